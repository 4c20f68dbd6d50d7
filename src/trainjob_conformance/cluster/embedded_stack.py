"""The embedded provider: built binaries, a kwokctl control plane, the stack as processes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.certs import CertificateAuthority
from trainjob_conformance.cluster.embedded import EmbeddedControlPlane
from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.host_controllers import (
    STARTERS,
    HostController,
    Launch,
    Ports,
)
from trainjob_conformance.cluster.isolated_managers import starter_for
from trainjob_conformance.cluster.manifests import (
    KUEUE_NAMESPACE,
    crds,
    load_documents,
    webhook_configurations,
)
from trainjob_conformance.cluster.netns import require_namespaces
from trainjob_conformance.cluster.ports import LOOPBACK
from trainjob_conformance.cluster.processes import (
    HostProcess,
    RunOwnership,
    reap_abandoned,
    register_cleanup,
    unregister_cleanup,
)
from trainjob_conformance.cluster.provider import startup_errors
from trainjob_conformance.cluster.readiness import (
    standard_probes,
    training_operator_probes,
    wait_for_admission,
)
from trainjob_conformance.cluster.stack_watch import (
    HEALTH_FILE,
    Breakage,
    Probe,
    StackWatch,
    tls_endpoint_probe,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import CRD
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.gobuild import build_profile, module_source
from trainjob_conformance.stack.profiles import Profile

# Start order matters: the Trainer needs the JobSet CRD and API, Kueue's
# TrainJob integration needs both.
_CONTROLLERS = ("jobset", "trainer", "kueue")
# Managers a profile may add (the previous generation, for the TO-* policies).
_OPTIONAL_CONTROLLERS = ("training-operator",)
_BINARY = {
    "jobset": "jobset-controller-manager",
    "trainer": "trainer-controller-manager",
    "kueue": "kueue",
    "training-operator": "training-operator",
}
_NAMESPACES = ("jobset-system", "kubeflow-system", KUEUE_NAMESPACE)
_TORCH_RUNTIME_FILE = "manifests/base/runtimes/torch_distributed.yaml"
STATE_FILE = "state.json"
# How often the watch looks: a test blocked on a dead manager stops about this soon.
_WATCH_INTERVAL = 0.5


class EmbeddedStackCluster:
    """Owns a control plane and the three managers from `up` to `down`."""

    def __init__(self, profile: Profile, run_dir: Path, node_labels: str = "cloud") -> None:
        self.profile = profile
        self.run_dir = run_dir
        self.node_labels = node_labels
        self.control_plane: EmbeddedControlPlane | None = None
        self.controllers: dict[str, HostController] = {}
        self.timings: dict[str, float] = {}
        self.owner: RunOwnership | None = None
        self.watch: StackWatch | None = None

    def _timed(self, key: str, started: float) -> None:
        self.timings[key] = round(time.monotonic() - started, 1)

    def up(self) -> ClusterHandle:
        with startup_errors(self.run_dir):
            return self._up()

    def _up(self) -> ClusterHandle:
        register_cleanup(self.down)
        started = time.monotonic()
        binaries = build_profile(self.profile)
        self._timed("build", started)

        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Sibling runs whose owner died (SIGKILL) and whose watchdog went with it.
        reap_abandoned(self.run_dir.parent)
        self.owner = RunOwnership.of(self.run_dir)
        say(f"run directory {self.run_dir}")
        mark = time.monotonic()
        self.control_plane = EmbeddedControlPlane(self.profile, binaries, self.run_dir)
        kubeconfig = self.control_plane.up()
        self.control_plane.add_nodes(self.node_labels)
        self._timed("control_plane", mark)

        mark = time.monotonic()
        with step("installing JobSet, Kueue and Trainer"):
            self._install_stack(binaries, kubeconfig)
        self._timed("stack", mark)
        self._timed("total", started)
        self.watch = StackWatch(
            self.run_dir / HEALTH_FILE, self._watch_probes(), interval=_WATCH_INTERVAL
        ).start()
        handle = ClusterHandle(
            provider="embedded",
            kubeconfig=kubeconfig,
            # An optional manager left out (no root) is not claimed: its policies skip.
            versions={
                k: v
                for k, v in self.profile.versions.items()
                if k not in _OPTIONAL_CONTROLLERS or k in self.controllers
            },
            log_files={name: c.log_file for name, c in self.controllers.items()},
            profile=self.profile.name,
            run_dir=self.run_dir,
            health_file=self.watch.path,
        )
        self._write_state(handle)
        say(
            f"cluster ready in {self.timings['total']}s "
            f"(build {self.timings['build']}s, control plane {self.timings['control_plane']}s, "
            f"stack {self.timings['stack']}s)"
        )
        return handle

    def _install_stack(self, binaries: dict[str, Path], kubeconfig: Path) -> None:
        kube = Kube(api_client_for(kubeconfig))
        ca = CertificateAuthority(self.run_dir / "pki")
        controllers = _CONTROLLERS + tuple(
            c for c in _OPTIONAL_CONTROLLERS if self.profile.has(c) and _can_isolate(c)
        )
        sources = {name: module_source(name, self.profile.version(name)) for name in controllers}
        ports = {name: Ports.pick() for name in controllers}
        for namespace in _NAMESPACES:
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

        # CRDs before the managers: each indexes its kinds at start and exits without them.
        crd_names = []
        for name in controllers:
            for crd in crds(sources[name], name, ports[name].webhook, ca.ca_pem):
                kube.apply(crd)
                crd_names.append(crd["metadata"]["name"])
        wait_for(
            f"{len(crd_names)} CRDs to be Established",
            lambda: all(_established(kube, crd) for crd in crd_names),
            timeout=60,
            retry_on=(ApiError,),
        )

        for name in controllers:
            directory = self.run_dir / name
            directory.mkdir(parents=True, exist_ok=True)
            binary = binaries[_BINARY[name]]
            start = starter_for(name, sources[name], STARTERS.get(name))
            self.controllers[name] = start(
                Launch(
                    binary,
                    kubeconfig,
                    ca,
                    directory,
                    ports[name],
                    RunOwnership.of(self.run_dir),
                    sources[name],
                )
            )
        for controller in self.controllers.values():
            controller.wait_ready()

        # Webhooks only once their servers listen: with failurePolicy Fail, an
        # earlier registration would block Jobs and Pods cluster-wide.
        for name in controllers:
            # The CA of the manager's own serving certificate (a pre-seeded
            # rotator's CA differs from the cluster's).
            for config in webhook_configurations(
                sources[name], name, ports[name].webhook, self.controllers[name].ca_pem
            ):
                kube.apply(config)
        kube.apply(_torch_runtime(sources["trainer"]))
        probes = standard_probes()
        if "training-operator" in controllers:
            probes += training_operator_probes()
        wait_for_admission(kube, probes, timeout=60, log_tails=self._log_tails)

    def _watch_probes(self) -> list[Probe]:
        probes: list[Probe] = []
        for name, controller in self.controllers.items():
            probes.append(_process_probe(controller))
            probes.extend(_helper_probe(name, helper) for helper in controller.helpers)
            probes.append(
                tls_endpoint_probe(
                    f"{name} webhook server",
                    LOOPBACK,
                    controller.ports.webhook,
                    lambda c=controller: c.process.log_tail(15),  # type: ignore[misc]
                )
            )
        if self.control_plane is not None:
            probes.extend(self.control_plane.component_probes())
        return probes

    def _log_tails(self) -> str:
        return "\n".join(
            f"--- {name} log tail ({c.log_file}) ---\n{c.process.log_tail(20)}"
            for name, c in self.controllers.items()
        )

    def _write_state(self, handle: ClusterHandle) -> None:
        state = {
            "profile": self.profile.name,
            "handle": handle.to_json(),
            "kwok_workdir": str(self.control_plane.workdir) if self.control_plane else None,
            "cluster_name": self.control_plane.name if self.control_plane else None,
            "pids": {name: c.process.pid for name, c in self.controllers.items()},
        }
        (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    def down_hint(self) -> str:
        return f"trainjob-conformance down --run-dir {self.run_dir}"

    def detach(self) -> None:
        """Leave everything running past this process; `trainjob-conformance down` stops it."""
        unregister_cleanup(self.down)
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.control_plane is not None:
            unregister_cleanup(self.control_plane.down)
        for controller in self.controllers.values():
            for process in (controller.process, *controller.helpers):
                unregister_cleanup(process.stop)
        if self.owner is not None:
            self.owner.detach()
            self.owner = None

    def down(self) -> None:
        unregister_cleanup(self.down)
        if self.watch is not None:
            self.watch.stop()  # what follows is intended, not a breakage
            self.watch = None
        # Managers first, so none of them reconciles against a dying API server.
        for name in reversed(list(self.controllers)):
            self.controllers[name].stop()
        self.controllers.clear()
        if self.control_plane is not None:
            self.control_plane.down()
            self.control_plane = None
        if self.owner is not None:
            self.owner.close()
            self.owner = None
        # The cluster is gone: its state would only mislead `existing` and `down`.
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)


def _process_probe(controller: HostController) -> Probe:
    def probe() -> Breakage | None:
        ended = controller.process.exit_description()
        if ended is None:
            return None
        return Breakage(f"{controller.component} manager", ended, controller.process.log_tail(15))

    return probe


def _can_isolate(component: str) -> bool:
    """An optional manager that binds every interface runs only where it can be isolated;
    elsewhere the stack goes without it, and says so."""
    try:
        require_namespaces(f"{component} binds its webhook server on every interface")
    except ConformanceError as error:
        say(f"{component} left out: {error}")
        return False
    return True


def _helper_probe(component: str, helper: HostProcess) -> Probe:
    def probe() -> Breakage | None:
        ended = helper.exit_description()
        if ended is None:
            return None
        return Breakage(f"{component} {helper.name}", ended, helper.log_tail(15))

    return probe


def read_state(run_dir: Path) -> dict[str, Any]:
    """The state an embedded run wrote once its cluster was ready; {} if there is none."""
    path = run_dir / STATE_FILE
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConformanceError(f"{path} is not a readable cluster state ({error})") from None
    handle = state.get("handle") if isinstance(state, dict) else None
    if not isinstance(handle, dict) or "kubeconfig" not in handle:
        raise ConformanceError(
            f"{path} is not a cluster state of trainjob-conformance (no handle); "
            "stop the cluster with `trainjob-conformance down --run-dir` and start a new one"
        )
    return state


def _established(kube: Kube, crd_name: str) -> bool:
    crd = kube.get(*CRD, crd_name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _torch_runtime(trainer_source: Path) -> dict[str, Any]:
    """Upstream's torch-distributed runtime, labelled as its runtimes overlay labels it."""
    runtime = load_documents(trainer_source / _TORCH_RUNTIME_FILE)[0]
    labels = runtime["metadata"].setdefault("labels", {})
    labels["trainer.kubeflow.org/webhook-validation"] = "disabled"
    return runtime
