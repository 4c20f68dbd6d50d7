"""Requests a policy says the API server must refuse, must accept, or may answer either way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import Kind
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.policies.view import TrainJobView

T = TypeVar("T")


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


def acceptance_of(request: Callable[[], T]) -> T:
    """Run a request that the policy says must be accepted; a refusal fails it, in
    the cluster's words (a server error propagates as the stack's failure)."""
    __tracebackhide__ = True
    try:
        return request()
    except Rejected as refused:
        raise AssertionError(
            f"the request was refused, but the policy says it must be accepted: {refused.message}"
        ) from None


def _send_until_accepted(
    request: Callable[[], T], seconds: float, why: str
) -> tuple[list[T], list[Rejected]]:
    """Send `request` until it is accepted, for at most `seconds`: its answer
    (none if it was refused all along) and every refusal before."""
    answers: list[T] = []
    refusals: list[Rejected] = []

    def accepted() -> bool | NotYet:
        try:
            answers.append(request())
        except Rejected as refused:
            refusals.append(refused)
            return NotYet(f"refused: {refused.message}")
        return True

    # Refused all along is an answer too: each caller says what it means for its policy.
    with contextlib.suppress(WaitTimeout):
        wait_for(f"the request to be accepted once {why}", accepted, timeout=seconds)
    return answers, refusals


def lasting_rejection(request: Callable[[], Any], seconds: float, why: str) -> Rejected:
    """Send a request the policy says must be refused, again and again for `seconds`;
    fail the first time it is accepted.

    For a webhook that judges from its manager's cache, which can lag behind
    what the test has just read from the API server (`why` says what it may
    not have seen yet): one refusal could be that lag, not the policy. Costs
    `seconds` only when the policy holds.
    """
    __tracebackhide__ = True
    answers, refusals = _send_until_accepted(request, seconds, why)
    if not answers:
        return refusals[-1]
    accepted_text = "the request was accepted, but the policy says it must be rejected"
    if refusals:
        count = f"{len(refusals)} refusal" + ("s" if len(refusals) > 1 else "")
        accepted_text += f" (after {count} while {why}: {refusals[-1].message})"
    raise AssertionError(accepted_text)


def accepted_within(request: Callable[[], T], seconds: float, why: str) -> T:
    """Send a request the policy says must be accepted, again while it is refused,
    for at most `seconds`; the answer once accepted.

    For a webhook that judges from its manager's cache, which can lag behind
    what the test has just read from the API server (`why` says what it may
    not have seen yet): a refusal in that moment is the lag, not the policy.
    Refused for the whole bound, the policy does not hold.
    """
    __tracebackhide__ = True
    answers, refusals = _send_until_accepted(request, seconds, why)
    if not answers:
        raise AssertionError(
            f"the request was refused for {seconds:g} s ({len(refusals)} times), but the "
            f"policy says it must be accepted once {why}: {refusals[-1].message}"
        )
    return answers[-1]


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


def wait_dry_run_answer(
    view: TrainJobView, manifest: dict[str, Any], field: str, value: str, why: str
) -> dict[str, Any]:
    """Create `manifest` as a dry run until the answer's spec `field` is `value`: a
    webhook that defaults from its manager's cache has caught up (`why` says with what).

    Recorded as one wait (`kubectl create --dry-run=server -o jsonpath`), not as the
    probes it sends.
    """
    kind = Kind(manifest["apiVersion"], manifest["kind"])
    view.record_wait(
        f"{why} (a dry-run {kind.kind} is given spec.{field}={value})",
        kind,
        name=manifest["metadata"]["name"],
        jsonpath=f"{{.spec.{field}}}",
        equals=value,
        dry_run_create=manifest,
    )

    def answered() -> dict[str, Any] | NotYet:
        answer = view.kube.create(manifest, dry_run=True)
        found = answer["spec"].get(field)
        return answer if found == value else NotYet(f"spec.{field} is {found!r}")

    with view.unrecorded():
        return view.wait(why, answered)


def kueues_log_names(view: TrainJobView, *words: str) -> bool:
    """Whether a line of Kueue's recent log names every one of `words` (a refusal
    Kueue met, which it records as no event)."""
    tail = view.cluster.controller_log_tail("kueue", 400).replace('\\"', '"')
    return any(all(word in line for word in words) for line in tail.splitlines())


def refusal_in_kueues_log(view: TrainJobView, trainjob: str) -> str:
    """The last refusal Kueue logged for a request about the named TrainJob: the
    cluster's words for why Kueue's start of it did not happen, which Kueue records
    as no event."""
    for line in reversed(view.cluster.controller_log_tail("kueue", 400).splitlines()):
        line = line.replace('\\"', '"')  # a JSON log line quotes the message's quotes
        if "denied the request" in line and f'"{trainjob}"' in line and "admission webhook" in line:
            message = line[line.index("admission webhook") :]
            return "Kueue's log: " + message.split('",')[0][:300]
    return "Kueue's log names no refusal for it"
