"""What a test gets from any cluster provider."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.cluster.capabilities import (
    Node,
    Topology,
    discover_topology,
    free_cpu,
    node_images,
    normalized_image,
    schedulable_nodes,
    splitting_label,
)
from trainjob_conformance.cluster.health.stack_watch import StackHealth
from trainjob_conformance.cluster.kueue import KUEUE_NAMESPACE
from trainjob_conformance.kube.client import Kube, api_client_for

IMAGES_PULLED = "pulled"
IMAGES_PRELOADED = "preloaded"
IMAGES_SIMULATED = "simulated"
IMAGES_MIRRORED = "mirrored"


@dataclass
class ClusterHandle:
    """A ready cluster with JobSet, Kueue and Trainer installed and answering.

    Controller logs come from files for host processes (`log_files`) or from
    the Pods of in-cluster installs (`controller_pods`).
    """

    provider: str
    kubeconfig: Path
    versions: dict[str, str]
    profile: str = ""
    run_dir: Path | None = None
    # In-cluster controllers: component -> (namespace, Pod label selector).
    controller_pods: dict[str, tuple[str, str]] = field(default_factory=dict)
    log_files: dict[str, Path] = field(default_factory=dict)
    # Written by the stack watch of the process that owns the cluster.
    health_file: Path | None = None
    # Where the cluster's images came from (kind: local or upstream) and which ran:
    # image name -> image ID, for reports.
    images: dict[str, str] = field(default_factory=dict)
    # How the nodes get the images a Pod names: IMAGES_PULLED (from registries),
    # IMAGES_PRELOADED (only those already on the nodes: no registry is reachable),
    # IMAGES_SIMULATED (no container runs: kwok's nodes), IMAGES_MIRRORED (those the
    # nodes hold and those a mirror serves, `mirrored_images`: nothing else is reachable).
    image_supply: str = IMAGES_PULLED
    mirrored_images: list[str] = field(default_factory=list)
    # For an `existing` cluster the harness built itself: the provider that built it
    # ("kind"), so a MultiKueue worker can be started beside it the same way.
    built_by: str = ""
    _kube: Kube | None = None
    _health: StackHealth | None = None

    @property
    def health(self) -> StackHealth:
        if self._health is None:
            self._health = StackHealth(self.health_file)
        return self._health

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            self._kube = Kube(api_client_for(self.kubeconfig))
        return self._kube

    @property
    def kueue_namespace(self) -> str:
        """Where Kueue runs (it reads MultiKueue's kubeconfig Secrets there): the namespace
        of its controller where the provider found one, else upstream's default, which
        the embedded cluster's host-process Kueue is configured with."""
        return self.controller_pods.get("kueue", (KUEUE_NAMESPACE, ""))[0]

    def schedulable_nodes(self) -> list[Node]:
        """Ready nodes a plain Pod can land on, read from the cluster now."""
        return schedulable_nodes(self.kube)

    def free_cpu(self, settled: bool = False) -> dict[str, int]:
        """Schedulable node -> millicores of CPU that Pods have not requested, read now;
        `settled`: once the terminating Pods are gone."""
        return free_cpu(self.kube, settled)

    @property
    def runs_containers(self) -> bool:
        """Whether the nodes run a Pod's containers (a kubelet), rather than playing
        their lifecycle (kwok)."""
        return self.image_supply != IMAGES_SIMULATED

    @property
    def adds_nodes(self) -> bool:
        """Whether a test may add nodes of the capacity it chooses: kwok plays every Node
        that carries its annotation (cluster/simulated_nodes.py), where a kubelet's
        capacity is fixed when its node starts."""
        return self.image_supply == IMAGES_SIMULATED

    def can_run_image(self, image: str) -> bool:
        """Whether a Pod naming `image` gets it: on nodes that run no container any
        image does; on nodes without a registry only the images they hold."""
        if self.image_supply in (IMAGES_SIMULATED, IMAGES_PULLED):
            return True
        wanted = normalized_image(image)
        if self.image_supply == IMAGES_MIRRORED and wanted in {
            normalized_image(served) for served in self.mirrored_images
        }:
            return True
        return wanted in node_images(self.kube)

    def topology(self) -> Topology | None:
        """The node-label topology of the schedulable nodes, if they have one."""
        return discover_topology(self.schedulable_nodes())

    def splitting_label(self, at_least: int) -> tuple[str, str] | None:
        """A node label some schedulable nodes (>= `at_least`) carry and others do not."""
        return splitting_label(self.schedulable_nodes(), at_least)

    def controller_log_tail(self, component: str, lines: int = 40) -> str:
        if component in self.controller_pods:
            from trainjob_conformance.cluster.introspect import pod_log_tailer

            return pod_log_tailer(self.kube, self.controller_pods)(component, lines)
        path = self.log_files.get(component)
        if path is None or not path.exists():
            return f"(no log for {component})"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def to_json(self) -> dict[str, object]:
        """What a pytest-xdist worker needs to attach to a cluster it did not start."""
        return {
            "provider": self.provider,
            "kubeconfig": str(self.kubeconfig),
            "versions": dict(self.versions),
            "profile": self.profile,
            "run_dir": str(self.run_dir) if self.run_dir else "",
            "controller_pods": {k: list(v) for k, v in self.controller_pods.items()},
            "log_files": {name: str(path) for name, path in self.log_files.items()},
            "health_file": str(self.health_file) if self.health_file else "",
            "images": dict(self.images),
            "image_supply": self.image_supply,
            "mirrored_images": list(self.mirrored_images),
            "built_by": self.built_by,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ClusterHandle:
        log_files = data.get("log_files") or {}
        assert isinstance(log_files, dict)
        versions = data.get("versions") or {}
        assert isinstance(versions, dict)
        return cls(
            provider=str(data["provider"]),
            kubeconfig=Path(str(data["kubeconfig"])),
            versions={str(k): str(v) for k, v in versions.items()},
            log_files={str(k): Path(str(v)) for k, v in log_files.items()},
            profile=str(data.get("profile") or ""),
            run_dir=Path(str(data["run_dir"])) if data.get("run_dir") else None,
            health_file=Path(str(data["health_file"])) if data.get("health_file") else None,
            images={str(k): str(v) for k, v in dict(data.get("images") or {}).items()},  # type: ignore[call-overload]
            image_supply=str(data.get("image_supply") or IMAGES_PULLED),
            mirrored_images=[str(i) for i in list(data.get("mirrored_images") or [])],  # type: ignore[call-overload]
            built_by=str(data.get("built_by") or ""),
            controller_pods={
                str(k): (str(v[0]), str(v[1]))
                for k, v in dict(data.get("controller_pods") or {}).items()  # type: ignore[call-overload]
            },
        )
