"""What an interrupted `prove` left on a cluster, found by its labels and removed.

A break's admission policies and probe namespace carry the prove label; a
narrowed webhook carries a selector expression on the break label, which no
one else writes. (A CRD whose rules a killed run dropped cannot be told from
one edited by hand: `prove` runs CRD breaks last and alone, and says so if it
is stopped during one.)
"""

from __future__ import annotations

import contextlib

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import NAMESPACE
from trainjob_conformance.policies.breaks import BREAK_LABEL
from trainjob_conformance.prove.breaking import PROVE_LABEL

_ADMISSION = "admissionregistration.k8s.io/v1"
_POLICY_KINDS = (
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
)
_WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def remove_leftovers(kube: Kube) -> list[str]:
    removed = []
    for kind in _POLICY_KINDS:
        try:
            found = kube.list(_ADMISSION, kind, label_selector=PROVE_LABEL)
        except NotFound:
            continue  # a cluster that does not serve this kind has none
        for obj in found:
            with contextlib.suppress(NotFound):
                kube.delete(_ADMISSION, kind, obj["metadata"]["name"])
                removed.append(f"{kind} {obj['metadata']['name']}")
    for kind in _WEBHOOK_KINDS:
        for configuration in kube.list(_ADMISSION, kind):
            removed += _unnarrow(kube, kind, configuration)
    for namespace in kube.list(*NAMESPACE, label_selector=PROVE_LABEL):
        with contextlib.suppress(NotFound):
            kube.delete(*NAMESPACE, namespace["metadata"]["name"], propagation_policy="Background")
            removed.append(f"namespace {namespace['metadata']['name']}")
    return removed


def _unnarrow(kube: Kube, kind: str, configuration: dict) -> list[str]:
    patch, removed = [], []
    for index, webhook in enumerate(configuration.get("webhooks") or []):
        selector = webhook.get("namespaceSelector") or {}
        expressions = selector.get("matchExpressions") or []
        kept = [e for e in expressions if e.get("key") != BREAK_LABEL]
        if len(kept) == len(expressions):
            continue
        restored = (
            {**selector, "matchExpressions": kept}
            if kept
            else {k: v for k, v in selector.items() if k != "matchExpressions"}
        )
        patch.append(
            {"op": "add", "path": f"/webhooks/{index}/namespaceSelector", "value": restored}
        )
        removed.append(f"the narrowing of webhook {webhook['name']}")
    if patch:
        kube.patch(
            _ADMISSION,
            kind,
            configuration["metadata"]["name"],
            patch,
            content_type="application/json-patch+json",
        )
    return removed
