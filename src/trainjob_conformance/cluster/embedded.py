"""The embedded cluster: real control-plane binaries run by kwokctl on loopback.

kwokctl's binary runtime already starts etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok-controller as processes from
local paths; the harness only pins the binaries, binds everything to
127.0.0.1, turns admission on (webhooks need it) and keeps the kubeconfig in
the run directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import yaml

from trainjob_conformance.cluster.kwok_stages import harness_stages
from trainjob_conformance.cluster.ledger import ProcessIdentity
from trainjob_conformance.cluster.nodes import node_manifests
from trainjob_conformance.cluster.ports import LOOPBACK
from trainjob_conformance.cluster.processes import (
    RunOwnership,
    register_cleanup,
    stop_processes_naming,
    unregister_cleanup,
)
from trainjob_conformance.cluster.stack_watch import Breakage, Probe
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.paths import cache_root
from trainjob_conformance.progress import step
from trainjob_conformance.stack.gobuild import module_source
from trainjob_conformance.stack.profiles import Profile

_CREATE_TIMEOUT = "3m"


@contextlib.contextmanager
def _one_kwokctl_create_at_a_time() -> Iterator[None]:
    """kwokctl picks free ports and binds them later: two creates at once (a run's
    MultiKueue worker next to another test's cluster) can pick the same port,
    and the loser's kwok-controller never makes its nodes Ready."""
    lock_path = cache_root() / "kwokctl-create.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class EmbeddedControlPlane:
    """One kwokctl cluster, owned by this process from `up` to `down`."""

    def __init__(
        self, profile: Profile, binaries: dict[str, Path], run_dir: Path, name: str | None = None
    ) -> None:
        self.profile = profile
        self.binaries = binaries
        self.run_dir = run_dir
        self.name = name or f"tjc-{uuid.uuid4().hex[:8]}"
        self.workdir = run_dir / "kwok"
        self._created = False

    @property
    def cluster_dir(self) -> Path:
        return self.workdir / "clusters" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.cluster_dir / "kubeconfig.yaml"

    @property
    def logs_dir(self) -> Path:
        return self.cluster_dir / "logs"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.workdir)
        env["KWOK_KUBECTL_BINARY"] = str(self.binaries["kubectl"])
        # kwokctl must never merge the new cluster into the user's kubeconfig.
        env.pop("KUBECONFIG", None)
        return env

    def _kwokctl_config(self) -> Path:
        path = self.run_dir / "kwokctl.yaml"
        options = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": {"bindAddress": LOOPBACK, "kubectlBinary": str(self.binaries["kubectl"])},
        }
        stages = harness_stages(module_source("kwok", self.profile.version("kwok")))
        path.write_text(yaml.safe_dump_all([options, *stages]))
        return path

    def _kwokctl(self, *args: str, log_name: str) -> None:
        log = self.run_dir / f"kwokctl-{log_name}.log"
        with log.open("ab") as sink:
            result = subprocess.run(
                [str(self.binaries["kwokctl"]), *args],
                env=self._env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        if result.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            raise ConformanceError(f"kwokctl {args[0]} {args[1]} failed; log {log}:\n{tail}")

    def up(self) -> Path:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = self._kwokctl_config()
        # Every process kwokctl starts names the cluster directory on its
        # command line: that is how a watchdog finds them if this process dies.
        RunOwnership.of(self.run_dir).record_directory(self.cluster_dir)
        register_cleanup(self.down)
        self._created = True
        with (
            step(f"starting control plane {self.name} (kwokctl, binary runtime)"),
            _one_kwokctl_create_at_a_time(),
        ):
            self._kwokctl(
                "--config",
                str(config),
                "create",
                "cluster",
                "--name",
                self.name,
                "--runtime",
                "binary",
                "--kube-admission",
                "--kubeconfig=",
                "--wait",
                _CREATE_TIMEOUT,
                "--etcd-binary",
                str(self.binaries["etcd"]),
                "--kube-apiserver-binary",
                str(self.binaries["kube-apiserver"]),
                "--kube-controller-manager-binary",
                str(self.binaries["kube-controller-manager"]),
                "--kube-scheduler-binary",
                str(self.binaries["kube-scheduler"]),
                "--kwok-controller-binary",
                str(self.binaries["kwok"]),
                log_name="create",
            )
        if not self.kubeconfig.is_file():
            raise ConformanceError(f"kwokctl reported success but wrote no {self.kubeconfig}")
        return self.kubeconfig

    def add_nodes(self, mode: str = "cloud") -> list[str]:
        kube = Kube(api_client_for(self.kubeconfig))
        names = []
        for node in node_manifests(mode):
            kube.apply(node)
            names.append(node["metadata"]["name"])

        def all_ready() -> bool:
            ready = 0
            for node in kube.core.list_node().items:
                if node.metadata.name not in names:
                    continue
                conditions = {c.type: c.status for c in node.status.conditions or []}
                ready += conditions.get("Ready") == "True"
            return ready == len(names)

        wait_for(
            f"{len(names)} fake nodes to be Ready",
            all_ready,
            timeout=60,
            retry_on=(ApiError,),
        )
        return names

    def component_probes(self) -> list[Probe]:
        """One probe per control-plane process kwokctl started (etcd, kube-apiserver, ...)."""
        # kwokctl's own pid files name its components; the managers also name
        # the cluster directory (its kubeconfig) but are watched on their own.
        running = []
        for pid_file in sorted((self.cluster_dir / "pids").glob("*.pid")):
            with contextlib.suppress(ValueError, OSError):
                identity = ProcessIdentity.of(int(pid_file.read_text().strip()), pid_file.stem)
                if identity is not None:
                    running.append(identity)

        def probe_for(process: ProcessIdentity) -> Probe:
            name = Path(process.name).name

            def probe() -> Breakage | None:
                if process.is_alive():
                    return None
                log = self.logs_dir / f"{name}.log"
                tail = log.read_text(errors="replace").splitlines()[-15:] if log.is_file() else []
                return Breakage(f"control plane {name}", "is no longer running", "\n".join(tail))

            return probe

        return [probe_for(process) for process in running]

    def down(self) -> None:
        unregister_cleanup(self.down)
        if not self._created:
            return
        self._created = False
        # kwokctl signals its components and returns before they have exited;
        # wait for them, so that nothing outlives the harness.
        try:
            self._kwokctl("delete", "cluster", "--name", self.name, log_name="delete")
        finally:
            stop_processes_naming(self.cluster_dir, f"control plane {self.name}")
            RunOwnership.of(self.run_dir).close()

    @classmethod
    def attach(
        cls, profile: Profile, binaries: dict[str, Path], run_dir: Path, name: str
    ) -> EmbeddedControlPlane:
        """A handle on a cluster that an earlier `up` left running."""
        control_plane = cls(profile, binaries, run_dir, name)
        control_plane._created = True
        return control_plane
