"""What a TrainJob's status says of its JobSet (a policy from upstream's fixes,
docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.kube.kinds import JOBSET, TRAINJOB
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.pods import wait_pods

# The counts JobSet keeps per replicated job, each as the TrainJob's jobsStatus names it.
COUNTS = ("ready", "succeeded", "failed", "active", "suspended")


def _counts_by_job(statuses: list[dict[str, Any]] | None) -> dict[str, dict[str, int]]:
    # An unset count is 0 in both APIs (the Trainer writes each JobSet count as is).
    return {s["name"]: {k: int(s.get(k) or 0) for k in COUNTS} for s in statuses or []}


@pytest.mark.policy("TJ-STATUS-001")
def test_the_trainjob_status_mirrors_the_replicated_jobs_status_of_its_jobset(
    trainjob_view, training_runtime
):
    view = trainjob_view
    runtime = training_runtime(extra_jobs=["aux"])
    view.create_trainjob("mirrored", runtime=runtime, num_nodes=2)
    wait_pods(view, "mirrored", 3)

    # Whatever the Jobs are doing (Pods that run on; Pods a kwok stage completes at
    # once), the TrainJob must come to say what the JobSet says of each job.
    def mirrored() -> dict[str, dict[str, int]] | NotYet:
        jobset = view.get(JOBSET, "mirrored")
        want = _counts_by_job((jobset.get("status") or {}).get("replicatedJobsStatus"))
        if sorted(want) != ["aux", "node"] or not all(sum(c.values()) for c in want.values()):
            return NotYet(f"the JobSet does not count a Job of each replicated job yet: {want}")
        trainjob = view.get(TRAINJOB, "mirrored")
        got = _counts_by_job((trainjob.get("status") or {}).get("jobsStatus"))
        return got if got == want else NotYet(f"TrainJob jobsStatus {got}, JobSet {want}")

    view.wait(
        "status.jobsStatus of TrainJob mirrored to equal its JobSet's replicatedJobsStatus",
        mirrored,
    )
