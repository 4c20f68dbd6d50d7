"""What the API refuses to store at creation: names the Trainer cannot build on,
runtimes it could not run (policies from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import copy

import pytest

from trainjob_conformance.kube.kinds import TRAINING_RUNTIME, TRAINJOB
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.admission import acceptance_of, accepted_within, rejection_of
from trainjob_conformance.policies.history import named, replay, resource_version, stored_while
from trainjob_conformance.policies.runtimes import (
    depends_on,
    namespaced,
    with_depends_on,
    without_node_container,
)

INITIALIZERS = ["dataset-initializer", "model-initializer"]
DATASET_URI = "hf://example/dataset"
# Runtimes with this label set to `disabled` skip the Trainer's runtime webhooks
# (an objectSelector of the release's webhook configuration, from v2.3.0).
VALIDATION_LABEL = "trainer.kubeflow.org/webhook-validation"


@pytest.mark.policy("TJ-NAME-001")
@pytest.mark.parametrize(
    ("name", "words"),
    [("1st-trainjob", "1035"), ("t" * 64, "63 characters")],
    ids=["leading-digit", "64-characters"],
)
def test_a_trainjob_whose_name_is_not_an_rfc_1035_label_is_refused(
    trainjob_view, trainjob_policy, name, words
):
    view = trainjob_view
    with trainjob_policy.holds():
        refused = rejection_of(lambda: view.create_trainjob(name, suspend=True))
        assert words in refused.message, refused
        assert view.find(TRAINJOB, name) is None, f"TrainJob {name} was stored"


@pytest.mark.policy("TJ-RT-001")
def test_a_runtime_whose_trainer_job_has_no_node_container_is_refused(
    trainjob_view, trainjob_policy
):
    view = trainjob_view
    runtime = without_node_container(_namespaced_runtime(view, "no-node"))
    trainjob_policy.gap_exercised("TrainingRuntime no-node's trainer job has only a container main")

    with trainjob_policy.holds():
        _refused_and_not_stored(
            view,
            runtime,
            "validator.trainingruntime.trainer.kubeflow.org",
            "required container for the ancestor: trainer",
        )


@pytest.mark.policy("TJ-RT-002")
def test_a_runtime_whose_node_job_depends_on_both_initializers_is_stored(
    trainjob_view, trainjob_policy
):
    view = trainjob_view
    both = {job: {"cpu": "10m"} for job in INITIALIZERS}
    runtime = with_depends_on(
        _namespaced_runtime(view, "two-deps", initializers=both), "node", INITIALIZERS
    )
    trainjob_policy.gap_exercised("TrainingRuntime two-deps' node job depends on both initializers")

    with trainjob_policy.holds():
        acceptance_of(lambda: view.create(runtime))
        stored = view.get(TRAINING_RUNTIME, "two-deps")
        assert depends_on(stored, "node") == INITIALIZERS, stored["spec"]["template"]


@pytest.mark.policy("TJ-INIT-001")
def test_a_trainjob_asking_for_a_dataset_its_runtime_cannot_initialize_is_refused(trainjob_view):
    view = trainjob_view
    # The harness's runtime has a node job and no dataset-initializer job.
    manifest = view.trainjob_manifest("wants-data", suspend=True)
    manifest["spec"]["initializer"] = {"dataset": {"storageUri": DATASET_URI}}

    _refused_and_not_stored(
        view,
        manifest,
        "validator.trainjob.trainer.kubeflow.org",
        "must have dataset-initializer job",
    )


@pytest.mark.policy("TJ-RT-004")
def test_a_runtime_labelled_webhook_validation_disabled_is_not_checked_by_the_runtime_webhook(
    trainjob_view, trainjob_policy
):
    view = trainjob_view
    invalid = without_node_container(_namespaced_runtime(view, "checked"))
    unchecked = copy.deepcopy(invalid)
    unchecked["metadata"]["name"] = "unchecked"
    unchecked["metadata"].setdefault("labels", {})[VALIDATION_LABEL] = "disabled"

    _refused_and_not_stored(view, invalid, "validator.trainingruntime.trainer.kubeflow.org")
    if trainjob_policy.expected("label_skips_validation"):
        acceptance_of(lambda: view.create(unchecked))
        assert view.find(TRAINING_RUNTIME, "unchecked"), "TrainingRuntime unchecked not stored"
    else:
        # Releases before the label: it changes nothing, the runtime is refused alike.
        refused = rejection_of(lambda: view.create(unchecked))
        assert "validator.trainingruntime.trainer.kubeflow.org" in refused.message, refused


RESOURCE_IN_USE = "trainer.kubeflow.org/resource-in-use"


@pytest.mark.policy("TJ-RT-005")
def test_a_runtime_a_trainjob_uses_is_deleted_as_the_release_says(trainjob_view, trainjob_policy):
    view = trainjob_view
    kept = trainjob_policy.expected("kept_while_in_use")
    _runtime_in_use(view, "in-use", "user")
    if kept:
        _wait_finalizer(view, "in-use")
    since = resource_version(view, TRAINING_RUNTIME)
    try:
        view.kube.delete(*TRAINING_RUNTIME, name="in-use", namespace=view.namespace)
        if kept:
            # The window closes once the runtime controller has acted after the
            # deletion: it has put the finalizer on a runtime first used since.
            _runtime_in_use(view, "witness", "witness")
            _wait_finalizer(view, "witness")
            history = replay(view, TRAINING_RUNTIME, since, field_selector=named("in-use"))
            deleted = [e for e in history if e["type"] == "DELETED"]
            assert not deleted, "TrainingRuntime in-use went while TrainJob user uses it"
            stored = view.get(TRAINING_RUNTIME, "in-use")
            assert stored["metadata"].get("deletionTimestamp"), "in-use is not Terminating"
            view.kube.delete(*TRAINJOB, name="user", namespace=view.namespace)
        view.wait(
            "TrainingRuntime in-use to be gone",
            lambda: _gone_or_why(view, "in-use"),
        )
        if not kept:
            held = stored_while(
                view,
                TRAINING_RUNTIME,
                since,
                f"TrainingRuntime in-use with finalizer {RESOURCE_IN_USE}",
                lambda runtime: RESOURCE_IN_USE in _finalizers(runtime),
                field_selector=named("in-use"),
            )
            assert not held, f"the runtime was held for its TrainJob: {held}"
            assert view.find(TRAINJOB, "user"), "TrainJob user went with its runtime"
    finally:
        # A finalizer nobody removes (a break's) must not hold the namespace.
        for name in ("in-use", "witness"):
            if view.find(TRAINING_RUNTIME, name):
                view.kube.patch(
                    *TRAINING_RUNTIME,
                    name=name,
                    namespace=view.namespace,
                    body={"metadata": {"finalizers": None}},
                )


def _runtime_in_use(view, runtime: str, trainjob: str) -> None:
    """A TrainingRuntime `runtime` and a suspended TrainJob `trainjob` that uses it."""
    view.create(_namespaced_runtime(view, runtime))
    user = view.trainjob_manifest(
        trainjob, runtime=runtime, runtime_kind="TrainingRuntime", suspend=True
    )
    accepted_within(
        lambda: view.create(user), 30, f"the Trainer's webhook sees TrainingRuntime {runtime}"
    )


def _finalizers(obj: dict) -> list[str]:
    return obj["metadata"].get("finalizers") or []


def _wait_finalizer(view, runtime: str) -> None:
    view.wait(
        f"TrainingRuntime {runtime} to carry finalizer {RESOURCE_IN_USE}",
        lambda: (
            RESOURCE_IN_USE in _finalizers(view.get(TRAINING_RUNTIME, runtime))
            or NotYet(f"finalizers {_finalizers(view.get(TRAINING_RUNTIME, runtime))}")
        ),
    )


def _gone_or_why(view, runtime: str) -> bool | NotYet:
    found = view.find(TRAINING_RUNTIME, runtime)
    return found is None or NotYet(f"still there, finalizers {_finalizers(found)}")


def _namespaced_runtime(view, name: str, **params) -> dict:
    """The harness's runtime as a TrainingRuntime `name` of the test's namespace."""
    return namespaced(view.render("clustertrainingruntime", name=name, **params), view.namespace)


def _refused_and_not_stored(view, manifest: dict, *words: str) -> None:
    """Creating `manifest` is refused, the refusal names each of `words`, and
    nothing of that kind and name is stored."""
    refused = rejection_of(lambda: view.create(manifest))
    for word in words:
        assert word in refused.message, refused
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    assert view.find(TRAINJOB if kind == "TrainJob" else TRAINING_RUNTIME, name) is None, (
        f"{kind} {name} was stored"
    )
