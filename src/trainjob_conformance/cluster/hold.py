"""A Pod that keeps running until a test lets it finish, on any cluster.

Policies that need a running TrainJob use a runtime whose Pods carry
HOLD_ANNOTATION. On a real kubelet the container reads its own annotations
from a downward-API file and exits once the annotation is gone; on the
embedded cluster's fake nodes, the kwok stage that completes Pods waits for
the same annotation to disappear. Either way, releasing a Pod is removing
the annotation.
"""

from __future__ import annotations

HOLD_ANNOTATION = "trainjob-conformance.kubeflow.org/hold"
# Where the container sees its annotations (a downwardAPI volume).
ANNOTATIONS_DIR = "/etc/podinfo"
# The Kubernetes e2e tests' busybox: small, multi-arch, has sh and grep.
HOLD_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
# Exits at once unless held; then polls the annotations the kubelet refreshes.
HOLD_COMMAND = [
    "sh",
    "-c",
    f"while grep -q '^{HOLD_ANNOTATION}=' {ANNOTATIONS_DIR}/annotations; do sleep 1; done",
]


def stopping_hold_command(stop_seconds: int) -> list[str]:
    """HOLD_COMMAND for a container that answers SIGTERM by taking `stop_seconds` to
    stop, as a training process writing its checkpoint would.

    The shell runs PID 1 and would otherwise ignore SIGTERM; its trap only runs
    between commands, so each second's sleep is waited for in the background.
    """
    loop = f"while grep -q '^{HOLD_ANNOTATION}=' {ANNOTATIONS_DIR}/annotations"
    return [
        "sh",
        "-c",
        f"trap 'sleep {stop_seconds}; exit 0' TERM; {loop}; do sleep 1 & wait $!; done",
    ]
