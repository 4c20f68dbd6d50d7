"""A release's ClusterTrainingRuntime as the cluster's nodes can run it.

A policy about the Trainer's and JobSet's wiring (a runtime becomes a JobSet,
Jobs and Pods that run and succeed) needs the runtime's containers to start.
Where the nodes cannot get the release's image (kind without a registry), the
test runs a copy of the runtime read from the cluster: the same spec, with
each container the nodes cannot run given the harness's test image and a
command that exits 0. The image is what changes, never the structure the
Trainer builds from.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

# Exits 0 at once: the stand-in's work is to start and succeed.
STAND_IN_COMMAND = ["true"]


def _pod_specs(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    jobs = runtime["spec"]["template"]["spec"].get("replicatedJobs") or []
    return [job["template"]["spec"]["template"]["spec"] for job in jobs]


def images_of(runtime: dict[str, Any]) -> list[str]:
    """Every image the runtime's Pods name, containers and init containers."""
    return [
        container["image"]
        for spec in _pod_specs(runtime)
        for container in [*(spec.get("initContainers") or []), *spec["containers"]]
    ]


def stand_in_copy(
    runtime: dict[str, Any], name: str, image: str, runnable: Callable[[str], bool]
) -> dict[str, Any]:
    """`runtime` renamed `name`, each container whose image is not `runnable` running
    `image` with STAND_IN_COMMAND; labels and annotations kept, server fields dropped."""
    metadata = runtime["metadata"]
    found = copy.deepcopy(runtime)
    found["metadata"] = {
        "name": name,
        "labels": dict(metadata.get("labels") or {}),
        "annotations": dict(metadata.get("annotations") or {}),
    }
    found.pop("status", None)
    for spec in _pod_specs(found):
        for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
            if not runnable(container["image"]):
                container["image"] = image
                container["command"] = list(STAND_IN_COMMAND)
                container.pop("args", None)
    return found
