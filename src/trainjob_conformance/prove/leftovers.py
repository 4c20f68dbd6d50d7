"""What an interrupted `prove` left on a cluster, found by its labels and removed.

A break's admission policies and probe namespace carry the prove label; a
narrowed webhook carries a selector expression on the break label, which no
one else writes. (A CRD whose rules a killed run dropped cannot be told from
one edited by hand, so the break writes what it dropped into an annotation of
the CRD, and the rules are put back from there.) A manager of an embedded run
left frozen by SIGSTOP gets its SIGCONT.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import NAMESPACE
from trainjob_conformance.policies.breaks import BREAK_LABEL
from trainjob_conformance.prove import managers
from trainjob_conformance.prove.breaking import (
    DROPPED_RULES_ANNOTATION,
    PROVE_LABEL,
    field_schema,
)

_ADMISSION = "admissionregistration.k8s.io/v1"
_POLICY_KINDS = (
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
)
_WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def remove_leftovers(kube: Kube, kubeconfig: Path) -> list[str]:
    removed = managers.thaw_stopped(kubeconfig)
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
    for crd in kube.list("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        if DROPPED_RULES_ANNOTATION in (crd["metadata"].get("annotations") or {}):
            removed.append(_restore_rules(kube, crd))
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


def _restore_rules(kube: Kube, crd: dict[str, Any]) -> str:
    saved = json.loads(crd["metadata"]["annotations"].pop(DROPPED_RULES_ANNOTATION))
    for version in crd["spec"]["versions"]:
        rules = saved["rules"].get(version["name"])
        if rules is not None:
            field_schema(version, saved["field"])["x-kubernetes-validations"] = rules
    # Items of a list come without their apiVersion and kind.
    kube.replace(
        {**crd, "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}
    )
    return f"the dropped rules of {saved['field']} in CRD {crd['metadata']['name']}"
