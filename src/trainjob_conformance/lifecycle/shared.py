"""A process several harness runs use at once (dockerd), stopped by the last to leave.

The process is described by a small directory: `process.json` (its pid and
start time, so it is signalled only while it is still the process a run
started), `users/` (one file per run using it, named by the run owner's pid
and start time), and a lock file that makes join, leave and start one step
each. A run that dies without leaving (SIGKILL) leaves its file behind; a
user whose process no longer runs does not count, so the next run to leave
stops the process if nobody else is left. Each run also records the process
in its ledger as shared (lifecycle/ledger.py), so its watchdog leaves it the
same way when the run is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.kube.waits import WaitTimeout, wait_for
from trainjob_conformance.lifecycle.identity import ProcessIdentity, start_time

_STOP_GRACE_SECONDS = 10.0
# Users that are not a run's process but something it left running.
KEPT = "kept-"
# A user file is "<pid>-<start time>+<join number>".
_JOIN_SEPARATOR = "+"
_JOINS = itertools.count(1)


@dataclass(frozen=True)
class SharedProcess:
    """The registry directory of one shared process."""

    directory: Path

    @property
    def users(self) -> Path:
        return self.directory / "users"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Join, leave and start one at a time, across processes."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / "lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def process(self) -> ProcessIdentity | None:
        """The recorded process, if it still runs as recorded."""
        try:
            found = json.loads((self.directory / "process.json").read_text())
            identity = ProcessIdentity(int(found["pid"]), float(found["start"]), str(found["name"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return identity if identity.is_alive() else None

    def adopt(self, identity: ProcessIdentity) -> None:
        """Record a process just started as the shared one (under `locked`)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "process.json").write_text(
            json.dumps({"pid": identity.pid, "start": identity.start, "name": identity.name})
        )

    def join(self) -> str:
        """Count this process's run as a user (under `locked`); its name, for `leave`."""
        self.users.mkdir(parents=True, exist_ok=True)
        # One file per join, not per process: a process may hold the daemon for two
        # clusters (a run and its MultiKueue worker), and the first to leave must not
        # take the other's place with it (it once stopped dockerd under the run's cluster).
        name = f"{user_name(os.getpid())}{_JOIN_SEPARATOR}{next(_JOINS)}"
        (self.users / name).touch()
        return name

    def keep_for(self, holder: str) -> None:
        """Count something that outlives its run (a kept kind cluster) as a user until
        `in_use` (given to `leave`) says it is gone."""
        with self.locked():
            self.users.mkdir(parents=True, exist_ok=True)
            (self.users / f"{KEPT}{holder}").touch()

    def others(self, mine: str, in_use: Callable[[str], bool] | None = None) -> list[str]:
        """Users other than `mine` still using the process; stale files are removed.

        A run counts while its process runs; a kept holder while `in_use(holder)`
        says so, and always when there is no `in_use` to ask (a watchdog, which
        cannot look, never stops the process under a kept cluster).
        """
        alive = []
        for path in sorted(self.users.glob("*")) if self.users.is_dir() else []:
            if path.name == mine:
                continue
            if path.name.startswith(KEPT):
                if in_use is None or in_use(path.name.removeprefix(KEPT)):
                    alive.append(path.name)
                else:
                    path.unlink(missing_ok=True)
                continue
            pid, _, start = path.name.split(_JOIN_SEPARATOR)[0].partition("-")
            with contextlib.suppress(ValueError):
                if ProcessIdentity(int(pid), float(start), "").is_alive():
                    alive.append(path.name)
                    continue
            path.unlink(missing_ok=True)
        return alive

    def leave(
        self, user: str, in_use: Callable[[str], bool] | None = None
    ) -> tuple[ProcessIdentity | None, list[str]]:
        """Stop counting `user` (what `join` returned); stop the process when no other
        user runs.

        Returns the process and the other users; the process was stopped when
        that list is empty.
        """
        with self.locked():
            (self.users / user).unlink(missing_ok=True)
            others = self.others(user, in_use)
            process = self.process()
            if process is not None and not others:
                stop(process)
                (self.directory / "process.json").unlink(missing_ok=True)
            return process, others


def user_name(pid: int) -> str:
    return f"{pid}-{start_time(pid) or 0}"


def joined_by(user: str, pid: int) -> bool:
    """Whether the user file `user` is one of process `pid`'s joins."""
    return user.split(_JOIN_SEPARATOR)[0] == user_name(pid)


def stop(process: ProcessIdentity, grace: float = _STOP_GRACE_SECONDS) -> None:
    """SIGTERM, then SIGKILL after `grace`; only while it is still the recorded process."""
    process.signal(signal.SIGTERM)
    with contextlib.suppress(WaitTimeout):
        wait_for(f"{process.name} to exit", lambda: not process.is_alive(), grace, interval=0.1)
    process.signal(signal.SIGKILL)
