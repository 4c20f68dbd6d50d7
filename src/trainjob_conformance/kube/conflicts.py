"""Read-modify-write against objects that controllers write too."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import Conflict

T = TypeVar("T")

# A controller that writes an object between our read and our PUT makes the PUT a
# Conflict; a few fresh reads are enough, and more means something keeps rewriting it.
ATTEMPTS = 5


def until_no_conflict(write: Callable[[], T], what: str, attempts: int = ATTEMPTS) -> T:
    """Run `write` (which reads the object afresh, then writes it) until it meets no
    Conflict. After `attempts` Conflicts the harness could not make its write: a
    ConformanceError (an ERROR, never a verdict), saying what changed under it."""
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Conflict as conflict:
            if attempt == attempts:
                raise ConformanceError(
                    f"{what} changed under each of {attempts} writes: {conflict.message}"
                ) from None
    raise AssertionError("unreachable")
