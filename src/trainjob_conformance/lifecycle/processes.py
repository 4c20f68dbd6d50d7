"""Host processes the harness starts, and the guarantee that they all stop."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.lifecycle.ledger import (
    CLOSED,
    DETACHED,
    LEDGER_FILE,
    ProcessIdentity,
    ProcessLedger,
    abandoned_ledgers,
    processes_naming,
)
from trainjob_conformance.lifecycle.watchdog import start_watchdog

_STOP_GRACE_SECONDS = 10.0
_cleanups: list[Callable[[], None]] = []


def _run_cleanups() -> None:
    while _cleanups:
        cleanup = _cleanups.pop()
        try:
            cleanup()
        except Exception as error:  # a cleanup must not stop the others
            print(f"[trainjob-conformance] cleanup failed: {error}")


atexit.register(_run_cleanups)


def register_cleanup(cleanup: Callable[[], None]) -> Callable[[], None]:
    """Run `cleanup` at interpreter exit unless it is unregistered first."""
    _cleanups.append(cleanup)
    return cleanup


def unregister_cleanup(cleanup: Callable[[], None]) -> None:
    if cleanup in _cleanups:
        _cleanups.remove(cleanup)


class HostProcess:
    """A long-running binary in its own process group, logging to a file."""

    def __init__(
        self,
        name: str,
        args: list[str],
        log_file: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        owner: RunOwnership | None = None,
        with_parent: bool = False,
    ) -> None:
        self.name = name
        self.owner = owner
        # Dies with the process that started it (the kernel's parent-death signal),
        # for a process no run ledger watches (a registry `images serve` runs).
        self.with_parent = with_parent
        self.args = args
        self.log_file = log_file
        self._env = env
        self._cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        self._identity: ProcessIdentity | None = None

    def start(self) -> HostProcess:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        sink = self.log_file.open("ab")
        try:
            self._popen = subprocess.Popen(
                self.args,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env,
                cwd=self._cwd,
                # Own group, so Ctrl-C in the terminal reaches the harness only
                # and the harness decides the order of shutdown.
                start_new_session=True,
                preexec_fn=die_with_parent if self.with_parent else None,
            )
        except OSError as error:
            raise ConformanceError(
                f"could not start {self.name} ({self.args[0]}): {error}"
            ) from error
        finally:
            sink.close()
        register_cleanup(self.stop)
        self._identity = ProcessIdentity.of(self._popen.pid, self.name)
        if self.owner is not None:
            self.owner.record(self._popen.pid, self.name)
        return self

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def exit_description(self) -> str | None:
        """How it ended, in words ("exited with code 1", "killed by SIGKILL"), or None."""
        code = self.exit_code()
        if code is None:
            return None
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"

    def is_stopped(self) -> bool:
        """Alive but frozen by SIGSTOP: it answers no webhook and reconciles nothing."""
        return self._identity is not None and self._identity.is_stopped()

    def wait(self) -> int:
        """Until it exits (a signal to this process interrupts the wait)."""
        if self._popen is None:
            raise ConformanceError(f"{self.name} was not started")
        return self._popen.wait()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def ensure_running(self) -> None:
        ended = self.exit_description()
        if ended is not None:
            raise ConformanceError(f"{self.name} {ended}; log {self.log_file}:\n{self.log_tail()}")

    def stop(self) -> None:
        unregister_cleanup(self.stop)
        if self._popen is None or self._popen.poll() is not None:
            return
        try:
            os.killpg(self._popen.pid, signal.SIGTERM)
            self._popen.wait(timeout=_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self._popen.pid, signal.SIGKILL)
            self._popen.wait()
        except ProcessLookupError:
            pass


class RunOwnership:
    """The ledger and watchdog of one run directory, shared by everything started there."""

    _by_dir: dict[Path, RunOwnership] = {}

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.ledger = ProcessLedger.create(run_dir)
        self._watchdog = start_watchdog(self.ledger)
        register_cleanup(self.close)

    @classmethod
    def of(cls, run_dir: Path) -> RunOwnership:
        key = run_dir.resolve()
        if key not in cls._by_dir:
            cls._by_dir[key] = cls(key)
        return cls._by_dir[key]

    def record(self, pid: int, name: str) -> None:
        identity = ProcessIdentity.of(pid, name)
        if identity is not None:
            self.ledger.record(identity)

    def record_directory(self, directory: Path) -> None:
        self.ledger.record_directory(directory)

    def _release(self, state: str) -> None:
        unregister_cleanup(self.close)
        self._by_dir.pop(self.run_dir, None)
        self.ledger.mark(state)
        stdin = self._watchdog.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.write(state.encode() + b"\n")
                stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._watchdog.wait(timeout=_STOP_GRACE_SECONDS)

    def close(self) -> None:
        """Everything of the run has been stopped; reap any straggler, then retire the watchdog."""
        if self.run_dir not in self._by_dir:
            return
        left = self.ledger.reap()
        if left:
            names = ", ".join(f"{p.name} (pid {p.pid})" for p in left)
            print(f"[trainjob-conformance] stopped what outlived its owner: {names}")
        self._release(CLOSED)

    def detach(self) -> None:
        """Leave the run's processes running past this process (a kept cluster)."""
        if self.run_dir in self._by_dir:
            self._release(DETACHED)


def stop_processes_naming(directory: Path, what: str) -> None:
    """Wait for every process naming `directory` to exit; SIGKILL the ones that do not."""
    from trainjob_conformance.kube.waits import WaitTimeout, wait_for

    def gone() -> bool:
        return not processes_naming(str(directory), 0, {os.getpid()})

    try:
        wait_for(f"{what} to exit", gone, timeout=_STOP_GRACE_SECONDS)
    except WaitTimeout:
        for process in processes_naming(str(directory), 0, {os.getpid()}):
            print(f"[trainjob-conformance] {what}: {process.name} ignored SIGTERM; killing it")
            process.signal(signal.SIGKILL)


def still_running(run_dir: Path) -> list[str]:
    """What a run directory's processes still running are, by name and pid."""
    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    if not ledger.path.exists():
        return []
    return [f"{p.name} (pid {p.pid})" for p in ledger.living()]


def reap_abandoned(runs_root: Path) -> None:
    """Stop what earlier runs left behind when their owner died (SIGKILL, a lost watchdog)."""
    if not runs_root.is_dir():
        return
    for ledger in abandoned_ledgers(runs_root):
        stopped = ledger.reap()
        ledger.mark(CLOSED)
        if stopped:
            names = ", ".join(f"{p.name} (pid {p.pid})" for p in stopped)
            print(
                f"[trainjob-conformance] stopped what a dead run left in {ledger.path.parent}: {names}",
                file=sys.stderr,
            )


def how_it_ended(returncode: int) -> str:
    """A child's end in words: `killed by SIGKILL` for a signal, `exit N` otherwise."""
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit {returncode}"
