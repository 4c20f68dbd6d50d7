"""Policy: schedulingGates set in a TrainJob's pod overrides reach every Pod."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import JOBSET, POD
from trainjob_conformance.policies.history import replay, resource_version, versions_where
from trainjob_conformance.policies.jobs import job_pod_spec, jobs_of, replicated_job_of
from trainjob_conformance.policies.jobsets import jobset_pod_spec
from trainjob_conformance.policies.pods import gate_names, wait_pods, wait_scheduling_gated
from trainjob_conformance.policies.trainjobs import EXAMPLE_GATES as GATES
from trainjob_conformance.policies.trainjobs import submit_gated
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL


@pytest.mark.policy("TJ-GATE-001")
def test_scheduling_gates_propagate_to_jobset_jobs_and_pods(trainjob_view, training_runtime):
    view = trainjob_view
    runtime = training_runtime()
    since = resource_version(view, POD)
    submit_gated(view, "gated", runtime, GATES)

    jobset = view.wait("JobSet gated", lambda: view.find(JOBSET, "gated"))
    assert gate_names(jobset_pod_spec(jobset, "node")) == GATES

    jobs = view.wait("the Job of JobSet gated", lambda: jobs_of(view, "gated") or None)
    assert len(jobs) == 1
    assert gate_names(job_pod_spec(jobs[0])) == GATES

    pods = wait_scheduling_gated(view, "gated", 2)
    for pod in pods:
        name = pod["metadata"]["name"]
        assert gate_names(pod["spec"]) == GATES, name
        assert not pod["spec"].get("nodeName"), f"{name} was bound despite its gates"
        assert pod["status"]["phase"] == "Pending", name
    # Over the whole window: each Pod carried the gates from its first stored
    # version, and no version of it was ever bound.
    history = replay(view, POD, since, label_selector=f"{JOBSET_NAME_LABEL}=gated")
    created = [e for e in history if e["type"] == "ADDED"]
    assert len(created) == 2, f"{len(created)} Pods were created, not 2"
    ungated = versions_where(
        created, f"created without {GATES}", lambda pod: gate_names(pod["spec"]) != GATES
    )
    assert ungated == [], f"Pods were created without their gates: {ungated}"
    bound = versions_where(history, "bound to a node", lambda pod: pod["spec"].get("nodeName"))
    assert bound == [], f"Pods were bound despite their gates: {bound}"


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
        lambda: jobs if len(jobs := jobs_of(view, "targeted")) == 2 else None,
    )
    by_job = {replicated_job_of(job): job_pod_spec(job) for job in jobs}
    assert gate_names(by_job["node"]) == GATES
    assert gate_names(by_job["aux"]) == []

    pods = wait_pods(view, "targeted", 3)
    for pod in pods:
        expected = GATES if replicated_job_of(pod) == "node" else []
        assert gate_names(pod["spec"]) == expected, pod["metadata"]["name"]
