"""The embedded provider: built binaries, a kwokctl control plane, the stack as processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.audit_policies import WINDOW_AUDIT_POLICY
from trainjob_conformance.cluster.embedded import NODE_LABELS
from trainjob_conformance.cluster.embedded.control_plane import (
    AUDIT_POLICY,
    EmbeddedControlPlane,
)
from trainjob_conformance.cluster.embedded.crd_install import (
    LOCAL_POLL,
    create_crd,
    replace_stored,
    wait_discoverable,
    wait_established,
)
from trainjob_conformance.cluster.embedded.host_controllers import (
    STARTERS,
    HostController,
    Launch,
    Ports,
)
from trainjob_conformance.cluster.embedded.isolated_managers import starter_for
from trainjob_conformance.cluster.embedded.manifests import (
    crds,
    kueue_user_roles,
    load_documents,
    webhook_configurations,
)
from trainjob_conformance.cluster.embedded.tasks import TaskGroup
from trainjob_conformance.cluster.handle import IMAGES_SIMULATED, ClusterHandle
from trainjob_conformance.cluster.health.phases import PHASES_FILE, PhaseClock
from trainjob_conformance.cluster.health.readiness import (
    stack_probes,
    wait_for_admission,
    wait_past_create_hold,
)
from trainjob_conformance.cluster.health.stack_watch import (
    HEALTH_FILE,
    Breakage,
    Probe,
    StackWatch,
    tls_endpoint_probe,
)
from trainjob_conformance.cluster.isolation.netns import require_namespaces
from trainjob_conformance.cluster.kueue import KUEUE_NAMESPACE
from trainjob_conformance.cluster.provider import (
    AUDIT_LOG_OPTION,
    WINDOW_AUDIT_OPTION,
    ClusterRequest,
    ComponentUpgrade,
    PushedImage,
    RegistryServer,
    startup_errors,
)
from trainjob_conformance.cluster.run_state import STATE_FILE
from trainjob_conformance.cluster.serving.certs import CertificateAuthority
from trainjob_conformance.errors import ConformanceError, ControlPlaneNotStarted
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.lifecycle.processes import (
    HostProcess,
    RunOwnership,
    reap_abandoned,
    register_cleanup,
    unregister_cleanup,
)
from trainjob_conformance.ports import LOOPBACK, free_port
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.gobuild import build_component, build_profile, module_source
from trainjob_conformance.stack.profiles import Profile

_CONTROLLERS = ("jobset", "trainer", "kueue")
# Managers a profile may add (the previous generation, for the TO-* policies).
_OPTIONAL_CONTROLLERS = ("training-operator",)
# The order the CRDs are created in. JobSet's one CRD first: the Trainer and
# Kueue need it. Then the managers that take longest to become ready once
# their CRDs are: the training-operator (its certificate rotator's first
# look at its webhooks comes before its own injection, and backs off 1-2 s),
# then the Trainer (about 1.3 s). Kueue, ready 0.2 s after its start, last.
# Measured: docs/measurements.md, 2026-11-23, "Second round: CRD order and worksteal".
_CRD_ORDER = ("jobset", "training-operator", "trainer", "kueue")
# Whose CRDs each manager needs Established before it starts: the Trainer
# needs the JobSet CRD and API, Kueue's TrainJob integration needs both.
_NEEDS = {
    "jobset": ("jobset",),
    "trainer": ("jobset", "trainer"),
    "kueue": _CONTROLLERS,
    "training-operator": ("training-operator",),
}
_BINARY = {
    "jobset": "jobset-controller-manager",
    "trainer": "trainer-controller-manager",
    "kueue": "kueue",
    "training-operator": "training-operator",
}
_NAMESPACES = ("jobset-system", "kubeflow-system", KUEUE_NAMESPACE)
_TORCH_RUNTIME_FILE = "manifests/base/runtimes/torch_distributed.yaml"
# How often the watch looks: a test blocked on a dead manager stops about this soon.
_WATCH_INTERVAL = 0.5


class EmbeddedStackCluster:
    """Owns a control plane and the three managers from `up` to `down`."""

    def __init__(
        self,
        profile: Profile,
        run_dir: Path,
        node_labels: str = "cloud",
        audit_log: Path | None = None,
        window_audit: bool = False,
    ) -> None:
        self.profile = profile
        # The bench's: an API server audit log of writes, copied here at `down`
        # (the control plane's own directory goes with it).
        self.audit_log = audit_log
        # An upgrade's: the custom resources' writes, read while the cluster runs.
        self.window_audit = window_audit
        self.run_dir = run_dir
        self.node_labels = node_labels
        self.control_plane: EmbeddedControlPlane | None = None
        self.controllers: dict[str, HostController] = {}
        self.timings: dict[str, float] = {}
        # Named phases of the start, for `bench` and for whoever reads the run directory.
        self.phases = PhaseClock()
        self.owner: RunOwnership | None = None
        self.watch: StackWatch | None = None
        # The steps of the start that run side by side, and the lock that
        # keeps a manager from starting once `down` has begun.
        self._tasks = TaskGroup()
        self._launching = threading.Lock()
        # What `upgrade_component` changes: set by `up`.
        self._plan_in_use: _Plan | None = None
        self._kubeconfig: Path | None = None
        self.versions: dict[str, str] = {}

    def _audit_policy(self) -> dict | None:
        if self.window_audit:
            return WINDOW_AUDIT_POLICY
        return AUDIT_POLICY if self.audit_log is not None else None

    def window_audit_log(self) -> Path | None:
        if not self.window_audit or self.control_plane is None:
            return None
        return self.control_plane.audit_log

    def _timed(self, key: str, started: float) -> None:
        self.timings[key] = round(time.monotonic() - started, 1)

    def up(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        """`on_created` is not called: the fake nodes and the stack come up together,
        so a worker cluster starts once this one is ready."""
        with startup_errors(self.run_dir):
            return self._up()

    def _up(self) -> ClusterHandle:
        register_cleanup(self.down)
        clock = self.phases
        started = time.monotonic()
        with clock.phase("build"):
            binaries = build_profile(self.profile)
        self._timed("build", started)

        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Sibling runs whose owner died (SIGKILL) and whose watchdog went with it.
        reap_abandoned(self.run_dir.parent)
        self.owner = RunOwnership.of(self.run_dir)
        say(f"run directory {self.run_dir}")
        self.control_plane = EmbeddedControlPlane(
            self.profile, binaries, self.run_dir, phases=clock, audit_policy=self._audit_policy()
        )
        # kwokctl creates the control plane in the background; meanwhile the
        # manifests are read, and the install starts as soon as the API server
        # answers (kwokctl still waits for the other components to report ready).
        self.control_plane.begin()
        with clock.phase("manifests read"):
            plan = self._plan_in_use = self._plan(binaries)
        with clock.phase("API server ready"):
            kubeconfig = self._kubeconfig = self.control_plane.wait_api_server()
        with step("installing JobSet, Kueue and Trainer"):
            self._install_stack(plan, kubeconfig)
        # kwokctl's own wait does not notice a component that gave up after
        # starting (kube-controller-manager exits if the API server is slow to
        # become healthy): without it no Pod is ever created.
        stopped = self.control_plane.stopped_components()
        if stopped:
            raise ControlPlaneNotStarted(
                "its components stopped during the start: " + "; ".join(stopped)
            )
        self.timings["control_plane"] = clock.seconds("control plane") or 0.0
        self._timed("total", started)
        self.timings["stack"] = round(
            self.timings["total"] - self.timings["build"] - self.timings["control_plane"], 1
        )
        clock.record("total", 0.0)
        clock.write(self.run_dir / PHASES_FILE)
        self.watch = StackWatch(
            self.run_dir / HEALTH_FILE, self._watch_probes(), interval=_WATCH_INTERVAL
        ).start()
        # An optional manager left out (no root) is not claimed: its policies skip.
        self.versions = {
            k: v
            for k, v in self.profile.versions.items()
            if k not in _OPTIONAL_CONTROLLERS or k in self.controllers
        }
        handle = self._handle()
        self._write_state(handle)
        say(
            f"cluster ready in {self.timings['total']}s "
            f"(build {self.timings['build']}s, control plane {self.timings['control_plane']:.1f}s, "
            f"then the stack {self.timings['stack']}s more)"
        )
        return handle

    def _handle(self) -> ClusterHandle:
        assert self._kubeconfig is not None and self.watch is not None
        return ClusterHandle(
            provider="embedded",
            kubeconfig=self._kubeconfig,
            versions=dict(self.versions),
            log_files={name: c.log_file for name, c in self.controllers.items()},
            profile=self.profile.name,
            run_dir=self.run_dir,
            health_file=self.watch.path,
            image_supply=IMAGES_SIMULATED,
        )

    def upgrade_refused(self) -> str | None:
        return None

    def upgrade_component(self, component: str, version: str) -> ComponentUpgrade:
        """The new release's CRDs over the old ones, then its manager in the old one's
        place, then its webhook configurations (and, for the Trainer, its runtime).

        The managers are host processes, so the old one stops before the new one
        starts on the same ports (a Recreate, where a Deployment's rolling update
        would overlap them): the webhooks refuse requests in between, which the
        upgrade's availability figures measure. Returns once every admission probe
        of the stack is answered again, with the new manager's serving CA.
        """
        plan, kubeconfig = self._plan_in_use, self._kubeconfig
        if plan is None or kubeconfig is None:
            raise ConformanceError("the cluster is not up: nothing to upgrade")
        if component not in self.controllers:
            raise ConformanceError(
                f"{component} does not run on this cluster (profile {self.profile.name}): "
                "an upgrade moves a running component to another release"
            )
        kube = Kube(api_client_for(kubeconfig))
        old_version = self.versions[component]
        label = f"{component} {old_version} -> {version}"
        binaries = build_component(component, version)
        source = module_source(component, version)
        port = plan.ports[component].webhook
        old_configs = webhook_configurations(
            plan.sources[component], component, port, self.controllers[component].ca_pem
        )
        started = time.monotonic()
        with step(f"{label}: CRDs"):
            new_crds = crds(source, component, port, plan.ca.ca_pem)
            for crd in new_crds:
                replace_stored(kube, crd)
            wait_established(kube, [crd["metadata"]["name"] for crd in new_crds], lambda: None)
            wait_discoverable(kube, new_crds, lambda: None)
        crds_done = time.monotonic()
        if self.watch is not None:
            self.watch.stop()  # the old manager's exit is the upgrade, not a breakage
            self.watch = None
        with step(f"{label}: manager"):
            self.controllers.pop(component).stop()
            plan.binaries.update(binaries)
            plan.sources[component] = source
            controller = self._launch_ready(component, plan, kubeconfig, lambda: None)
        manager_done = time.monotonic()
        with step(f"{label}: webhooks"):
            new_configs = webhook_configurations(source, component, port, controller.ca_pem)
            kept = {(c["kind"], c["metadata"]["name"]) for c in new_configs}
            for config in old_configs:
                if (config["kind"], config["metadata"]["name"]) not in kept:
                    kube.delete_if_present(
                        config["apiVersion"], config["kind"], config["metadata"]["name"]
                    )
            for config in new_configs:
                replace_stored(kube, config)
            if component == "kueue":
                for role in kueue_user_roles(source):
                    replace_stored(kube, role)
            if component == "trainer":
                replace_stored(kube, _torch_runtime(source))
            wait_for_admission(
                kube,
                stack_probes(plan.sources),
                timeout=60,
                log_tails=self._log_tails,
                interval=LOCAL_POLL,
            )
        self.versions[component] = version
        self.watch = StackWatch(
            self.run_dir / HEALTH_FILE, self._watch_probes(), interval=_WATCH_INTERVAL
        ).start()
        self._write_state(self._handle())
        return ComponentUpgrade(
            component=component,
            from_version=old_version,
            to_version=version,
            crds_seconds=round(crds_done - started, 1),
            manager_seconds=round(manager_done - crds_done, 1),
            webhooks_seconds=round(time.monotonic() - manager_done, 1),
            notes=("the old manager stopped before the new one started (host processes)",),
        )

    def _plan(self, binaries: dict[str, Path]) -> _Plan:
        ca = CertificateAuthority(self.run_dir / "pki")
        controllers = _CONTROLLERS + tuple(
            c for c in _OPTIONAL_CONTROLLERS if self.profile.has(c) and _can_isolate(c)
        )
        sources = {name: module_source(name, self.profile.version(name)) for name in controllers}
        ports = {name: Ports.pick() for name in controllers}
        return _Plan(
            binaries=binaries,
            ca=ca,
            ports=ports,
            crds={n: crds(sources[n], n, ports[n].webhook, ca.ca_pem) for n in controllers},
            sources=sources,
            runtime=_torch_runtime(sources["trainer"]),
        )

    def _install_stack(self, plan: _Plan, kubeconfig: Path) -> None:
        """Each manager starts as soon as the CRDs it needs are Established, alongside the others.

        JobSet needs its own CRD; the Trainer also JobSet's (it builds
        JobSets); Kueue also both (its JobSet and TrainJob integrations). Each
        product's webhooks are registered once its own manager is ready, and
        only then (failurePolicy Fail would otherwise block those kinds).

        The CRDs are created one after the other, in `_CRD_ORDER`: the API
        server's naming and establishing controllers take CRDs first come,
        first served, so the managers slowest to become ready start first and
        get ready while Kueue's many CRDs are still being established.
        """
        assert self.control_plane is not None
        kube = Kube(api_client_for(kubeconfig))
        clock = self.phases
        with clock.phase("namespaces"):
            for namespace in _NAMESPACES:
                kube.apply(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
        controllers = tuple(plan.sources)
        applied = {name: threading.Event() for name in controllers}
        established = {name: threading.Event() for name in controllers}
        tasks = self._tasks
        applied_from = clock.now()

        probes = stack_probes(controllers)
        # Within each product, the CRDs of the kinds the admission probes
        # create go first: the API server holds a create for 2 s after its
        # kind's CRD is Established, and the probes wait that out (Kueue's
        # ResourceFlavor, among Kueue's CRDs created last, waited 0.4 s).
        probed = {probe.manifest["kind"] for probe in probes}

        def create_crds() -> None:
            # CRDs before the managers: each indexes its kinds at start and exits without them.
            for name in sorted(controllers, key=_CRD_ORDER.index):
                for crd in sorted(
                    plan.crds[name], key=lambda c: c["spec"]["names"]["kind"] not in probed
                ):
                    tasks.check()
                    create_crd(kube, crd)
                clock.record(f"{name} CRDs applied", applied_from)
                applied[name].set()

        def bring_up(name: str) -> None:
            tasks.wait_event(applied[name])
            wait_established(
                kube, [crd["metadata"]["name"] for crd in plan.crds[name]], tasks.check
            )
            clock.record(f"{name} CRDs Established", applied_from)
            # A manager maps kinds to resources through discovery, which the API
            # server updates a moment after Established: it exits on a kind it cannot map.
            wait_discoverable(kube, plan.crds[name], tasks.check)
            clock.record(f"{name} CRDs in discovery", applied_from)
            established[name].set()
            for needed in _NEEDS[name]:
                tasks.wait_event(established[needed])
            launched = clock.now()
            controller = self._launch_ready(name, plan, kubeconfig, tasks.check)
            clock.record(f"{name} manager ready", launched)
            with clock.phase(f"{name} webhooks registered"):
                # The CA of the manager's own serving certificate (a pre-seeded
                # rotator's CA differs from the cluster's).
                for config in webhook_configurations(
                    plan.sources[name], name, plan.ports[name].webhook, controller.ca_pem
                ):
                    kube.apply(config)
            if name == "trainer":
                with clock.phase("runtime applied"):
                    kube.apply(plan.runtime)
            if name == "kueue":
                # As a release install gives them: a policy checks what they allow.
                with clock.phase("kueue user roles applied"):
                    for role in kueue_user_roles(plan.sources[name]):
                        kube.apply(role)

        tasks.start("crds", create_crds)
        for name in controllers:
            tasks.start(name, lambda name=name: bring_up(name))
        nodes_from = clock.now()
        try:
            nodes = self.control_plane.create_nodes(kube, self.node_labels)
            self.control_plane.finish()
            self.control_plane.wait_nodes_ready(kube, nodes, abort=tasks.check)
            clock.record("nodes Ready", nodes_from)
        except BaseException as error:
            tasks.failed(error)
        tasks.join()
        with clock.phase("admission probes"):
            with clock.phase("CRDs past the API server's create hold"):
                wait_past_create_hold(kube, probes, interval=LOCAL_POLL)
            wait_for_admission(
                kube,
                probes,
                timeout=60,
                log_tails=self._log_tails,
                phases=clock,
                interval=LOCAL_POLL,
            )

    def _launch_ready(
        self, name: str, plan: _Plan, kubeconfig: Path, abort: Callable[[], None]
    ) -> HostController:
        """Start a manager and wait until it is ready.

        A port is picked free and bound by the manager a moment later; on a
        busy machine another process can take it in between. A metrics or
        health port taken so is picked again (twice at most); the webhook port
        stays, since the CRDs' conversion webhooks already name it.
        """
        for attempt in range(_PORT_RETRIES + 1):
            controller = self._launch(name, plan, kubeconfig)
            try:
                controller.wait_ready(abort=abort)
                return controller
            except ConformanceError:
                taken = _taken_port(controller.process.log_tail())
                ports = plan.ports[name]
                if attempt == _PORT_RETRIES or taken is None or taken == ports.webhook:
                    raise
                controller.stop()
                plan.ports[name] = Ports(ports.webhook, free_port(), free_port())
                say(f"{name}: port {taken} was taken by another process; starting it again")
        raise AssertionError("unreachable")

    def _launch(self, name: str, plan: _Plan, kubeconfig: Path) -> HostController:
        directory = self.run_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        launch = Launch(
            plan.binaries[_BINARY[name]],
            kubeconfig,
            plan.ca,
            directory,
            plan.ports[name],
            RunOwnership.of(self.run_dir),
            plan.sources[name],
        )
        start = starter_for(name, plan.sources[name], STARTERS.get(name))
        # Under the lock `down` takes: a manager is either known to `down` or never started.
        with self._launching:
            self._tasks.check()
            controller = self.controllers[name] = start(launch)
        return controller

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

    def detach(self) -> str:
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
        return f"trainjob-conformance down --run-dir {self.run_dir}"

    def down(self) -> None:
        unregister_cleanup(self.down)
        with self._launching:
            self._tasks.stop()  # a start still running gives up; no manager starts after this
        if self.watch is not None:
            self.watch.stop()  # what follows is intended, not a breakage
            self.watch = None
        # Managers first, so none of them reconciles against a dying API server.
        for name in reversed(list(self.controllers)):
            self.controllers[name].stop()
        self.controllers.clear()
        if self.control_plane is not None:
            if self.audit_log is not None and self.control_plane.audit_log.is_file():
                self.audit_log.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.control_plane.audit_log, self.audit_log)
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
        if ended is None and controller.process.is_stopped():
            ended = "is stopped (SIGSTOP)"  # its webhook's silence would take HUNG_AFTER to tell
        if ended is None:
            return None
        return Breakage(f"{controller.component} manager", ended, controller.process.log_tail(15))

    return probe


_PORT_RETRIES = 2
_PORT_TAKEN = re.compile(r"listen tcp [0-9.]+:(\d+): bind: address already in use")


def _taken_port(log: str) -> int | None:
    found = _PORT_TAKEN.search(log)
    return int(found.group(1)) if found else None


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


@dataclass(frozen=True)
class _Plan:
    """What the install needs, read before the API server answers."""

    binaries: dict[str, Path]
    ca: CertificateAuthority
    ports: dict[str, Ports]
    crds: dict[str, list[dict[str, Any]]]
    # Per manager, in start order: where its release's manifests are read from.
    sources: dict[str, Path]
    runtime: dict[str, Any]


def _torch_runtime(trainer_source: Path) -> dict[str, Any]:
    """Upstream's torch-distributed runtime, labelled as its runtimes overlay labels it."""
    runtime = load_documents(trainer_source / _TORCH_RUNTIME_FILE)[0]
    labels = runtime["metadata"].setdefault("labels", {})
    labels["trainer.kubeflow.org/webhook-validation"] = "disabled"
    return runtime


def from_request(request: ClusterRequest) -> EmbeddedStackCluster:
    """The registry's way in (cluster/registry.py)."""
    audit_log = request.option(AUDIT_LOG_OPTION)
    return EmbeddedStackCluster(
        request.profile,
        request.run_dir,
        request.option(NODE_LABELS, "cloud") or "cloud",
        audit_log=Path(audit_log) if audit_log else None,
        window_audit=bool(request.option(WINDOW_AUDIT_OPTION)),
    )


def peer_beside(profile: Profile, run_dir: Path) -> EmbeddedStackCluster:
    """A MultiKueue worker: a second embedded cluster of the same profile."""
    return EmbeddedStackCluster(profile, run_dir / f"worker-{os.getpid()}")


def bare_start(profile: Profile, run_dir: Path) -> float:
    """The kwokctl control plane and its nodes alone, started and stopped."""
    control_plane = EmbeddedControlPlane(profile, build_profile(profile), run_dir)
    started = time.monotonic()
    try:
        control_plane.up()
        control_plane.add_nodes()
        return time.monotonic() - started
    finally:
        control_plane.down()


def leftovers(run_dir: Path) -> list[str]:
    """Nothing beyond the ledger: every process an embedded cluster starts is in it."""
    return []


def prebuild(profile: Profile) -> dict[str, Path]:
    """Nothing beyond the profile's binaries."""
    return {}


def push_images(profile: Profile, registry_url: str) -> list[PushedImage]:
    raise ConformanceError("the embedded cluster runs no images: `images push` pushes its binaries")


def registry_server(storage: Path, config_dir: Path) -> RegistryServer | None:
    """The embedded cluster's host processes reach a registry on 127.0.0.1."""
    return None
