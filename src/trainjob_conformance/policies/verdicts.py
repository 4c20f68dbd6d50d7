"""A policy's verdict: holds, fails, known upstream gap, gap closed, not applicable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from trainjob_conformance.policies.catalog import Outcome, Policy
from trainjob_conformance.report.model import (
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
)

# Leads the failure message of a closed gap, so a report can tell it apart.
GAP_CLOSED_MARKER = "GAP CLOSED"


class PolicyContext:
    """The policy a test proves, and what the catalog expects of this Trainer."""

    def __init__(self, policy: Policy, trainer_version: str) -> None:
        self.policy = policy
        self.trainer_version = trainer_version
        self.outcome = policy.outcome(trainer_version)
        self.judged = False

    @property
    def id(self) -> str:
        return self.policy.id

    def expected(self, key: str) -> Any:
        return self.policy.expected(key, self.trainer_version)

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
        if self.outcome is not Outcome.KNOWN_GAP:
            yield
            return
        reference = self.policy.gap_reference(self.trainer_version)
        try:
            yield
        except AssertionError as error:
            first_line = str(error).splitlines()[0] if str(error) else "assertion failed"
            pytest.xfail(
                f"KNOWN UPSTREAM GAP {self.id} on Trainer {self.trainer_version}: {reference} "
                f"(observed: {first_line})"
            )
        pytest.fail(
            f"{GAP_CLOSED_MARKER}: {self.id} now holds on Trainer {self.trainer_version}; the catalog "
            f"lists it as a known gap ({reference}). Update fixtures/policies.yaml.",
            pytrace=False,
        )


def reason_of(report: pytest.TestReport) -> str:
    """One line saying why a test did not simply pass."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return str(crash.message).strip().splitlines()[0]
    text = str(longrepr or "").strip()
    return text.splitlines()[-1] if text else ""


def policy_result(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return KNOWN_GAP
    if report.failed and GAP_CLOSED_MARKER in str(report.longrepr):
        return GAP_CLOSED
    if report.skipped:
        # Only the catalog's version ranges make a policy not applicable; any
        # other skip is a run that did not happen, and is reported as such.
        expected = dict(report.user_properties).get("expected_outcome")
        return NOT_APPLICABLE if expected == Outcome.NOT_APPLICABLE.value else SKIPPED
    return PASS if report.passed else FAIL
