"""Collects policy verdicts during a run; prints the summary and writes the report."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.session import ClusterSession
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.policies.verdicts import reason_of
from trainjob_conformance.report.model import (
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    PASS,
    SKIPPED,
    PolicyResult,
    RunReport,
    read_reports,
)
from trainjob_conformance.report.render import write_reports


class PolicyResults:
    """Per-run collector of policy verdicts, registered as a plugin object.

    Under xdist it runs in the controller, which sees every worker's reports.
    """

    def __init__(
        self,
        config: pytest.Config,
        catalog: Callable[[], dict[str, Policy]],
        session: ClusterSession,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.session = session
        self.rows: list[PolicyResult] = []
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.started_monotonic = time.monotonic()

    @property
    def report_dir(self) -> Path | None:
        option = self.config.getoption("--trainjob-report")
        return Path(option).resolve() if option else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "policy_result" not in props:
            return
        policy_id = str(props.get("policy"))
        result = str(props["policy_result"])
        row = PolicyResult(
            policy=policy_id,
            title=self.catalog()[policy_id].title,
            result=result,
            seconds=round(report.duration, 1),
            test=report.nodeid,
            reason=reason_of(report) if result != PASS else "",
        )
        if result in (FAIL, GAP_CLOSED, KNOWN_GAP, SKIPPED) and self.report_dir is not None:
            row.diagnostics = self._write_diagnostics(report)
        self.rows.append(row)

    def _write_diagnostics(self, report: pytest.TestReport) -> str:
        assert self.report_dir is not None
        owner = self.session
        profile = self.config.getoption("--trainjob-profile")
        if owner.handle is not None and owner.handle.profile:
            profile = owner.handle.profile
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", report.nodeid).strip("_") + ".txt"
        relative = Path("diagnostics") / profile / name
        path = self.report_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report.longreprtext or reason_of(report))
        return str(relative)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.report_dir is None or not self.rows or hasattr(self.config, "workerinput"):
            return
        owner = self.session
        handle = owner.handle
        run = RunReport(
            profile=(handle.profile if handle and handle.profile else "")
            or self.config.getoption("--trainjob-profile"),
            provider=handle.provider if handle else "unknown",
            versions=dict(handle.versions) if handle else {},
            started=self.started,
            wall_seconds=round(time.monotonic() - self.started_monotonic, 1),
            cluster_start_seconds=owner.startup_seconds,
            results=sorted(self.rows, key=lambda r: (r.policy, r.test)),
        )
        run.write(self.report_dir)
        write_reports(read_reports(self.report_dir), self.report_dir)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        owner = self.session
        terminalreporter.section("TrainJob conformance")
        if owner.handle is not None:
            versions = ", ".join(f"{k} {v}" for k, v in owner.handle.versions.items())
            terminalreporter.write_line(f"cluster: {owner.handle.provider}; {versions}")
        if owner.startup_seconds is not None:
            terminalreporter.write_line(f"cluster start: {owner.startup_seconds:.1f}s")
        for row in sorted(self.rows, key=lambda r: (r.policy, r.test)):
            terminalreporter.write_line(
                f"{row.policy:14} {row.result:15} {row.seconds:7.1f}s  {row.test}"
            )
        if self.report_dir is not None:
            terminalreporter.write_line(f"report: {self.report_dir / 'conformance.html'}")
