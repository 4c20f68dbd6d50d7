"""Policy: schedulingGates set in a TrainJob's pod overrides reach every Pod."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.policies.steps import (
    EXAMPLE_GATES as GATES,
)
from trainjob_conformance.policies.steps import (
    gate_names,
    job_pod_spec,
    jobset_pod_spec,
    replicated_job_of,
    submit_gated,
    wait_scheduling_gated,
)


@pytest.mark.policy("TJ-GATE-001")
def test_scheduling_gates_propagate_to_jobset_jobs_and_pods(trainjob_view, training_runtime):
    view = trainjob_view
    runtime = training_runtime()
    submit_gated(view, "gated", runtime, GATES)

    jobset = view.wait("JobSet gated", lambda: view.find(JOBSET, "gated"))
    assert gate_names(jobset_pod_spec(jobset, "node")) == GATES

    jobs = view.wait("the Job of JobSet gated", lambda: view.jobs("gated") or None)
    assert len(jobs) == 1
    assert gate_names(job_pod_spec(jobs[0])) == GATES

    pods = wait_scheduling_gated(view, "gated", 2)
    for pod in pods:
        name = pod["metadata"]["name"]
        assert gate_names(pod["spec"]) == GATES, name
        assert not pod["spec"].get("nodeName"), f"{name} was bound despite its gates"
        assert pod["status"]["phase"] == "Pending", name


@pytest.mark.policy("TJ-GATE-002")
def test_gates_targeted_at_one_replicated_job_do_not_leak_into_another(
    trainjob_view, training_runtime
):
    view = trainjob_view
    runtime = training_runtime(extra_jobs=["aux"])
    submit_gated(view, "targeted", runtime, GATES)

    jobset = view.wait("JobSet targeted", lambda: view.find(JOBSET, "targeted"))
    assert gate_names(jobset_pod_spec(jobset, "node")) == GATES
    assert gate_names(jobset_pod_spec(jobset, "aux")) == []

    jobs = view.wait(
        "Jobs of both replicated jobs",
        lambda: jobs if len(jobs := view.jobs("targeted")) == 2 else None,
    )
    by_job = {replicated_job_of(job): job_pod_spec(job) for job in jobs}
    assert gate_names(by_job["node"]) == GATES
    assert gate_names(by_job["aux"]) == []

    pods = view.wait_for_pods("targeted", 3)
    for pod in pods:
        expected = GATES if replicated_job_of(pod) == "node" else []
        assert gate_names(pod["spec"]) == expected, pod["metadata"]["name"]
