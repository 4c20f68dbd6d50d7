"""What the API refuses to store at creation: names the Trainer cannot build on,
runtimes it could not run (policies from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import TRAINING_RUNTIME, TRAINJOB
from trainjob_conformance.policies.admission import acceptance_of, rejection_of
from trainjob_conformance.policies.runtimes import (
    depends_on,
    namespaced,
    with_depends_on,
    without_node_container,
)

INITIALIZERS = ["dataset-initializer", "model-initializer"]
DATASET_URI = "hf://example/dataset"


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
    runtime = without_node_container(
        namespaced(view.render("clustertrainingruntime", name="no-node"), view.namespace)
    )
    trainjob_policy.gap_exercised("TrainingRuntime no-node's trainer job has only a container main")

    with trainjob_policy.holds():
        refused = rejection_of(lambda: view.create(runtime))
        assert "validator.trainingruntime.trainer.kubeflow.org" in refused.message, refused
        assert "required container for the ancestor: trainer" in refused.message, refused
        assert view.find(TRAINING_RUNTIME, "no-node") is None, "TrainingRuntime no-node was stored"


@pytest.mark.policy("TJ-RT-002")
def test_a_runtime_whose_node_job_depends_on_both_initializers_is_stored(
    trainjob_view, trainjob_policy
):
    view = trainjob_view
    both = {job: {"cpu": "10m"} for job in INITIALIZERS}
    runtime = with_depends_on(
        namespaced(
            view.render("clustertrainingruntime", name="two-deps", initializers=both),
            view.namespace,
        ),
        "node",
        INITIALIZERS,
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

    refused = rejection_of(lambda: view.create(manifest))
    assert "validator.trainjob.trainer.kubeflow.org" in refused.message, refused
    assert "must have dataset-initializer job" in refused.message, refused
    assert view.find(TRAINJOB, "wants-data") is None, "TrainJob wants-data was stored"
