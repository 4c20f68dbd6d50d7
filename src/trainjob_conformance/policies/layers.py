"""The layer of the stack that answered a request, or failed to act, behind a result.

A FAIL, a known gap or an ERROR is routed upstream by its layer first: the
admission webhook that refused (or should have), the API server's own validation
of a CRD (its schema and CEL rules) or of a built-in type, the authorizer (RBAC),
a controller's reconcile, the scheduler or the kubelet, Kueue's admission, or
the stack itself.

Where the cluster's words name who answered (a webhook's name, an admission
policy's name, a field the API server's validation refused), that is the
layer. Where they cannot (a request that was accepted but should not have been,
a wait that timed out, a known upstream gap), the layer is the one the policy's
statement is about, declared in the catalog (`layer:`): the one that did not act.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from trainjob_conformance.errors import CLUSTER_NOT_STARTED

ADMISSION_WEBHOOK = "admission webhook"
ADMISSION_POLICY = "admission policy"
CRD_VALIDATION = "CEL/CRD validation"
API_VALIDATION = "API validation"
AUTHORIZATION = "authorization"
CONTROLLER = "controller reconcile"
SCHEDULER = "scheduler/kubelet"
KUEUE_ADMISSION = "Kueue admission"
STACK = "stack"
HARNESS = "harness"
# What a catalog may declare; STACK and HARNESS only ever come from an ERROR.
DECLARABLE = (
    ADMISSION_WEBHOOK,
    ADMISSION_POLICY,
    CRD_VALIDATION,
    API_VALIDATION,
    AUTHORIZATION,
    CONTROLLER,
    SCHEDULER,
    KUEUE_ADMISSION,
)
KINDS = (*DECLARABLE, STACK, HARNESS)

_WEBHOOK_DENIED = re.compile(r'admission webhook "([^"]+)" denied the request')
_WEBHOOK_UNANSWERED = re.compile(r'failed calling webhook "([^"]+)"')
_ADMISSION_POLICY = re.compile(r"(?:Validating|Mutating)AdmissionPolicy '([^']+)'")
# `Kind.group "name" is invalid: spec.field: Invalid value: ...`: the API server's
# validation. A kind with a group (a dot) is a CRD's; a bare kind is built in.
_INVALID = re.compile(r'^(\w+)(\.[\w.-]+)? "[^"]*" is invalid: ([\w.\[\]-]+)')
# The authorizer's refusal: `... is forbidden: User "u" cannot create resource "r" ...`.
_UNAUTHORIZED = re.compile(r'is forbidden: User "([^"]+)" cannot (\w+) resource "([^"]+)"')
_STACK_BROKE = "the stack broke: "


def kind_of(layer: str) -> str:
    """`admission webhook: validator.x` -> `admission webhook`."""
    return layer.split(":", 1)[0].strip()


def check_declared(layer: str) -> str | None:
    """Why a catalog's `layer:` is not one of the declarable kinds, or None."""
    if kind_of(layer) in DECLARABLE:
        return None
    return f"layer {layer!r} is not one of: {', '.join(DECLARABLE)} (optionally `kind: detail`)"


def layer_of(result: str, reason: str, declared: str) -> str:
    """The layer behind one result: the responder the reason names, else `declared`.

    `result` is the result word; only an ERROR can be the stack's or the harness's.
    """
    if result == "ERROR":
        if reason.startswith(_STACK_BROKE):
            return f"{STACK}: {reason.removeprefix(_STACK_BROKE)}"
        if reason.startswith(CLUSTER_NOT_STARTED):
            return STACK
    if match := _WEBHOOK_DENIED.search(reason):
        return f"{ADMISSION_WEBHOOK}: {match.group(1)}"
    if match := _WEBHOOK_UNANSWERED.search(reason):
        return f"{ADMISSION_WEBHOOK}: {match.group(1)} (did not answer)"
    if match := _ADMISSION_POLICY.search(reason):
        return f"{ADMISSION_POLICY}: {match.group(1)}"
    if match := _UNAUTHORIZED.search(reason):
        return f"{AUTHORIZATION}: {match.group(1)} cannot {match.group(2)} {match.group(3)}"
    if match := _INVALID.search(reason):
        kind = CRD_VALIDATION if match.group(2) else API_VALIDATION
        return f"{kind}: {match.group(1)} {match.group(3)}"
    if result == "ERROR":
        return HARNESS
    return declared


def counts_by_kind(layers: Iterable[str]) -> dict[str, int]:
    """How many results each kind of layer is behind, in the order of KINDS."""
    counted = Counter(kind_of(layer) for layer in layers if layer)
    return {kind: counted[kind] for kind in KINDS if counted[kind]}
