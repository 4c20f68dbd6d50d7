"""JobSet observations: the pod template per replicated job, and active Jobs."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import TrainJobView


def wait_jobset(view: TrainJobView, name: str) -> dict[str, Any]:
    """The JobSet the Trainer builds for TrainJob `name` (same name)."""
    view.record_wait(f"JobSet {name}", JOBSET, name=name)
    return view.wait(f"JobSet {name}", lambda: view.find(JOBSET, name) or NotYet("no JobSet"))


def record_no_jobset(view: TrainJobView, trainjob: str, found: dict[str, Any] | None) -> None:
    """Note what a managedBy policy judges: TrainJob `trainjob` has no JobSet (kubectl
    prints nothing for an absent object with --ignore-not-found)."""
    view.record_observation(
        f"the JobSet of TrainJob {trainjob}",
        JOBSET,
        name=trainjob,
        jsonpath="{.metadata.name}",
        expected="",
        observed=str(found["metadata"]["name"]) if found else "",
    )


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


# The replicated jobs a JobSet reports, then those with active Jobs.
_ACTIVE_JSONPATH = (
    "{.status.replicatedJobsStatus[*].name}/{.status.replicatedJobsStatus[?(@.active>0)].name}"
)


def wait_jobset_active(view: TrainJobView, name: str) -> dict[str, Any]:
    view.record_wait(
        f"JobSet {name} to report active Jobs",
        JOBSET,
        name=name,
        jsonpath="{.status.replicatedJobsStatus[?(@.active>0)].name}",
        nonempty=True,
    )

    def probe() -> dict[str, Any] | NotYet:
        jobset = view.get(JOBSET, name)
        active = active_by_replicated_job(jobset)
        return jobset if sum(active.values()) > 0 else NotYet(f"active Jobs: {active}")

    return view.wait(f"JobSet {name} to report active Jobs", probe)


def wait_jobset_idle(view: TrainJobView, name: str) -> dict[str, Any]:
    """The JobSet reports a status for its replicated jobs, and no active Job in any."""
    jobs = [entry["name"] for entry in view.get(JOBSET, name)["spec"]["replicatedJobs"]]
    view.record_wait(
        f"JobSet {name} to report no active Job",
        JOBSET,
        name=name,
        jsonpath=_ACTIVE_JSONPATH,
        equals=" ".join(jobs) + "/",
    )

    def probe() -> dict[str, Any] | NotYet:
        jobset = view.get(JOBSET, name)
        active = active_by_replicated_job(jobset)
        return jobset if active and not any(active.values()) else NotYet(f"active Jobs: {active}")

    return view.wait(f"JobSet {name} to report no active Job", probe)


def wait_jobset_template(
    view: TrainJobView,
    name: str,
    replicated_job: str,
    selector_key: str,
    selector_value: str,
    gates: list[str],
) -> dict[str, Any]:
    """The JobSet's pod template of `replicated_job` selects `selector_key=selector_value`
    and carries exactly `gates` (sorted): an override edit has reached it."""
    template = f'{{.spec.replicatedJobs[?(@.name=="{replicated_job}")].template.spec.template.spec'
    key = selector_key.replace(".", "\\.")
    view.record_wait(
        f"JobSet {name} to select {selector_key}={selector_value} with gates {gates}",
        JOBSET,
        name=name,
        jsonpath=f"{template}.nodeSelector.{key}}}/{template}.schedulingGates[*].name}}",
        equals=f"{selector_value}/{' '.join(gates)}",
    )

    def probe() -> dict[str, Any] | None:
        spec = jobset_pod_spec(view.get(JOBSET, name), replicated_job)
        selector = spec.get("nodeSelector") or {}
        found = sorted(gate["name"] for gate in spec.get("schedulingGates") or [])
        return spec if selector.get(selector_key) == selector_value and found == gates else None

    return view.wait(
        f"JobSet {name} to select {selector_key}={selector_value} with gates {gates}", probe
    )


def plain_jobset(name: str, namespace: str, image: str, replicas: int = 1) -> dict[str, Any]:
    """A suspended JobSet of one replicated job, created by the test itself (not by the
    Trainer): what JobSet's own webhooks judge, with no controller of the harness's
    stack writing to it."""
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]}
    return {
        "apiVersion": JOBSET.api_version,
        "kind": JOBSET.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {"spec": {"template": {"spec": pod_spec}}},
                }
            ],
        },
    }


def delete_jobset(view: TrainJobView, name: str) -> str:
    """Delete a TrainJob's JobSet (its Jobs and Pods go with it); its uid, to tell a
    JobSet created in its place from it."""
    uid = str(view.get(JOBSET, name)["metadata"]["uid"])
    view.kube.delete(*JOBSET, name=name, namespace=view.namespace, propagation_policy="Background")
    return uid


def wait_jobset_replaced(view: TrainJobView, name: str, old_uid: str) -> dict[str, Any]:
    """A JobSet of this name other than the deleted one (`old_uid`)."""

    def probe() -> dict[str, Any] | NotYet:
        found = view.find(JOBSET, name)
        if found is None:
            return NotYet(f"no JobSet {name} since the deletion")
        if found["metadata"]["uid"] == old_uid:
            return NotYet(f"JobSet {name} is still the deleted one (uid {old_uid})")
        return found

    return view.wait(f"JobSet {name} created again", probe)
