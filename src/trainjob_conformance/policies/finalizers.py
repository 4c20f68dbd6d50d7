"""A finalizer the test owns: an object deleted while it carries it stays, Terminating,
until the test lets it go, on any cluster (a kubelet, kwok and the garbage collector
alike remove an object only once its finalizers are gone)."""

from __future__ import annotations

import contextlib

from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import Kind
from trainjob_conformance.policies.view import TrainJobView

TERMINATION_FINALIZER = "trainjob-conformance.kubeflow.org/keep-terminating"
# Strategic merge: add or drop one finalizer, leaving the controllers' own.
_SMP = "application/strategic-merge-patch+json"


def keep_when_deleted(view: TrainJobView, kind: Kind, name: str) -> None:
    """Once deleted, object `name` stays Terminating until `let_go`."""
    body = {"metadata": {"finalizers": [TERMINATION_FINALIZER]}}
    view.kube.patch(*kind, name=name, namespace=view.namespace, body=body, content_type=_SMP)
    # Undone when the test ends whatever happens: the namespace could not go otherwise.
    view.cleanup.defer(f"finalizer of {kind} {name}", lambda: let_go(view, kind, name))


def let_go(view: TrainJobView, kind: Kind, name: str) -> None:
    body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [TERMINATION_FINALIZER]}}
    with contextlib.suppress(NotFound):  # already gone: nothing holds it
        view.kube.patch(*kind, name=name, namespace=view.namespace, body=body, content_type=_SMP)
