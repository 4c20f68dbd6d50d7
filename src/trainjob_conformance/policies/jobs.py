"""Jobs of a TrainJob's JobSet, and their pod templates."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.kinds import JOB
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL, TrainJobView

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def jobs_of(view: TrainJobView, trainjob: str) -> list[dict[str, Any]]:
    return view.of_trainjob(JOB, trainjob)


def wait_jobs(view: TrainJobView, trainjob: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | NotYet:
        jobs = jobs_of(view, trainjob)
        return jobs if len(jobs) == count else NotYet(f"{len(jobs)} of {count} Jobs")

    return view.wait(f"{count} Jobs of TrainJob {trainjob}", probe)


def _pod_count(job: dict[str, Any], field: str) -> int:
    return int((job.get("status") or {}).get(field) or 0)


def wait_jobs_count_terminating(
    view: TrainJobView, trainjob: str, pods: int
) -> list[dict[str, Any]]:
    """The Job controller counts `pods` Pods as terminating and none as active."""
    # kubectl prints nothing for an active count of 0 (the field is omitted).
    view.record_wait(
        f"the Jobs of {trainjob} to count {pods} terminating Pods and none active",
        JOB,
        selector=f"{JOBSET_NAME_LABEL}={trainjob}",
        jsonpath="active={.items[*].status.active} terminating={.items[*].status.terminating}",
        equals=f"active= terminating={pods}",
    )

    def probe() -> list[dict[str, Any]] | NotYet:
        jobs = jobs_of(view, trainjob)
        active = sum(_pod_count(job, "active") for job in jobs)
        terminating = sum(_pod_count(job, "terminating") for job in jobs)
        if active == 0 and terminating == pods:
            return jobs
        return NotYet(f"the Jobs count {active} active and {terminating} terminating Pods")

    return view.wait(f"the Jobs of {trainjob} to count {pods} terminating Pods", probe)


def wait_job_gate(view: TrainJobView, trainjob: str, gate: str) -> list[dict[str, Any]]:
    """A Job of the TrainJob whose pod template carries `gate` (JobSet created it)."""
    view.record_wait(
        f"a Job of {trainjob} to carry the gate {gate}",
        JOB,
        selector=f"{JOBSET_NAME_LABEL}={trainjob}",
        jsonpath="{.items[*].spec.template.spec.schedulingGates[*].name}",
        contains=gate,
    )

    def probe() -> list[dict[str, Any]] | NotYet:
        jobs = jobs_of(view, trainjob)
        carrying = [j for j in jobs if gate in _gates(job_pod_spec(j))]
        return carrying or NotYet(f"{len(jobs)} Jobs, none carrying {gate}")

    return view.wait(f"a Job of {trainjob} to carry {gate}", probe)


def _gates(pod_spec: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in pod_spec.get("schedulingGates") or []]


def job_pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return dict(job["spec"]["template"].get("spec") or {})


def replicated_job_of(obj: dict[str, Any]) -> str | None:
    """The replicated job a Job or Pod belongs to."""
    return (obj["metadata"].get("labels") or {}).get(REPLICATED_JOB_LABEL)
