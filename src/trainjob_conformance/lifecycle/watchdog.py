"""Stops a run's processes when the process that owns the run dies, however it dies.

Started by the owner with a pipe on stdin, in a session of its own (so Ctrl-C
and a process-group kill do not reach it). The owner never writes to the pipe
except to say `detach` (a kept cluster) or `closed` (stopped cleanly). End of
file without either means the owner is gone: the watchdog reaps what the
ledger lists and exits.

Run as `python -m trainjob_conformance.lifecycle.watchdog LEDGER`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from trainjob_conformance.lifecycle.ledger import CLOSED, DETACHED, ProcessLedger


def start_watchdog(ledger: ProcessLedger) -> subprocess.Popen[bytes]:
    """A watchdog for `ledger`; the caller keeps the returned process's stdin open."""
    return subprocess.Popen(
        [sys.executable, "-m", "trainjob_conformance.lifecycle.watchdog", str(ledger.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=(ledger.path.parent / "watchdog.log").open("ab"),
        start_new_session=True,
        close_fds=True,
    )


def watch(ledger: ProcessLedger, pipe: IO[bytes]) -> list[str]:
    """Block until the owner closes the pipe; reap unless told otherwise."""
    last = b""
    for line in pipe:
        last = line.strip() or last
    if last in (DETACHED.encode(), CLOSED.encode()):
        return []
    stopped = [f"{p.name} (pid {p.pid})" for p in ledger.reap()]
    # Done: a surviving parent (the CLI) waits for this before it says what is left.
    ledger.mark(CLOSED)
    return stopped


def main(argv: list[str]) -> int:
    ledger = ProcessLedger(Path(argv[0]))
    stopped = watch(ledger, sys.stdin.buffer)
    if stopped:
        print(
            f"watchdog {os.getpid()}: the owner of {ledger.path} died; stopped {', '.join(stopped)}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
