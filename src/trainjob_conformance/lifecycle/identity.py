"""Which process the harness started: its pid and its start time, so that a reused pid
is never taken for it."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import psutil


def start_time(pid: int) -> float | None:
    """When the process started (psutil's create_time, seconds since the epoch
    with the kernel's tick resolution): with the pid, its identity."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _running_as(pid: int, start: float) -> bool:
    """The process `pid` runs, has not exited (a zombie has), and started at `start`."""
    try:
        process = psutil.Process(pid)
        return process.create_time() == start and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as it was when the harness started it."""

    pid: int
    start: float
    name: str

    @classmethod
    def of(cls, pid: int, name: str) -> ProcessIdentity | None:
        started = start_time(pid)
        return cls(pid, started, name) if started is not None else None

    def is_alive(self) -> bool:
        """Still running and still the same process (a reused pid has another start time)."""
        return _running_as(self.pid, self.start)

    def is_stopped(self) -> bool:
        """Ours, and frozen by SIGSTOP (alive, but runs nothing until SIGCONT)."""
        try:
            process = psutil.Process(self.pid)
            return process.create_time() == self.start and process.status() == psutil.STATUS_STOPPED
        except psutil.Error:
            return False

    def signal(self, signum: int) -> bool:
        """Signal its process group if it leads one, else itself; only if it is still ours."""
        if not self.is_alive():
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)
        return True
