"""Jobs of a TrainJob's JobSet, and their pod templates."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.kinds import JOB
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import TrainJobView

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def jobs_of(view: TrainJobView, trainjob: str) -> list[dict[str, Any]]:
    return view.of_trainjob(JOB, trainjob)


def wait_jobs(view: TrainJobView, trainjob: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | NotYet:
        jobs = jobs_of(view, trainjob)
        return jobs if len(jobs) == count else NotYet(f"{len(jobs)} of {count} Jobs")

    return view.wait(f"{count} Jobs of TrainJob {trainjob}", probe)


def job_pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return dict(job["spec"]["template"].get("spec") or {})


def replicated_job_of(obj: dict[str, Any]) -> str | None:
    """The replicated job a Job or Pod belongs to."""
    return (obj["metadata"].get("labels") or {}).get(REPLICATED_JOB_LABEL)
