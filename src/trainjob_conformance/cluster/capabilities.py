"""What a cluster offers the policies, read from the live nodes, never from the provider.

Policies ask for capabilities (schedulable nodes, a topology with levels and
domains, a label that splits the nodes in two) instead of naming one
provider's labels, so the same test holds on the embedded cluster, on kind
and on a user's cluster. Where a capability is missing the caller (the pytest
side) skips the policy with the reason given here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kubernetes.utils import parse_quantity

from trainjob_conformance.cluster.labels import LOCAL_IMAGE_HOST
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.kinds import NODE, POD

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str]


def _schedulable(node: dict[str, Any]) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("effect") in _BLOCKING_EFFECTS for t in spec.get("taints") or []):
        return False
    conditions = {
        c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []
    }
    return conditions.get("Ready") == "True"


def schedulable_nodes(kube: Kube) -> list[Node]:
    """Ready nodes without a cordon or a taint that repels a plain Pod."""
    return [
        Node(n["metadata"]["name"], dict(n["metadata"].get("labels") or {}))
        for n in kube.list(*NODE)
        if _schedulable(n)
    ]


def _millicpu(quantity: object) -> int:
    return int(parse_quantity(str(quantity)) * 1000)


def _pod_cpu_request(pod: dict[str, Any]) -> int:
    """What the scheduler counts for a Pod: its containers' requests, or its largest
    init container's when that is more."""
    spec = pod.get("spec") or {}

    def request(container: dict[str, Any]) -> int:
        requests = (container.get("resources") or {}).get("requests") or {}
        return _millicpu(requests.get("cpu", "0"))

    running = sum(request(c) for c in spec.get("containers") or [])
    return max([running, *(request(c) for c in spec.get("initContainers") or [])])


def free_cpu(kube: Kube, settled: bool = False) -> dict[str, int]:
    """Schedulable node -> millicores of allocatable CPU no bound, unfinished Pod requests.

    Read from the live nodes and Pods: a real node's allocatable is the host's
    CPUs, much of it requested by the control plane and the controllers. The
    scheduler counts a terminating Pod until it is gone; `settled` leaves those
    out, to say what the nodes will have once they are.
    """
    nodes = {
        n["metadata"]["name"]: _millicpu(
            ((n.get("status") or {}).get("allocatable") or {}).get("cpu", "0")
        )
        for n in kube.list(*NODE)
        if _schedulable(n)
    }
    for pod in kube.list(*POD):
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if settled and pod["metadata"].get("deletionTimestamp"):
            continue
        if node in nodes and phase not in ("Succeeded", "Failed"):
            nodes[node] -= _pod_cpu_request(pod)
    return nodes


def largest_fitting_request(free: list[int], pods: int, at_most: int) -> int:
    """The largest per-Pod CPU request (millicores, <= at_most) with which `pods` Pods
    fit on nodes with these free millicores; 0 when even 1m does not fit."""

    def fits(request: int) -> bool:
        return sum(max(room, 0) // request for room in free) >= pods

    candidates = {at_most} | {room // k for room in free for k in range(1, pods + 1)}
    return max((c for c in candidates if 0 < c <= at_most and fits(c)), default=0)


def normalized_image(image: str) -> str:
    """An image reference as the kubelet reports it: Docker Hub's implied registry and
    `library/` spelled out, `:latest` where no tag or digest is given."""
    first, _, rest = image.partition("/")
    if not rest:
        image = f"docker.io/library/{image}"
    elif "." not in first and ":" not in first and first != "localhost":
        image = f"docker.io/{image}"
    if "@" not in image and ":" not in image.rsplit("/", 1)[-1]:
        image += ":latest"
    return image


def holds_local_images(kube: Kube) -> bool:
    """Whether any node (the control plane too, where the controllers run) holds an
    image the harness built (LOCAL_IMAGE_HOST)."""
    return any(
        name.startswith(f"{LOCAL_IMAGE_HOST}/")
        for n in kube.list(*NODE)
        for held in (n.get("status") or {}).get("images") or []
        for name in held.get("names") or []
    )


def node_images(kube: Kube) -> set[str]:
    """Every image name the schedulable nodes report holding (Node status.images)."""
    return {
        normalized_image(name)
        for n in kube.list(*NODE)
        if _schedulable(n)
        for held in (n.get("status") or {}).get("images") or []
        for name in held.get("names") or []
    }


def _is_topology_key(key: str) -> bool:
    return key in (REGION_LABEL, ZONE_LABEL, HOSTNAME_LABEL) or "topology" in key.split("/")[-1]


def _nests(nodes: list[Node], upper: str, lower: str) -> bool:
    """Every domain of `lower` lies inside one domain of `upper`."""
    parent: dict[str, str] = {}
    for node in nodes:
        if parent.setdefault(node.labels[lower], node.labels[upper]) != node.labels[upper]:
            return False
    return True


@dataclass(frozen=True)
class Topology:
    """Node-label levels, widest first and the node itself last, over the schedulable nodes."""

    levels: tuple[str, ...]
    nodes: tuple[Node, ...]

    def domains(self, level: str) -> dict[str, list[str]]:
        """Domain value -> node names, at one level."""
        found: dict[str, list[str]] = {}
        for node in self.nodes:
            found.setdefault(node.labels[level], []).append(node.name)
        return found

    def level_for(self, pods: int) -> str | None:
        """The narrowest level above the node that has several domains, one of them
        holding at least `pods` nodes: "all Pods in one domain" can then fail."""
        for level in reversed(self.levels[:-1]):
            domains = self.domains(level)
            if len(domains) > 1 and max(len(v) for v in domains.values()) >= pods:
                return level
        return None

    def flavor_labels(self) -> dict[str, str]:
        """A node label (the widest level's largest domain) that a TAS flavor can carry."""
        widest = self.levels[0]
        value, _ = Counter(n.labels[widest] for n in self.nodes).most_common(1)[0]
        return {widest: value}

    def nodes_with(self, labels: dict[str, str]) -> frozenset[str]:
        """The names of the nodes that carry every one of these labels."""
        return frozenset(
            n.name for n in self.nodes if all(n.labels.get(k) == v for k, v in labels.items())
        )


def discover_topology(nodes: list[Node]) -> Topology | None:
    """The topology label levels the nodes share, or None when there is no usable one.

    Candidates are the well-known zone/region/hostname labels and any label
    whose name says topology, present on every node; levels are ordered by how
    many domains they have and kept only while each nests inside the previous.
    """
    if not nodes:
        return None
    shared = set.intersection(*(set(n.labels) for n in nodes))
    candidates = sorted(
        (key for key in shared if _is_topology_key(key) and key != HOSTNAME_LABEL),
        key=lambda key: (len({n.labels[key] for n in nodes}), key),
    )
    if HOSTNAME_LABEL not in shared:
        return None
    levels: list[str] = []
    for key in [*candidates, HOSTNAME_LABEL]:
        count = len({n.labels[key] for n in nodes})
        if levels and count == len({n.labels[levels[-1]] for n in nodes}):
            continue  # the same partition as the level above: adds nothing
        if levels and not _nests(nodes, levels[-1], key):
            continue
        levels.append(key)
    if len(levels) < 2:
        return None
    return Topology(tuple(levels), tuple(nodes))


def splitting_label(nodes: list[Node], at_least: int) -> tuple[str, str] | None:
    """A label (key, value) held by at least `at_least` schedulable nodes but not by all:
    a nodeSelector on it shows where Pods went. Topology labels first."""
    if not nodes:
        return None
    shared = set.intersection(*(set(n.labels) for n in nodes)) - {HOSTNAME_LABEL}
    candidates = []
    for key in sorted(shared):
        counts = Counter(n.labels[key] for n in nodes)
        if len(counts) < 2:
            continue
        value, size = max(sorted(counts.items()), key=lambda item: item[1])
        if size >= at_least:
            candidates.append((not _is_topology_key(key), key, value))
    if not candidates:
        return None
    _, key, value = min(candidates)
    return key, value
