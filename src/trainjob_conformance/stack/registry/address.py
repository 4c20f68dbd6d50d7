"""A registry URL as the user gives it (`--registry`), checked once and in one line."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from trainjob_conformance.errors import ConformanceError

EXPECTED_FORM = (
    "expected HOST:PORT or http(s)://HOST[:PORT][/PATH], e.g. http://127.0.0.1:5000 "
    "(plain HTTP is the default only for localhost and 127.0.0.1)"
)
# One path component of a repository name (the OCI distribution spec's grammar).
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOSTNAME_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# A tag (the OCI distribution spec's grammar); other characters of a name become `_`.
_TAG_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class RegistryAddress:
    """Where a registry answers, and the path its repositories are kept under."""

    scheme: str  # "http" or "https"
    host: str  # host[:port], as references and the Docker config name it
    prefix: str = ""  # "" or "team/ci": repositories are named below it

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}" + (f"/{self.prefix}" if self.prefix else "")

    @property
    def insecure(self) -> bool:
        return self.scheme == "http"

    @property
    def loopback(self) -> bool:
        """On this machine (127.0.0.0/8, ::1, localhost)."""
        if self.host.startswith("["):
            return _is_loopback(self.host[1:].split("]", 1)[0])
        return _is_loopback(self.host.rsplit(":", 1)[0] if ":" in self.host else self.host)

    def repository(self, name: str) -> str:
        """A repository's full path below the host."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def reference(self, name: str, tag_or_digest: str) -> str:
        """`host/prefix/name:tag` or `host/prefix/name@sha256:...`, as `docker pull` names it."""
        separator = "@" if tag_or_digest.startswith("sha256:") else ":"
        return f"{self.host}/{self.repository(name)}{separator}{tag_or_digest}"


def _malformed(text: str, reason: str) -> ConformanceError:
    return ConformanceError(f"registry URL {text!r} is malformed ({reason}): {EXPECTED_FORM}")


def _is_loopback(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _check_hostname(text: str, hostname: str) -> None:
    try:
        ipaddress.ip_address(hostname)
        return
    except ValueError:
        pass
    labels = hostname.split(".")
    if len(hostname) > 253 or not all(_HOSTNAME_LABEL.match(label) for label in labels):
        raise _malformed(text, f"{hostname!r} is not a host name or IP address")


def parse_registry_url(text: str) -> RegistryAddress:
    """The address `text` names, or one line saying what form is expected.

    A URL carrying a user name or password is refused without repeating it:
    credentials are read from the Docker config only, never from the command
    line, where they would end up in shell histories and logs.
    """
    text = text.strip()
    if not text:
        raise ConformanceError(f"the registry URL is empty: {EXPECTED_FORM}")
    scheme = ""
    rest = text
    if "://" in text:
        scheme, rest = text.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise _malformed(text, f"scheme {scheme!r} is neither http nor https")
    try:
        parts = urlsplit(f"//{rest}")
    except ValueError as error:  # an unclosed IPv6 bracket
        raise _malformed(text, str(error)) from None
    if "@" in parts.netloc:
        raise ConformanceError(
            "the registry URL carries credentials, which are never taken from the command "
            "line: give http(s)://HOST[:PORT] and log in with `docker login HOST[:PORT]` "
            "(credentials are read from the Docker config, $DOCKER_CONFIG/config.json or "
            "~/.docker/config.json)"
        )
    if parts.query or parts.fragment or "?" in rest or "#" in rest:
        raise _malformed(text, "a query or fragment is not part of a registry URL")
    hostname = parts.hostname or ""
    if not hostname:
        raise _malformed(text, "no host")
    try:
        port = parts.port
    except ValueError:
        raise _malformed(text, "the port is not a number from 1 to 65535") from None
    if port == 0:
        raise _malformed(text, "the port is not a number from 1 to 65535")
    _check_hostname(text, hostname)
    path = parts.path.strip("/")
    components = path.split("/") if path else []
    bad = [component for component in components if not _COMPONENT.match(component)]
    if bad:
        raise _malformed(
            text, f"path component {bad[0]!r} is not a repository name (lowercase, digits, . _ -)"
        )
    shown = f"[{hostname}]" if ":" in hostname else hostname
    host = f"{shown}:{port}" if port else shown
    # As Docker does: plain HTTP for a registry on this machine, TLS elsewhere.
    scheme = scheme or ("http" if _is_loopback(hostname) else "https")
    return RegistryAddress(scheme, host, "/".join(components))


def tag_for(name: str) -> str:
    """A valid tag for a profile's name (`latest+kueue=v0.16.6` -> `latest_kueue_v0.16.6`)."""
    tag = _TAG_CHARACTERS.sub("_", name)
    if not tag or not re.match(r"[A-Za-z0-9_]", tag[0]):
        tag = f"_{tag}"
    return tag[:128]
