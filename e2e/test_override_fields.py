"""Pod spec fields that a TrainJob's override for one replicated job carries to that
job's Pods and no others: each field from the Trainer release that added it to
the override (policies from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.policies.jobs import replicated_job_of
from trainjob_conformance.policies.pods import wait_pods

PREFERRED_ZONE = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {
                    "matchExpressions": [
                        {"key": "example.com/zone", "operator": "In", "values": ["a"]}
                    ]
                },
            }
        ]
    }
}


def _pods_by_job(
    view, training_runtime, name: str, field: str, value: Any
) -> dict[str, list[dict[str, Any]]]:
    """The Pods of a TrainJob of two nodes, beside a one-Pod job `aux`, whose
    override gives only the trainer job `node` the Pod spec field `field`."""
    runtime = training_runtime(extra_jobs=["aux"])
    view.create_trainjob(
        name,
        runtime=runtime,
        num_nodes=2,
        pod_overrides=[{"target_job": "node", "pod_spec": {field: value}}],
    )
    by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in wait_pods(view, name, 3):
        by_job.setdefault(replicated_job_of(pod), []).append(pod)
    return by_job


def _assert_reaches_only_the_targeted_job(
    by_job: dict[str, list[dict[str, Any]]], field: str, value: Any
) -> None:
    node, aux = by_job.get("node", []), by_job.get("aux", [])
    assert len(node) == 2 and len(aux) == 1, f"Pods by job: {sorted(by_job)} {len(node)}/{len(aux)}"
    for pod in node:
        got = pod["spec"].get(field)
        assert got == value, f"{pod['metadata']['name']} has {field} {got!r}, not {value!r}"
    for pod in aux:
        got = pod["spec"].get(field)
        assert got != value, f"{pod['metadata']['name']} of job aux also got {field} {got!r}"


@pytest.mark.policy("TJ-OVR-001")
def test_an_affinity_in_the_override_reaches_the_targeted_jobs_pods_only(
    trainjob_view, training_runtime
):
    by_job = _pods_by_job(trainjob_view, training_runtime, "affine", "affinity", PREFERRED_ZONE)
    _assert_reaches_only_the_targeted_job(by_job, "affinity", PREFERRED_ZONE)


@pytest.mark.policy("TJ-OVR-002")
def test_image_pull_secrets_in_the_override_reach_the_targeted_jobs_pods_only(
    trainjob_view, training_runtime
):
    secrets = [{"name": "registry-credentials"}]
    by_job = _pods_by_job(trainjob_view, training_runtime, "pulling", "imagePullSecrets", secrets)
    _assert_reaches_only_the_targeted_job(by_job, "imagePullSecrets", secrets)


@pytest.mark.policy("TJ-OVR-003")
def test_a_pod_security_context_in_the_runtime_patch_reaches_the_targeted_jobs_pods_only(
    trainjob_view, training_runtime
):
    context = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    by_job = _pods_by_job(trainjob_view, training_runtime, "secured", "securityContext", context)
    _assert_reaches_only_the_targeted_job(by_job, "securityContext", context)


@pytest.mark.policy("TJ-OVR-004")
def test_a_termination_grace_period_in_the_runtime_patch_reaches_the_targeted_jobs_pods_only(
    trainjob_view, training_runtime
):
    by_job = _pods_by_job(
        trainjob_view, training_runtime, "graceful", "terminationGracePeriodSeconds", 7
    )
    _assert_reaches_only_the_targeted_job(by_job, "terminationGracePeriodSeconds", 7)
