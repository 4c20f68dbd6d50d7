"""Nodes kwok plays: a Node object that carries kwok's annotation is run by
kwok-controller, which reports it Ready and plays its Pods' lifecycle.

The embedded cluster's own nodes are made this way, and a test may add nodes
of its own whose capacity it chooses (a kubelet's is fixed when it starts).
"""

from __future__ import annotations

from typing import Any

from trainjob_conformance.cluster.capabilities import HOSTNAME_LABEL

# kwokctl starts kwok-controller managing the nodes with this annotation (its
# default `manageNodesWithAnnotationSelector`).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def simulated_node(
    name: str,
    labels: dict[str, str],
    capacity: dict[str, str],
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node kwok plays, with `capacity` as its capacity and allocatable (a Node's
    status is taken on create; kwok's node stage keeps what it finds there)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {**labels, HOSTNAME_LABEL: name},
        },
        "spec": {"taints": list(taints)} if taints else {},
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }
