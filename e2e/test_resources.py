"""What a TrainJob's resourcesPerNode does to the runtime's own requests (a
policy from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import POD
from trainjob_conformance.policies.pods import wait_pods
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL

RUNTIME_REQUESTS = {"cpu": "50m", "memory": "64Mi"}


@pytest.mark.policy("TJ-RES-001")
def test_resources_per_node_naming_only_cpu_keeps_the_runtimes_memory_request(
    trainjob_view, training_runtime, trainjob_policy
):
    view = trainjob_view
    runtime = training_runtime(node_requests=RUNTIME_REQUESTS)
    view.create_trainjob(
        "merged", runtime=runtime, num_nodes=1, resources_per_node={"requests": {"cpu": "100m"}}
    )
    (pod,) = wait_pods(view, "merged", 1)
    node = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    requests = (node.get("resources") or {}).get("requests") or {}
    trainjob_policy.gap_exercised(
        "resourcesPerNode names only cpu; the runtime's node container also requests memory 64Mi"
    )

    with trainjob_policy.holds():
        view.record_observation(
            "the memory request of the node container of TrainJob merged's Pod",
            POD,
            selector=f"{JOBSET_NAME_LABEL}=merged",
            jsonpath='{.items[*].spec.containers[?(@.name=="node")].resources.requests.memory}',
            expected=RUNTIME_REQUESTS["memory"],
            observed=str(requests.get("memory", "")),
        )
        assert requests.get("cpu") == "100m", f"the node container requests {requests}"
        assert requests.get("memory") == RUNTIME_REQUESTS["memory"], (
            f"the node container requests {requests}: the runtime's memory request was dropped"
        )
