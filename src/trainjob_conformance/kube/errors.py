"""The API server's answers as a few typed errors, translated in one place.

Every call through `Kube` (and its `core` API) raises one of these instead of
the client library's `ApiException` family, so the rest of the harness never
parses a response body or compares a status code. Each error's text is the
API server's own status message, which is what a verdict must quote.

The split follows what a verdict needs to know:
- `NotFound`: the object is not there (a wait may keep polling).
- `Rejected`: the server (or an admission webhook) refused the request as
  invalid or forbidden: a policy's answer, quoted as it was given.
- `Conflict`: optimistic concurrency; the caller may retry with a fresh read.
- `WebhookUnreachable`, `ServerError`, `ApiServerUnreachable`: the stack is
  broken, not the policy; a test that meets one is reported as ERROR.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException


class ApiError(Exception):
    """An answer of the API server that is not a success."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"HTTP {self.status} {self.reason}: {self.message}"


class NotFound(ApiError):
    """404: the object (or its kind) does not exist."""


class Rejected(ApiError):
    """400/403/422: refused by validation, admission or authorization."""


class Conflict(ApiError):
    """409: the object changed since it was read, or already exists."""


class StackError(ApiError):
    """The cluster could not give an answer at all: the stack is broken."""


class WebhookUnreachable(StackError):
    """An admission webhook with failurePolicy Fail could not be called."""


class ServerError(StackError):
    """Any other 5xx answer."""


class ApiServerUnreachable(StackError):
    """No HTTP answer: the API server is down or the connection failed."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unreachable", message)


def _status_message(error: ApiException) -> tuple[str, str]:
    """(reason, message) from the Status object the API server sends back."""
    raw: Any = error.body
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    text = str(raw or "")
    try:
        status = json.loads(text) if text else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = str(status.get("reason") or error.reason or "")
    message = str(status.get("message") or text or error.reason or f"HTTP {error.status}")
    return reason, message


def translate(error: ApiException) -> ApiError:
    status = int(error.status or 0)
    reason, message = _status_message(error)
    if status == 404:
        return NotFound(status, reason, message)
    if status == 409:
        return Conflict(status, reason, message)
    if status in (400, 403, 422):
        return Rejected(status, reason, message)
    if "failed calling webhook" in message:
        return WebhookUnreachable(status, reason, message)
    if status >= 500 or status == 0:
        return ServerError(status, reason, message)
    return Rejected(status, reason, message)


@contextmanager
def api_errors() -> Iterator[None]:
    """Raise the typed error for whatever the client library raises inside."""
    try:
        yield
    except ApiException as error:
        raise translate(error) from None
    except (urllib3.exceptions.HTTPError, ConnectionError) as error:
        raise ApiServerUnreachable(
            f"the API server did not answer ({_root_cause(error)})"
        ) from None


def _root_cause(error: BaseException) -> str:
    """urllib3 nests the cause (MaxRetryError -> NewConnectionError): keep the last words."""
    while getattr(error, "reason", None) is not None and isinstance(error.reason, BaseException):  # type: ignore[attr-defined]
        error = error.reason  # type: ignore[attr-defined]
    return str(error).rsplit(": ", 1)[-1] if ": " in str(error) else str(error)


def watch_error(event: dict[str, Any]) -> ApiError | None:
    """The ApiError a watch's ERROR event carries (a Status object), else None."""
    if event.get("type") != "ERROR":
        return None
    status = event.get("object") or {}
    return ApiError(
        int(status.get("code") or 0),
        str(status.get("reason") or "Error"),
        str(status.get("message") or status),
    )
