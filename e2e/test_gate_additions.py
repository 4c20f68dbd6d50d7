"""Policy: no scheduling gate can be added once the Pods exist; removing one is allowed."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import POD
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.history import resource_version, stored_while
from trainjob_conformance.policies.pods import (
    gate_names,
    patch_pod,
    pods_of,
    wait_running,
    wait_scheduling_gated,
)
from trainjob_conformance.policies.trainjobs import EXAMPLE_GATES as GATES
from trainjob_conformance.policies.trainjobs import patch_trainjob, submit_gated
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL

ADDED_GATE = "example.com/added-late"


def create_gated(view, runtime, name="gated"):
    submit_gated(view, name, runtime, GATES)
    return wait_scheduling_gated(view, name, 2)


@pytest.mark.policy("TJ-GATE-003")
def test_api_server_rejects_adding_a_gate_to_an_existing_pod(trainjob_view, training_runtime):
    pods = create_gated(trainjob_view, training_runtime())
    pod = pods[0]["metadata"]["name"]
    more_gates = [{"name": gate} for gate in [*GATES, ADDED_GATE]]

    refused = rejection_of(
        lambda: patch_pod(trainjob_view, pod, {"spec": {"schedulingGates": more_gates}})
    )

    assert refused.status == 422, refused
    assert "schedulingGates" in refused.message, refused
    current = trainjob_view.get(POD, pod)
    assert gate_names(current["spec"]) == GATES


@pytest.mark.policy("TJ-GATE-004")
def test_trainer_webhook_rejects_adding_a_gate_to_a_running_trainjob(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    runtime = training_runtime(hold=True)
    since = resource_version(view, POD)
    view.create_trainjob("running", runtime=runtime, num_nodes=2)
    wait_running(view, "running", 2)
    with_gate = trainjob_templates.override_fields(
        [{"target_job": "node", "scheduling_gates": [ADDED_GATE]}]
    )

    refused = rejection_of(lambda: patch_trainjob(view, "running", with_gate))

    assert refused.status == 403, refused
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in refused.message
    assert trainjob_policy.expected("forbidden_message") in refused.message, refused
    gated = stored_while(
        view,
        POD,
        since,
        f"carries {ADDED_GATE}",
        lambda pod: ADDED_GATE in gate_names(pod["spec"]),
        label_selector=f"{JOBSET_NAME_LABEL}=running",
    )
    assert gated == [], f"a Pod of the running TrainJob got the refused gate: {gated}"
    for pod in pods_of(view, "running"):
        assert gate_names(pod["spec"]) == [], pod["metadata"]["name"]


@pytest.mark.policy("TJ-GATE-005")
def test_removing_the_gates_lets_the_pods_schedule_and_run(
    trainjob_view, training_runtime, schedulable_nodes
):
    view = trainjob_view
    nodes = schedulable_nodes(1)
    runtime = training_runtime(hold=True)
    pods = create_gated(view, runtime)

    for pod in pods:
        patch_pod(view, pod["metadata"]["name"], {"spec": {"schedulingGates": None}})

    running = wait_running(view, "gated", 2)
    for pod in running:
        assert gate_names(pod["spec"]) == [], pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] in nodes, pod["metadata"]["name"]
