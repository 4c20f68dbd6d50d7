"""What an always-on certificate rotator reads, pre-seeded so that it accepts it.

Trainer v2.0.x and training-operator v1.9.x run open-policy-agent's
cert-controller (`pkg/rotator`) in the manager, with no way to turn it off. On
start it reads a Secret; if the CA there verifies for the rotator's CA name and
the serving certificate verifies against that CA for the webhook Service's DNS
name, both still valid 90 days ahead (its look-ahead), it keeps them; it then
writes the CA into the named webhook configurations, waits until the serving
certificate exists in its certificate directory and only then reports ready.
Otherwise it generates a CA of its own, which the loopback URLs the API server
calls (127.0.0.1) would not match.

So the harness writes what the rotator would have generated, plus
`IP:127.0.0.1` on the serving certificate: an RSA CA whose key is PKCS#1
(`buildArtifactsFromSecret` parses only that) and whose SAN is the CA name,
valid for a year; the serving certificate for the Service DNS name; the Secret
with `ca.crt`, `ca.key`, `tls.crt`, `tls.key`; and the same pair in the
certificate directory (a Pod gets it by mounting the Secret). The rotator runs
unmodified and finds nothing to rotate.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from trainjob_conformance.cluster.serving.certs import ServingCert
from trainjob_conformance.ports import LOOPBACK

# Longer than the rotator's 90-day look-ahead, or it regenerates at once.
_VALIDITY = datetime.timedelta(days=365)
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class RotatorSpec:
    """The names one release's rotator is configured with (read from its source)."""

    ca_name: str
    ca_organization: str
    service_dns: str  # <service>.<namespace>.svc
    secret_namespace: str
    secret_name: str
    cert_dir: str  # where the rotator looks for tls.crt; the webhook server reads it too


def _pkcs1(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # "RSA PRIVATE KEY", PKCS#1
        serialization.NoEncryption(),
    )


def _usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=True,
        key_cert_sign=cert_sign,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


@dataclass(frozen=True)
class RotatorSeed:
    spec: RotatorSpec
    ca_pem: bytes
    ca_key_pem: bytes
    cert: ServingCert

    def secret(self) -> dict[str, Any]:
        files = {
            "ca.crt": self.ca_pem,
            "ca.key": self.ca_key_pem,
            "tls.crt": self.cert.cert_file.read_bytes(),
            "tls.key": self.cert.key_file.read_bytes(),
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.spec.secret_name, "namespace": self.spec.secret_namespace},
            "data": {name: base64.b64encode(value).decode() for name, value in files.items()},
        }


def seed(spec: RotatorSpec, directory: Path) -> RotatorSeed:
    """Generate the CA and serving certificate; write tls.crt/tls.key under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, spec.ca_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, spec.ca_organization),
        ]
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(spec.ca_name)]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, spec.service_dns)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName(spec.service_dns),
                    x509.IPAddress(ipaddress.ip_address(LOOPBACK)),
                ]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.crt").write_bytes(ca_pem)
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(_pkcs1(key))
    key_file.chmod(0o600)
    return RotatorSeed(
        spec=spec,
        ca_pem=ca_pem,
        ca_key_pem=_pkcs1(ca_key),
        cert=ServingCert(cert_file=cert_file, key_file=key_file, ca_file=directory / "ca.crt"),
    )
