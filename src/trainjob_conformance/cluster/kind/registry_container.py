"""A registry kind's nodes can pull from: Debian's docker-registry in a container.

A registry on the host's 127.0.0.1 is out of reach of kind's nodes, which are
containers on Docker's `kind` network. kind's own local-registry recipe runs
the registry as a container, published on the host's loopback only, and joins
it to the `kind` network; this does the same (`images serve --cluster kind`),
so the host pushes and fetches at http://127.0.0.1:PORT and the nodes pull from
the container by name (cluster/kind/mirror.py connects it).

The image holds the registry program of Debian's package and the two libraries
it links (libc and the loader), nothing else, cached by the package's version.
The container is removed when the command ends, by Ctrl-C or SIGTERM, and by
the run's watchdog if the command is SIGKILLed (it removes only containers
carrying this process's owner label).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Self

import requests
import yaml

from trainjob_conformance.cluster.kind.docker import DockerDaemon
from trainjob_conformance.cluster.kind.images import store
from trainjob_conformance.cluster.labels import LOCAL_IMAGE_HOST
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.lifecycle.identity import start_time
from trainjob_conformance.lifecycle.processes import (
    RunOwnership,
    register_cleanup,
    unregister_cleanup,
)
from trainjob_conformance.ports import LOOPBACK, free_port
from trainjob_conformance.stack.registry.binary import DEBIAN_PACKAGE, registry_program
from trainjob_conformance.stack.registry.server import StoppedOnExit, registry_config

OWNER_LABEL = "trainjob-conformance.kubeflow.org/registry-owner"
PORT_INSIDE = 5000
START_TIMEOUT = 30.0
_CONFIG_INSIDE = "/etc/docker/registry/config.yml"
_STORAGE_INSIDE = "/var/lib/registry"


def _package_version() -> str:
    found = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", DEBIAN_PACKAGE],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return found.stdout.strip() or "unknown"


def _linked_libraries(program: Path) -> list[Path]:
    """The shared libraries `program` loads, as ldd resolves them on this host."""
    listed = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=False)
    found = []
    for line in listed.stdout.splitlines():
        for word in line.split():
            if word.startswith("/") and Path(word).exists():
                found.append(Path(word))
    return found


def _build_image(image: str, program: Path) -> None:
    context = store.fresh_context("registry")
    store.add_file(context, program, "rootfs/usr/bin/docker-registry")
    for library in _linked_libraries(program):
        store.add_file(context, library.resolve(), f"rootfs{library}", mode=0o755)
    (context / "rootfs" / "tmp").mkdir(parents=True, exist_ok=True)
    dockerfile = (
        "FROM scratch\nCOPY rootfs/ /\n"
        f'ENTRYPOINT ["/usr/bin/docker-registry"]\nCMD ["serve", "{_CONFIG_INSIDE}"]\n'
    )
    store.build_from_context(image, context, dockerfile)


def registry_image() -> str:
    program = registry_program()
    version = _package_version()
    tag = version.replace("+", "_").replace("~", "_")
    image = f"{LOCAL_IMAGE_HOST}/registry:{tag}"
    store.ensure(image, lambda: _build_image(image, program), key=f"registry-{tag}")
    return image


def remove_owned(owner: str) -> None:
    """Remove the registry containers labelled with `owner` (the watchdog's command)."""
    listed = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={OWNER_LABEL}={owner}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    for container in listed.stdout.split():
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


class ContainerRegistry(StoppedOnExit):
    """A registry container serving `storage`, published on 127.0.0.1 only."""

    def __init__(self, storage: Path, config_dir: Path) -> None:
        self.storage = storage
        self.config_dir = config_dir
        self.config_file = config_dir / "registry-container.yml"
        self.log_file = config_dir / "registry-container.log"
        self.name = ""
        self.port = 0
        self._owner = ""
        self._docker: DockerDaemon | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _write_config(self) -> None:
        # Inside the container's own network namespace; the host sees it on
        # 127.0.0.1 only (the publication in `start`), the kind nodes by name.
        config = registry_config(_STORAGE_INSIDE, f":{PORT_INSIDE}")
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))

    def _answers(self) -> bool | NotYet:
        state = store.docker("inspect", "--format", "{{.State.Running}}", self.name).strip()
        if state != "true":
            raise ConformanceError(
                f"the registry container {self.name} exited at start:\n{self.log_tail()}"
            )
        try:
            with requests.Session() as session:
                session.trust_env = False
                status = session.get(f"{self.url}/v2/", timeout=1.0).status_code
        except requests.RequestException as error:
            return NotYet(error.__class__.__name__)
        return status == 200

    def start(self) -> Self:
        self.storage.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        register_cleanup(self.stop)
        ownership = RunOwnership.of(self.config_dir)
        self._docker = DockerDaemon(self.config_dir, ownership).ensure()
        image = registry_image()
        self._write_config()
        pid = os.getpid()
        self.port = free_port()
        self._owner = f"{pid}-{start_time(pid) or 0}"
        self.name = f"tjc-registry-{pid}"
        ownership.ledger.record_command(
            [sys.executable, "-m", __name__, self._owner]
        )  # the watchdog's, should this process be SIGKILLed
        store.docker(
            "run", "-d", "--name", self.name, "--label", f"{OWNER_LABEL}={self._owner}",
            # A fixed host port: Docker gives an ephemeral one (`127.0.0.1::5000`) anew
            # when the container joins or leaves a network, which kind runs make it do.
            "--publish", f"{LOOPBACK}:{self.port}:{PORT_INSIDE}",
            "--volume", f"{self.storage.resolve()}:{_STORAGE_INSIDE}",
            "--volume", f"{self.config_file.resolve()}:{_CONFIG_INSIDE}:ro",
            image, what="run the registry container",
        )  # fmt: skip
        try:
            wait_for(f"the registry container on {self.url}", self._answers, START_TIMEOUT)
        except WaitTimeout:
            self.stop()
            raise ConformanceError(
                f"the registry container did not answer GET {self.url}/v2/ within "
                f"{START_TIMEOUT:.0f}s:\n{self.log_tail()}"
            ) from None
        return self

    def wait(self) -> int:
        """Until the container exits (a signal to this process interrupts the wait)."""
        ended = subprocess.run(["docker", "wait", self.name], capture_output=True, text=True)
        with contextlib.suppress(ValueError):
            return int(ended.stdout.strip())
        return 1

    def log_tail(self, lines: int = 20) -> str:
        if not self.name:
            return "(no container)"
        logs = subprocess.run(
            ["docker", "logs", "--tail", str(lines), self.name],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return (logs.stdout + logs.stderr).strip() or "(no log)"

    def stop(self) -> None:
        unregister_cleanup(self.stop)
        if self.name:
            # Its log outlives it, beside its configuration.
            with contextlib.suppress(OSError):
                self.log_file.write_text(self.log_tail(200) + "\n")
            remove_owned(self._owner)
            self.name = ""
        if self._docker is not None:
            self._docker.stop()
            self._docker = None


if __name__ == "__main__":
    if len(sys.argv) == 2 and shutil.which("docker"):
        remove_owned(sys.argv[1])
