"""The TrainJobs in flight when the upgrade starts, created on the old release and
brought to the states the policies care about: suspended with overrides, running
with gated Pods, admitted and holding quota, queued for it, and managed by
another controller; and where the training-operator runs, a PyTorchJob managed by
MultiKueue, which it must leave alone."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import LOCAL_QUEUE, PYTORCHJOB, TRAINJOB, Kind
from trainjob_conformance.policies.jobsets import wait_jobset_template
from trainjob_conformance.policies.pods import wait_running, wait_scheduling_gated
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.policies.workloads import wait_admitted, wait_pending_for_quota
from trainjob_conformance.upgrade.record import (
    ADMITTED,
    GATED,
    MANAGED,
    MANAGED_PYTORCHJOB,
    QUEUED,
    SUSPENDED,
    InFlightObject,
)

# A nodeSelector no node needs to carry: what the suspended TrainJob's overrides set.
PLACEMENT = "trainjob-conformance.kubeflow.org/placement"
UPGRADE_GATE = "example.com/upgrade"
# Holds the running TrainJob's Pods unscheduled, so they exist for the whole upgrade.
HOLD_GATE = "example.com/upgrade-hold"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
QUEUE = "queue"
# The queue's quota is exactly one admitted TrainJob's: one Pod of this much CPU.
POD_CPU = "250m"
SUSPENDED_OVERRIDES = [
    {
        "target_job": "node",
        "node_selector": {PLACEMENT: "upgrade"},
        "scheduling_gates": [UPGRADE_GATE],
    }
]


def create_runtime(view: TrainJobView, name: str) -> str:
    """A held runtime (its Pods run until released), seen by both webhooks before use."""
    view.create(view.templates.render_one("clustertrainingruntime", name=name, hold=True))
    probe = view.trainjob_manifest("runtime-probe", runtime=name, queue_name="runtime-probe")

    def seen() -> bool:
        try:
            view.kube.create(probe, dry_run=True)
        except Rejected as refused:
            if "must be created before" in refused.message or "not found" in refused.message:
                return False
            raise
        return True

    view.wait(f"the Trainer to see ClusterTrainingRuntime {name}", seen, timeout=30)
    return name


def create_queue(view: TrainJobView, name: str) -> str:
    """A LocalQueue backed by a ClusterQueue whose CPU quota fits one Pod of POD_CPU."""
    render = view.templates.render_one
    view.create(render("resourceflavor", name=name))
    view.create(
        render(
            "clusterqueue",
            name=name,
            namespace=view.namespace,
            flavor=name,
            cpu=POD_CPU,
            memory="1Gi",
        )
    )
    view.create(render("localqueue", name=QUEUE, namespace=view.namespace, cluster_queue=name))
    view.wait_for_condition(LOCAL_QUEUE, QUEUE, "Active")
    return name


def _entry(
    view: TrainJobView,
    role: str,
    gates: list[str],
    pods: dict[str, str] | None = None,
    kind: Kind = TRAINJOB,
) -> InFlightObject:
    stored = view.get(kind, role)
    return InFlightObject(
        role=role,
        kind=kind.kind,
        name=role,
        namespace=view.namespace,
        spec=stored["spec"],
        uid=stored["metadata"]["uid"],
        pods=pods or {},
        gates=gates,
    )


def _pod_uids(pods: list[dict[str, Any]]) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in pods}


def seed_suspended_objects(view: TrainJobView, runtime: str) -> dict[str, InFlightObject]:
    """In a namespace Kueue does not manage: a suspended TrainJob with overrides, and one
    managed by MultiKueue, which the Trainer alone decides about."""
    view.create_trainjob(
        SUSPENDED, runtime=runtime, num_nodes=2, suspend=True, pod_overrides=SUSPENDED_OVERRIDES
    )
    wait_jobset_template(view, SUSPENDED, "node", PLACEMENT, "upgrade", [UPGRADE_GATE])
    view.create_trainjob(MANAGED, runtime=runtime, managed_by=MULTIKUEUE)
    return {
        SUSPENDED: _entry(view, SUSPENDED, [UPGRADE_GATE]),
        MANAGED: _entry(view, MANAGED, []),
    }


def seed_running_objects(view: TrainJobView, runtime: str) -> dict[str, InFlightObject]:
    """In a namespace of its own, Kueue not managing it: a running TrainJob whose two
    Pods exist, held unscheduled by a gate of the harness's own."""
    view.create_trainjob(
        GATED,
        runtime=runtime,
        num_nodes=2,
        pod_overrides=[{"target_job": "node", "scheduling_gates": [HOLD_GATE]}],
    )
    gated_pods = wait_scheduling_gated(view, GATED, 2)
    return {GATED: _entry(view, GATED, [HOLD_GATE], _pod_uids(gated_pods))}


def seed_kueue_objects(view: TrainJobView, runtime: str) -> dict[str, InFlightObject]:
    """In a namespace Kueue manages: one TrainJob admitted and running on the whole
    quota, one queued behind it."""
    resources = {"requests": {"cpu": POD_CPU, "memory": "256Mi"}}
    view.create_trainjob(ADMITTED, runtime=runtime, queue_name=QUEUE, resources_per_node=resources)
    wait_admitted(view, ADMITTED)
    running = wait_running(view, ADMITTED, 1)
    view.create_trainjob(QUEUED, runtime=runtime, queue_name=QUEUE, resources_per_node=resources)
    wait_pending_for_quota(view, QUEUED)
    return {
        ADMITTED: _entry(view, ADMITTED, [], _pod_uids(running)),
        QUEUED: _entry(view, QUEUED, []),
    }


def seed_pytorchjob(view: TrainJobView) -> dict[str, InFlightObject]:
    """A PyTorchJob whose runPolicy.managedBy names MultiKueue, which the
    training-operator skips; without a queue name, Kueue leaves it alone too."""
    view.create(
        view.render(
            "pytorchjob", name=MANAGED_PYTORCHJOB, namespace=view.namespace, managed_by=MULTIKUEUE
        )
    )
    return {MANAGED_PYTORCHJOB: _entry(view, MANAGED_PYTORCHJOB, [], kind=PYTORCHJOB)}
