"""One holder at a time across the processes of a run (pytest-xdist workers): an
advisory file lock, waited for by polling so that the wait is bounded and says what
it waited for."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from trainjob_conformance.kube.waits import NotYet, wait_for


@contextlib.contextmanager
def one_at_a_time(lock_file: Path, description: str, timeout: float) -> Iterator[None]:
    """Hold `lock_file` exclusively for the block; a WaitTimeout after `timeout` s."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:

        def taken() -> bool | NotYet:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return NotYet(f"{lock_file} is held")
            return True

        wait_for(f"the turn of {description}", taken, timeout=timeout)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
