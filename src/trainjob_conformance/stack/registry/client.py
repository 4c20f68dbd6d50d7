"""The oras client as the harness uses it: bounded, quiet, and credentials from Docker's config.

oras-py (`oras.provider.Registry`) builds the manifests, uploads blobs and
answers Bearer token challenges. Three of its defaults do not suit a harness
that must fail in one line within seconds, so this subclass changes them:

- its requests are retried 5 times with sleeps of 3 to 83 s, and sent without
  a timeout: an unreachable registry took minutes. Here each request is sent
  once, with a connect and a read timeout;
- it answers a `Basic` challenge (distribution's htpasswd) as if it were a
  Bearer one, asking the realm (a name, not a URL) for a token. Here a Basic
  challenge is answered with the Docker config's credentials for the host;
- it turns a failed answer into `ValueError("Issue with ...")`, losing the
  status. Here it raises `HTTPFailure`, which `errors.translated` words.

Its logger is silenced: what went wrong reaches the user in one line, from here.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from http.cookiejar import DefaultCookiePolicy
from pathlib import Path
from typing import Any

import oras.container
import oras.defaults
import oras.provider
import requests

from trainjob_conformance.stack.registry.address import RegistryAddress
from trainjob_conformance.stack.registry.credentials import oras_auth_config
from trainjob_conformance.stack.registry.errors import HTTPFailure

# Seconds to connect, and to wait for each answer (a blob's final PUT makes the
# registry hash it before it answers).
TIMEOUT = (5.0, 120.0)
CHUNK = 16 * 1024 * 1024
OCI_MANIFEST = oras.defaults.default_manifest_media_type
_OK = (200, 201, 202)
# What an image's tag may name: a single-platform manifest or a list of them.
IMAGE_MANIFESTS = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)

_oras_log = logging.getLogger("oras")
_oras_log.addHandler(logging.NullHandler())
_oras_log.propagate = False


class _Session(requests.Session):
    """A session whose every request has a timeout, and that reads no ~/.netrc."""

    def __init__(self, address: RegistryAddress) -> None:
        super().__init__()
        # trust_env would read ~/.netrc (credentials from outside the Docker
        # config) and route even 127.0.0.1 through $HTTP_PROXY; proxies still
        # apply to a registry elsewhere, unless $NO_PROXY names it.
        self.trust_env = False
        if not address.loopback:
            self.proxies.update(requests.utils.get_environ_proxies(address.url))
        # Some registries set cookies to tell browsers apart; ignore them all.
        self.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = TIMEOUT
        return super().request(method, url, *args, **kwargs)


class RegistryClient(oras.provider.Registry):
    """One registry, reached at `address`, with the Docker config's credentials for it."""

    def __init__(self, address: RegistryAddress, ca_file: Path | None = None) -> None:
        # A registry whose certificate a private CA signed: that CA's file (--registry-ca).
        super().__init__(
            hostname=address.host, insecure=address.insecure, auth_backend="token",
            tls_verify=str(ca_file) if ca_file is not None else True,
        )  # fmt: skip
        self.address = address
        self.session = _Session(address)
        self.auth.session = self.session
        # Loaded here, not by oras (which reads only ~/.docker/config.json).
        self.auth._auth_config = oras_auth_config()
        self.auth.load_configs(self.container("v2", "latest"))
        self._authorization: dict[str, str] = {}
        self.bytes_uploaded = 0

    @property
    def has_credentials(self) -> bool:
        return bool(getattr(self.auth, "_basic_auth", None))

    def container(self, name: str, reference: str) -> oras.container.Container:
        """`name` (below the address's prefix) at a tag or digest, parsed as oras would not:
        a prefix whose first part has a dot would be taken for a host."""
        path = self.address.repository(name).split("/")
        found = oras.container.Container(path[-1], registry=self.address.host)
        found.registry = self.address.host
        found.namespace = "/".join(path[:-1]) or None
        found.repository = path[-1]
        if reference.startswith("sha256:"):
            found.digest, found.tag = reference, reference
        else:
            found.digest, found.tag = None, reference
        return found

    # The transport: one attempt, answering one authentication challenge.

    def do_request(  # type: ignore[override]
        self,
        url: str,
        method: str = "GET",
        data: Any = None,
        headers: dict[str, str] | None = None,
        json: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> requests.Response:
        sent = {**(headers or {}), **self._authorization}
        response = self._send(method, url, data, sent, json, stream)
        if response.status_code not in (401, 403) or not self._answer(response):
            return response
        response.close()
        return self._send(method, url, data, {**sent, **self._authorization}, json, stream)

    def _send(
        self,
        method: str,
        url: str,
        data: Any,
        headers: dict[str, str],
        json: dict[str, Any] | None,
        stream: bool,
    ) -> requests.Response:
        return self.session.request(
            method, url, data=data, json=json, headers=headers, stream=stream,
            verify=self._tls_verify,
        )  # fmt: skip

    def _answer(self, response: requests.Response) -> bool:
        """Credentials for the challenge in `response`; False if there are none to try
        (none in the Docker config, or exactly these were just refused)."""
        challenge = response.headers.get("WWW-Authenticate", "")
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if not self.has_credentials:
                return False
            wanted = {"Authorization": f"Basic {self.auth._basic_auth}"}
        elif scheme == "bearer":
            # A token is scoped to one repository and action: ask again for this one.
            answered, changed = self.auth.authenticate_request(response, {}, refresh=True)
            if not changed or "Authorization" not in answered:
                return False
            wanted = {"Authorization": str(answered["Authorization"])}
        else:
            return False
        if wanted == self._authorization:
            return False
        self._authorization = wanted
        return True

    def _check_200_response(self, response: requests.Response) -> None:
        if response.status_code not in _OK:
            raise HTTPFailure(response, bool(self._authorization))

    def _get_location(self, r: requests.Response, container: oras.container.Container) -> str:
        # oras reads an upload's location even from a refusal, then fails without its status.
        self._check_200_response(r)
        return super()._get_location(r, container)

    def blob_exists(self, layer: dict[str, Any], container: oras.container.Container) -> bool:
        response = self.do_request(
            f"{self.prefix}://{container.get_blob_url(layer['digest'])}", "HEAD"
        )
        if response.status_code == 404:
            return False
        self._check_200_response(response)
        return True

    def chunked_upload(  # type: ignore[override]
        self,
        blob: str,
        container: oras.container.Container,
        layer: dict[str, Any],
        chunk_size: int = CHUNK,
    ) -> requests.Response:
        response = super().chunked_upload(blob, container, layer, chunk_size=chunk_size)
        if response.status_code in _OK:
            self.bytes_uploaded += int(layer["size"])
        return response

    # What the artifacts module asks.

    def ping(self) -> None:
        """GET /v2/: the registry answers, speaks the API, and lets these credentials in."""
        self._check_200_response(self.do_request(f"{self.prefix}://{self.address.host}/v2/"))

    def manifest(self, container: oras.container.Container) -> bytes:
        """A manifest's bytes exactly as served, so that their digest can be checked."""
        response = self.do_request(
            f"{self.prefix}://{container.manifest_url()}", "GET", headers={"Accept": OCI_MANIFEST}
        )
        self._check_200_response(response)
        return response.content

    def image_digest(self, container: oras.container.Container) -> str | None:
        """The digest an image's tag resolves to (HEAD of its manifest, any image media
        type), as a node's containerd would pull it; None where the registry lacks it."""
        response = self.do_request(
            f"{self.prefix}://{container.manifest_url()}", "HEAD",
            headers={"Accept": ", ".join(IMAGE_MANIFESTS)},
        )  # fmt: skip
        if response.status_code == 404:
            return None
        self._check_200_response(response)
        return response.headers.get("Docker-Content-Digest") or None

    def blob_chunks(self, container: oras.container.Container, digest: str) -> Iterator[bytes]:
        """A blob's bytes as they arrive (a binary is up to ~100 MB: never whole in memory)."""
        with self.get_blob(container, digest, stream=True) as response:
            self._check_200_response(response)
            yield from response.iter_content(chunk_size=1024 * 1024)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
