"""The stack is really wired: TrainJobs run, and the Trainer's webhook judges them."""

from __future__ import annotations

import pytest

from trainjob_conformance.cluster.health.readiness import TORCH_RUNTIME
from trainjob_conformance.cluster.introspect import TRAINER_VALIDATOR, validators_naming
from trainjob_conformance.kube.kinds import JOBSET, TRAINJOB
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.jobs import jobs_of
from trainjob_conformance.policies.pods import pods_of

pytestmark = pytest.mark.e2e


@pytest.mark.policy("TJ-STACK-001")
def test_trainjob_on_torch_distributed_runs_to_completion(
    trainjob_view, schedulable_nodes, runnable_runtime
):
    view = trainjob_view
    nodes = schedulable_nodes(1)
    # The release's runtime; where the nodes cannot get its image, the same runtime
    # running the harness's test image (the policy is the wiring, not PyTorch).
    view.create_trainjob("smoke", runtime=runnable_runtime(TORCH_RUNTIME), num_nodes=2)

    jobset = view.wait("JobSet smoke", lambda: view.find(JOBSET, "smoke"))
    owners = jobset["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"]) for o in owners] == [("TrainJob", "smoke")]

    view.wait_for_condition(TRAINJOB, "smoke", "Complete", timeout=90)

    jobs = jobs_of(view, "smoke")
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    assert jobs[0]["spec"]["parallelism"] == 2
    assert jobs[0]["spec"]["completions"] == 2
    pods = pods_of(view, "smoke")
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"].get("nodeName") in nodes, pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Succeeded", pod["metadata"]["name"]


@pytest.mark.policy("TJ-STACK-002")
def test_trainjob_naming_missing_runtime_is_rejected_by_trainer_webhook(
    trainjob_view, trainjob_templates
):
    view = trainjob_view
    # The API server calls validating webhooks in parallel and reports the first
    # denial: another TrainJob validator judging this Trainer-only namespace
    # (Kueue's, when Kueue is not scoped away from it) may answer instead.
    judging = validators_naming(
        view.kube, "trainer.kubeflow.org", "trainjobs", "CREATE", view.namespace
    )
    others = [name for name in judging if name != TRAINER_VALIDATOR]
    if others:
        pytest.skip(
            f"needs a namespace where only the Trainer validates TrainJobs; here {others} "
            "judge them too (scope Kueue with managedJobsNamespaceSelector, see docs/clusters.md)"
        )
    manifest = trainjob_templates.render_one(
        "trainjob", name="orphan", namespace=view.namespace, runtime="no-such-runtime"
    )
    refused = rejection_of(lambda: view.create(manifest))

    assert refused.status == 403, refused
    assert refused.message.startswith(
        f'admission webhook "{TRAINER_VALIDATOR}" denied the request'
    ), refused
    assert "must be created before the TrainJob is created" in refused.message, refused
    assert view.find(TRAINJOB, "orphan") is None
