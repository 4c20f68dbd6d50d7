"""Policy: a TrainJob managed by another controller is left alone by the Trainer."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import JOBSET, TRAINJOB
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.history import named, resource_version, stored_while
from trainjob_conformance.policies.jobsets import record_no_jobset, wait_jobset
from trainjob_conformance.policies.trainjobs import patch_trainjob

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"


@pytest.mark.policy("TJ-MB-001")
def test_trainer_builds_no_jobset_for_a_trainjob_managed_by_multikueue(
    trainjob_view, trainjob_policy
):
    view = trainjob_view
    # Judged over the whole window: a JobSet built and deleted again, or
    # status written and cleared, would leave the same end state.
    jobsets_since = resource_version(view, JOBSET)
    trainjobs_since = resource_version(view, TRAINJOB)
    # The external one first: by the time the control TrainJob has its JobSet,
    # the Trainer has had every chance to act on the external one.
    view.create(view.trainjob_manifest("external", managed_by=MULTIKUEUE, suspend=True))
    view.create(view.trainjob_manifest("control", suspend=True))

    wait_jobset(view, "control")
    view.wait_for_condition(TRAINJOB, "control", "Suspended")
    record_no_jobset(view, "external", view.find(JOBSET, "external"))

    with trainjob_policy.holds():
        built = stored_while(
            view,
            JOBSET,
            jobsets_since,
            "a JobSet",
            lambda _: True,
            field_selector=named("external"),
        )
        assert built == [], f"the Trainer built a JobSet for a TrainJob it does not manage: {built}"
        written = stored_while(
            view,
            TRAINJOB,
            trainjobs_since,
            "status conditions",
            lambda t: (t.get("status") or {}).get("conditions"),
            field_selector=named("external"),
        )
        assert written == [], (
            f"the Trainer wrote status on a TrainJob it does not manage: {written}"
        )
        status = view.get(TRAINJOB, "external").get("status") or {}
        assert not status.get("conditions"), (
            f"the Trainer wrote status on a TrainJob it does not manage: {status['conditions']}"
        )


@pytest.mark.policy("TJ-MB-002")
def test_managed_by_defaults_to_the_trainer_controller(trainjob_view):
    created = trainjob_view.create(trainjob_view.trainjob_manifest("plain", suspend=True))
    assert created["spec"]["managedBy"] == TRAINER_CONTROLLER, (
        f"managedBy was defaulted to {created['spec'].get('managedBy')!r}"
    )


@pytest.mark.policy("TJ-MB-003")
def test_managed_by_is_immutable(trainjob_view):
    view = trainjob_view
    since = resource_version(view, TRAINJOB)
    view.create(view.trainjob_manifest("fixed", suspend=True))

    refused = rejection_of(lambda: patch_trainjob(view, "fixed", {"managedBy": MULTIKUEUE}))

    assert refused.status == 422, refused
    assert "spec.managedBy" in refused.message and "immutable" in refused.message, refused
    changed = stored_while(
        view,
        TRAINJOB,
        since,
        f"spec.managedBy is not {TRAINER_CONTROLLER}",
        lambda t: t["spec"].get("managedBy") != TRAINER_CONTROLLER,
        field_selector=named("fixed"),
    )
    assert changed == [], f"TrainJob fixed was stored with another managedBy: {changed}"


@pytest.mark.policy("TJ-MB-004")
def test_unknown_managed_by_value_is_rejected(trainjob_view):
    view = trainjob_view
    manifest = view.trainjob_manifest("stranger", managed_by="example.com/other")

    refused = rejection_of(lambda: view.create(manifest))

    assert refused.status == 422, refused
    assert f"{TRAINER_CONTROLLER} or {MULTIKUEUE}" in refused.message, refused
    assert view.find(TRAINJOB, "stranger") is None
