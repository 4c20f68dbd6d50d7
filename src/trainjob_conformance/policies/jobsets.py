"""JobSet observations: the pod template per replicated job, and active Jobs."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import TrainJobView


def wait_jobset(view: TrainJobView, name: str) -> dict[str, Any]:
    """The JobSet the Trainer builds for TrainJob `name` (same name)."""
    return view.wait(f"JobSet {name}", lambda: view.find(JOBSET, name) or NotYet("no JobSet"))


def jobset_pod_spec(jobset: dict[str, Any], replicated_job: str) -> dict[str, Any]:
    for job in jobset["spec"]["replicatedJobs"]:
        if job["name"] == replicated_job:
            return dict(job["template"]["spec"]["template"].get("spec") or {})
    raise AssertionError(
        f"JobSet {jobset['metadata']['name']} has no replicated job {replicated_job}"
    )


def active_by_replicated_job(jobset: dict[str, Any]) -> dict[str, int]:
    statuses = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    return {entry["name"]: int(entry.get("active") or 0) for entry in statuses}


def wait_jobset_active(view: TrainJobView, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | NotYet:
        jobset = view.get(JOBSET, name)
        active = active_by_replicated_job(jobset)
        return jobset if sum(active.values()) > 0 else NotYet(f"active Jobs: {active}")

    return view.wait(f"JobSet {name} to report active Jobs", probe)


def wait_jobset_idle(view: TrainJobView, name: str) -> dict[str, Any]:
    """The JobSet reports a status for its replicated jobs, and no active Job in any."""

    def probe() -> dict[str, Any] | NotYet:
        jobset = view.get(JOBSET, name)
        active = active_by_replicated_job(jobset)
        return jobset if active and not any(active.values()) else NotYet(f"active Jobs: {active}")

    return view.wait(f"JobSet {name} to report no active Job", probe)
