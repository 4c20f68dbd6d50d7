"""Watching the stack under test while the policies run.

A dead manager or a webhook that stopped answering makes every later policy
fail for a reason that is not the policy's. The process that owns the cluster
runs a `StackWatch`: a thread that probes each component at a short interval
and writes what broke (component, how, its log tail) to a health file in the
run directory. Every test process reads that file through `StackHealth`: its
waits stop as soon as something broke, and a failing test is then reported
as ERROR (the stack broke), not FAIL (the policy does not hold).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

HEALTH_FILE = "stack-health.json"
_TLS_TIMEOUT = 2.0
# A handshake that times out once is a busy machine, not a hung server: a
# 2-core runner compiling beside the tests has missed the 2 s bound (CI, stop
# 48) while the manager went on logging. Only a server that has not answered
# for this long is hung; one that refuses the connection is gone at once.
HUNG_AFTER = 15.0


@dataclass(frozen=True)
class Breakage:
    """One component that stopped working: which, how, and its last log lines."""

    component: str
    state: str
    log_tail: str = ""

    def line(self) -> str:
        return f"{self.component} {self.state}"


class StackBroken(Exception):
    """The stack under test broke; the policy cannot be judged.

    Deliberately not an AssertionError: it must never read as a policy failure.
    """

    def __init__(self, breakages: list[Breakage]) -> None:
        self.breakages = breakages
        super().__init__("; ".join(b.line() for b in breakages))

    @classmethod
    def starting(cls, component: str, message: str) -> StackBroken:
        return cls([Breakage(component, f"did not start: {message}")])

    def details(self) -> str:
        parts = []
        for breakage in self.breakages:
            parts.append(f"===== {breakage.line()} =====")
            if breakage.log_tail:
                parts.append(breakage.log_tail)
        return "\n".join(parts)


class StackHealth:
    """What the watch has recorded, read by any process of the run."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen: tuple[float, list[Breakage]] = (-1.0, [])

    def breakages(self) -> list[Breakage]:
        if self.path is None:
            return []
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return []
        if mtime != self._seen[0]:
            try:
                rows = json.loads(self.path.read_text())
                self._seen = (mtime, [Breakage(**row) for row in rows])
            except (OSError, ValueError, TypeError):
                return self._seen[1]  # caught mid-write: the next read sees it whole
        return self._seen[1]

    def raise_if_broken(self) -> None:
        broken = self.breakages()
        if broken:
            raise StackBroken(broken)


Probe = Callable[[], Breakage | None]


class StackWatch:
    """Probes the components at `interval` seconds and records the first breakage of each."""

    def __init__(self, path: Path, probes: list[Probe], interval: float) -> None:
        self.path = path
        self.probes = probes
        self.interval = interval
        self.broken: dict[str, Breakage] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-watch", daemon=True)

    def start(self) -> StackWatch:
        self.path.unlink(missing_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching: from here on, stopping a component is intended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def check_once(self) -> list[Breakage]:
        found = []
        for probe in self.probes:
            try:
                breakage = probe()
            except Exception as error:  # a probe that fails must not end the watch
                breakage = Breakage("stack watch", f"could not probe: {error}")
            if breakage is not None and breakage.component not in self.broken:
                self.broken[breakage.component] = breakage
                found.append(breakage)
        if found:
            self._write()
        return found

    def _write(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps([asdict(b) for b in self.broken.values()], indent=2))
        partial.replace(self.path)  # atomic: readers never see half a file

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check_once()


def tls_endpoint_probe(
    component: str,
    host: str,
    port: int,
    log_tail: Callable[[], str],
    hung_after: float = HUNG_AFTER,
    handshake_timeout: float = _TLS_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> Probe:
    """Broken when nothing completes a TLS handshake on host:port: at once when the
    connection is refused (the server is gone), after `hung_after` seconds of
    timeouts when it is accepted but never answered (hung or stopped)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    silent_since: float | None = None  # when the current run of timeouts began

    def probe() -> Breakage | None:
        nonlocal silent_since
        try:
            with (
                socket.create_connection((host, port), timeout=handshake_timeout) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                silent_since = None
                return None
        except TimeoutError:
            if silent_since is None:
                silent_since = clock()
            silent = clock() - silent_since
            if silent < hung_after:
                return None
            state = f"does not answer TLS on {host}:{port} (timed out for {silent:.0f} s)"
            return Breakage(component, state, log_tail())
        except (OSError, ssl.SSLError) as error:
            state = f"does not answer TLS on {host}:{port} ({error})"
            return Breakage(component, state, log_tail())

    return probe
