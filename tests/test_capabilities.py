"""Capabilities read from node labels: topology levels, domains, a splitting label."""

from __future__ import annotations

from pathlib import Path

from trainjob_conformance.cluster.capabilities import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    Node,
    discover_topology,
    free_cpu,
    largest_fitting_request,
    normalized_image,
    splitting_label,
)
from trainjob_conformance.cluster.embedded.nodes import BLOCK_LABEL, RACK_LABEL, node_manifests
from trainjob_conformance.cluster.handle import (
    IMAGES_PRELOADED,
    IMAGES_PULLED,
    IMAGES_SIMULATED,
    ClusterHandle,
)


def nodes_of(manifests: list[dict]) -> list[Node]:
    return [Node(m["metadata"]["name"], m["metadata"]["labels"]) for m in manifests]


def test_the_embedded_nodes_carry_no_kwok_label_by_default() -> None:
    for manifest in node_manifests():
        labels = manifest["metadata"]["labels"]
        assert not any("kwok" in f"{key}={value}" for key, value in labels.items()), labels
    assert all(m["metadata"]["labels"]["type"] == "kwok" for m in node_manifests("kwok"))


def test_topology_levels_are_ordered_widest_first_and_nest() -> None:
    topology = discover_topology(nodes_of(node_manifests()))

    assert topology is not None
    assert topology.levels == (ZONE_LABEL, BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)
    assert topology.level_for(pods=2) == RACK_LABEL
    assert topology.level_for(pods=3) == BLOCK_LABEL
    assert topology.level_for(pods=5) is None
    assert topology.flavor_labels() == {ZONE_LABEL: "zone-1"}


def test_a_flavors_nodes_are_those_with_its_labels() -> None:
    nodes = [
        Node("a", {HOSTNAME_LABEL: "a", ZONE_LABEL: "z1"}),
        Node("b", {HOSTNAME_LABEL: "b", ZONE_LABEL: "z1"}),
        Node("c", {HOSTNAME_LABEL: "c", ZONE_LABEL: "z2"}),
    ]
    topology = discover_topology(nodes)

    assert topology is not None
    # The largest zone: the nodes a TAS flavor's Pods can go to, whose CPU sizes them.
    assert topology.nodes_with(topology.flavor_labels()) == {"a", "b"}
    assert topology.nodes_with({ZONE_LABEL: "z2"}) == {"c"}
    assert topology.nodes_with({ZONE_LABEL: "z3"}) == set()


def test_a_level_that_does_not_nest_is_left_out() -> None:
    nodes = [
        Node("a", {HOSTNAME_LABEL: "a", "example.com/topology-rack": "r1", ZONE_LABEL: "z1"}),
        Node("b", {HOSTNAME_LABEL: "b", "example.com/topology-rack": "r1", ZONE_LABEL: "z2"}),
        Node("c", {HOSTNAME_LABEL: "c", "example.com/topology-rack": "r2", ZONE_LABEL: "z2"}),
    ]

    topology = discover_topology(nodes)

    assert topology is not None
    # zone and rack both have two domains, but rack r1 spans zones z1 and z2.
    assert len(topology.levels) == 2 and topology.levels[-1] == HOSTNAME_LABEL


def test_nodes_without_topology_labels_have_no_topology() -> None:
    nodes = [Node("kind-control-plane", {HOSTNAME_LABEL: "kind-control-plane"})]

    assert discover_topology(nodes) is None
    assert discover_topology([]) is None


def test_a_splitting_label_prefers_topology_and_needs_enough_nodes() -> None:
    nodes = nodes_of(node_manifests())

    assert splitting_label(nodes, at_least=2) == (BLOCK_LABEL, "block-a")
    assert splitting_label(nodes, at_least=5) is None
    same = [Node(n.name, {HOSTNAME_LABEL: n.name, ZONE_LABEL: "z"}) for n in nodes]
    assert splitting_label(same, at_least=1) is None


class _Listing:
    """Answers Kube.list for Nodes and Pods: enough for free_cpu."""

    def __init__(self, nodes: list[dict], pods: list[dict]) -> None:
        self.items = {"Node": nodes, "Pod": pods}

    def list(self, api_version: str, kind: str, **_: object) -> list[dict]:
        return self.items[kind]


def _node(name: str, cpu: str, ready: bool = True) -> dict:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {
        "metadata": {"name": name},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu}, "conditions": [condition]},
    }


def _pod(node: str, *cpus: str, phase: str = "Running", init: str = "", deleting: bool = False):
    containers = [{"resources": {"requests": {"cpu": cpu}}} for cpu in cpus]
    spec: dict = {"nodeName": node, "containers": containers}
    if init:
        spec["initContainers"] = [{"resources": {"requests": {"cpu": init}}}]
    metadata = {"deletionTimestamp": "2026-11-25T00:00:00Z"} if deleting else {}
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def test_free_cpu_is_allocatable_less_what_unfinished_pods_request() -> None:
    kube = _Listing(
        [_node("a", "2"), _node("b", "8"), _node("down", "8", ready=False)],
        [
            _pod("a", "250m", "100m"),
            _pod("a", "1", phase="Succeeded"),
            _pod("a", "100m", init="1500m"),  # the init container's request is the larger
            _pod("b", "500m", deleting=True),
            _pod("down", "1"),
        ],
    )

    assert free_cpu(kube) == {"a": 150, "b": 7500}  # type: ignore[arg-type]
    assert free_cpu(kube, settled=True) == {"a": 150, "b": 8000}  # type: ignore[arg-type]


def test_the_largest_fitting_request_packs_pods_onto_the_free_nodes() -> None:
    assert largest_fitting_request([150], pods=2, at_most=2000) == 75
    assert largest_fitting_request([8000, 8000], pods=2, at_most=2000) == 2000
    assert largest_fitting_request([1000, 700], pods=2, at_most=2000) == 700
    assert largest_fitting_request([1000, 300], pods=2, at_most=2000) == 500
    assert largest_fitting_request([1, 0, -200], pods=2, at_most=2000) == 0


def test_images_are_compared_as_the_kubelet_names_them() -> None:
    assert normalized_image("busybox") == "docker.io/library/busybox:latest"
    assert normalized_image("pytorch/pytorch:2.13") == "docker.io/pytorch/pytorch:2.13"
    assert normalized_image("registry.k8s.io/pause:3.10") == "registry.k8s.io/pause:3.10"
    assert normalized_image("localhost/a@sha256:00") == "localhost/a@sha256:00"
    assert normalized_image("tjc.local/kueue/kueue:v1") == "tjc.local/kueue/kueue:v1"


def test_a_cluster_runs_an_image_it_pulls_holds_or_only_simulates() -> None:
    node = _node("a", "2")
    node["status"]["images"] = [{"names": ["registry.k8s.io/pause:3.10", "docker.io/x@sha256:1"]}]
    kube = _Listing([node], [])

    def handle(supply: str) -> ClusterHandle:
        found = ClusterHandle("p", Path("k"), {}, image_supply=supply)
        found._kube = kube  # type: ignore[assignment]
        return found

    assert handle(IMAGES_PRELOADED).can_run_image("registry.k8s.io/pause:3.10")
    assert not handle(IMAGES_PRELOADED).can_run_image("pytorch/pytorch:2.13")
    assert handle(IMAGES_PULLED).can_run_image("pytorch/pytorch:2.13")
    assert handle(IMAGES_SIMULATED).can_run_image("pytorch/pytorch:2.13")
    assert ClusterHandle.from_json(handle(IMAGES_PRELOADED).to_json()).image_supply == "preloaded"
