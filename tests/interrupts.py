"""Ctrl-C as a terminal session has it, whatever started this pytest: a background
job of a non-interactive shell (./scripts/test runs its steps so) inherits SIGINT
ignored, and a SIGINT sent to it, or to a child it starts, then does nothing."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def python_ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt) in this process for the block."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def default_ctrl_c() -> None:
    """For `preexec_fn`: the child starts with SIGINT's default action, not ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
