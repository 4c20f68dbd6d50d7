"""Requests a policy says the API server must refuse, or may answer either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainjob_conformance.kube.errors import Rejected


def rejection_of(request: Callable[[], Any]) -> Rejected:
    """Run a request that the policy says must be refused; fail if it is accepted.

    Only a refusal counts: an unreachable webhook or a server error is the
    stack's failure and propagates as such.
    """
    __tracebackhide__ = True
    try:
        request()
    except Rejected as refused:
        return refused
    raise AssertionError("the request was accepted, but the policy says it must be rejected")


class AdmissionAnswer:
    """Allowed or forbidden, for policies whose verdict differs by release."""

    def __init__(self, verdict: str, detail: str) -> None:
        self.verdict = verdict
        self.detail = detail

    def __repr__(self) -> str:
        return f"{self.verdict}: {self.detail}"


def admission_answer(request: Callable[[], Any]) -> AdmissionAnswer:
    """Send a request and report the verdict; errors other than 403 propagate."""
    try:
        request()
    except Rejected as refused:
        if refused.status != 403:
            raise
        return AdmissionAnswer("forbidden", refused.message)
    return AdmissionAnswer("allowed", "the request was accepted")
