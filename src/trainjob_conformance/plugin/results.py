"""Collects policy verdicts during a run; prints the summary and writes the report."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.errors import cluster_not_started
from trainjob_conformance.kube.client import HARNESS_USER_AGENT
from trainjob_conformance.paths import suite
from trainjob_conformance.plugin.expected_run import (
    expected_policies,
    guard_off_reason,
    missing_results,
    project_tests_given,
)
from trainjob_conformance.plugin.options import Settings, is_xdist_worker
from trainjob_conformance.plugin.session import ClusterSession
from trainjob_conformance.plugin.verdict_report import decode
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.policies.layers import counts_by_kind, layer_of
from trainjob_conformance.report.archive import COMMAND_ENV, RECORD_SUFFIX, write_archive
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    PASS,
    PolicyResult,
    RunReport,
    read_reports,
)
from trainjob_conformance.report.render import write_reports
from trainjob_conformance.report.words import lookup
from trainjob_conformance.stack.compose import describe

# Results whose record is always kept; with --trainjob-record every result's is.
_RECORDED_ALWAYS = (FAIL, KNOWN_GAP)
# Results a reader routes upstream, each with the layer behind it.
_ROUTED = (FAIL, KNOWN_GAP, GAP_CLOSED, ERROR)


class PolicyResults:
    """Per-run collector of policy verdicts, registered as a plugin object.

    Under xdist it runs in the controller, which sees every worker's reports.
    """

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        catalog: Callable[[], dict[str, Policy]],
        session: ClusterSession,
    ) -> None:
        self.config = config
        self.settings = settings
        self.catalog = catalog
        self.session = session
        self.rows: list[PolicyResult] = []
        self.interrupted = False
        self.archive_due = False
        self.missing: list[PolicyResult] = []  # the expected-run guard's ERROR rows
        self.guard_off: str | None = None
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.started_monotonic = time.monotonic()

    @property
    def profile(self) -> str:
        handle = self.session.handle
        return handle.profile if handle is not None and handle.profile else self.settings.profile

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        verdict = decode(report)
        if verdict is None:
            return
        policy = self.catalog()[verdict.policy]
        row = PolicyResult(
            policy=verdict.policy,
            title=policy.title,
            result=verdict.result,
            seconds=round(report.duration, 1),
            test=report.nodeid,
            reason=verdict.reason if verdict.result != PASS else "",
        )
        if verdict.result in _ROUTED:
            row.layer = layer_of(verdict.result, verdict.reason, policy.layer)
        if verdict.result != PASS and self.settings.report_dir is not None:
            row.diagnostics = self._write_diagnostics(report, verdict.details)
        keep = verdict.result in _RECORDED_ALWAYS or self.settings.record
        if verdict.record is not None and keep and self.settings.report_dir is not None:
            self._write_record(row, verdict.record)
        self.rows.append(row)

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    def _diagnostics_path(self, nodeid: str, suffix: str) -> tuple[Path, Path]:
        """(absolute, relative to the report directory) of one test's diagnostics file."""
        assert self.settings.report_dir is not None
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_") + suffix
        relative = Path("diagnostics") / self.profile / name
        return self.settings.report_dir / relative, relative

    def _write_record(self, row: PolicyResult, text: str) -> None:
        """The test's record beside its diagnostics, with what `repro` needs to name it."""
        path, _ = self._diagnostics_path(row.test, RECORD_SUFFIX)
        handle = self.session.handle
        record = {
            "policy": row.policy,
            "title": row.title,
            "test": row.test,
            "result": row.result,
            "reason": row.reason,
            "profile": self.profile,
            "versions": dict(handle.versions) if handle is not None else {},
            "user_agent": HARNESS_USER_AGENT,
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **json.loads(text),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2) + "\n")
        if row.diagnostics:
            # The diagnostics say where the record is and what turns it into a bundle.
            with path.with_name(Path(row.diagnostics).name).open("a") as diagnostics:
                diagnostics.write(
                    f"\n\nrecord of what the test sent: {path.name} "
                    f"(trainjob-conformance repro {row.policy} writes a bundle from it)\n"
                )

    def _write_diagnostics(self, report: pytest.TestReport, details: str) -> str:
        path, relative = self._diagnostics_path(report.nodeid, ".txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        text = report.longreprtext or ""
        path.write_text("\n\n".join(part for part in (text, details) if part))
        return str(relative)

    def run_report(self) -> RunReport:
        handle = self.session.handle
        stack_errors = sorted({r.reason for r in self.rows if r.result == ERROR})
        return RunReport(
            profile=self.profile,
            provider=handle.provider if handle else self.settings.request.provider,
            versions=dict(handle.versions) if handle else {},
            started=self.started,
            wall_seconds=round(time.monotonic() - self.started_monotonic, 1),
            cluster_start_seconds=self.session.startup_seconds,
            results=sorted(self.rows, key=lambda r: (r.policy, r.test)),
            interrupted=self.interrupted,
            stack_errors=stack_errors,
            catalog_digest=self._catalog_digest(),
        )

    def _catalog_digest(self) -> str:
        """The project's catalog and every pack's, hashed together (see RunReport)."""
        digest = hashlib.sha256()
        for path in [self.settings.catalog, *(p / "policies.yaml" for p in self.settings.packs)]:
            digest.update(path.read_bytes() if path.is_file() else b"")
        return digest.hexdigest()[:16]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if is_xdist_worker(self.config):
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.interrupted = True
        self._guard_the_expected_run(session)
        report_dir = self.settings.report_dir
        if report_dir is None or not self.rows:
            return
        self.run_report().write(report_dir)
        write_reports(read_reports(report_dir), report_dir)
        self.archive_due = True

    def _guard_the_expected_run(self, session: pytest.Session) -> None:
        """Missing policies are ERROR rows and fail the run (plugin/expected_run.py).

        Not for a run that judged no policy and writes no report (the harness's
        own unit tests), nor an interrupted one (it is partial, and says so).
        """
        if self.interrupted or (not self.rows and self.settings.report_dir is None):
            return
        self.guard_off = guard_off_reason(self.config)
        if self.guard_off is not None:
            return
        # Paths the user named; pytest's own default (testpaths, the invocation
        # directory) names none, and the project's tests are expected then.
        given = self.config.args_source == pytest.Config.ArgsSource.ARGS
        with_project = project_tests_given(list(self.config.args) if given else [], suite().tests)
        expected = expected_policies(self.settings, self.catalog(), with_project)
        self.missing = missing_results(expected, self.rows, self.catalog())
        if self.missing:
            self.rows += self.missing
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # After every sessionfinish hook, so that the JUnit XML is written too.
        if not self.archive_due or self.settings.report_dir is None:
            return
        handle = self.session.handle
        command = os.environ.get(COMMAND_ENV) or shlex.join(
            ["pytest", *config.invocation_params.args]
        )
        catalogs = {"policies.yaml": self.settings.catalog}
        catalogs.update(
            {
                f"packs/{pack.name}/policies.yaml": pack / "policies.yaml"
                for pack in self.settings.packs
            }
        )
        path = write_archive(
            self.settings.report_dir,
            self.profile,
            dict(handle.versions) if handle is not None else {},
            command,
            catalogs,
            images=dict(handle.images) if handle is not None else None,
        )
        config.get_terminal_writer().line(f"results archive: {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows and self.session.start_error is None:
            return
        owner = self.session
        terminalreporter.section("TrainJob conformance")
        if owner.start_error is not None:
            terminalreporter.write_line(cluster_not_started(owner.start_error))
        if owner.handle is not None:
            versions = ", ".join(f"{k} {v}" for k, v in owner.handle.versions.items())
            composed = describe(self.profile)
            versions += f" ({composed})" if composed else ""
            terminalreporter.write_line(f"cluster: {owner.handle.provider}; {versions}")
            if owner.handle.images:
                images = owner.handle.images
                terminalreporter.write_line(
                    f"images: {images.get('source', '?')}, {len(images) - 1} recorded "
                    "with their IDs in the results archive (meta/versions.json)"
                )
        if owner.startup_seconds is not None:
            terminalreporter.write_line(f"cluster start: {owner.startup_seconds:.1f}s")
        # A pack's namespaced IDs are longer than the project's.
        width = max([14, *(len(row.policy) for row in self.rows)])
        for row in sorted(self.rows, key=lambda r: (r.policy, r.test)):
            # The word in its colour from the one table (report/words.py); the padding
            # stays plain, so an inverted word is not a block of colour.
            word = lookup(row.result)
            padding = " " * (15 - len(word.word))
            terminalreporter.ensure_newline()
            terminalreporter.write(f"{row.policy:{width}} ")
            terminalreporter.write(word.word, **word.markup)
            terminalreporter.line(f"{padding} {row.seconds:7.1f}s  {row.test}")
            if row.result == ERROR:
                terminalreporter.write_line(f"{'':{width}} {row.reason}")
            if row.layer:
                terminalreporter.write_line(f"{'':{width}} layer: {row.layer}")
        routed = counts_by_kind(row.layer for row in self.rows)
        if routed:
            terminalreporter.write_line(
                "by layer: " + ", ".join(f"{kind} {count}" for kind, count in routed.items())
            )
        if self.interrupted:
            terminalreporter.write_line(
                "interrupted: policies that did not run are absent from the report"
            )
        elif self.missing:
            terminalreporter.write_line(
                f"expected-run guard: {len(self.missing)} of the catalog's policies ran no "
                f"test: {', '.join(row.policy for row in self.missing)} (ERROR)"
            )
        elif self.guard_off is not None:
            terminalreporter.write_line(
                f"expected-run guard off: {self.guard_off}, so what the catalog expects is not checked"
            )
        if self.settings.report_dir is not None:
            terminalreporter.write_line(f"report: {self.settings.report_dir / 'conformance.html'}")
