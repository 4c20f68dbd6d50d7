"""The stand-in breaks of `upgrade --prove`: each makes the write a faulty upgrade
would make to the objects in flight (fixtures/breaks.yaml, kind stand-in)."""

from __future__ import annotations

from collections.abc import Callable

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.kinds import CLUSTER_QUEUE, POD, PYTORCHJOB, TRAINJOB, WORKLOAD
from trainjob_conformance.upgrade.judging import owner_of
from trainjob_conformance.upgrade.record import (
    ADMITTED,
    GATED,
    MANAGED_PYTORCHJOB,
    SUSPENDED,
    UpgradeRecord,
)


def strip_suspended_overrides(kube: Kube, record: UpgradeRecord) -> str:
    entry = record.objects[SUSPENDED]
    stored = kube.get(*TRAINJOB, entry.name, entry.namespace)
    fields = [
        field
        for field in entry.spec
        if field in stored["spec"] and field.endswith(("Overrides", "Patches"))
    ]
    if not fields:
        raise ConformanceError(f"TrainJob {entry.name} holds no override field to strip")
    kube.patch(
        *TRAINJOB,
        entry.name,
        [{"op": "remove", "path": f"/spec/{field}"} for field in fields],
        entry.namespace,
        content_type="application/json-patch+json",
    )
    return f"removed spec.{', spec.'.join(fields)} of TrainJob {entry.name}"


def delete_running_pod(kube: Kube, record: UpgradeRecord) -> str:
    entry = record.objects[GATED]
    name = sorted(entry.pods)[0]
    kube.delete(*POD, name, entry.namespace)
    return f"deleted Pod {name} of TrainJob {entry.name}"


def delete_admitted_workload(kube: Kube, record: UpgradeRecord) -> str:
    entry = record.objects[ADMITTED]
    owned = [w for w in kube.list(*WORKLOAD, namespace=entry.namespace) if owner_of(w) == ADMITTED]
    if not owned:
        raise ConformanceError(f"TrainJob {entry.name} has no Workload to delete")
    name = owned[0]["metadata"]["name"]
    kube.delete(*WORKLOAD, name, entry.namespace)
    return f"deleted Workload {name} of TrainJob {entry.name}"


def hand_pytorchjob_to_the_operator(kube: Kube, record: UpgradeRecord) -> str:
    """What a migration that reset runPolicy.managedBy would do: the training-operator's."""
    entry = record.objects.get(MANAGED_PYTORCHJOB)
    if entry is None:
        raise ConformanceError("no PyTorchJob is in flight: the training-operator does not run")
    owner = "kubeflow.org/training-operator"
    kube.patch(
        *PYTORCHJOB, entry.name, {"spec": {"runPolicy": {"managedBy": owner}}}, entry.namespace
    )
    return f"set runPolicy.managedBy of PyTorchJob {entry.name} to {owner}"


def hold_cluster_queue(kube: Kube, record: UpgradeRecord) -> str:
    kube.patch(*CLUSTER_QUEUE, record.cluster_queue, {"spec": {"stopPolicy": "Hold"}})
    return f"ClusterQueue {record.cluster_queue} set to stopPolicy Hold"


ACTIONS: dict[str, Callable[[Kube, UpgradeRecord], str]] = {
    "strip-suspended-overrides": strip_suspended_overrides,
    "delete-running-pod": delete_running_pod,
    "delete-admitted-workload": delete_admitted_workload,
    "hold-cluster-queue": hold_cluster_queue,
    "hand-pytorchjob-to-the-operator": hand_pytorchjob_to_the_operator,
}


def act(action: str, kube: Kube, record: UpgradeRecord) -> str:
    if action not in ACTIONS:
        raise ConformanceError(
            f"stand-in action {action!r} is not one the upgrade knows: {', '.join(ACTIONS)}"
        )
    return ACTIONS[action](kube, record)
