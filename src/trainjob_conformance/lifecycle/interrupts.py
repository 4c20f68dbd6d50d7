"""SIGTERM and SIGHUP handled exactly like Ctrl-C.

CI cancelling a job sends SIGTERM; a closed terminal sends SIGHUP. Python's
default for both is to die at once, skipping every cleanup. Raising
KeyboardInterrupt instead sends them down the path Ctrl-C already takes:
children stopped, partial files removed, the report marked interrupted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Loaded here, not in the child: between fork and exec, a child of a process
# with threads must not take locks (the dynamic loader's among them) that
# another thread may have held at the fork.
_PRCTL = _load_prctl()


class Terminated(KeyboardInterrupt):
    """A termination signal, delivered as an interruption."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def die_with_parent() -> None:
    """For `preexec_fn`: the child gets SIGTERM when the process that started it dies.

    Covers the case no handler can: the parent killed with SIGKILL. Linux only
    (prctl PR_SET_PDEATHSIG); elsewhere a no-op.
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


# The kernel's flag on a task that has begun to exit (include/linux/sched.h),
# set before it closes the task's files.
_PF_EXITING = 0x4


def process_exiting(pid: int) -> bool:
    """Whether process `pid` is gone, a zombie, or on its way out."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0] in "ZX" or bool(int(fields[6]) & _PF_EXITING)


def leave_if_orphaned(parent: int) -> None:
    """Exit at once, printing nothing, if `parent` (the process that started this
    one) is dying or dead: as die_with_parent's SIGTERM would have taken this one.

    For where the dying parent's closed pipes can be seen before that signal
    arrives (the kernel closes an exiting process's files, then signals its
    children): a process that goes on from there reports to nobody.
    """
    if os.getppid() != parent or process_exiting(parent):
        os._exit(128 + signal.SIGTERM)


def interruptible_child() -> None:
    """For `preexec_fn` of a child this process interrupts with SIGINT (pytest):
    dies with its parent, and answers SIGINT even where this process was
    started with it ignored (a background job of a non-interactive shell is;
    an ignored signal is inherited across exec)."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignore_interrupts() -> dict[int, Any]:
    """From here on the process only finishes its work: Ctrl-C and SIGTERM are ignored.

    Returns the handlers it replaced, for `restore_handlers`: an ignored signal
    is inherited by every child started later, so a process that goes on
    (pytest run in-process by another pytest) must put them back.
    """
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            previous[signum] = signal.signal(signum, signal.SIG_IGN)
    return previous


def restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signum, handler)


def raise_interrupt_on_termination() -> None:
    """Install the handlers; only the main thread may, and only it needs to."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, _raise)


# How long orphaned workers get to answer SIGTERM before SIGKILL.
_ORPHAN_GRACE = 5.0


def stop_orphaned_group(pgid: int, grace: float = _ORPHAN_GRACE) -> bool:
    """Stop what is left of the process group of a leader that was killed and reaped
    (pytest's xdist workers, whose controller died by SIGKILL); whether it is gone.

    Called right after the leader was reaped: while any member lives, the
    kernel hands its id to no new process, so the group is still the one
    that leader started; an empty group answers ProcessLookupError.
    """
    from trainjob_conformance.kube.waits import WaitTimeout, wait_for

    def empty() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    for signum, seconds in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        if empty():
            return True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signum)
        # Not answered within its time: the next signal, or the caller says so.
        with contextlib.suppress(WaitTimeout):
            wait_for(f"process group {pgid} to exit", empty, timeout=seconds, interval=0.05)
    return empty()
