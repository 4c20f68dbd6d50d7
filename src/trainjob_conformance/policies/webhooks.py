"""A component's webhook called a second time, for the test's namespace only.

Platforms that run webhooks of their own set Kueue's to `reinvocationPolicy:
IfNeeded`, so the API server may call it again on the same request. A policy
that a webhook's defaulting is safe to repeat registers a copy of it, bound to
the test's namespace, so that every create there passes it twice.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from trainjob_conformance.cluster.introspect import mutating_webhook
from trainjob_conformance.kube.errors import Rejected, StackError, WebhookUnreachable
from trainjob_conformance.kube.kinds import MUTATING_WEBHOOKS
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.view import TrainJobView

# Where the copy first points: nothing listens there, so the API server's answer
# shows when it has loaded the copy, whatever the webhook itself would do.
_NOWHERE = {"url": "https://127.0.0.1:9/not-served"}


def _probe(view: TrainJobView, manifest: dict[str, Any], reached: bool) -> Any:
    """A dry-run create of `manifest`: True once the copy is called (`reached`: and
    answers through the real webhook), else NotYet with what was seen."""

    def probe() -> bool | NotYet:
        try:
            view.kube.create(manifest, dry_run=True)
        except WebhookUnreachable as unreachable:
            if reached:
                return NotYet(f"the copy still points nowhere: {unreachable.message}")
            return True
        except Rejected:
            # An answer of the real webhooks (or of the validation after them): what
            # they make of a second defaulting is the policy's to judge.
            return True if reached else NotYet("the API server does not call the copy yet")
        return True if reached else NotYet("the API server does not call the copy yet")

    return probe


def call_again(view: TrainJobView, name: str, probe: dict[str, Any]) -> str:
    """Register a copy of mutating webhook `name` for the test's namespace, with
    reinvocationPolicy IfNeeded, and wait until the API server calls it on a
    dry-run create of `probe`; the copy's name (it is deleted with the test)."""
    found = mutating_webhook(view.kube, name)
    if found is None:
        raise StackError(0, "NotRegistered", f"no mutating webhook {name} is registered")
    _, webhook = found
    again = f"again.{name}"
    entry = copy.deepcopy(webhook)
    entry.update(
        name=again,
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": view.namespace}},
        reinvocationPolicy="IfNeeded",
        clientConfig=_NOWHERE,
        failurePolicy="Fail",
    )
    configuration = f"{view.namespace}-{name}-again"
    view.create(
        {
            "apiVersion": MUTATING_WEBHOOKS.api_version,
            "kind": MUTATING_WEBHOOKS.kind,
            "metadata": {"name": configuration},
            "webhooks": [entry],
        }
    )
    with view.unrecorded():
        view.wait(f"the API server to call {again}", _probe(view, probe, reached=False))
    # Sent once more, recorded: a reproduction resends a request until it gets the
    # run's answer, so this is its wait for the copy too.
    with contextlib.suppress(WebhookUnreachable):
        view.kube.create(probe, dry_run=True)
    entry["clientConfig"] = webhook["clientConfig"]
    view.kube.patch(*MUTATING_WEBHOOKS, name=configuration, body={"webhooks": [entry]})
    with view.unrecorded():
        view.wait(f"{again} to reach {name}'s server", _probe(view, probe, reached=True))
    with contextlib.suppress(Rejected):
        view.kube.create(probe, dry_run=True)
    return again
