"""Steps and observations the policies share, in the words of the policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainjob_conformance.cluster.hold import HOLD_ANNOTATION
from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import WORKLOAD
from trainjob_conformance.policies.view import JOBSET, POD, TRAINJOB, TrainJobView, condition

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def rejection_of(request: Callable[[], Any]) -> Rejected:
    """Run a request that the policy says must be refused; fail if it is accepted.

    Only a refusal counts: an unreachable webhook or a server error is the
    stack's failure and propagates as such.
    """
    __tracebackhide__ = True
    try:
        request()
    except Rejected as refused:
        return refused
    raise AssertionError("the request was accepted, but the policy says it must be rejected")


class AdmissionAnswer:
    """Allowed or forbidden, for policies whose verdict differs by release."""

    def __init__(self, verdict: str, detail: str) -> None:
        self.verdict = verdict
        self.detail = detail

    def __repr__(self) -> str:
        return f"{self.verdict}: {self.detail}"


def admission_answer(request: Callable[[], Any]) -> AdmissionAnswer:
    """Send a request and report the verdict; errors other than 403 propagate."""
    try:
        request()
    except Rejected as refused:
        if refused.status != 403:
            raise
        return AdmissionAnswer("forbidden", refused.message)
    return AdmissionAnswer("allowed", "the request was accepted")


def gate_names(pod_spec: dict[str, Any]) -> list[str]:
    return sorted(gate["name"] for gate in pod_spec.get("schedulingGates") or [])


def jobset_pod_spec(jobset: dict[str, Any], replicated_job: str) -> dict[str, Any]:
    for job in jobset["spec"]["replicatedJobs"]:
        if job["name"] == replicated_job:
            return dict(job["template"]["spec"]["template"].get("spec") or {})
    raise AssertionError(
        f"JobSet {jobset['metadata']['name']} has no replicated job {replicated_job}"
    )


def job_pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return dict(job["spec"]["template"].get("spec") or {})


def replicated_job_of(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(REPLICATED_JOB_LABEL)


def is_scheduling_gated(pod: dict[str, Any]) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return bool(
        scheduled
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "SchedulingGated"
    )


EXAMPLE_GATES = ["example.com/gate-a", "example.com/gate-b"]


def submit_gated(
    view: TrainJobView, name: str, runtime: str, gates: list[str], **values: Any
) -> dict[str, Any]:
    """A TrainJob of two nodes whose trainer job `node` carries `gates`."""
    values.setdefault("num_nodes", 2)
    overrides = [{"target_job": "node", "scheduling_gates": list(gates)}]
    return view.create_trainjob(name, runtime=runtime, pod_overrides=overrides, **values)


def wait_scheduling_gated(view: TrainJobView, trainjob: str, count: int) -> list[dict[str, Any]]:
    """`count` Pods that kube-scheduler reports as SchedulingGated."""

    def probe() -> list[dict[str, Any]] | None:
        pods = view.pods(trainjob)
        gated = len(pods) == count and all(is_scheduling_gated(p) for p in pods)
        return pods if gated else None

    return view.wait(f"{count} Pods of {trainjob} reported SchedulingGated", probe)


def active_by_replicated_job(jobset: dict[str, Any]) -> dict[str, int]:
    statuses = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    return {entry["name"]: int(entry.get("active") or 0) for entry in statuses}


def patch_trainjob(view: TrainJobView, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One merge-patch request on the TrainJob's spec."""
    return view.kube.patch(*TRAINJOB, name=name, namespace=view.namespace, body={"spec": spec})


def patch_pod(view: TrainJobView, name: str, body: dict[str, Any]) -> dict[str, Any]:
    return view.kube.patch(*POD, name=name, namespace=view.namespace, body=body)


def release_held_pods(view: TrainJobView, trainjob: str) -> None:
    """Let the held Pods finish: their container (or the fake node) waits for this."""
    for pod in view.pods(trainjob):
        body = {"metadata": {"annotations": {HOLD_ANNOTATION: None}}}
        patch_pod(view, pod["metadata"]["name"], body)


def wait_running(view: TrainJobView, trainjob: str, count: int) -> list[dict[str, Any]]:
    """`count` Pods Running and the JobSet reporting them active."""

    def pods_running() -> list[dict[str, Any]] | None:
        pods = view.pods(trainjob)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(running) == count and len(pods) == count else None

    pods = view.wait(f"{count} Running Pods of TrainJob {trainjob}", pods_running)

    def jobset_active() -> dict[str, Any] | None:
        jobset = view.get(JOBSET, trainjob)
        return jobset if sum(active_by_replicated_job(jobset).values()) > 0 else None

    view.wait(f"JobSet {trainjob} to report active Jobs", jobset_active)
    return pods


KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


def workloads_of(view: TrainJobView, trainjob: str) -> list[dict[str, Any]]:
    """Kueue Workloads whose owner is the named TrainJob."""
    return [
        workload
        for workload in view.kube.list(*WORKLOAD, namespace=view.namespace)
        if any(
            ref.get("kind") == "TrainJob" and ref.get("name") == trainjob
            for ref in workload["metadata"].get("ownerReferences") or []
        )
    ]


def wait_workload(view: TrainJobView, trainjob: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = workloads_of(view, trainjob)
        return found[0] if len(found) == 1 else None

    return view.wait(f"the Workload of TrainJob {trainjob}", probe)


KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"


def kueue_pod_template_patch(
    trainjob: dict[str, Any], replicated_job: str
) -> dict[str, Any] | None:
    """What Kueue injected into a replicated job's pod template, in either field.

    From Trainer v2.2 Kueue owns the runtime patch with manager
    kueue.x-k8s.io/manager; before, it appends podTemplateOverrides entries it
    marks with the kueue.x-k8s.io/podset label. None when there is neither.
    """
    for patch in trainjob["spec"].get("runtimePatches") or []:
        if patch.get("manager") != KUEUE_PATCH_MANAGER:
            continue
        spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job in spec.get("replicatedJobs") or []:
            if job.get("name") == replicated_job:
                return dict(((job.get("template") or {}).get("spec") or {}).get("template") or {})
        return {}
    for override in trainjob["spec"].get("podTemplateOverrides") or []:
        labels = (override.get("metadata") or {}).get("labels") or {}
        targets = [t.get("name") for t in override.get("targetJobs") or []]
        if labels.get(KUEUE_PODSET_LABEL) and replicated_job in targets:
            return {"metadata": override.get("metadata") or {}, "spec": override.get("spec") or {}}
    return None
