"""Policy: the previous generation's PyTorchJob honours runPolicy.managedBy (training-operator v1)."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import POD, PYTORCHJOB, SERVICE
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.history import named, resource_version, stored_while
from trainjob_conformance.policies.view import condition

TRAINING_OPERATOR = "kubeflow.org/training-operator"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
VALIDATOR = "validator.pytorchjob.training-operator.kubeflow.org"


def create_job(view, name, managed_by=""):
    return view.create(
        view.render("pytorchjob", name=name, namespace=view.namespace, managed_by=managed_by)
    )


def children(view, kind, name):
    return view.list(kind, f"{JOB_NAME_LABEL}={name}")


def wait_reconciled(view, name, pods=2):
    """The job's Pods and Services exist and it reports Created."""

    def probe():
        found = {
            "Pods": len(children(view, POD, name)),
            "Services": len(children(view, SERVICE, name)),
        }
        if found["Pods"] < pods or not found["Services"]:
            return NotYet(f"{found}")
        return found

    view.wait(f"the training-operator to create the Pods and Services of {name}", probe)
    return view.wait_for_condition(PYTORCHJOB, name, "Created")


def managed_by(job):
    return (job["spec"].get("runPolicy") or {}).get("managedBy")


@pytest.mark.policy("TO-MB-001")
def test_pytorchjob_without_managed_by_keeps_it_unset_and_is_reconciled(trainjob_view):
    view = trainjob_view
    created = create_job(view, "plain")
    assert managed_by(created) is None, f"managedBy was defaulted to {managed_by(created)!r}"

    reconciled = wait_reconciled(view, "plain")
    assert managed_by(reconciled) is None, (
        f"managedBy was set to {managed_by(reconciled)!r} after creation"
    )


@pytest.mark.policy("TO-MB-002")
def test_pytorchjob_managed_by_the_training_operator_is_reconciled(trainjob_view):
    view = trainjob_view
    created = create_job(view, "own", TRAINING_OPERATOR)
    assert managed_by(created) == TRAINING_OPERATOR, (
        f"managedBy {TRAINING_OPERATOR} was stored as {managed_by(created)!r}"
    )

    wait_reconciled(view, "own")


@pytest.mark.policy("TO-MB-003")
def test_training_operator_leaves_a_multikueue_pytorchjob_alone(trainjob_view):
    view = trainjob_view
    # Judged over the whole window: Pods created and deleted again would
    # leave the same end state.
    since = {kind: resource_version(view, kind) for kind in (POD, SERVICE, PYTORCHJOB)}
    # The external one first: once the control job has its Pods, the
    # training-operator has had every chance to act on the external one.
    external = managed_by(create_job(view, "external", MULTIKUEUE))
    assert external == MULTIKUEUE, f"managedBy {MULTIKUEUE} was stored as {external!r}"
    create_job(view, "control")
    wait_reconciled(view, "control")

    of_external = f"{JOB_NAME_LABEL}=external"
    for kind in (POD, SERVICE):
        made = stored_while(
            view, kind, since[kind], f"a {kind.kind} of external", lambda _: True, of_external
        )
        assert made == [], f"the training-operator created {kind.kind}s: {made}"
    written = stored_while(
        view,
        PYTORCHJOB,
        since[PYTORCHJOB],
        "status conditions",
        lambda job: (job.get("status") or {}).get("conditions"),
        field_selector=named("external"),
    )
    assert written == [], f"the training-operator wrote status: {written}"
    status = view.get(PYTORCHJOB, "external").get("status") or {}
    assert not status.get("conditions"), f"the training-operator wrote status: {status}"
    assert not condition(view.get(PYTORCHJOB, "external"), "Created")


def patch_managed_by(view, name, value):
    return view.kube.patch(
        *PYTORCHJOB, name, {"spec": {"runPolicy": {"managedBy": value}}}, namespace=view.namespace
    )


@pytest.mark.policy("TO-MB-004")
def test_managed_by_is_immutable_in_the_webhooks_words(trainjob_view, trainjob_policy):
    view = trainjob_view
    since = resource_version(view, PYTORCHJOB)
    create_job(view, "fixed", TRAINING_OPERATOR)
    # The validator judges updates of this job: an unknown value is denied on update too.
    unknown = rejection_of(lambda: patch_managed_by(view, "fixed", "example.com/other"))
    assert f'admission webhook "{VALIDATOR}" denied the request' in unknown.message, unknown
    trainjob_policy.gap_exercised(f"{VALIDATOR} judged an update of the job: {unknown.message}")

    with trainjob_policy.holds():
        refused = rejection_of(lambda: patch_managed_by(view, "fixed", MULTIKUEUE))
        assert f'admission webhook "{VALIDATOR}" denied the request' in refused.message, refused
        # In the words of the same release's TFJob webhook, which enforces it.
        assert (
            f'spec.runPolicy.managedBy: Invalid value: "{MULTIKUEUE}": field is immutable'
            in refused.message
        ), refused
        changed = stored_while(
            view,
            PYTORCHJOB,
            since,
            f"runPolicy.managedBy is not {TRAINING_OPERATOR}",
            lambda job: managed_by(job) != TRAINING_OPERATOR,
            field_selector=named("fixed"),
        )
        assert changed == [], f"PyTorchJob fixed was stored with another managedBy: {changed}"


@pytest.mark.policy("TO-MB-005")
def test_unknown_managed_by_value_is_rejected(trainjob_view):
    view = trainjob_view
    manifest = view.render(
        "pytorchjob", name="stranger", namespace=view.namespace, managed_by="example.com/other"
    )

    refused = rejection_of(lambda: view.create(manifest))

    assert f'admission webhook "{VALIDATOR}" denied the request' in refused.message, refused
    assert 'spec.runPolicy.managedBy: Unsupported value: "example.com/other"' in refused.message
    for supported in (TRAINING_OPERATOR, MULTIKUEUE):
        assert f'"{supported}"' in refused.message.split("supported values:", 1)[-1], refused
    assert view.find(PYTORCHJOB, "stranger") is None
