"""Every registry failure as one line that names what failed and what to do.

The client raises `HTTPFailure` for an answer that is not 2xx; `translated`
turns it, and the transport's exceptions, into a `ConformanceError` of one of
the kinds below. No message ever carries a credential: only the host and where
the Docker config is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import requests

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.registry.address import RegistryAddress
from trainjob_conformance.stack.registry.credentials import docker_config_path, login_hint


class RegistryError(ConformanceError):
    """A registry failure, in one line."""


class RegistryUnreachable(RegistryError):
    pass


class CredentialsNeeded(RegistryError):
    pass


class ArtifactMissing(RegistryError):
    pass


class DigestMismatch(RegistryError):
    pass


class HTTPFailure(Exception):
    """An answer that is not 2xx, with what was asked and whether credentials were sent."""

    def __init__(self, response: requests.Response, credentials_sent: bool) -> None:
        request = response.request
        super().__init__(f"HTTP {response.status_code} to {request.method} {request.url}")
        self.response = response
        self.credentials_sent = credentials_sent

    @property
    def status(self) -> int:
        return self.response.status_code

    def registry_message(self) -> str:
        """The registry's own error text (its `errors` list), shortened to a line."""
        try:
            errors = self.response.json().get("errors") or []
            text = "; ".join(str(e.get("message") or e.get("code")) for e in errors)
        except (ValueError, AttributeError):
            text = self.response.text
        return " ".join(text.split())[:200] or self.response.reason or "no message"


def push_hint(address: RegistryAddress, profile: str) -> str:
    return (
        f"run `trainjob-conformance images push --registry {address.url} --profile {profile}` "
        "first (on a machine that has built the profile)"
    )


def mismatch(artifact: str, expected: str, got: str, recorded_by: str) -> DigestMismatch:
    return DigestMismatch(
        f"artifact {artifact}: the registry answered with {got}, expected {expected} "
        f"({recorded_by}); its content changed since it was pushed: push it again, "
        "or find out what rewrote it"
    )


def missing(address: RegistryAddress, artifact: str, profile: str) -> ArtifactMissing:
    return ArtifactMissing(
        f"artifact {artifact} is not in the registry at {address.url}: {push_hint(address, profile)}"
    )


def _why_unreachable(error: BaseException) -> str:
    text = str(error)
    for needle, why in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "host name not found"),
        ("Temporary failure in name resolution", "host name not found"),
        ("No route to host", "no route to host"),
        ("Network is unreachable", "network unreachable"),
    ):
        if needle in text:
            return why
    if isinstance(error, requests.Timeout):
        return "no answer in time"
    return error.__class__.__name__


def unreachable(address: RegistryAddress, error: BaseException) -> RegistryError:
    if isinstance(error, requests.exceptions.SSLError):
        return RegistryUnreachable(
            f"TLS with the registry at {address.url} failed ({_why_unreachable(error)}): "
            f"if it serves plain HTTP, give --registry http://{address.host}"
            + (f"/{address.prefix}" if address.prefix else "")
        )
    return RegistryUnreachable(
        f"cannot reach the registry at {address.url} ({_why_unreachable(error)}): "
        "check the URL and that the registry is running"
    )


def from_http(
    failure: HTTPFailure, address: RegistryAddress, artifact: str | None, profile: str
) -> RegistryError:
    what = f"artifact {artifact}" if artifact else "it"
    if failure.status == 401 or (failure.status == 403 and not failure.credentials_sent):
        found = "were refused" if failure.credentials_sent else "were not found"
        return CredentialsNeeded(
            f"the registry at {address.url} asks for credentials (HTTP {failure.status}) and "
            f"those for {address.host} {found}: {login_hint(address.host)}"
        )
    if failure.status == 403:
        return CredentialsNeeded(
            f"the registry at {address.url} denies access to {what} (HTTP 403) with the "
            f"credentials for {address.host} from {docker_config_path()}: check that account's "
            "rights, or log in as another with `docker login`"
        )
    if failure.status == 404 and artifact:
        return missing(address, artifact, profile)
    if failure.status == 404:
        return RegistryError(
            f"{address.url} does not answer as an OCI registry (HTTP 404 to GET /v2/): "
            "check the URL"
        )
    return RegistryError(
        f"the registry at {address.url} answered HTTP {failure.status} "
        f"({failure.registry_message()}) for {what}"
    )


@contextlib.contextmanager
def translated(
    address: RegistryAddress, profile: str, artifact: str | None = None
) -> Iterator[None]:
    """Turn what a registry call raises into one line about `artifact` (or the registry)."""
    try:
        yield
    except HTTPFailure as failure:
        raise from_http(failure, address, artifact, profile) from None
    except (requests.ConnectionError, requests.Timeout) as error:
        raise unreachable(address, error) from None
    except requests.RequestException as error:
        raise RegistryError(
            f"talking to the registry at {address.url} failed "
            f"({error.__class__.__name__}: {' '.join(str(error).split())[:200]})"
        ) from None
