"""What a test did to the cluster, in order: the record a reproduction is written from.

A `Recorder` set on a `Kube` receives every write the harness sends (create,
apply, replace, patch, delete, raw writes) with its body and the cluster's
answer: the stored object's metadata and spec, or the status and message of a
refusal. Reads are not recorded. Steps that cannot be read off the requests
(a wait for a controller, what a policy judged) are added by the policy
helpers in kubectl's terms (`wait`, `observation`), so that a script can
replay the whole test with kubectl alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from trainjob_conformance.kube.errors import ApiError

T = TypeVar("T")

REQUEST = "request"
WAIT = "wait"
OBSERVATION = "observation"

# Kept from an answer: enough to find the object again and to see what was stored.
_KEPT_METADATA = ("name", "generateName", "namespace", "labels", "annotations", "finalizers")


def _plain(value: Any) -> Any:
    """A JSON-safe deep copy (bodies may hold tuples or client models)."""
    return json.loads(json.dumps(value, default=str))


def stored_part(answer: Any) -> dict[str, Any]:
    """The part of a stored object a reproduction needs: metadata that names it, and spec."""
    if not isinstance(answer, dict):
        return {}
    metadata = answer.get("metadata") or {}
    part: dict[str, Any] = {
        "metadata": {key: metadata[key] for key in _KEPT_METADATA if metadata.get(key)}
    }
    if "spec" in answer:
        part["spec"] = answer["spec"]
    return _plain(part)


class Recorder:
    """An ordered list of steps; `observing()` marks the steps a policy's verdict rests on."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._observing = False

    @contextmanager
    def observing(self, observed: bool = True) -> Iterator[None]:
        """Steps recorded here are (or, with observed=False, are not) what the verdict
        rests on."""
        previous, self._observing = self._observing, observed
        try:
            yield
        finally:
            self._observing = previous

    def _append(self, entry: dict[str, Any]) -> None:
        if self._observing:
            entry["observation"] = True
        self.entries.append(entry)

    def request(
        self,
        verb: str,
        target: dict[str, Any],
        body: Any,
        send: Callable[[], T],
        dry_run: bool = False,
        content_type: str = "application/json",
    ) -> T:
        """Send one write through `send` and record it with the cluster's answer."""
        entry: dict[str, Any] = {
            "step": REQUEST,
            "verb": verb,
            **target,
            "body": _plain(copy.deepcopy(body)) if body is not None else None,
            "dryRun": dry_run,
            "contentType": content_type,
        }
        try:
            answer = send()
        except ApiError as error:
            entry["answer"] = {
                "ok": False,
                "status": error.status,
                "reason": error.reason,
                "message": error.message,
            }
            self._append(entry)
            raise
        entry["answer"] = {"ok": True, "object": stored_part(answer)}
        self._append(entry)
        return answer

    def wait(self, what: str, **how: Any) -> None:
        """A wait the test made, in kubectl's terms (see policies/view.py `record_wait`)."""
        self._append({"step": WAIT, "what": what, **_plain(how)})

    def observation(self, what: str, **how: Any) -> None:
        """What a policy judged, with the value the policy expects and the value seen."""
        self._append({"step": OBSERVATION, "what": what, **_plain(how), "observation": True})
