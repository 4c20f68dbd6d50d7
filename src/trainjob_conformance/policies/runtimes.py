"""Runtimes a policy creates: a release's ClusterTrainingRuntime as the cluster's
nodes can run it, and namespaced variants of the harness's own runtime.

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


# The label that makes a replicated job the Trainer's trainer (or an initializer).
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"


def namespaced(cluster_runtime: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A ClusterTrainingRuntime's manifest as a TrainingRuntime in `namespace`: a
    webhook narrowed to skip the test's namespaces (a break) then lets it through,
    which it never does for a cluster-scoped object."""
    runtime = copy.deepcopy(cluster_runtime)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = namespace
    return runtime


def _job(runtime: dict[str, Any], name: str) -> dict[str, Any]:
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return next(job for job in jobs if job["name"] == name)


def pod_template(runtime: dict[str, Any], job: str) -> dict[str, Any]:
    """The pod template of the runtime's replicated job `job`, in place (to edit it)."""
    return _job(runtime, job)["template"]["spec"]["template"]


def without_node_container(runtime: dict[str, Any], renamed: str = "main") -> dict[str, Any]:
    """The runtime with its trainer job's `node` container renamed (the only change)."""
    changed = copy.deepcopy(runtime)
    trainer = next(
        job
        for job in changed["spec"]["template"]["spec"]["replicatedJobs"]
        if (job["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL)
        == "trainer"
    )
    for container in trainer["template"]["spec"]["template"]["spec"]["containers"]:
        if container["name"] == "node":
            container["name"] = renamed
    return changed


def with_depends_on(runtime: dict[str, Any], job: str, on: list[str]) -> dict[str, Any]:
    """The runtime with `job` depending on each job of `on` reaching Complete."""
    changed = copy.deepcopy(runtime)
    _job(changed, job)["dependsOn"] = [{"name": name, "status": "Complete"} for name in on]
    return changed


def with_first(runtime: dict[str, Any], job: str) -> dict[str, Any]:
    """The runtime with `job` moved to the front of its replicated jobs: JobSet lets a
    job depend only on jobs listed before it."""
    changed = copy.deepcopy(runtime)
    jobs = changed["spec"]["template"]["spec"]["replicatedJobs"]
    jobs.insert(0, jobs.pop(jobs.index(_job(changed, job))))
    return changed


def depends_on(runtime: dict[str, Any], job: str) -> list[str]:
    """The jobs `job` depends on, as stored."""
    return [entry["name"] for entry in _job(runtime, job).get("dependsOn") or []]
