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
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml
from kubernetes.client import ApiClient

from trainjob_conformance.cluster.embedded.kwok_stages import harness_stages
from trainjob_conformance.cluster.embedded.nodes import node_manifests
from trainjob_conformance.cluster.health.host_load import while_saturated
from trainjob_conformance.cluster.health.phases import PhaseClock
from trainjob_conformance.cluster.health.stack_watch import Breakage, Probe
from trainjob_conformance.errors import ConformanceError, ControlPlaneNotStarted
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import NODE
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.lifecycle.ledger import ProcessIdentity
from trainjob_conformance.lifecycle.processes import (
    RunOwnership,
    register_cleanup,
    stop_processes_naming,
    unregister_cleanup,
)
from trainjob_conformance.ports import KWOKCTL_CREATE_LOCK, LOOPBACK
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.gobuild import module_source
from trainjob_conformance.stack.profiles import Profile

_CREATE_TIMEOUT = "3m"
_API_SERVER_TIMEOUT = 180.0
# A create waits for another's to end; that one is bounded by kwokctl's own
# --wait (_CREATE_TIMEOUT) after its start, so a few in a row fit in this.
_CREATE_TURN_TIMEOUT = 600.0
# How often to look at things on this machine's loopback (the API server's
# readiness, node conditions): a request costs a few milliseconds.
_LOCAL_POLL = 0.05
# For `bench`, which times what the cluster did for each test from this log:
# every write (the harness's and the managers' answers to it), at Metadata
# level (times, user agent, object; no bodies), once answered. Reads are left
# out (polls would drown the rest), and so are Leases (a renewal every 2 s from
# every manager says nothing about a test).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "Metadata"},
    ],
}


def _create_lock_path() -> Path:
    return KWOKCTL_CREATE_LOCK


@contextlib.contextmanager
def _one_kwokctl_create_at_a_time(holder: str, turn: threading.Event) -> Iterator[None]:
    """kwokctl picks free ports and binds them later: two creates at once (a run's
    MultiKueue worker next to another test's cluster) can pick the same port,
    and the loser's kwok-controller never makes its nodes Ready.

    The holder writes who it is into the lock file, so that a create waiting
    for its turn can say whose create it waits for; `turn` is set once the
    lock is ours."""
    lock_path = _create_lock_path()
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    # "a+", not "w": opening must not erase the holder's line before the lock is ours.
    with lock_path.open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(holder)
            lock.flush()
            turn.set()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _create_lock_holder() -> str:
    """Who last took the create lock (the one holding it, while a create waits)."""
    try:
        return _create_lock_path().read_text().strip() or "unknown"
    except OSError:
        return "unknown"


class EmbeddedControlPlane:
    """One kwokctl cluster, owned by this process from `up` to `down`."""

    def __init__(
        self,
        profile: Profile,
        binaries: dict[str, Path],
        run_dir: Path,
        name: str | None = None,
        phases: PhaseClock | None = None,
        audit_policy: dict | None = None,
    ) -> None:
        self.profile = profile
        # AUDIT_POLICY (the bench's), WINDOW_AUDIT_POLICY (an upgrade's) or none.
        self.audit_policy = audit_policy
        self.binaries = binaries
        self.run_dir = run_dir
        self.name = name or f"tjc-{uuid.uuid4().hex[:8]}"
        self.workdir = run_dir / "kwok"
        self.phases = phases or PhaseClock()
        self._created = False
        self._kwokctl_process: subprocess.Popen[bytes] | None = None
        self._creating: threading.Thread | None = None
        self._create_error: BaseException | None = None
        # Set once this cluster's create holds the machine's create lock.
        self._create_turn = threading.Event()

    @property
    def cluster_dir(self) -> Path:
        return self.workdir / "clusters" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.cluster_dir / "kubeconfig.yaml"

    @property
    def logs_dir(self) -> Path:
        return self.cluster_dir / "logs"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log, written when the cluster was made with a policy."""
        return self.logs_dir / "audit.log"

    def _audit_args(self) -> list[str]:
        if self.audit_policy is None:
            return []
        policy = self.run_dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(self.audit_policy))
        return ["--kube-audit-policy", str(policy)]

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
            process = subprocess.Popen(
                [str(self.binaries["kwokctl"]), *args],
                env=self._env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # kwokctl outliving a harness killed by SIGKILL would go on
                # starting the control plane after the watchdog has reaped.
                preexec_fn=die_with_parent,
            )
        # In the ledger too: the watchdog stops it before what it has started.
        RunOwnership.of(self.run_dir).record(process.pid, "kwokctl")
        # Kept, so that `down` can stop a create still running in the background.
        self._kwokctl_process = process
        try:
            returncode = process.wait()
        finally:
            self._kwokctl_process = None
        if returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            raise ConformanceError(f"kwokctl {args[0]} {args[1]} failed; log {log}:\n{tail}")

    def up(self) -> Path:
        """Create the cluster and wait until kwokctl reports every component ready."""
        self.begin()
        return self.finish()

    def begin(self) -> None:
        """Start creating the cluster in the background; `finish` waits for it.

        Meanwhile the caller can prepare the install, and start it once the
        API server is ready (`wait_api_server`), a little before kwokctl has
        seen every other component ready.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = self._kwokctl_config()
        # Every process kwokctl starts names the cluster directory on its
        # command line: that is how a watchdog finds them if this process dies.
        RunOwnership.of(self.run_dir).record_directory(self.cluster_dir)
        register_cleanup(self.down)
        self._created = True
        started = self.phases.now()

        def create() -> None:
            try:
                self._create(config)
                self.phases.record("control plane", started)
            except ConformanceError as error:  # kwokctl's own failure: no release's
                self._create_error = ControlPlaneNotStarted(str(error))
            except BaseException as error:  # handed to whoever waits on the cluster
                self._create_error = error

        # A daemon thread: an interrupted harness must not wait for kwokctl at exit.
        self._creating = threading.Thread(target=create, name="kwokctl-create", daemon=True)
        self._creating.start()

    def _check_create(self) -> None:
        error = self._create_error
        if error is not None:
            raise error

    def finish(self) -> Path:
        """Wait for the create `begin` started; its kubeconfig."""
        if self._creating is not None:
            while self._creating.is_alive():
                self._creating.join(0.1)  # in slices, so Ctrl-C is seen at once
        self._check_create()
        if not self.kubeconfig.is_file():
            raise ConformanceError(f"kwokctl reported success but wrote no {self.kubeconfig}")
        return self.kubeconfig

    def _wait_create_turn(self) -> None:
        """Wait while another cluster's create holds the lock: the API server's
        bound starts when this create starts, not before."""
        creating = self._creating
        if creating is None or self._create_turn.is_set():
            return
        if not self._create_turn.wait(0.5):
            say(f"waiting for another kwokctl create to end first: {_create_lock_holder()}")

        def our_turn() -> bool:
            self._check_create()
            # (a create that ended without its turn: its error is raised above)
            return self._create_turn.is_set() or not creating.is_alive()

        wait_for(
            f"the turn of {self.name} to create (one kwokctl create at a time on this machine)",
            our_turn,
            timeout=_CREATE_TURN_TIMEOUT,
            diagnostics=lambda: f"the create holding the lock: {_create_lock_holder()}",
            interval=_LOCAL_POLL,
        )

    def wait_api_server(self, timeout: float = _API_SERVER_TIMEOUT) -> Path:
        """The kubeconfig, once the API server reports ready; `finish` waits for the rest.

        Only a fully ready API server (/readyz, its bootstrap done): load put on
        it earlier slows that bootstrap, and kube-controller-manager exits if
        the API server is not healthy within 10 s of its own start.
        """

        self._wait_create_turn()
        clients: list[ApiClient] = []

        def ready() -> bool | NotYet:
            self._check_create()
            # Not even once kwokctl is done: when its own wait runs out it logs the
            # error and exits 0 (CI, 2026-11-29: an API server starved for 5 minutes,
            # "done", then every request refused).
            if not self.kubeconfig.is_file():
                return NotYet("kwokctl has written no kubeconfig yet")
            if not clients:
                try:
                    clients.append(api_client_for(self.kubeconfig, retries=False))
                except ConformanceError as error:  # a kubeconfig half written
                    return NotYet(str(error))
            return Kube.api_server_ready(clients[0]) or NotYet("/readyz is not ok yet")

        try:
            wait_for(
                f"the API server of {self.name} to report ready",
                ready,
                timeout=timeout,
                interval=_LOCAL_POLL,
                stretch=while_saturated(timeout),
                diagnostics=self._api_server_diagnostics,
            )
        except WaitTimeout as error:
            raise ControlPlaneNotStarted(str(error)) from None
        finally:
            for api in clients:
                api.close()
        return self.kubeconfig

    def _api_server_diagnostics(self) -> str:
        """What a timeout of the API server's wait prints: its log's last lines, and
        any component kwokctl started that is no longer running."""
        stopped = self.stopped_components()
        return "\n".join(
            [
                f"kube-apiserver log tail ({self.logs_dir / 'kube-apiserver.log'}):",
                *(self._log_tail("kube-apiserver", 15) or ["(no log yet)"]),
                *(["stopped:", *stopped] if stopped else []),
            ]
        )

    def _log_tail(self, component: str, lines: int) -> list[str]:
        """The last `lines` lines of the log kwokctl keeps for `component` ([] if none)."""
        log = self.logs_dir / f"{component}.log"
        return log.read_text(errors="replace").splitlines()[-lines:] if log.is_file() else []

    def _create(self, config: Path) -> None:
        with (
            step(f"starting control plane {self.name} (kwokctl, binary runtime)"),
            _one_kwokctl_create_at_a_time(
                f"cluster {self.name} of pid {os.getpid()} ({self.run_dir})", self._create_turn
            ),
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
                *self._audit_args(),
                log_name="create",
            )

    def add_nodes(self, mode: str = "cloud") -> list[str]:
        """Create the fake nodes and wait until kwok reports every one Ready."""
        kube = Kube(api_client_for(self.kubeconfig))
        names = self.create_nodes(kube, mode)
        self.wait_nodes_ready(kube, names)
        return names

    def create_nodes(self, kube: Kube, mode: str = "cloud") -> list[str]:
        """Create the fake nodes; kwok-controller makes them Ready once it runs."""
        names = []
        for node in node_manifests(mode):
            kube.apply(node)
            names.append(node["metadata"]["name"])
        return names

    def wait_nodes_ready(
        self, kube: Kube, names: list[str], abort: Callable[[], None] | None = None
    ) -> None:
        def all_ready() -> bool | NotYet:
            ready = set()
            for node in kube.list(*NODE):
                conditions = {
                    c["type"]: c["status"] for c in node["status"].get("conditions") or []
                }
                if conditions.get("Ready") == "True":
                    ready.add(node["metadata"]["name"])
            missing = sorted(set(names) - ready)
            return not missing or NotYet(f"not Ready yet: {', '.join(missing)}")

        wait_for(
            f"{len(names)} fake nodes to be Ready",
            all_ready,
            timeout=60,
            interval=_LOCAL_POLL * 2,
            retry_on=(ApiError,),
            abort=abort,
        )

    def stopped_components(self) -> list[str]:
        """Control-plane processes kwokctl started that are no longer running, with their logs."""
        stopped = []
        for pid_file in sorted((self.cluster_dir / "pids").glob("*.pid")):
            with contextlib.suppress(ValueError, OSError):
                identity = ProcessIdentity.of(int(pid_file.read_text().strip()), pid_file.stem)
                if identity is None or not identity.is_alive():
                    name = Path(pid_file.stem).name
                    log = self.logs_dir / f"{name}.log"
                    stopped.append(f"{name} (log {log}):\n" + "\n".join(self._log_tail(name, 5)))
        return stopped

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
                tail = self._log_tail(name, 15)
                return Breakage(f"control plane {name}", "is no longer running", "\n".join(tail))

            return probe

        return [probe_for(process) for process in running]

    def down(self) -> None:
        unregister_cleanup(self.down)
        if not self._created:
            return
        self._created = False
        creating = self._kwokctl_process
        if creating is not None and creating.poll() is None:
            # A create still running in the background (an interrupted start).
            creating.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                creating.wait(timeout=10)
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
