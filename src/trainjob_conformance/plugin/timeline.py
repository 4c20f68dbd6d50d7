"""Per-test wall time and cluster timeline, for `trainjob-conformance bench`.

With `--trainjob-timeline FILE`, each test's `trainjob_view` reads the
timestamps of what the test created just before its cleanup runs (so nothing
is gone yet) and attaches them to the test's report; the controller process
(which sees every xdist worker's reports) adds the test's setup, call and
teardown durations and writes one JSON file at the end of the session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.bench.timeline import timeline_of
from trainjob_conformance.plugin.verdict_report import decode, policy_of
from trainjob_conformance.policies.view import TrainJobView

TIMELINE = "trainjob_timeline"


def record(item: pytest.Item, view: TrainJobView, began: float, ended: float) -> None:
    """Read the test's timeline now (before cleanup) and attach it to its reports."""
    timeline = timeline_of(view.kube, view.namespace, view.cleanup.objects, began, ended)
    # The namespace, so that `bench` can find the test's writes in the audit log.
    item.user_properties.append((TIMELINE, {**timeline.to_json(), "namespace": view.namespace}))


class TimelineRecorder:
    """Collects, in the controller, one row per policy test: durations and timeline."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.rows.setdefault(
            report.nodeid, {"test": report.nodeid, "setup": 0.0, "call": 0.0, "teardown": 0.0}
        )
        row[report.when] = round(report.duration, 3)
        # From the setup's start to the teardown's end, on the worker's clock:
        # the phases' durations leave out what runs between them (the
        # harness's verdict hooks, the report's trip to the controller).
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if start is not None and stop is not None:
            row["start"] = min(row.get("start", start), start)
            row["stop"] = max(row.get("stop", stop), stop)
        policy, verdict = policy_of(report), decode(report)
        if policy is not None:
            row["policy"] = policy
        if verdict is not None:
            row["result"] = verdict.result
        props = dict(report.user_properties)
        if TIMELINE in props:
            row["timeline"] = props[TIMELINE]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        tests = [row for row in self.rows.values() if "policy" in row]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"tests": tests}, indent=2))
