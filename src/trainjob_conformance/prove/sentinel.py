"""When an admission policy change is in effect, not just stored.

The API server loads ValidatingAdmissionPolicies, MutatingAdmissionPolicies and
their bindings through informers: a policy created a moment ago may not judge
the next request yet, and one deleted may still judge it. Each informer
delivers its objects in the order they were written, so once a sentinel policy
and binding written after the change judge a dry-run request, the change
before them is loaded too. The sentinel touches only a ConfigMap of its own
name in the break's probe namespace, and is deleted right after.
"""

from __future__ import annotations

import contextlib
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import NotFound, Rejected
from trainjob_conformance.kube.waits import NotYet, wait_for

_GROUP = "admissionregistration.k8s.io/v1"
SENTINEL_CONFIGMAP = "trainjob-conformance-sentinel"
_MARK = "trainjob-conformance.kubeflow.org/sentinel"
SETTLE_SECONDS = 30


def _validating(name: str, namespace: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": _GROUP,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [_configmap_rule()]},
                "matchConditions": [_only_the_sentinel()],
                "validations": [{"expression": "false", "message": f"{_MARK} {name}"}],
            },
        },
        {
            "apiVersion": _GROUP,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": _namespace(namespace),
            },
        },
    ]


def _mutating(name: str, namespace: str) -> list[dict[str, Any]]:
    patch = (
        f'[JSONPatch{{op: "add", path: "/metadata/annotations", value: {{"{_MARK}": "{name}"}}}}]'
    )
    return [
        {
            "apiVersion": _GROUP,
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "matchConstraints": {"resourceRules": [_configmap_rule()]},
                "matchConditions": [_only_the_sentinel()],
                "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
            },
        },
        {
            "apiVersion": _GROUP,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "matchResources": _namespace(namespace)},
        },
    ]


def _configmap_rule() -> dict[str, Any]:
    return {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["configmaps"],
    }


def _only_the_sentinel() -> dict[str, str]:
    return {"name": "sentinel", "expression": f"object.metadata.name == '{SENTINEL_CONFIGMAP}'"}


def _namespace(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def _answer(kube: Kube, namespace: str) -> str:
    """What the sentinel ConfigMap's dry-run create is answered: the mark, or ''."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SENTINEL_CONFIGMAP, "namespace": namespace},
    }
    try:
        created = kube.create(configmap, dry_run=True)
    except Rejected as refused:
        return refused.message if _MARK in refused.message else ""
    annotations = created["metadata"].get("annotations") or {}
    return str(annotations.get(_MARK, ""))


def settle(kube: Kube, namespace: str, name: str, mutating: bool) -> None:
    """Return once the API server judges requests with every admission policy change
    written so far (of the validating or the mutating kind)."""
    objects = (_mutating if mutating else _validating)(f"{name}-sentinel", namespace)
    for obj in objects:
        kube.apply(obj)
    try:
        wait_for(
            f"the API server to load admission policy {name}-sentinel",
            lambda: _answer(kube, namespace) or NotYet("the sentinel does not judge yet"),
            timeout=SETTLE_SECONDS,
        )
    finally:
        for obj in reversed(objects):
            with contextlib.suppress(NotFound):
                kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
