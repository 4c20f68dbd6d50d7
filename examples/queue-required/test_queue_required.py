"""Our rule, certified on the cluster under test: every TrainJob names a Kueue queue."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import TRAINJOB
from trainjob_conformance.policies.admission import rejection_of

PROBE_LABEL = "queue-required.example.com/probe"
# The message our policy answers with (the pack's catalog states it).
MESSAGE = "TrainJobs must name a Kueue queue: set the label kueue.x-k8s.io/queue-name"


@pytest.fixture
def queue_policy(trainjob_view, trainjob_templates, training_runtime):
    """Our policy, bound to this test's namespace and in force; removed after the test."""
    view = trainjob_view
    for manifest in trainjob_templates.render(
        "queue-policy", name=view.namespace, namespace=view.namespace, message=MESSAGE
    ):
        view.create(manifest)
    runtime = training_runtime()
    probe = view.trainjob_manifest("probe", runtime=runtime, labels={PROBE_LABEL: "true"})

    def in_force() -> bool:
        try:
            view.kube.create(probe, dry_run=True)
        except Rejected as refused:
            # Our policy's own denial of the probe, not any refusal (whose
            # message would name the TrainJob "probe" too).
            return f"with binding '{view.namespace}'" in refused.message and (
                refused.message.endswith("denied request: probe")
            )
        return False

    view.wait("our admission policy to be in force", in_force, timeout=30)
    return runtime


@pytest.mark.policy("ADM-001")
def test_a_trainjob_without_a_queue_is_rejected_with_our_message(
    trainjob_view, queue_policy, trainjob_policy
):
    view = trainjob_view

    refused = rejection_of(lambda: view.create_trainjob("unqueued", runtime=queue_policy))

    assert trainjob_policy.expected("message") in refused.message, refused
    assert view.find(TRAINJOB, "unqueued") is None, "the refused TrainJob was stored"


@pytest.mark.policy("ADM-002")
def test_a_trainjob_with_a_queue_is_admitted(trainjob_view, queue_policy):
    view = trainjob_view

    created = view.create_trainjob("queued", runtime=queue_policy, queue_name="team-a")

    assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert view.get(TRAINJOB, "queued")["metadata"]["uid"] == created["metadata"]["uid"]
