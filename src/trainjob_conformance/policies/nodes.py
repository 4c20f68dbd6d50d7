"""Nodes a test adds for itself, where the cluster lets it (ClusterHandle.adds_nodes)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from trainjob_conformance.cluster.labels import TEST_NODE_LABEL
from trainjob_conformance.cluster.simulated_nodes import simulated_node
from trainjob_conformance.kube.conflicts import until_no_conflict
from trainjob_conformance.kube.kinds import NODE
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import TrainJobView, condition

# Room for the small Pods the policies run there; the pod count is what a test chooses.
OWN_NODE_CPU = "4"
OWN_NODE_MEMORY = "16Gi"


@dataclass(frozen=True)
class OwnNodes:
    """A test's own nodes: the labels only they carry (a flavor's nodeLabels) and the
    tolerations that let Pods onto them (a flavor's tolerations)."""

    names: tuple[str, ...]
    labels: dict[str, str]
    tolerations: list[dict[str, str]]


def add_own_nodes(view: TrainJobView, count: int, pods: int) -> OwnNodes:
    """`count` nodes with room for `pods` Pods each, deleted when the test ends; once
    every one is Ready."""
    labels = {TEST_NODE_LABEL: view.namespace}
    taint = {"key": TEST_NODE_LABEL, "value": view.namespace, "effect": "NoSchedule"}
    capacity = {"cpu": OWN_NODE_CPU, "memory": OWN_NODE_MEMORY, "pods": str(pods)}
    # A node's name is its hostname label's value (63 characters at most): named by a
    # digest of the namespace, which the label and taint name in full.
    digest = hashlib.sha256(view.namespace.encode()).hexdigest()[:10]
    names = tuple(f"test-node-{digest}-{index}" for index in range(count))
    for name in names:
        view.create(simulated_node(name, labels, capacity, [taint]))

    def ready() -> bool | NotYet:
        waiting = [
            name
            for name in names
            if condition(view.kube.get(*NODE, name), "Ready").get("status") != "True"
        ]
        return not waiting or NotYet(f"not Ready yet: {', '.join(waiting)}")

    view.wait(f"the test's nodes {', '.join(names)} to be Ready", ready)
    toleration = {**taint, "operator": "Equal"}
    return OwnNodes(names, labels, [toleration])


def allocatable_pods(view: TrainJobView, name: str) -> str:
    """The Pods node `name` says it has room for, as stored now."""
    node: dict[str, Any] = view.kube.get(*NODE, name)
    return str(((node.get("status") or {}).get("allocatable") or {}).get("pods", ""))


def set_pod_capacity(view: TrainJobView, name: str, pods: int) -> None:
    """Give the test's node `name` room for `pods` Pods (its capacity and allocatable),
    as a kubelet restarted with another maxPods would report it."""

    def write() -> None:
        node = view.kube.get(*NODE, name)
        for field in ("capacity", "allocatable"):
            node["status"][field]["pods"] = str(pods)
        view.kube.replace_status(*NODE, node)

    until_no_conflict(write, f"the pod capacity of node {name}")
