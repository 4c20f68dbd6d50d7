"""Policy: what was in flight when a component was upgraded is kept, and the rules
that held before still hold (judged after each step of `trainjob-conformance upgrade`).

The upgrade creates the objects on the old release and records them; each test
here reads the stored objects now, and the window's watch from before the first
step to now, for statements that something never happened.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.utils import parse_quantity

from trainjob_conformance.kube.kinds import CLUSTER_QUEUE, JOBSET, PYTORCHJOB, TRAINJOB
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.jobsets import jobset_pod_spec
from trainjob_conformance.policies.pods import gate_names, wait_running
from trainjob_conformance.policies.trainjobs import kueue_pod_template_patch, patch_trainjob
from trainjob_conformance.policies.workloads import wait_admitted
from trainjob_conformance.upgrade.inflight import HOLD_GATE, PLACEMENT, POD_CPU, UPGRADE_GATE
from trainjob_conformance.upgrade.judging import (
    fields_lost,
    first_workload,
    pod_changes,
    runtime_settings,
    workload_changes,
)
from trainjob_conformance.upgrade.record import (
    ADMITTED,
    BEFORE,
    GATED,
    MANAGED,
    MANAGED_PYTORCHJOB,
    QUEUED,
    SETTLED,
    SUSPENDED,
)

pytestmark = pytest.mark.upgrade

# An edit of the overrides: another placement, no gate.
EDIT = {"target_job": "node", "node_selector": {PLACEMENT: "edited"}}
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"


def at(record) -> str:
    """Where the stack is, for an assertion's words."""
    if record.phase == BEFORE:
        return "before the upgrade"
    if record.phase == SETTLED and record.steps_done:
        return f"over the whole window, once the judge after {record.steps_done[-1]} was over"
    return f"after {record.steps_done[-1]}" if record.steps_done else record.phase


@pytest.mark.policy("UP-SUSP-001")
def test_suspended_trainjob_keeps_its_overrides_and_gates(
    upgrade_record, upgrade_view, trainjob_templates, trainjob_policy
):
    entry = upgrade_record.objects[SUSPENDED]
    view = upgrade_view(entry.namespace)
    stored = view.get(TRAINJOB, entry.name)
    assert stored["metadata"]["uid"] == entry.uid, f"{at(upgrade_record)}: TrainJob recreated"
    field_now = trainjob_templates.shape.value
    if upgrade_record.override_field != field_now:
        trainjob_policy.gap_exercised(
            f"created with spec.{upgrade_record.override_field}; the Trainer now takes "
            f"spec.{field_now}"
        )

    with trainjob_policy.holds():
        lost = fields_lost(entry.spec, stored["spec"])
        assert lost == [], f"{at(upgrade_record)}: the stored TrainJob lost {lost}"
        assert stored["spec"].get("suspend") is True, f"{at(upgrade_record)}: no longer suspended"
        spec = jobset_pod_spec(view.get(JOBSET, entry.name), "node")
        assert UPGRADE_GATE in gate_names(spec), (
            f"{at(upgrade_record)}: JobSet {entry.name} no longer carries {UPGRADE_GATE}: "
            f"{gate_names(spec)}"
        )
        assert (spec.get("nodeSelector") or {}).get(PLACEMENT) == "upgrade", spec.get(
            "nodeSelector"
        )


@pytest.mark.policy("UP-GATE-001")
def test_pods_that_existed_gain_no_gate_during_the_upgrade(upgrade_record, upgrade_view):
    entry = upgrade_record.objects[GATED]
    events = upgrade_record.window_events("running-pods")

    found = pod_changes(events, entry.pods, upgrade_record.window_started)

    assert found == [], f"{at(upgrade_record)}: " + "; ".join(found)
    view = upgrade_view(entry.namespace)
    for name, uid in entry.pods.items():
        pod = view.kube.get("v1", "Pod", name, entry.namespace)
        assert pod["metadata"]["uid"] == uid, f"{at(upgrade_record)}: Pod {name} recreated"
        assert HOLD_GATE in gate_names(pod["spec"]), (
            f"{at(upgrade_record)}: {name} lost {HOLD_GATE}"
        )


@pytest.mark.policy("UP-EDIT-001")
def test_running_trainjob_still_rejects_an_override_edit(
    upgrade_record, upgrade_view, trainjob_templates, trainjob_policy
):
    entry = upgrade_record.objects[GATED]
    view = upgrade_view(entry.namespace)

    refused = rejection_of(
        lambda: patch_trainjob(
            view, entry.name, trainjob_templates.override_fields([EDIT]), dry_run=True
        )
    )

    assert refused.status == 403, f"{at(upgrade_record)}: {refused}"
    assert trainjob_policy.expected("forbidden_message") in refused.message, refused


@pytest.mark.policy("UP-EDIT-002")
def test_suspended_trainjob_still_accepts_an_override_edit(
    upgrade_record, upgrade_view, trainjob_templates
):
    entry = upgrade_record.objects[SUSPENDED]
    view = upgrade_view(entry.namespace)

    # Judged, not stored: the suspended TrainJob keeps its overrides for the next step.
    edited = patch_trainjob(
        view, entry.name, trainjob_templates.override_fields([EDIT]), dry_run=True
    )

    for field in trainjob_templates.override_fields([EDIT]):
        assert f'"{PLACEMENT}": "edited"' in json.dumps(edited["spec"].get(field)), (
            f"{at(upgrade_record)}: the edit was accepted but {field} does not carry it: "
            f"{edited['spec'].get(field)}"
        )


@pytest.mark.policy("UP-MB-001")
def test_managed_by_is_still_immutable(upgrade_record, upgrade_view):
    entry = upgrade_record.objects[MANAGED]
    view = upgrade_view(entry.namespace)

    refused = rejection_of(
        lambda: patch_trainjob(view, entry.name, {"managedBy": TRAINER_CONTROLLER}, dry_run=True)
    )

    assert refused.status == 422, f"{at(upgrade_record)}: {refused}"
    assert "spec.managedBy" in refused.message and "immutable" in refused.message, refused
    stored = view.get(TRAINJOB, entry.name)
    assert stored["spec"]["managedBy"] == entry.spec["managedBy"], stored["spec"]


PYTORCHJOB_NAME_LABEL = "training.kubeflow.org/job-name"


@pytest.mark.policy("UP-MB-002")
def test_a_multikueue_pytorchjob_stays_unreconciled(upgrade_record, upgrade_view):
    entry = upgrade_record.objects.get(MANAGED_PYTORCHJOB)
    if entry is None:
        pytest.skip(
            "no PyTorchJob was in flight: the stack before the upgrade ran no training-operator"
        )
    view = upgrade_view(entry.namespace)
    stored = view.get(PYTORCHJOB, entry.name)
    assert stored["metadata"]["uid"] == entry.uid, f"{at(upgrade_record)}: PyTorchJob recreated"
    managed_by = stored["spec"].get("runPolicy", {}).get("managedBy")
    assert managed_by == entry.spec["runPolicy"]["managedBy"], (
        f"{at(upgrade_record)}: runPolicy.managedBy is now {managed_by!r}"
    )
    # Over the whole window, not only now: Pods made and deleted again leave no trace.
    made = [
        f"{e['type']} Pod {e['object']['metadata']['name']}"
        for e in upgrade_record.window_events("kueue-pods")
        if (e["object"]["metadata"].get("labels") or {}).get(PYTORCHJOB_NAME_LABEL) == entry.name
    ]
    assert made == [], (
        f"{at(upgrade_record)}: the training-operator made Pods of {entry.name}: {made}"
    )
    written = [
        f"{e['type']} at resourceVersion {e['object']['metadata']['resourceVersion']}: "
        f"{(e['object'].get('status') or {}).get('conditions')}"
        for e in upgrade_record.window_events("pytorchjobs")
        if e["object"]["metadata"]["name"] == entry.name
        and (e["object"].get("status") or {}).get("conditions")
    ]
    assert written == [], f"{at(upgrade_record)}: the training-operator wrote status: {written}"


def cpu_reserved(cluster_queue: dict) -> float:
    return sum(
        float(parse_quantity(resource.get("total") or "0"))
        for flavor in (cluster_queue.get("status") or {}).get("flavorsReservation") or []
        for resource in flavor.get("resources") or []
        if resource.get("name") == "cpu"
    )


@pytest.mark.policy("UP-KQ-001")
def test_admission_is_neither_lost_nor_duplicated(upgrade_record, upgrade_view, trainjob_policy):
    admitted = upgrade_record.objects[ADMITTED]
    view = upgrade_view(admitted.namespace)
    events = upgrade_record.window_events("workloads")
    # The known gap's mechanism: Kueue built with another Trainer works out other
    # PodSets than the ones the Workload it finds carries.
    first = first_workload(events, ADMITTED)
    settings = runtime_settings(first) if first is not None else []
    if settings:
        trainjob_policy.gap_exercised(
            f"Workload {first['metadata']['name']}, which Kueue "
            f"{upgrade_record.source_versions.get('kueue')} admitted for TrainJob {ADMITTED} "
            f"before the upgrade, carries the runtime's settings: {'; '.join(settings)}"
        )

    with trainjob_policy.holds():
        found = workload_changes(events, ADMITTED, QUEUED, upgrade_record.window_started)
        # Admission lost shows on the Pods too: Kueue suspends a job it no longer admits.
        found += pod_changes(
            upgrade_record.window_events("kueue-pods"), admitted.pods, upgrade_record.window_started
        )
        assert found == [], f"{at(upgrade_record)}: " + "; ".join(found)
        queue = view.get(CLUSTER_QUEUE, upgrade_record.cluster_queue)
        reserved = cpu_reserved(queue)
        assert reserved == float(parse_quantity(POD_CPU)), (
            f"{at(upgrade_record)}: ClusterQueue {upgrade_record.cluster_queue} reserves "
            f"{reserved} CPU, the admitted TrainJob {POD_CPU}: {queue.get('status')}"
        )
        assert view.get(TRAINJOB, ADMITTED)["spec"].get("suspend") in (None, False)
        assert view.get(TRAINJOB, QUEUED)["spec"].get("suspend") is True


@pytest.mark.policy("UP-KQ-002")
def test_queued_trainjob_is_admitted_once_the_quota_frees(
    upgrade_record, upgrade_view, trainjob_policy
):
    view = upgrade_view(upgrade_record.objects[ADMITTED].namespace)
    queued = view.get(TRAINJOB, QUEUED)
    if kueue_pod_template_patch(queued, "node") is None:
        trainjob_policy.gap_exercised(
            f"TrainJob {QUEUED}, queued on {upgrade_record.source}, carries no pod template "
            "patch of Kueue's"
        )

    # Deleted, not completed: its quota is freed whatever state the upgrade left it in.
    view.kube.delete(*TRAINJOB, ADMITTED, view.namespace)

    with trainjob_policy.holds():
        wait_admitted(view, QUEUED)
        wait_running(view, QUEUED, 1)
