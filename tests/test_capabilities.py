"""Capabilities read from node labels: topology levels, domains, a splitting label."""

from __future__ import annotations

from trainjob_conformance.cluster.capabilities import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    Node,
    discover_topology,
    splitting_label,
)
from trainjob_conformance.cluster.embedded.nodes import BLOCK_LABEL, RACK_LABEL, node_manifests


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
