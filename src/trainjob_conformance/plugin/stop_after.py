"""Stop a run at the first failure of named policies (`compat`'s stack checks).

A compat cell is incompatible as soon as one stack check fails (a plain
TrainJob never admitted, a webhook refusing the other's objects); what the
other policies would say about such a stack is not what the table reports, and
each of them waits out its own bound on a stack that does not work (up to
60 s a policy, measured: docs/compat.md). So the named policies run first, and
once one has failed the tests not yet started are skipped, with that failure
as their reason. Under xdist the workers share the first failure through a
file in the run directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainjob_conformance.plugin import stash
from trainjob_conformance.plugin.verdict_report import decode
from trainjob_conformance.report.model import ERROR, FAIL

FIRST_FAILURE_FILE = "first-stack-failure.txt"


class StopAfterFailure:
    """Runs `policies` first; after one of them fails, skips what has not started."""

    def __init__(self, policies: tuple[str, ...], run_dir: Path) -> None:
        self.policies = policies
        self.marker = run_dir / FIRST_FAILURE_FILE

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # A stable sort: the named policies first, each group in collected order.
        items.sort(key=lambda item: stash.policy_id(item) not in self.policies)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        verdict = decode(report)
        if verdict is None or verdict.policy not in self.policies:
            return
        if verdict.result not in (FAIL, ERROR):
            return
        first = (verdict.reason or verdict.result).splitlines()[0][:300]
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        try:  # the first failure wins, whichever worker saw it
            fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as out:
            out.write(f"{verdict.policy} {verdict.result}: {first}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        try:
            failure = self.marker.read_text()
        except OSError:
            return
        pytest.skip(
            f"not run: the stack check {failure} (the cell stops at its first failed stack check)"
        )
