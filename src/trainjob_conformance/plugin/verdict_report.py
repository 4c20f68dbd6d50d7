"""A policy test's verdict on its pytest report, written and read back.

The worker that ran the test judges each phase's report (plugin/verdicts.py)
and writes the verdict into the report's user_properties, which travel from an
xdist worker to the controller; there the results collector (plugin/results.py)
reads it back with `decode`. Both sides of that encoding are here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.errors import cluster_not_started
from trainjob_conformance.plugin import stash
from trainjob_conformance.plugin.verdicts import judge
from trainjob_conformance.report.model import ERROR

# The user_properties a policy test's report carries.
_POLICY = "policy"
_RESULT = "policy_result"
_REASON = "policy_reason"
_DETAILS = "policy_details"
_RECORD = "policy_record"


@dataclass(frozen=True)
class Verdict:
    """One judged phase of a policy test, as the controller reads it."""

    policy: str
    result: str
    reason: str
    details: str
    record: str | None  # JSON text of the test's record (kube/record.py), if it kept one


def mark_policy(item: pytest.Item, policy_id: str) -> None:
    """At collection: every report of the test names its policy."""
    item.user_properties.append((_POLICY, policy_id))


def policy_of(report: pytest.TestReport) -> str | None:
    """The policy of any report of a policy test, judged or not."""
    policy = dict(report.user_properties).get(_POLICY)
    return str(policy) if policy is not None else None


def decode(report: pytest.TestReport) -> Verdict | None:
    """The verdict a report carries, or None for a phase that was not judged."""
    props = dict(report.user_properties)
    if _RESULT not in props:
        return None
    record = props.get(_RECORD)
    return Verdict(
        policy=str(props.get(_POLICY)),
        result=str(props[_RESULT]),
        reason=str(props.get(_REASON) or ""),
        details=str(props.get(_DETAILS) or ""),
        record=str(record) if record is not None else None,
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[stash.CALL_REPORT] = report
    policy_id = stash.policy_id(item)
    if policy_id is None:
        return report
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _encode(item, call, report)
    return report


def _gap_not_judged(item: pytest.Item, report: pytest.TestReport) -> str | None:
    """Why a passing test of a policy with a known gap (the catalog marks it at
    collection) is no verdict: it never entered its holds() block, so on a release
    where the gap applies the gap could not have been judged."""
    context = item.stash.get(stash.CONTEXT, None)
    if report.when != "call" or not report.passed or context is None or context.judged:
        return None
    if item.get_closest_marker("known_gap") is None:
        return None
    return (
        f"{context.id} names a known gap in the catalog, but the test never entered its "
        f"`with trainjob_policy.holds():` block on {context.policy.component_name} "
        f"{context.trainer_version}, so the gap cannot be judged"
    )


def _encode(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    context = item.stash.get(stash.CONTEXT, None)
    owner = item.config.stash[stash.SESSION]
    # The cluster the test actually used (a fixture may stand in for the session's).
    cluster = getattr(item, "funcargs", {}).get("trainjob_cluster") or owner.handle
    health = cluster.health if isinstance(cluster, ClusterHandle) else None
    word, reason, details = judge(
        report, call.excinfo, health, context.outcome if context else None
    )
    unjudged = _gap_not_judged(item, report)
    if unjudged is not None:
        # A defect of the test, not a verdict on the policy: an error, whatever the release.
        report.outcome = "failed"
        word, reason = ERROR, unjudged
    if owner.start_error is not None and report.failed:
        word, reason = ERROR, cluster_not_started(owner.start_error)
    report.user_properties += [(_RESULT, word), (_REASON, reason), (_DETAILS, details)]
    recorder = item.stash.get(stash.RECORDER, None)
    if recorder is not None:
        # JSON text: user_properties travel from an xdist worker to the controller.
        namespace = getattr(item, "funcargs", {}).get("trainjob_namespace")
        record = {"namespace": namespace, "entries": recorder.entries}
        report.user_properties.append((_RECORD, json.dumps(record)))
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None and reason:
        # pytest's short summary and JUnit's message attribute read the crash
        # line, which starts with the exception's dotted class name; they
        # should say what the results say.
        crash.message = reason
    if word == ERROR:
        if details:
            report.sections.append(("stack watch", details))
        # pytest, its terminal summary and JUnit call a failure outside the
        # test body an error: the policy was not judged.
        report.when = "setup"
