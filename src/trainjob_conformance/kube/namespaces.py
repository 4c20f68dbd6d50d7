"""One namespace per test, removed afterwards with everything in it."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError, NotFound
from trainjob_conformance.kube.kinds import NAMESPACE

TEST_NAMESPACE_LABEL = "trainjob-conformance.kubeflow.org/test"
# What a test's Pods get to stop once the test is over. The namespace controller
# would give them their own grace (30 s by default), and a real kubelet keeps
# their CPU requested for all of it: a container whose PID 1 ignores SIGTERM
# (busybox sh) holds a node's CPU half a minute after its test ended, and the
# next test sized from the free CPU waits for it.
TEARDOWN_GRACE_SECONDS = 1


def namespace_name(test_name: str) -> str:
    """A DNS-1123 label from the test name, unique per call."""
    slug = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")
    suffix = uuid.uuid4().hex[:6]
    return f"{slug[: 62 - len(suffix) - 1].rstrip('-')}-{suffix}"


@contextmanager
def temporary_namespace(
    kube: Kube, test_name: str, labels: dict[str, str] | None = None
) -> Iterator[str]:
    name = namespace_name(test_name)
    kube.create(
        {
            "apiVersion": NAMESPACE.api_version,
            "kind": NAMESPACE.kind,
            "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "true", **(labels or {})}},
        }
    )
    try:
        yield name
    finally:
        # Background: the namespace controller removes the contents; a test
        # does not wait for it, and the next test has its own namespace.
        with contextlib.suppress(NotFound):
            kube.delete(*NAMESPACE, name, propagation_policy="Background")
        stop_pods_now(kube, name)


def stop_pods_now(kube: Kube, namespace: str) -> None:
    """Delete a terminating namespace's Pods with a short grace; nothing recreates them,
    since a namespace being deleted takes no new objects. Not recorded: it is
    clean-up, not a step of the test."""
    with contextlib.suppress(ApiError):
        kube.core.delete_collection_namespaced_pod(
            namespace, grace_period_seconds=TEARDOWN_GRACE_SECONDS
        )
