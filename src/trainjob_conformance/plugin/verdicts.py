"""A policy's verdict: holds, fails, known upstream gap, gap closed, not applicable, or
the stack broke (ERROR), and the one-line reason for it in the cluster's own words."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

from trainjob_conformance.cluster.health.stack_watch import StackBroken, StackHealth
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import ApiError, StackError
from trainjob_conformance.kube.record import Recorder
from trainjob_conformance.kube.waits import WaitTimeout, wait_for
from trainjob_conformance.policies.catalog import Outcome, Policy
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
)

# The stack watch looks every 0.5 s (2 s for in-cluster controllers).
_WATCH_GRACE_SECONDS = 2.5
# Leads the failure message of a closed gap, so a report can tell it apart.
GAP_CLOSED_MARKER = "GAP CLOSED"


class PolicyContext:
    """The policy a test proves, and what the catalog expects of this Trainer."""

    def __init__(
        self,
        policy: Policy,
        trainer_version: str,
        before: Mapping[str, str] | None = None,
        now: Mapping[str, str] | None = None,
    ) -> None:
        self.policy = policy
        self.trainer_version = trainer_version
        # Each component's release before an upgrade, where the stack was upgraded
        # (the UP family); empty otherwise.
        self.before = dict(before or {})
        # Each component's release the stack runs now.
        self.now = dict(now or {})
        self.outcome = policy.outcome(trainer_version, self.before, self.now)
        self.judged = False
        self.evidence: str | None = None
        # The test's record: what happens inside holds() is what the policy judged.
        self.recorder: Recorder | None = None

    @property
    def id(self) -> str:
        return self.policy.id

    def expected(self, key: str) -> Any:
        return self.policy.expected(key, self.trainer_version)

    def gap_exercised(self, evidence: str) -> None:
        """Say that the test has shown the mechanism behind a known gap at work.

        A known gap can only be declared closed after this: a test that never
        set the gap up (the Pods never carried the gate, say) proves nothing.
        """
        self.evidence = evidence

    @contextmanager
    def holds(self) -> Iterator[None]:
        """Wrap the assertions that state the policy.

        For a known upstream gap only these assertions decide: failing here is
        the known gap (xfail, named); passing means the gap has closed and the
        run fails so the catalog gets updated. A failure elsewhere in the test
        is an ordinary failure, never excused as the gap.
        """
        __tracebackhide__ = True
        self.judged = True
        observing = (
            self.recorder.observing() if self.recorder is not None else contextlib.nullcontext()
        )
        if self.outcome is not Outcome.KNOWN_GAP:
            with observing:
                yield
            return
        reference = self.policy.gap_reference(self.trainer_version, self.before, self.now)
        try:
            with observing:
                yield
        except AssertionError as error:
            first_line = str(error).splitlines()[0] if str(error) else "assertion failed"
            since = ""
            if self.before.get(self.policy.component):
                since = f" upgraded from {self.before[self.policy.component]}"
            if self.before.get("kueue"):
                since += f" and Kueue {self.before['kueue']}"
            pytest.xfail(
                f"KNOWN UPSTREAM GAP {self.id} on {self.policy.component_name} {self.trainer_version}{since}: {reference} "
                f"(observed: {first_line})"
            )
        if self.evidence is None:
            pytest.fail(
                f"{self.id} is a known gap on {self.policy.component_name} {self.trainer_version} and its assertions "
                "passed, but the test never showed the gap's mechanism at work "
                "(trainjob_policy.gap_exercised), so the gap cannot be declared closed",
                pytrace=False,
            )
        pytest.fail(
            f"{GAP_CLOSED_MARKER}: {self.id} now holds on {self.policy.component_name} {self.trainer_version} "
            f"({self.evidence}); the catalog lists it as a known gap ({reference}). "
            "Update fixtures/policies.yaml.",
            pytrace=False,
        )


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _where(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    frames = traceback.extract_tb(excinfo.tb)
    if not frames:
        return "the test"
    frame = frames[-1]
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


def reason_from_exception(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """One line in the cluster's or the policy's words, never an exception class name."""
    error = excinfo.value
    if isinstance(error, StackBroken):
        return f"the stack broke: {error}"
    if isinstance(error, ApiError):
        return error.message.strip().splitlines()[0] if error.message.strip() else str(error)
    if isinstance(error, (AssertionError, ConformanceError)):
        return _first_line(str(error)) or f"assertion failed at {_where(excinfo)}"
    if isinstance(error, KeyError):
        return f"{_where(excinfo)}: the object has no {error.args[0]!r}"
    text = _first_line(str(error))
    return f"{_where(excinfo)}: {text}" if text else f"the test stopped at {_where(excinfo)}"


def reason_from_report(report: pytest.TestReport) -> str:
    """The reason of a report that carries no exception (skips, xfails)."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return _first_line(str(crash.message).removeprefix("Failed: "))
    return _first_line(str(longrepr or ""))


def stack_breakage(
    excinfo: pytest.ExceptionInfo[BaseException] | None, health: StackHealth | None
) -> StackBroken | None:
    """The broken stack behind a failure, if there is one."""
    if excinfo is not None and isinstance(excinfo.value, StackBroken):
        return excinfo.value
    if health is None:
        return None
    broken = health.breakages()
    if not broken and excinfo is not None and isinstance(excinfo.value, StackError):
        # The cluster already answered that something is down; give the watch
        # one of its rounds to say which component, so the reason names it.
        try:
            broken = wait_for(
                "the stack watch to name the broken component",
                health.breakages,
                timeout=_WATCH_GRACE_SECONDS,
                interval=0.1,
            )
        except WaitTimeout:
            broken = []
    return StackBroken(broken) if broken else None


def judge(
    report: pytest.TestReport,
    excinfo: pytest.ExceptionInfo[BaseException] | None,
    health: StackHealth | None,
    expected: Outcome | None,
) -> tuple[str, str, str]:
    """(result word, one-line reason, extra diagnostics) of one test phase."""
    if report.passed:
        return PASS, "", ""
    if report.skipped and not hasattr(report, "wasxfail"):
        # Only the catalog's version ranges make a policy not applicable; any
        # other skip is a run that did not happen, and is reported as such.
        word = NOT_APPLICABLE if expected is Outcome.NOT_APPLICABLE else SKIPPED
        return word, reason_from_report(report), ""
    # A failure or a known gap: neither can be trusted if the stack broke.
    broken = stack_breakage(excinfo, health)
    if broken is not None:
        return ERROR, f"the stack broke: {broken}", broken.details()
    if excinfo is not None and isinstance(excinfo.value, StackError):
        return ERROR, reason_from_exception(excinfo), ""
    if excinfo is not None and isinstance(excinfo.value, ConformanceError):
        # The harness could not do its part (a cluster it could not start, an
        # input it could not read): the policy was never judged.
        return ERROR, reason_from_exception(excinfo), ""
    if hasattr(report, "wasxfail"):
        return KNOWN_GAP, reason_from_report(report), ""
    if GAP_CLOSED_MARKER in str(report.longrepr):
        return GAP_CLOSED, reason_from_report(report), ""
    if excinfo is not None:
        return FAIL, reason_from_exception(excinfo), ""
    return FAIL, reason_from_report(report), ""
