"""A release runtime copied so that the nodes can run it: the image changes, nothing else."""

from __future__ import annotations

from trainjob_conformance.policies.runtimes import STAND_IN_COMMAND, images_of, stand_in_copy


def _runtime() -> dict:
    def job(name: str, image: str) -> dict:
        container = {"name": name, "image": image, "args": ["train.py"]}
        return {
            "name": name,
            "template": {"spec": {"template": {"spec": {"containers": [container]}}}},
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed", "labels": {"f": "torch"}, "uid": "u"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [job("node", "pytorch/pytorch:2"), job("init", "here:1")]
                }
            },
        },
        "status": {},
    }


def test_only_the_containers_the_nodes_cannot_run_get_the_stand_in() -> None:
    runtime = _runtime()

    copied = stand_in_copy(runtime, "ns-torch", "busybox:1", lambda image: image == "here:1")

    assert copied["metadata"] == {"name": "ns-torch", "labels": {"f": "torch"}, "annotations": {}}
    assert "status" not in copied
    assert copied["spec"]["mlPolicy"] == runtime["spec"]["mlPolicy"]
    node, init = (
        j["template"]["spec"]["template"]["spec"]["containers"][0]
        for j in copied["spec"]["template"]["spec"]["replicatedJobs"]
    )
    assert node == {"name": "node", "image": "busybox:1", "command": STAND_IN_COMMAND}
    assert init == {"name": "init", "image": "here:1", "args": ["train.py"]}
    assert images_of(runtime) == ["pytorch/pytorch:2", "here:1"]  # the original is untouched
