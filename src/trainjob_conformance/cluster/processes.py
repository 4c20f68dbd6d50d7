"""Host processes the harness starts, and the guarantee that they all stop."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.errors import ConformanceError

_STOP_GRACE_SECONDS = 10.0
_cleanups: list[Callable[[], None]] = []


def _run_cleanups() -> None:
    while _cleanups:
        cleanup = _cleanups.pop()
        try:
            cleanup()
        except Exception as error:  # a cleanup must not stop the others
            print(f"[trainjob-conformance] cleanup failed: {error}")


def _on_terminate(signum: int, frame: object) -> None:
    # SIGTERM (CI cancelling a job) would skip atexit; turn it into a normal exit.
    raise SystemExit(128 + signum)


atexit.register(_run_cleanups)
if os.environ.get("PYTEST_XDIST_WORKER") is None:
    # Not the main thread (embedded use): the caller owns signals.
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _on_terminate)


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
    ) -> None:
        self.name = name
        self.args = args
        self.log_file = log_file
        self._env = env
        self._cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None

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
            )
        except OSError as error:
            raise ConformanceError(
                f"could not start {self.name} ({self.args[0]}): {error}"
            ) from error
        finally:
            sink.close()
        register_cleanup(self.stop)
        return self

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def ensure_running(self) -> None:
        code = self.exit_code()
        if code is not None:
            raise ConformanceError(
                f"{self.name} exited with code {code}; log {self.log_file}:\n{self.log_tail()}"
            )

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it holds no resources, so it counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], what: str, timeout: float = _STOP_GRACE_SECONDS) -> None:
    """Wait until `pids` have exited; SIGKILL what is left and say so."""
    from trainjob_conformance.kube.waits import WaitTimeout, wait_for

    try:
        wait_for(f"{what} to exit", lambda: not any(_alive(p) for p in pids), timeout=timeout)
    except WaitTimeout:
        for pid in pids:
            if _alive(pid):
                print(f"[trainjob-conformance] {what}: pid {pid} ignored SIGTERM; killing it")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def terminate_groups(pids: list[int], what: str) -> None:
    """SIGTERM each process group, then wait for the leaders to exit."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    wait_gone(pids, what)
