"""The order in which a JobSet creates its Jobs: a job that depends on another
waits for it (a policy from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from trainjob_conformance.kube.kinds import JOB, JOBSET
from trainjob_conformance.policies.admission import accepted_within
from trainjob_conformance.policies.history import replay, resource_version
from trainjob_conformance.policies.jobs import jobs_of, replicated_job_of
from trainjob_conformance.policies.runtimes import namespaced, with_depends_on, with_first
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL

INITIALIZER = "dataset-initializer"


def _complete(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


@pytest.mark.policy("JS-DEP-001")
def test_no_node_job_exists_until_the_dataset_initializer_job_has_succeeded(trainjob_view):
    view = trainjob_view
    rendered = view.render(
        "clustertrainingruntime", name="ordered", initializers={INITIALIZER: {"cpu": "10m"}}
    )
    runtime = with_depends_on(
        with_first(namespaced(rendered, view.namespace), INITIALIZER), "node", [INITIALIZER]
    )
    view.create(runtime)
    since = resource_version(view, JOB)
    manifest = view.trainjob_manifest("ordered", runtime="ordered", runtime_kind="TrainingRuntime")
    accepted_within(
        lambda: view.create(manifest), 30, "the Trainer's webhook sees TrainingRuntime ordered"
    )
    view.wait(
        "the node Job of TrainJob ordered",
        lambda: [j for j in jobs_of(view, "ordered") if replicated_job_of(j) == "node"] or None,
    )

    # The Jobs' stored versions in the order they were stored: the node Job's
    # creation must come after a version of the initializer Job that is Complete.
    history = replay(view, JOB, since, label_selector=f"{JOBSET_NAME_LABEL}=ordered")
    waited, order = created_after(history, "node", INITIALIZER, _complete, "Complete")
    assert waited, f"the node Job was created before the {INITIALIZER} Job was Complete: {order}"


def _ready(job: dict[str, Any]) -> bool:
    """As JobSet counts a Job towards its replicated job's Ready: its ready and
    succeeded Pods at least its parallelism (or its completions, where fewer)."""
    spec, status = job["spec"], job.get("status") or {}
    pods = min(spec.get("parallelism", 1), spec.get("completions") or spec.get("parallelism", 1))
    return status.get("ready", 0) + status.get("succeeded", 0) >= pods


def created_after(
    history: list[dict[str, Any]], job: str, before: str, reached: Callable, state: str
) -> tuple[bool, list[str]]:
    """Whether replicated job `job`'s first Job was stored after every Job of `before`
    had a version that `reached` its `state`, in the order of `history` (a replay of
    the Jobs); and that order, in words, for the failure message."""
    order = [
        f"{e['type']} {replicated_job_of(e['object'])}{f' {state}' if reached(e['object']) else ''}"
        for e in history
    ]
    created = next(
        i
        for i, e in enumerate(history)
        if e["type"] == "ADDED" and replicated_job_of(e["object"]) == job
    )
    latest: dict[str, bool] = {}
    for event in history[:created]:
        found = event["object"]
        if replicated_job_of(found) == before:
            latest[found["metadata"]["name"]] = reached(found)
    return bool(latest) and all(latest.values()), order


@pytest.mark.policy("TJ-MPI-001")
def test_the_launcher_of_the_shipped_deepspeed_runtime_starts_once_its_nodes_are_ready(
    trainjob_view, trainjob_policy, shipped_runtime
):
    view = trainjob_view
    runtime = shipped_runtime("deepspeed_distributed.yaml")
    since = resource_version(view, JOB)
    view.create_trainjob("mpi", runtime=runtime, num_nodes=2)
    view.wait(
        "the launcher Job of TrainJob mpi",
        lambda: [j for j in jobs_of(view, "mpi") if replicated_job_of(j) == "launcher"] or None,
    )
    trainjob_policy.gap_exercised("the launcher Job of TrainJob mpi was created")

    depends = [
        item["name"]
        for job in view.get(JOBSET, "mpi")["spec"]["replicatedJobs"]
        if job["name"] == "launcher"
        for item in job.get("dependsOn") or []
    ]
    # In kubectl's terms (what a reproduction reads): the dependency the launcher waits on.
    view.record_observation(
        "the replicated jobs the launcher of JobSet mpi depends on",
        JOBSET,
        name="mpi",
        jsonpath='{.spec.replicatedJobs[?(@.name=="launcher")].dependsOn[*].name}',
        expected="node",
        observed=" ".join(depends),
    )

    with trainjob_policy.holds():
        # mpirun in the launcher reaches the nodes over SSH, served once they are Ready:
        # the launcher Job's creation must come after a Ready version of each node Job.
        history = replay(view, JOB, since, label_selector=f"{JOBSET_NAME_LABEL}=mpi")
        waited, order = created_after(history, "launcher", "node", _ready, "Ready")
        assert waited, f"the launcher Job was created before the node Jobs were Ready: {order}"
