"""A registry on 127.0.0.1, started and stopped like every process of the harness.

`LocalRegistry` runs Debian's docker-registry (binary.py) on a free loopback
port, with its storage in a directory of the caller's and a config file it
writes beside it (nothing listens beyond 127.0.0.1: no debug or metrics
server). Optionally it asks for a user and password (htpasswd), for tests of
what a registry that wants credentials gets.

As every process the harness starts (a lifecycle/ HostProcess): in a session of its own, so
a Ctrl-C reaches the harness, which stops it; with the kernel's parent-death
signal, so it goes with a SIGKILLed harness; recorded in the run's ledger
when given one, so the watchdog or a later run stops it; and signalled only
while it is still the process started (its pid is not reaped, so not reused,
until `stop` has waited for it).

    with LocalRegistry(tmp / "storage", owner=RunOwnership.of(run_dir)) as registry:
        push_profile(profile, registry.url)
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from types import TracebackType
from typing import Self

import requests
import yaml

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.lifecycle.processes import HostProcess, RunOwnership
from trainjob_conformance.ports import LOOPBACK, free_port
from trainjob_conformance.stack.registry.binary import PROGRAM, registry_program

START_TIMEOUT = 30.0
# Another process may take the free port between the look and the registry's bind.
_PORT_TRIES = 3
_REALM = "trainjob-conformance"


def _htpasswd_line(user: str, password: str) -> str:
    # distribution accepts bcrypt only. Cost 5 (of 4-31): it checks the password
    # on every request, and this guards a loopback registry living for a test.
    import bcrypt

    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}\n"


def registry_config(root: str, addr: str) -> dict[str, object]:
    """distribution's configuration: files under `root`, HTTP on `addr`, and no other
    listener (no debug or metrics server)."""
    return {
        "version": "0.1",
        "log": {"level": "info", "formatter": "text", "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": root},
            "delete": {"enabled": True},
            # Its storage lives as long as the caller's directory; nothing to purge.
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {
            "addr": addr,
            "secret": secrets.token_hex(16),
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        },
        "health": {"storagedriver": {"enabled": False}},
    }


class StoppedOnExit:
    """A server used as a context manager: started on entry, stopped on exit."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class LocalRegistry(StoppedOnExit):
    """A registry serving `storage` on 127.0.0.1; a context manager that stops it."""

    def __init__(
        self,
        storage: Path,
        config_dir: Path | None = None,
        owner: RunOwnership | None = None,
        credentials: tuple[str, str] | None = None,
        program: Path | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.storage = storage
        self.config_dir = config_dir or storage.parent
        self.owner = owner
        self.credentials = credentials
        self._program = program
        self.start_timeout = start_timeout
        self.port = 0
        self.log_file = self.config_dir / "registry.log"
        self.config_file = self.config_dir / "registry.yml"
        self.process: HostProcess | None = None

    @property
    def host(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _write_config(self) -> None:
        config = registry_config(str(self.storage.resolve()), self.host)
        if self.credentials:
            htpasswd = self.config_dir / "registry.htpasswd"
            htpasswd.write_text(_htpasswd_line(*self.credentials))
            htpasswd.chmod(0o600)
            config["auth"] = {"htpasswd": {"realm": _REALM, "path": str(htpasswd.resolve())}}
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))

    def _spawn(self, program: Path) -> None:
        # The registry would take any REGISTRY_* variable over its config file.
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
        self.process = HostProcess(
            PROGRAM,
            [str(program), "serve", str(self.config_file)],
            self.log_file,
            env=env,
            owner=self.owner,
            with_parent=True,
        ).start()

    def _answers(self) -> bool | NotYet:
        if self.process is None or self.process.exit_code() is not None:
            raise _Exited()
        try:
            with requests.Session() as session:
                session.trust_env = False  # straight to 127.0.0.1, whatever $HTTP_PROXY says
                status = session.get(f"{self.url}/v2/", timeout=1.0).status_code
        except requests.RequestException as error:
            return NotYet(error.__class__.__name__)
        # 401: it answers, and asks for the credentials it was told to.
        return status == 200 or (status == 401 and self.credentials is not None)

    def start(self) -> Self:
        program = self._program or registry_program()
        self.storage.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _PORT_TRIES + 1):
            self.port = free_port()
            self._write_config()
            self._spawn(program)
            try:
                wait_for(f"{PROGRAM} on {self.url}", self._answers, timeout=self.start_timeout)
                return self
            except _Exited:
                in_use = "address already in use" in self.log_tail()
                self.stop()
                if not in_use or attempt == _PORT_TRIES:
                    raise ConformanceError(
                        f"{PROGRAM} exited at start; log {self.log_file}:\n{self.log_tail()}"
                    ) from None
            except WaitTimeout:
                self.stop()
                raise ConformanceError(
                    f"{PROGRAM} did not answer GET {self.url}/v2/ within {self.start_timeout:.0f}s; "
                    f"log {self.log_file}:\n{self.log_tail()}"
                ) from None
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def running(self) -> bool:
        return self.process is not None and self.process.exit_code() is None

    def wait(self) -> int:
        """Until the registry exits (a signal to this process interrupts the wait)."""
        if self.process is None:
            raise ConformanceError(f"{PROGRAM} was not started")
        return self.process.wait()

    def stop(self) -> None:
        """SIGTERM its group, SIGKILL after the grace; only while it is unreaped, so ours."""
        if self.process is not None:
            self.process.stop()

    def log_tail(self, lines: int = 20) -> str:
        return self.process.log_tail(lines) if self.process else "(no log)"


class _Exited(Exception):
    """The registry process ended while it was awaited."""
