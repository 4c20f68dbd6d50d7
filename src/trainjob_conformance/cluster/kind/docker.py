"""Finding a Docker daemon for kind, or starting one, and the one host quirk it must absorb.

Some hosts (sandboxed CI machines among them) withhold CAP_SYS_RESOURCE from
every process: it is missing from the capability bounding set. kind runs its
nodes with `--privileged`, which asks runc for every capability, and runc
fails with "unable to apply caps: operation not permitted". A runtime that
takes CAP_SYS_RESOURCE out of the OCI spec before handing it to the real runc
lets privileged containers start there. On an ordinary host the capability is
present and nothing of this is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout, wait_for
from trainjob_conformance.lifecycle.identity import ProcessIdentity
from trainjob_conformance.lifecycle.processes import (
    HostProcess,
    RunOwnership,
    register_cleanup,
    unregister_cleanup,
)
from trainjob_conformance.lifecycle.shared import SharedProcess, joined_by
from trainjob_conformance.paths import cache_root
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.apt import apt_install

CAP_SYS_RESOURCE = 24  # linux/capability.h
RUNTIME_NAME = "tjc-runc"
_CAP_NAME = "CAP_SYS_RESOURCE"
_DOCKER_INSTALL_HINT = (
    "install Docker (Debian/Ubuntu: apt-get install docker.io) and start its daemon, "
    "or run as root so the harness can install and start it"
)


def bounding_set(status_text: str) -> int:
    """The CapBnd mask from the text of /proc/<pid>/status."""
    for line in status_text.splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise ValueError("no CapBnd line")


def lacks_sys_resource(status_text: str | None = None) -> bool:
    text = status_text if status_text is not None else Path("/proc/self/status").read_text()
    return not bounding_set(text) >> CAP_SYS_RESOURCE & 1


def shim_source(real_runc: str, python: str) -> str:
    """A runc wrapper that drops CAP_SYS_RESOURCE from the spec runc is given, then execs runc.

    dockerd passes the container spec as `--bundle DIR` (DIR/config.json) on
    create and as `--process FILE` on exec.
    """
    return f'''#!{python}
import json, os, sys
args = sys.argv[1:]
def strip(path, key=None):
    try:
        with open(path) as f:
            spec = json.load(f)
    except (OSError, ValueError):
        return
    caps = (spec.get("process") or {{}}).get("capabilities") if key else spec.get("capabilities")
    if not isinstance(caps, dict):
        return
    for name, values in caps.items():
        if isinstance(values, list):
            caps[name] = [v for v in values if v != "{_CAP_NAME}"]
    with open(path, "w") as f:
        json.dump(spec, f)
for i, arg in enumerate(args[:-1]):
    if arg in ("--bundle", "-b"):
        strip(os.path.join(args[i + 1], "config.json"), key="process")
    elif arg in ("--process", "-p"):
        strip(args[i + 1])
os.execv({real_runc!r}, [{real_runc!r}, *args])
'''


def write_shim(real_runc: str) -> Path:
    path = cache_root() / "kind" / RUNTIME_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    # The interpreter itself, not a virtualenv's link to it: the daemon outlives the
    # run, and a checkout's .venv may be gone by the time another run uses it.
    source = shim_source(real_runc, os.path.realpath(sys.executable))
    if not path.is_file() or path.read_text() != source:
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(source)
        partial.chmod(0o755)
        os.replace(partial, path)
    return path


def _docker(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def daemon_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", "--format", "{{.ServerVersion}}", timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def default_runtime() -> str:
    return _docker("info", "--format", "{{.DefaultRuntime}}").stdout.strip()


def _kind_cluster_exists(name: str) -> bool:
    """Whether node containers of kind cluster `name` still exist (kind's own label)."""
    listed = _docker("ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={name}")
    return listed.returncode != 0 or bool(listed.stdout.strip())


# The dockerd the harness starts is shared by every harness run on the host that
# finds it answering, and stopped by the last of them to end (lifecycle/shared.py):
# stopping it with the run that started it broke another run's kind nodes.
def shared_daemon() -> SharedProcess:
    return SharedProcess(cache_root() / "dockerd")


class DockerDaemon:
    """The daemon kind talks to: the user's own, or one the harness started, which
    this run uses with any other harness run and which the last to end stops."""

    def __init__(self, run_dir: Path, owner: RunOwnership | None = None) -> None:
        self.run_dir = run_dir
        self.owner = owner
        self.shared = shared_daemon()
        self.user: str | None = None  # this run's name among the daemon's users
        self.started: HostProcess | None = None  # the daemon, where this run started it

    def ensure(self) -> DockerDaemon:
        with self.shared.locked():
            if daemon_answers():
                if self.shared.process() is not None:
                    self._join()
                self._check_runtime()
                return self
            if os.geteuid() != 0:
                raise ConformanceError(f"no Docker daemon answers: {_DOCKER_INSTALL_HINT}")
            self._install()
            self._start()
        return self

    def _join(self) -> None:
        self.user = self.shared.join()
        if self.owner is not None:
            self.owner.ledger.record_shared(self.shared, self.user)
        register_cleanup(self.stop)

    def _check_runtime(self) -> None:
        if lacks_sys_resource() and default_runtime() != RUNTIME_NAME:
            raise ConformanceError(
                f"this host withholds {_CAP_NAME} (CapBnd in /proc/self/status), so the Docker "
                "daemon cannot start kind's privileged nodes: restart dockerd with a default "
                f"runtime that drops {_CAP_NAME} from the container spec, or stop it and let "
                "the harness start its own (run as root)"
            )

    def _install(self) -> None:
        if shutil.which("dockerd") and shutil.which("docker"):
            return
        if shutil.which("apt-get") is None:
            raise ConformanceError(f"no dockerd on PATH and no apt-get: {_DOCKER_INSTALL_HINT}")
        with step("installing docker.io from Debian's repositories"):
            apt_install(["docker.io"])

    def _start(self) -> None:
        args = ["dockerd"]
        if lacks_sys_resource():
            real_runc = shutil.which("runc")
            if real_runc is None:
                raise ConformanceError("dockerd is installed but runc is not: apt-get install runc")
            shim = write_shim(real_runc)
            args += ["--add-runtime", f"{RUNTIME_NAME}={shim}", "--default-runtime", RUNTIME_NAME]
            say(f"this host withholds {_CAP_NAME}: dockerd runs containers through {shim}")
        # Its log outlives this run directory's use of it: beside the registry.
        log = self.shared.directory / "dockerd.log"
        process = HostProcess("dockerd", args, log).start()
        # Not this run's to stop on exit: the last user stops it (stop()).
        unregister_cleanup(process.stop)
        self.started = process
        identity = ProcessIdentity.of(process.pid or 0, "dockerd")
        if identity is None:
            raise ConformanceError(f"dockerd exited at once; log {log}:\n{process.log_tail(15)}")
        self.shared.adopt(identity)
        self._join()
        with step("starting dockerd"):
            try:
                wait_for("dockerd to answer", daemon_answers, timeout=60, interval=0.5)
            except WaitTimeout:
                raise ConformanceError(
                    f"dockerd did not answer within 60 s; log {log}:\n{process.log_tail(15)}"
                ) from None

    def keep_for(self, cluster: str) -> None:
        """This run leaves kind cluster `cluster` running: the harness's daemon stays
        while its node containers exist, then the last run to end stops it."""
        if self.user is not None:
            self.shared.keep_for(cluster)
        self.stop()

    def stop(self) -> None:
        """Leave the harness's daemon; it stops when no other harness run uses it."""
        unregister_cleanup(self.stop)
        if self.user is None:
            return
        process, others = self.shared.leave(self.user, in_use=_kind_cluster_exists)
        self.user = None
        if self.started is not None and not others:
            # Ours to reap once it has exited, or it stays a zombie until this run ends.
            self.started.exit_code()
        # This process's other cluster (a run's MultiKueue worker) is no news to its user.
        others = [o for o in others if not joined_by(o, os.getpid())]
        if process is not None and others:
            say(
                f"dockerd (pid {process.pid}) left running: used by {len(others)} other "
                f"harness run{'s' if len(others) > 1 else ''} or kept cluster"
                f"{'s' if len(others) > 1 else ''} on this host"
            )
