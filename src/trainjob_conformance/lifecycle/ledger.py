"""Which processes a run owns, so that they are stopped even if the harness is not.

A run directory holds one ledger, `owned-processes.jsonl`: a header naming the
owner (pid and start time), one line per process the run started (pid and
start time, so a recycled pid is never mistaken for it), and the directories
whose processes belong to the run (kwokctl's cluster directory: every
control-plane process it starts names that directory on its command line).

A watchdog (`lifecycle/watchdog.py`) holds the other end of a pipe from the
owner; when the owner dies, even by SIGKILL, the pipe closes and the watchdog
reaps what the ledger lists. A later run reaps a ledger whose owner is gone,
in case the watchdog was killed too. `detached` (a kept cluster) and `closed`
(stopped cleanly) ledgers are left alone.

Process identities come from psutil (start time, status, command lines: what
it reads from /proc, checked on every platform it supports); its import adds
about 20 ms to the watchdog's start.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from trainjob_conformance.lifecycle.identity import ProcessIdentity, start_time
from trainjob_conformance.lifecycle.shared import SharedProcess

LEDGER_FILE = "owned-processes.jsonl"
DETACHED = "detached"
CLOSED = "closed"
_GRACE_SECONDS = 10.0
# How many times `reap` looks for the run's processes (see there).
_LOOKS = 3
# A recorded clean-up command (a kind cluster's deletion takes about 10 s).
_COMMAND_TIMEOUT = 120.0
# The order a cluster stops in cleanly: the managers (and their forwarders)
# while the API server still answers them, then the control plane, then etcd.
# SIGTERM to all at once left kube-apiserver and Kueue each waiting on the
# other until the SIGKILL at the end of the grace (10 s on every interrupted
# run); in this order they are all gone within about 2 s.
_STOP_STAGES = (
    frozenset({"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}),
    frozenset({"etcd"}),
)


def _stop_stage(process: ProcessIdentity) -> int:
    """0 for a manager or anything else of the run; then each of _STOP_STAGES in turn."""
    for stage, names in enumerate(_STOP_STAGES, start=1):
        if process.name in names:
            return stage
    return 0


def processes_naming(directory: str, since: float, exclude: set[int]) -> list[ProcessIdentity]:
    """Processes started at or after `since` whose executable lies in `directory`.

    kwokctl runs each component from the cluster's own `bin/`. A process that
    only names a file there (a pytest or kubectl given the cluster's
    kubeconfig) is someone else's and is never watched or signalled: a
    `prove` child that had finished was once reported as a dead component.
    """
    prefix = directory.rstrip("/") + "/"
    found = []
    for process in psutil.process_iter(["create_time", "cmdline", "status"]):
        info = process.info
        started, command = info["create_time"], info["cmdline"]
        if process.pid in exclude or started is None or started < since or not command:
            continue
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if command[0].startswith(prefix):
            found.append(ProcessIdentity(process.pid, started, os.path.basename(command[0])))
    return found


class ProcessLedger:
    """The ledger file of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, run_dir: Path) -> ProcessLedger:
        run_dir.mkdir(parents=True, exist_ok=True)
        ledger = cls(run_dir / LEDGER_FILE)
        if not ledger.path.exists():
            ledger._append(
                {
                    "owner": os.getpid(),
                    "owner_start": start_time(os.getpid()),
                    # The owner's start on the same clock as every process's
                    # start time (psutil's create_time), which may stand up to
                    # a second before the wall clock: a process the run starts
                    # never looks older than this.
                    "since": start_time(os.getpid()),
                }
            )
        return ledger

    def _append(self, entry: dict[str, Any]) -> None:
        with self.path.open("a") as sink:
            sink.write(json.dumps(entry) + "\n")
            sink.flush()

    def _entries(self) -> list[dict[str, Any]]:
        entries = []
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries

    def record(self, identity: ProcessIdentity) -> None:
        self._append({"pid": identity.pid, "start": identity.start, "name": identity.name})

    def record_shared(self, shared: SharedProcess, user: str) -> None:
        """A process this run uses with other runs: left, not reaped (lifecycle/shared.py)."""
        self._append({"shared": str(shared.directory), "user": user})

    def record_command(self, argv: list[str]) -> None:
        """A command that undoes what the run made outside its processes (a kind
        cluster's containers), run when the run is reaped; it must do nothing where
        there is nothing left to undo."""
        self._append({"command": argv})

    def record_directory(self, directory: Path) -> None:
        self._append({"directory": str(directory)})

    def mark(self, state: str) -> None:
        self._append({"state": state})

    @property
    def state(self) -> str | None:
        states = [e["state"] for e in self._entries() if "state" in e]
        return states[-1] if states else None

    def owner_alive(self) -> bool:
        header = next((e for e in self._entries() if "owner" in e), None)
        if header is None:
            return False
        owner = ProcessIdentity(int(header["owner"]), float(header.get("owner_start") or -1), "")
        return owner.is_alive()

    def _since(self) -> float:
        header = next((e for e in self._entries() if "since" in e), {})
        return float(header.get("since") or 0)

    def living(self) -> list[ProcessIdentity]:
        """Every process of this run still running, the recorded ones first."""
        entries = self._entries()
        recorded = [
            ProcessIdentity(int(e["pid"]), float(e["start"]), str(e.get("name") or "?"))
            for e in entries
            if "pid" in e
        ]
        alive = [p for p in recorded if p.is_alive()]
        exclude = {os.getpid(), *(p.pid for p in alive)}
        for entry in entries:
            if "directory" in entry:
                found = processes_naming(entry["directory"], self._since(), exclude)
                alive += found
                exclude.update(p.pid for p in found)
        return alive

    def reap(self, grace: float = _GRACE_SECONDS) -> list[ProcessIdentity]:
        """SIGTERM what is still running, SIGKILL what outlives the grace; returns them.

        Looks again once they are stopped: a process still starting others when
        the first look was taken (kwokctl, starting the control plane) may have
        started more before it stopped.
        """
        targets: list[ProcessIdentity] = []
        for _ in range(_LOOKS):
            stopped = {(p.pid, p.start) for p in targets}
            found = [p for p in self.living() if (p.pid, p.start) not in stopped]
            if not found:
                break
            _stop(found, grace)
            targets += found
        for entry in self._entries():
            if "command" in entry:
                # Its own session: the terminal's Ctrl-C must not cut it short.
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    subprocess.run(
                        [str(arg) for arg in entry["command"]],
                        timeout=_COMMAND_TIMEOUT, start_new_session=True, check=False,
                    )  # fmt: skip
        # Shared processes last: the run's own processes may still have been using them.
        for entry in self._entries():
            if "shared" in entry:
                process, others = SharedProcess(Path(entry["shared"])).leave(str(entry["user"]))
                if process is not None and not others:
                    targets.append(process)
        return targets


def _stop(targets: list[ProcessIdentity], grace: float) -> None:
    """SIGTERM by stages (_STOP_STAGES), then SIGKILL to what outlived the grace."""
    deadline = time.monotonic() + grace
    for stage in range(len(_STOP_STAGES) + 1):
        group = [p for p in targets if _stop_stage(p) == stage]
        for process in group:
            process.signal(signal.SIGTERM)
        _wait_exited(group, deadline - time.monotonic())
    for process in targets:
        process.signal(signal.SIGKILL)


def _wait_exited(targets: list[ProcessIdentity], grace: float) -> None:
    """Until every target has exited, or `grace` is over, as the kernel reports
    each exit (a pidfd turns readable when its process ends, zombie or not)."""
    deadline = time.monotonic() + grace
    descriptors: list[int] = []
    unwatched: list[ProcessIdentity] = []
    try:
        for process in targets:
            try:
                descriptor = os.pidfd_open(process.pid)
            except ProcessLookupError:
                continue  # gone already
            except OSError:
                unwatched.append(process)  # no pidfd on this kernel (Linux before 5.3)
                continue
            if process.is_alive():  # still the process recorded, not a reused pid
                descriptors.append(descriptor)
            else:
                os.close(descriptor)
        poller = select.poll()
        for descriptor in descriptors:
            poller.register(descriptor, select.POLLIN)
        pending = set(descriptors)
        # A process the kernel cannot report on gets the whole grace.
        while (pending or any(p.is_alive() for p in unwatched)) and (
            left := deadline - time.monotonic()
        ) > 0:
            for descriptor, _ in poller.poll(left * 1000):
                pending.discard(descriptor)
                poller.unregister(descriptor)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def abandoned_ledgers(runs_root: Path) -> list[ProcessLedger]:
    """Ledgers under `runs_root` whose owner died without stopping or keeping its cluster."""
    found = []
    for path in sorted(runs_root.glob(f"*/{LEDGER_FILE}")) + sorted(
        runs_root.glob(f"*/*/{LEDGER_FILE}")
    ):
        ledger = ProcessLedger(path)
        if ledger.state in (DETACHED, CLOSED) or ledger.owner_alive():
            continue
        found.append(ledger)
    return found
