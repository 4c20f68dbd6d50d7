"""kind clusters with the stack from upstream release manifests.

The install takes what the upstream e2e setups take: JobSet's and Kueue's
release manifests, the Trainer's manager and runtimes overlays (and the
training-operator's where the profile pins it), regrouped into a few applies
(cluster/releases/install_plan.py), the first of them while kind still joins the workers. The
manifests are built from the release sources (cluster/releases/manifests.py), the
same files the e2e suite dry-runs against a real API server.

Images come from one of two sources. `local` (the default) builds every image
the cluster runs from pinned sources on this machine (cluster/kind/images/) and
needs no registry; `upstream` runs kind's node image and the releases' images
from their registries. kind itself is built through the Go module proxy and run
as a subprocess, always with --kubeconfig, so ~/.kube/config is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.audit_policies import WINDOW_AUDIT_POLICY
from trainjob_conformance.cluster.handle import (
    IMAGES_MIRRORED,
    IMAGES_PRELOADED,
    IMAGES_PULLED,
    ClusterHandle,
)
from trainjob_conformance.cluster.health.controller_watch import controller_pod_probe
from trainjob_conformance.cluster.health.phases import TIMINGS_FILE
from trainjob_conformance.cluster.health.readiness import (
    AdmissionProbe,
    standard_probes,
    training_operator_probes,
    wait_for_admission,
)
from trainjob_conformance.cluster.health.stack_watch import HEALTH_FILE, StackWatch
from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.cluster.introspect import running_images
from trainjob_conformance.cluster.kind import (
    IMAGE_SOURCE,
    IMAGE_SOURCES,
    REGISTRY_CA,
    REGISTRY_MIRROR,
    WORKER_MIRROR,
    host_packages,
    mirror,
    reclaim,
)
from trainjob_conformance.cluster.kind import config as kind_config
from trainjob_conformance.cluster.kind import nodes as kind_nodes
from trainjob_conformance.cluster.kind import upgrade as kind_upgrade
from trainjob_conformance.cluster.kind.binaries import (
    build_kind_and_kubectl,
    build_node_binaries,
)
from trainjob_conformance.cluster.kind.docker import DockerDaemon, lacks_sys_resource
from trainjob_conformance.cluster.kind.images import catalog, local_build, publish, store
from trainjob_conformance.cluster.kind.images.node import NODE_IMAGE_LABEL
from trainjob_conformance.cluster.kind.mirror import NodeMirror
from trainjob_conformance.cluster.kind.versions import NODE_TOOLS
from trainjob_conformance.cluster.provider import (
    WINDOW_AUDIT_OPTION,
    ClusterRequest,
    ComponentUpgrade,
    PushedImage,
    RegistryServer,
    startup_errors,
)
from trainjob_conformance.cluster.releases import in_place
from trainjob_conformance.cluster.releases import upgrade as releases_upgrade
from trainjob_conformance.cluster.releases.applier import ManifestApplier
from trainjob_conformance.cluster.releases.install_plan import (
    CONTROLLERS,
    Phase,
    install_plan,
    split_plan,
)
from trainjob_conformance.cluster.releases.manifests import (
    InstallStep,
    release_images,
    release_install_steps,
)
from trainjob_conformance.cluster.run_state import write_image_supply
from trainjob_conformance.errors import ConformanceError, ControlPlaneNotStarted
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import CRD
from trainjob_conformance.kube.waits import NotYet, wait_for
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.lifecycle.processes import (
    RunOwnership,
    register_cleanup,
    unregister_cleanup,
)
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.profiles import COMPONENT_KEYS, Profile
from trainjob_conformance.stack.registry.mirror_names import ImageName

# What a run's cluster was made of, for the MultiKueue worker that goes beside it.
IMAGE_SOURCE_FILE = "kind-image-source.json"
# The nodes' containerd configuration for a mirror, mounted into them (mirror.py).
CERTS_DIR = "containerd-certs.d"
# Workers beside the control plane: enough for a label that splits the nodes and
# a topology zone of two nodes (cluster/kind/nodes.py); each is a container on
# the host's CPUs, so no more.
WORKERS = len(kind_nodes.WORKER_ZONES)


# kind's own bound on a cluster's creation is its --wait, which the provider does
# not use; this only guards against a kind that never returns.
_KIND_CREATE_TIMEOUT = 600.0


def cluster_name(run_dir: Path) -> str:
    """kind takes lower-case letters, digits and dashes; the run id keeps clusters apart."""
    run_id = re.sub(r"[^a-z0-9]+", "-", run_dir.name.lower()).strip("-")[-12:].strip("-")
    return f"tjc-{run_id}"


def create_failure(kind_log: str, journal: str) -> str:
    """Why `kind create cluster` failed, in kind's and the kubelet's own words: kind's
    `ERROR:` line and kubeadm's `error execution phase` (the log ends in a Go stack
    trace, whose last line says nothing), and the first error the node's kubelet
    logged (`err="..."`), which names the cause where kubeadm only timed out."""
    lines = [line.strip() for line in kind_log.strip().splitlines() if line.strip()]
    said = [
        line for line in lines if line.startswith(("ERROR:", "error execution phase", "error:"))
    ]
    words = said[:2] or lines[-1:]
    kubelet = re.search(r'kubelet\[\d+\]: .*?err="((?:[^"\\]|\\.)*)"', journal)
    if kubelet:
        words.append(f"the kubelet: {kubelet.group(1)}")
    return "kind create cluster failed: " + " / ".join(words)


class KindStackCluster:
    """A kind cluster this run creates, installs the stack on, and deletes."""

    def __init__(
        self,
        profile: Profile,
        run_dir: Path,
        image_source: str = "local",
        install_steps: Callable[..., list[InstallStep]] = release_install_steps,
        workers: int = WORKERS,
        name: str | None = None,
        for_peers: bool = False,
        bare: bool = False,
        leave_out: tuple[str, ...] = (),
        on_created: Callable[[], None] | None = None,
        registry_mirror: NodeMirror | None = None,
        worker_mirror: NodeMirror | None = None,
        window_audit: bool = False,
    ) -> None:
        if image_source not in IMAGE_SOURCES:
            raise ConformanceError(
                f"unknown image source {image_source!r}: choose one of {', '.join(IMAGE_SOURCES)}"
            )
        # Every image through the mirror: the upstream names, pulled.
        self.mirror = registry_mirror
        if registry_mirror is not None:
            image_source = "upstream"
        # Where a MultiKueue worker started beside this cluster pulls its images from.
        self.worker_mirror = worker_mirror
        self.install_steps = install_steps
        self.profile = profile
        self.run_dir = run_dir
        # An upgrade's: the API server keeps an audit log of the custom resources'
        # writes in a directory of the run, read while the cluster runs.
        self.window_audit = window_audit
        self.image_source = image_source
        self.name = name or cluster_name(run_dir)
        self.workers = workers
        # The handle's kubeconfig names the API server on the kind network, where
        # another kind cluster's Pods reach it (a MultiKueue worker's).
        self.for_peers = for_peers
        # Only `kind create` (the bench's baseline): no wiring, images or stack.
        self.bare = bare
        # Controllers of the profile this cluster does without (a MultiKueue worker's).
        self.leave_out = leave_out
        # Called once `kind create` has ended well (ClusterProvider.up).
        self.on_created = on_created
        self.docker: DockerDaemon | None = None
        self.record: reclaim.ClusterRecord | None = None
        self.watch: StackWatch | None = None
        self.images: dict[str, str] = {}
        self.kube_proxy_mode = ""  # the iptables mode of kube-proxy's image (the harness's node)
        # The node image is the harness's (its label says): no kindnetd, so the
        # harness routes pod subnets (cluster/kind/nodes.py).
        self.harness_node = image_source == "local"
        self.served: set[str] = set()  # the images the mirror was found to serve
        self.timings: dict[str, float] = {}
        self.started = 0.0  # when `kind create` began: the origin of the timings
        self.control_plane_open = False  # its taint lifted for the controllers
        self._client: Kube | None = None
        # What an upgrade (upgrade_component) needs of the start: kubectl, the local
        # controller images (component -> name) the manifests point at, the handle `up`
        # gave, whose versions it moves.
        self.kubectl: Path | None = None
        self.local: dict[str, str] = {}
        self.handle: ClusterHandle | None = None

    @property
    def profile_controllers(self) -> list[str]:
        """The stack's controllers, and the training-operator where the profile pins it."""
        return local_build.controller_keys(self.profile)

    @property
    def controllers(self) -> list[str]:
        """The controllers this cluster installs: the profile's, less those it leaves out."""
        return [c for c in self.profile_controllers if c not in self.leave_out]

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kind-kubeconfig.yaml"

    def _applier(self, kubectl: Path) -> ManifestApplier:
        """kubectl against this cluster; a failed wait's Pods and events go to the run
        directory's startup-error.txt, each rollout's seconds into the timings."""
        return ManifestApplier(
            kubectl, self.kubeconfig, self._kube, self.run_dir / "startup-error.txt", self.timings
        )

    def _kube(self) -> Kube:
        """One client of the cluster's API server, made once its kubeconfig exists."""
        if self._client is None:
            self._client = Kube(api_client_for(self.kubeconfig))
        return self._client

    def _kubectl_call(self, kubectl: Path) -> Callable[..., None]:
        return self._applier(kubectl).run

    def _timed(self, key: str, started: float) -> None:
        self.timings[key] = round(time.monotonic() - started, 1)

    def create_and_install(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        register_cleanup(self.down)
        owner = RunOwnership.of(self.run_dir)
        self.docker = DockerDaemon(self.run_dir, owner).ensure()
        reclaim.reclaim_abandoned(self.run_dir.parent)
        reclaim.reclaim_builds()
        versions = dict(self.profile.versions)
        if self.mirror is not None:
            # Before anything is fetched or built: a mirror the nodes cannot reach.
            self.mirror = mirror.reach_from_nodes(self.mirror)
        self._remember_image_source()
        if self.image_source == "local":
            # Should this process die while a node image is assembled in a build
            # container, the run's watchdog removes that container (its owner
            # label names this process, dead by then), not the next run.
            owner.ledger.record_command(
                [sys.executable, "-m", "trainjob_conformance.cluster.kind.reclaim", "--builds"]
            )
            # Every controller of the profile, also those this cluster leaves out
            # (local_build.py says why): 13-17 s less beside the suite on a
            # MultiKueue worker's first run of a machine.
            binaries = local_build.build_binaries(self.profile)
        else:
            # The node image holds the node's runtime and Kubernetes.
            binaries = self._kind_and_kubectl()
        kind_bin, kubectl = binaries["kind"], binaries["kubectl"]
        self.kubectl = kubectl
        started = time.monotonic()
        local: dict[str, str] | None = None
        etcd_tag: str | None = None
        certs: Path | None = None
        if self.image_source == "local":
            built, local = local_build.build_images(self.profile, binaries)
            self.local = dict(local)
            # The controllers' and the test image are in the nodes' containerd from
            # the start: no `kind load` after `kind create`.
            catalog.ensure_role_images(built, list(local.values()), with_workers=self.workers > 0)
            node_images = (built.control_plane, built.worker)
            self.images = {"source": "local", **built.digests}
            self.kube_proxy_mode = built.kube_proxy_mode
            etcd_tag = catalog.etcd_image_tag(versions["etcd"])
        else:
            node, certs = self._upstream_images(kubectl)
            node_images = (node, node)
            facts = publish.node_image_facts(node)
            self.harness_node = NODE_IMAGE_LABEL in facts
            etcd_tag = facts.get(publish.ETCD_TAG_LABEL)
            self.kube_proxy_mode = facts.get(publish.KUBE_PROXY_MODE_LABEL, "")
        self._timed("images", started)
        inotify = kind_nodes.ensure_inotify_instances() if self.workers else None
        if inotify:
            say(inotify)
        on_v1 = kind_config.cgroup_v1()
        if on_v1:
            say("the host runs cgroup v1: the kubelet is told failCgroupV1: false")
        config = kind_config.write_config(
            self.run_dir / "kind-config.yaml",
            kind_config.cluster_config(
                *node_images,
                self.run_dir.name,
                on_cgroup_v1=on_v1,
                restrict_oom_score_adj=lacks_sys_resource(),
                etcd_tag=etcd_tag,
                workers=kind_nodes.worker_labels(self.workers),
                mirror_certs=certs,
                audit_dir=self._audit_dir(),
            ),
        )
        self.record = reclaim.new_record(
            self.name, self.kubeconfig, kind_bin, created_network=not reclaim.network_exists()
        )
        self.record.write(self.run_dir)
        # Deleted by the watchdog if this process dies before `down` (SIGKILL).
        owner.ledger.record_command(
            [sys.executable, "-m", "trainjob_conformance.cluster.kind.reclaim", str(self.run_dir)]
        )
        plan: list[Phase] = []
        if not self.bare:
            names = ", ".join(self.controllers)
            with step(f"building the release manifests of {names}"):
                steps = self.install_steps(self.profile, kubectl, local, self.controllers)
                plan = install_plan(steps)
        self.started = time.monotonic()
        early, late = split_plan(plan)
        with (
            step(f"creating kind cluster {self.name}"),
            self._kind_create(kind_bin, config) as kind_ended,
        ):
            # The CRDs and the controllers go in as soon as the control plane
            # answers, while kind still joins the workers.
            if early and self._control_plane_answers(kind_ended):
                began = time.monotonic()
                self._run_phases(kubectl, early[:-1], 1)
                placed = time.monotonic()
                self._control_plane_takes_pods(kubectl)
                self._timed("control plane takes the controllers", placed)
                self._run_phases(kubectl, early[-1:], len(early))
                self._timed("install beside kind create", began)
        if self.bare:
            return
        self._connect_mirror()
        if self.on_created is not None:
            self.on_created()
        started = time.monotonic()
        with self._workers_kept_whole(kubectl):
            self._timed("nodes", started)
            started = time.monotonic()
            with step(f"installing {', '.join(self.controllers)} from their release manifests"):
                self._run_phases(kubectl, late, len(early) + 1)
        self._timed("install", started)

    @contextlib.contextmanager
    def _kind_create(self, kind_bin: Path, config: Path) -> Iterator[Callable[[], int | None]]:
        """`kind create cluster` in the background while the body runs; the body gets a
        callable giving kind's exit code once it has ended (None before). Leaving waits
        for kind (a failure is one line with the node's journal tail); an error in the
        body kills it."""
        log = self.run_dir / "kind-create.log"
        ended: list[float] = []
        with log.open("wb") as output:
            # Goes with this process even when it is killed by SIGKILL: kind going
            # on would make nodes after the watchdog's deletion (reclaim.py).
            process = subprocess.Popen(
                [str(kind_bin), "create", "cluster", "--name", self.name, "--config", str(config),
                 "--kubeconfig", str(self.kubeconfig), "--retain"],
                stdout=output, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            )  # fmt: skip

            def kind_ended() -> int | None:
                code = process.poll()
                if code is not None and not ended:
                    ended.append(time.monotonic())
                return code

            try:
                yield kind_ended
                wait_for(
                    "kind create cluster to end",
                    lambda: True if kind_ended() is not None else NotYet("kind still creating"),
                    _KIND_CREATE_TIMEOUT,
                    interval=0.2,
                )
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        self.timings["kind_create"] = round(ended[0] - self.started, 1)
        if process.returncode != 0:
            # Kubernetes itself, before any release of the stack: not the releases' doing.
            journal = self._journal_tail()
            raise ControlPlaneNotStarted(
                f"{create_failure(log.read_text(errors='replace'), journal)}; "
                f"node journal:\n{journal}"
            )

    def _remember_image_source(self) -> None:
        """Where this cluster's images come from, for a worker started beside it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        chosen = {"image_source": self.image_source}
        if self.mirror is not None:
            chosen.update(_mirror_choice(self.mirror))
        record: dict[str, object] = dict(chosen)
        if self.worker_mirror is not None:
            record["worker"] = {"image_source": "upstream", **_mirror_choice(self.worker_mirror)}
        (self.run_dir / IMAGE_SOURCE_FILE).write_text(json.dumps(record) + "\n")

    def _kind_and_kubectl(self) -> dict[str, Path]:
        """kind and kubectl: fetched from the mirror where it holds the profile's
        binaries (`images push --cluster kind` puts them there), else built here.

        Built only where this machine never saw that mirror hold them (a mirror of
        the public registries has no binaries of the harness): once a push or a
        fetch is recorded, an artifact gone from it is an error, not a reason to
        build."""
        if self.mirror is not None:
            from trainjob_conformance.stack.registry.errors import ArtifactMissing
            from trainjob_conformance.stack.registry.fetch import fetch_profile
            from trainjob_conformance.stack.registry.records import read_record, record_path

            seen = read_record(record_path(self.mirror.address, self.profile.name))
            try:
                fetched = fetch_profile(
                    self.profile, self.mirror.url, extra={"kind": NODE_TOOLS["kind"]},
                    ca_file=self.mirror.ca_file,
                )  # fmt: skip
            except ArtifactMissing as missing:
                if seen is not None:
                    raise
                say(f"{missing}; building kind and kubectl here instead")
            else:
                if fetched.fetched:
                    say(f"fetched {', '.join(fetched.fetched)} from {self.mirror.url} "
                        f"in {fetched.seconds:.1f}s")  # fmt: skip
        return build_kind_and_kubectl(self.profile)

    def _upstream_images(self, kubectl: Path) -> tuple[str, Path | None]:
        """The node image pulled, from the mirror where one is given, and the nodes'
        mirror configuration; every image the cluster will pull is checked first."""
        upstream = publish.upstream_node_image(self.profile)
        if self.mirror is None:
            digest = store.pulled(
                upstream,
                "--image-source upstream takes the release images from their registries; "
                "where none is reachable, --image-source local builds them here, or "
                "--registry-mirror names a mirror",
            )
            self.images = {"source": "upstream", "node": upstream, "node digest": digest}
            return upstream, None
        with step(f"building the release manifests of {', '.join(self.controllers)}"):
            steps = self.install_steps(self.profile, kubectl, None, self.controllers)
        wanted = sorted({upstream, HOLD_IMAGE, *release_images(steps).values()})
        with step(f"checking that {self.mirror.url} serves the {len(wanted)} images to pull"):
            served = mirror.mirror_digests(self.mirror, wanted, self.profile.name)
        self.served = set(served)
        node = ImageName.parse(upstream).in_mirror(self.mirror.address)
        digest = store.pulled(node, f"the node image, from the mirror {self.mirror.url}")
        certs = mirror.write_certs_dir(self.run_dir / CERTS_DIR, wanted, self.mirror)
        self.images = {
            "source": f"upstream, through the mirror {self.mirror.url}",
            "node": f"{upstream} as {node}",
            "node digest": digest,
            **{f"{image} (served by the mirror)": found for image, found in served.items()},
        }
        return node, certs

    def _image_supply(self) -> str:
        """Local images are in the nodes' containerd from the start and nothing else can
        be pulled; through a mirror, only what it serves; else any image is pulled."""
        if self.image_source == "local":
            return IMAGES_PRELOADED
        return IMAGES_MIRRORED if self.mirror is not None else IMAGES_PULLED

    def _connect_mirror(self) -> None:
        """A loopback mirror's container on the kind network, once kind has made it
        and before any node pulls (the controllers are applied after this)."""
        if self.mirror is not None and self.mirror.container and reclaim.network_exists():
            mirror.connect(self.mirror)

    def _run_phases(self, kubectl: Path, phases: list[Phase], first: int) -> None:
        """Run install phases in order, each timed as `install N: ...`."""
        applier = self._applier(kubectl)
        for number, phase in enumerate(phases, first):
            began = time.monotonic()
            applier.run_phase(phase)
            self._timed(f"install {number}: {phase.label}", began)

    def _control_plane_answers(self, kind_ended: Callable[[], int | None]) -> bool:
        """Wait until kind's control plane serves the admin user (kubeadm binds its group
        a little after the API server starts), with the kubeconfig read from the node as
        `kind get kubeconfig` reads it. False when kind has failed first: leaving
        `_kind_create` then says why."""
        assert self.record is not None
        kind_bin = self.record.kind_bin

        def look() -> bool | NotYet:
            code = kind_ended()
            if code:
                return True
            self._connect_mirror()
            if code is None:
                got = subprocess.run(
                    [str(kind_bin), "get", "kubeconfig", "--name", self.name],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if got.returncode != 0:
                    return NotYet(f"no kubeconfig yet: {got.stderr.strip()[-200:]}")
                if not self.kubeconfig.exists():
                    self.kubeconfig.write_text(got.stdout)
            try:
                self._kube().list(*CRD)
            except ApiError as error:  # refused, or no answer (ApiServerUnreachable)
                return NotYet(f"the API server does not serve the admin user yet: {error}")
            return True

        wait_for("kind's control plane to answer", look, _KIND_CREATE_TIMEOUT, interval=0.5)
        if kind_ended():
            return False
        self._timed("control plane answers", self.started)
        return True

    def _control_plane_takes_pods(self, kubectl: Path) -> None:
        """Before the controllers are applied: the control-plane node on its own pod
        subnet (local images), routing Services, and (with workers, which join
        tainted) without its taint."""
        kube = self._kube()
        control_plane = kind_nodes.read_nodes(kube, 1, self.name, control_plane_only=True)
        # A lone control plane needs neither wiring nor opening: the image's
        # conflist serves it, and kind lifts its taint itself.
        if self.workers and self.harness_node:
            kind_nodes.wire_pod_network(control_plane)
        kind_nodes.wait_service_routing(kube, control_plane[0].name)
        if self.workers:
            self._open_control_plane(kubectl, control_plane[0].name)

    def _open_control_plane(self, kubectl: Path, control_plane: str) -> None:
        """Lift the control plane's taint for the controllers, once."""
        if not self.control_plane_open:
            kind_nodes.open_control_plane(self._kubectl_call(kubectl), control_plane)
            self.control_plane_open = True

    @contextlib.contextmanager
    def _workers_kept_whole(self, kubectl: Path) -> Iterator[None]:
        """Once kind has ended: pod networking across all the nodes, CoreDNS settled on
        the control plane; when the install is done, the workers take Pods again
        (cluster/kind/nodes.py)."""
        if not self.workers:
            yield
            return
        kube = self._kube()
        nodes = kind_nodes.read_nodes(kube, self.workers + 1, self.name)
        # kind's own node image runs kindnetd, which routes pod subnets itself; the
        # harness's has no kindnetd (no reachable source builds it), so the harness does.
        if self.harness_node:
            with step(f"wiring pod networking across {self.workers + 1} nodes"):
                modes = kind_nodes.wire_pod_network(nodes)
            mismatch = kind_nodes.mode_mismatch(modes, self.kube_proxy_mode)
            if mismatch:
                say(mismatch)
        control_plane = next(n.name for n in nodes if n.control_plane)
        self._open_control_plane(kubectl, control_plane)
        moved = kind_nodes.settle_system_pods(kube, nodes)
        if moved:
            say(f"restarted on the control plane's subnet: {', '.join(n for _, n in moved)}")
        yield
        kind_nodes.give_workers_back(self._kubectl_call(kubectl), control_plane)

    def _journal_tail(self) -> str:
        containers = reclaim.node_containers(self.name, harness_only=False)
        if not containers:
            return "(no node container)"
        result = subprocess.run(
            ["docker", "exec", containers[0], "journalctl", "--no-pager", "-n", "30"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return result.stdout or result.stderr

    def up(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        if on_created is not None:
            self.on_created = on_created
        with startup_errors(self.run_dir):
            return self._up()

    def _up(self) -> ClusterHandle:
        self.create_and_install()
        kube = self._kube()
        started = time.monotonic()
        wait_for_admission(kube, self._admission_probes(), timeout=120, log_tails=lambda: "")
        self._timed("admission", started)
        self._timed("ready", self.started)
        say(f"kind timings (s): {self.timings}")
        # For the bench, which reads a `run --cluster kind`'s start from here.
        (self.run_dir / TIMINGS_FILE).write_text(json.dumps(self.timings) + "\n")
        handle = ClusterHandle(
            provider="kind",
            kubeconfig=self._peer_kubeconfig() if self.for_peers else self.kubeconfig,
            # Only what it runs: no kwok (real kubelets), the training-operator
            # where it was installed.
            versions={
                k: v
                for k, v in self.profile.versions.items()
                if (k in COMPONENT_KEYS and k != "kwok") or k in self.controllers
            },
            profile=self.profile.name,
            run_dir=self.run_dir,
            images=dict(self.images),
            image_supply=self._image_supply(),
            mirrored_images=sorted(self.served),
        )
        handle.controller_pods = {
            n: (ns, sel) for n, (ns, _, sel) in CONTROLLERS.items() if n in self.controllers
        }
        # With `upstream` the nodes pulled the controllers' images: their registry
        # digests, as the kubelets report them. Local images keep the IDs of the images
        # built here (their kubelets name the digest of kind's import instead).
        # kube-system's too (the control plane, etcd, CoreDNS, kube-proxy).
        ran_here = {**handle.controller_pods, "kube-system": ("kube-system", "")}
        for image, ran in running_images(kube, ran_here).items():
            handle.images.setdefault(image, ran)
        self.watch = self._start_watch(handle)
        handle.health_file = self.watch.path
        self.handle = handle
        write_image_supply(self.run_dir, handle.image_supply, handle.mirrored_images)
        return handle

    def _admission_probes(self) -> list[AdmissionProbe]:
        probes = standard_probes()
        if "training-operator" in self.controllers:
            probes += training_operator_probes()
        return probes

    def _start_watch(self, handle: ClusterHandle) -> StackWatch:
        kube = self._kube()
        probes = [
            controller_pod_probe(kube, component, namespace, selector)
            for component, (namespace, selector) in handle.controller_pods.items()
        ]
        return StackWatch(self.run_dir / HEALTH_FILE, probes, interval=2.0).start()

    def _stop_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch = None

    def upgrade_refused(self) -> str | None:
        return None

    def _audit_dir(self) -> Path | None:
        """The directory the API server's audit policy and log share, mounted into the
        control plane (kind_config.cluster_config); None where no log is kept."""
        if not self.window_audit:
            return None
        directory = self.run_dir / "audit"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / kind_config.AUDIT_POLICY_FILE).write_text(yaml.safe_dump(WINDOW_AUDIT_POLICY))
        return directory

    def window_audit_log(self) -> Path | None:
        if not self.window_audit or self.handle is None:
            return None
        log = self.run_dir / "audit" / kind_config.AUDIT_LOG_FILE
        # Written by the API server as root: a harness that is not cannot read it,
        # and the window is then its watch alone.
        if not os.access(log, os.R_OK):
            say(
                f"the API server's audit log {log} cannot be read here: the window is its watch alone"
            )
            return None
        return log

    def upgrade_component(self, component: str, version: str) -> ComponentUpgrade:
        """Move one running controller to another release in place: its image into every
        node, then the new release's CRDs, its Deployment's rolling update, and the wait
        until every admission probe of the stack is answered (cluster/releases/upgrade.py
        says what each phase runs). The handle then names the new release, as does
        the cluster itself (`existing` reads it from the Deployment's image).

        A MultiKueue worker started beside this cluster afterwards (the catalog's,
        through peer_cluster) runs the releases the handle names, the upgraded ones
        included; one started before is not upgraded.
        """
        kubectl, handle = self._upgradable(component, version)

        def steps(profile: Profile, local: dict[str, str] | None, only: list[str]):
            return self.install_steps(profile, kubectl, local, only)

        with step(f"{component} {self.profile.version(component)} -> {version}: preparing"):
            if self.image_source == "local":
                prepared = kind_upgrade.prepare(
                    self.profile, self.local, component, version, steps, self._load_image
                )
            else:
                prepared = releases_upgrade.prepare_pulled(
                    self.profile, component, version, steps, self._pulled_from
                )
        probes = self._admission_probes()
        seconds = in_place.apply_upgrade(
            self._applier(kubectl),
            prepared,
            self._stop_watch,
            lambda: in_place.wait_admission(
                self._kube(), probes, handle.controller_pods, component, self.run_dir
            ),
        )
        pod = in_place.new_controller_pod(self._kube(), prepared)
        done = ComponentUpgrade(
            component, prepared.from_version, version, *seconds, notes=prepared.notes(pod.node)
        )
        self.profile = prepared.target
        if prepared.local is not None:
            self.local = prepared.local
            self.images[prepared.image] = store.image_id(prepared.image)
            handle.images[prepared.image] = self.images[prepared.image]
        else:
            # What the node pulled; how it got there is in the step's notes.
            ran = pod.image_id or prepared.supply
            handle.images[prepared.image] = self.images[prepared.image] = ran
            if self.mirror is not None:
                # Checked before the step (_pulled_from): the mirror serves it.
                self.served.add(prepared.image)
                handle.mirrored_images = sorted(self.served)
                write_image_supply(self.run_dir, handle.image_supply, handle.mirrored_images)
        handle.versions[component] = version
        self.watch = self._start_watch(handle)
        return done

    def _upgradable(self, component: str, version: str) -> tuple[Path, ClusterHandle]:
        """kubectl and the handle of a cluster that can make this upgrade; else one line."""
        if self.kubectl is None or self.handle is None:
            raise ConformanceError("the kind cluster is not up: nothing to upgrade")
        if refused := self.upgrade_refused():
            raise ConformanceError(refused)
        releases_upgrade.check_request(component, version, self.controllers)
        return self.kubectl, self.handle

    def _pulled_from(self, image: str) -> str:
        """Where the nodes pull the new release's `image` from, in a few words; through
        a mirror, checked first: one line where the mirror lacks it, or where the nodes'
        containerd does not send its registry there (set when the cluster started)."""
        if self.mirror is None:
            return f"pulled by the nodes from {ImageName.parse(image).host}"
        host = ImageName.parse(image).host
        # The registries write_certs_dir sent to the mirror: those of what it served.
        mirrored = {ImageName.parse(served).host for served in self.served}
        if host not in mirrored:
            raise ConformanceError(
                f"the nodes send no pull of {host} to the mirror {self.mirror.url} (only "
                f"those of {', '.join(sorted(mirrored))}, set when the cluster started): "
                f"{image} would come from {host} itself"
            )
        from trainjob_conformance.stack.registry.client import RegistryClient

        client = RegistryClient(self.mirror.address, self.mirror.ca_file)
        digest = mirror.served_digest(client, self.mirror, image, self.profile.name)
        if digest is None:
            raise ConformanceError(
                f"the mirror {self.mirror.url} has no {image}, which the upgrade pulls: push "
                "the images of the profile you upgrade to (`trainjob-conformance images push "
                f"--registry {self.mirror.url} --profile PROFILE --cluster kind`) first"
            )
        return f"pulled by the nodes through the mirror {self.mirror.url} ({digest})"

    def _load_image(self, image: str) -> tuple[int, float]:
        """The image into every node of this cluster: how many, in how many seconds."""
        nodes = reclaim.node_containers(self.name, harness_only=False)
        return len(nodes), kind_upgrade.load_image(image, nodes, self.run_dir / "upgrade")

    def _peer_kubeconfig(self) -> Path:
        """The kubeconfig with the API server at the control-plane container's address on
        the kind network (port 6443, in kubeadm's certificate), which the host reaches
        too; written beside the other and removed with the run directory's cluster."""
        node = f"{self.name}-control-plane"
        result = subprocess.run(
            ["docker", "inspect", "--format",
             f"{{{{(index .NetworkSettings.Networks \"{reclaim.KIND_NETWORK}\").IPAddress}}}}",
             node],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        address = result.stdout.strip()
        if result.returncode != 0 or not address:
            raise ConformanceError(f"no address of {node} on the kind network: {result.stderr}")
        path = self.run_dir / reclaim.PEER_KUBECONFIG
        path.write_text(kind_config.kubeconfig_at(self.kubeconfig.read_text(), address))
        return path

    def _down_hint(self) -> str:
        kind_bin = self.record.kind_bin if self.record else "kind"
        command = ["delete", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig)]
        return shlex.join([kind_bin, *command])

    def detach(self) -> str:
        """Leave the kind cluster running past this process (`kind delete cluster` removes it)."""
        hint = self._down_hint()
        unregister_cleanup(self.down)
        self._stop_watch()
        if self.record is not None:
            self.record.state = "detached"
            self.record.write(self.run_dir)
        if self.docker is not None:
            self.docker.keep_for(self.name)
            self.docker = None
        return hint

    def down(self) -> None:
        unregister_cleanup(self.down)
        self._stop_watch()
        if self.mirror is not None:
            mirror.disconnect(self.mirror)
        if self.record is not None and self.record.state == "running":
            with step(f"deleting kind cluster {self.name}"):
                reclaim.delete(self.record, self.run_dir)
        if self.docker is not None:
            self.docker.stop()
            self.docker = None


# A MultiKueue worker is one node: kind's lone control plane takes Pods, so the
# controllers and the TrainJob's 2 Pods (sized from its free CPU) share it. A
# second node (one `kubeadm join`, one more kubelet on the host's cores) made its
# start, beside the running suite, the suite's longest wait.
MULTIKUEUE_WORKER_NODES = 0
# Kueue's MultiKueue mirrors only the job kinds of the integrations it enables
# (its `GetMultiKueueAdapters` takes the configuration's frameworks, v0.14 to
# v0.19), and the harness enables batch Jobs, JobSets and TrainJobs
# (cluster/kueue.py KUEUE_FRAMEWORKS): no PyTorchJob ever reaches a worker, so
# it runs without the training-operator, its CRDs and its webhooks (one Pod and
# six large CRDs fewer for an API server that starts beside the suite).
MULTIKUEUE_WORKER_LEAVES_OUT = ("training-operator",)


def _mirror_choice(node_mirror: NodeMirror) -> dict[str, str]:
    return {"mirror": node_mirror.url, "ca": str(node_mirror.ca_file or "")}


def multikueue_worker(profile: Profile, manager_run_dir: Path) -> KindStackCluster:
    """A second kind cluster beside the run's, with the same images and stack, for
    MultiKueue: its handle's kubeconfig works from the manager cluster's Pods."""
    chosen: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        chosen = json.loads((manager_run_dir / IMAGE_SOURCE_FILE).read_text())
    # The run's own supply, unless it named another for its worker.
    chosen = chosen.get("worker", chosen)
    return KindStackCluster(
        profile,
        manager_run_dir / f"worker-{os.getpid()}",
        image_source=chosen.get("image_source", "local"),
        workers=MULTIKUEUE_WORKER_NODES,
        name=f"{cluster_name(manager_run_dir)}-mk{os.getpid()}",
        for_peers=True,
        leave_out=MULTIKUEUE_WORKER_LEAVES_OUT,
        registry_mirror=(
            mirror.parse_mirror(chosen["mirror"], chosen.get("ca") or None)
            if chosen.get("mirror")
            else None
        ),
    )


def from_request(request: ClusterRequest) -> KindStackCluster:
    """The registry's way in (cluster/registry.py)."""
    given = request.option(REGISTRY_MIRROR)
    for_worker = request.option(WORKER_MIRROR)
    ca = request.option(REGISTRY_CA)
    if ca and not (given or for_worker):
        raise ConformanceError("--registry-ca goes with --registry-mirror: name the mirror too")
    return KindStackCluster(
        request.profile,
        request.run_dir,
        request.option(IMAGE_SOURCE, "local") or "local",
        registry_mirror=mirror.parse_mirror(given, ca) if given else None,
        worker_mirror=mirror.parse_mirror(for_worker, ca) if for_worker else None,
        window_audit=bool(request.option(WINDOW_AUDIT_OPTION)),
    )


def peer_beside(profile: Profile, run_dir: Path) -> KindStackCluster:
    return multikueue_worker(profile, run_dir)


def bare_start(profile: Profile, run_dir: Path) -> float:
    """Seconds for `kind create` alone, with the provider's node image and config."""
    bare = KindStackCluster(profile, run_dir, bare=True)
    try:
        bare.create_and_install()
        return bare.timings["kind_create"]
    finally:
        bare.down()


def leftovers(run_dir: Path) -> list[str]:
    """The kind cluster a run directory records, if it was neither deleted nor kept and
    node containers of it remain."""
    record = reclaim.ClusterRecord.read(run_dir / reclaim.RECORD_FILE)
    if record is None or record.state != "running":
        return []
    named = reclaim.node_containers(record.name, harness_only=False)
    return [f"kind cluster {record.name}"] if named else []


def prebuild(profile: Profile) -> dict[str, Path]:
    """The binaries the node image is built from; as root, the Debian packages that
    build needs first."""
    host_packages.ensure_build_packages()
    return build_node_binaries(profile)


def push_images(profile: Profile, registry_url: str) -> list[PushedImage]:
    """Every image a kind cluster of `profile` runs, under its upstream name."""
    from trainjob_conformance.stack.registry.address import parse_registry_url

    return publish.push_images(profile, parse_registry_url(registry_url))


def registry_server(storage: Path, config_dir: Path) -> RegistryServer | None:
    """A registry container the nodes reach on the kind network (registry_container.py)."""
    from trainjob_conformance.cluster.kind.registry_container import ContainerRegistry

    return ContainerRegistry(storage, config_dir)
