"""Kueue Workloads of TrainJobs."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.cluster.labels import TEST_NODE_LABEL
from trainjob_conformance.kube.conflicts import until_no_conflict
from trainjob_conformance.kube.kinds import (
    ADMISSION_CHECK,
    NAMESPACE,
    RESOURCE_FLAVOR,
    TRAINJOB,
    WORKLOAD,
)
from trainjob_conformance.kube.namespaces import TEST_NAMESPACE_LABEL
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import DEFAULT_TIMEOUT, TrainJobView, condition

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
# The controller of the admission checks a test decides itself: no controller has it.
TEST_CHECK_CONTROLLER = "trainjob-conformance.kubeflow.org/test"


def owned_by(workload: dict[str, Any], trainjob: str) -> bool:
    """Whether the named TrainJob owns this Workload."""
    return any(
        ref.get("kind") == "TrainJob" and ref.get("name") == trainjob
        for ref in workload["metadata"].get("ownerReferences") or []
    )


def workloads_of(view: TrainJobView, trainjob: str) -> list[dict[str, Any]]:
    """Kueue Workloads whose owner is the named TrainJob."""
    return [workload for workload in view.list(WORKLOAD) if owned_by(workload, trainjob)]


def condition_path(trainjob: str, condition_type: str, field: str = "status") -> str:
    """Where kubectl finds a field (status, message) of a condition of the TrainJob's
    Workload: Kueue names the Workload after the TrainJob's uid, so a replay finds it by
    its owner."""
    return (
        f'{{.items[?(@.metadata.ownerReferences[0].name=="{trainjob}")]'
        f'.status.conditions[?(@.type=="{condition_type}")].{field}}}'
    )


def wait_workload(view: TrainJobView, trainjob: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | NotYet:
        found = workloads_of(view, trainjob)
        return found[0] if len(found) == 1 else NotYet(f"{len(found)} Workloads")

    return view.wait(f"the Workload of TrainJob {trainjob}", probe)


def quota_words(workload: dict[str, Any]) -> str:
    """What Kueue says of a Workload's quota: its QuotaReserved message (why it has none)."""
    reserved = condition(workload, "QuotaReserved")
    return reserved.get("message") or reserved.get("reason") or "no QuotaReserved condition"


def wait_admitted(
    view: TrainJobView, trainjob: str, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """The TrainJob's Workload once Admitted; until then the wait says why Kueue has not
    admitted it (its QuotaReserved message), which is what a timeout prints first."""
    view.record_wait(
        f"the Workload of TrainJob {trainjob} to be Admitted",
        WORKLOAD,
        jsonpath=condition_path(trainjob, "Admitted"),
        equals="True",
    )

    def probe() -> dict[str, Any] | NotYet:
        found = workloads_of(view, trainjob)
        if len(found) != 1:
            return NotYet(f"{len(found)} Workloads")
        if condition(found[0], "Admitted").get("status") == "True":
            return found[0]
        return NotYet(f"not Admitted: {quota_words(found[0])}")

    with view.unrecorded():
        return view.wait(f"the Workload of TrainJob {trainjob} to be Admitted", probe, timeout)


def wait_pending_for_quota(view: TrainJobView, trainjob: str) -> dict[str, Any]:
    """The TrainJob's Workload, once Kueue says it has no quota for it (QuotaReserved False)."""

    def probe() -> dict[str, Any] | NotYet:
        found = workloads_of(view, trainjob)
        if not found:
            return NotYet("no Workload")
        reserved = condition(found[0], "QuotaReserved")
        if reserved.get("status") == "True":
            # Decided the other way: say so now rather than time out later.
            raise AssertionError(
                f"Kueue reserved quota for TrainJob {trainjob}: {reserved.get('message', '')}"
            )
        if reserved.get("status") == "False":
            return found[0]
        return NotYet(f"QuotaReserved: {reserved or 'not reported'}")

    return view.wait(f"the Workload of TrainJob {trainjob} to be pending for quota", probe)


def wait_quota_decided(view: TrainJobView, trainjob: str) -> dict[str, Any]:
    """The TrainJob's Workload once Kueue has said whether it reserves quota for it (its
    QuotaReserved condition, True or False)."""

    def probe() -> dict[str, Any] | NotYet:
        found = workloads_of(view, trainjob)
        if len(found) != 1:
            return NotYet(f"{len(found)} Workloads")
        status = condition(found[0], "QuotaReserved").get("status")
        return found[0] if status in ("True", "False") else NotYet("QuotaReserved not reported")

    what = f"Kueue to decide on quota for TrainJob {trainjob}"
    view.record_wait(
        what, WORKLOAD, jsonpath=condition_path(trainjob, "QuotaReserved"), nonempty=True
    )
    with view.unrecorded():
        return view.wait(what, probe)


def wait_finished(view: TrainJobView, trainjob: str, timeout: float) -> tuple[dict[str, Any], dict]:
    """The TrainJob, and its Workload's Finished condition, once Kueue has finished the Workload.

    Kueue finishes a Workload once its job has finished; for MultiKueue, once
    the worker's Workload has, after copying the worker's job status to the
    manager's job. The Workload is read before the TrainJob, so a TrainJob
    read after a Finished Workload holds whatever status Kueue copied.
    """

    def probe() -> tuple[dict[str, Any], dict] | NotYet:
        found = workloads_of(view, trainjob)
        done = [c for w in found if (c := condition(w, "Finished")).get("status") == "True"]
        if not done:
            return NotYet(f"{len(found)} Workloads, none Finished")
        return view.get(TRAINJOB, trainjob), done[0]

    view.record_wait(
        f"the Workload of TrainJob {trainjob} to be Finished",
        WORKLOAD,
        jsonpath=condition_path(trainjob, "Finished"),
        equals="True",
    )
    with view.unrecorded():
        return view.wait(f"the Workload of TrainJob {trainjob} to be Finished", probe, timeout)


def topology_holders_elsewhere(view: TrainJobView) -> list[str]:
    """Workloads in other tests' namespaces (terminating ones too) that Kueue admitted
    with a topology assignment, as namespace/name: what Kueue counts against the nodes
    of every topology-aware flavor over the same nodes. One placed only on flavors of a
    test's own nodes (policies/nodes.py) holds none of the cluster's."""
    tests = {
        ns["metadata"]["name"]
        for ns in view.kube.list(*NAMESPACE, label_selector=f"{TEST_NAMESPACE_LABEL}=true")
    }
    tests.discard(view.namespace)
    own_nodes_only = {
        flavor["metadata"]["name"]
        for flavor in view.kube.list(*RESOURCE_FLAVOR)
        if TEST_NODE_LABEL in ((flavor.get("spec") or {}).get("nodeLabels") or {})
    }
    held = []
    for workload in view.kube.list(*WORKLOAD):
        assignments = ((workload.get("status") or {}).get("admission") or {}).get(
            "podSetAssignments"
        ) or []
        placed = [a for a in assignments if a.get("topologyAssignment")]
        flavors = {f for a in placed for f in (a.get("flavors") or {}).values()}
        metadata = workload["metadata"]
        if metadata["namespace"] in tests and placed and not flavors <= own_nodes_only:
            held.append(f"{metadata['namespace']}/{metadata['name']}")
    return sorted(held)


def wait_quota_reserved(
    view: TrainJobView, trainjob: str, checks: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The TrainJob's Workload once Kueue has reserved quota for it and listed a state
    for each of `checks` (its admission checks, which may still be pending)."""

    def probe() -> dict[str, Any] | NotYet:
        found = workloads_of(view, trainjob)
        if len(found) != 1:
            return NotYet(f"{len(found)} Workloads")
        reserved = condition(found[0], "QuotaReserved")
        if reserved.get("status") != "True":
            return NotYet(f"QuotaReserved: {reserved.get('message') or 'absent'}")
        states = check_states(found[0])
        if any(check not in states for check in checks):
            return NotYet(f"quota reserved; admission check states {states}")
        return found[0]

    return view.wait(f"Kueue to reserve quota for TrainJob {trainjob}", probe)


def check_states(workload: dict[str, Any]) -> dict[str, str]:
    """Admission check name -> its state on the Workload."""
    checks = (workload.get("status") or {}).get("admissionChecks") or []
    return {check["name"]: check.get("state", "") for check in checks}


def set_check_state(view: TrainJobView, trainjob: str, check: str, state: str) -> None:
    """Write the state of admission check `check` on the TrainJob's Workload, as the
    check's own controller would (the test plays that controller)."""

    def write() -> None:
        (workload,) = workloads_of(view, trainjob)
        for entry in workload["status"]["admissionChecks"]:
            if entry["name"] == check:
                entry.update(state=state, message=f"set {state} by the test")
        view.kube.replace_status(*WORKLOAD, workload)

    until_no_conflict(write, f"the state of check {check} on TrainJob {trainjob}'s Workload")


def decided_admission_check(view: TrainJobView, name: str) -> str:
    """An AdmissionCheck that only the test decides: Active (so that a ClusterQueue
    naming it is active), and its state on each Workload set by `set_check_state`."""
    view.create(
        {
            "apiVersion": view.kube.concrete(ADMISSION_CHECK.api_version),
            "kind": ADMISSION_CHECK.kind,
            "metadata": {"name": name},
            "spec": {"controllerName": TEST_CHECK_CONTROLLER},
        }
    )

    def activate() -> None:
        # Kueue writes the new check's status too: read afresh for each attempt.
        check = view.kube.get(*ADMISSION_CHECK, name)
        check["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "the test decides this check",
                    "lastTransitionTime": check["metadata"]["creationTimestamp"],
                }
            ]
        }
        view.kube.replace_status(*ADMISSION_CHECK, check)

    until_no_conflict(activate, f"the status of AdmissionCheck {name}")
    return name
