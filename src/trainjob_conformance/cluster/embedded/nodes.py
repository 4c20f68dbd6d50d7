"""The fake nodes of an embedded cluster, with a topology Kueue can use.

By default they carry only the labels a cloud node has (hostname, zone,
topology block and rack, instance type, os, arch), so that the policies prove
they do not lean on anything kwok-specific; `kwok` mode adds `type: kwok`,
the label kwok's own examples put on fake nodes. kwok-controller manages a
node by its annotation, which stays in both modes.
"""

from __future__ import annotations

from typing import Any

from trainjob_conformance.cluster.simulated_nodes import simulated_node

ZONE_LABEL = "topology.kubernetes.io/zone"
BLOCK_LABEL = "cloud.provider.com/topology-block"
RACK_LABEL = "cloud.provider.com/topology-rack"

# block -> racks -> nodes per rack: 2 blocks x 2 racks x 2 nodes.
_LAYOUT = {"block-a": ("rack-a1", "rack-a2"), "block-b": ("rack-b1", "rack-b2")}
_NODES_PER_RACK = 2
NODE_CPU = "8"
NODE_MEMORY = "32Gi"


NODE_LABEL_MODES = ("cloud", "kwok")


def node_manifests(mode: str = "cloud") -> list[dict[str, Any]]:
    nodes = []
    for block, racks in _LAYOUT.items():
        for rack in racks:
            for index in range(_NODES_PER_RACK):
                name = f"node-{rack.removeprefix('rack-')}-{index}"
                labels = {"type": "kwok"} if mode == "kwok" else {}
                labels |= {
                    ZONE_LABEL: "zone-1",
                    BLOCK_LABEL: block,
                    RACK_LABEL: rack,
                    "node.kubernetes.io/instance-type": "standard-8cpu-32gi",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                }
                capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110"}
                nodes.append(simulated_node(name, labels, capacity))
    return nodes
