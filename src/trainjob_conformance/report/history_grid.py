"""The history's grid: policies as rows, runs as columns, in the order the runs started.

Each report directory (`run`/`matrix --report DIR`) holds one result file per
profile; every result file is one column. Columns are sorted by the run's
start time; a cell is a policy's worst result in one run, or ABSENT.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    PASS,
    SKIPPED,
    PolicyResult,
    RunReport,
    read_reports,
    worst_result,
)
from trainjob_conformance.report.words import ABSENT

# Durations of these results are the policy's own work; skipped and
# not-applicable tests return at once, so they would only drag the trend down.
TIMED = (PASS, FAIL, KNOWN_GAP, GAP_CLOSED, ERROR)


@dataclass(frozen=True)
class Run:
    """One column: one result file of one report directory."""

    source: Path  # the report directory; diagnostics paths are relative to it
    report: RunReport

    @property
    def label(self) -> str:
        return self.source.name or str(self.source)


@dataclass
class Cell:
    result: str  # a result word, or ABSENT
    seconds: float | None  # the policy's tests together; None if absent
    tests: list[PolicyResult] = field(default_factory=list)


@dataclass
class Trend:
    """A policy's duration over the runs where it did real work."""

    seconds: list[float | None]  # per column; None where not timed

    @property
    def values(self) -> list[float]:
        return [s for s in self.seconds if s is not None]

    def summary(self) -> tuple[float, float, float] | None:
        """(min, median, max), or None when no run timed the policy."""
        values = self.values
        if not values:
            return None
        return min(values), statistics.median(values), max(values)


@dataclass
class Row:
    policy: str
    title: str
    cells: list[Cell]

    @property
    def trend(self) -> Trend:
        return Trend([c.seconds if c.result in TIMED else None for c in self.cells])


@dataclass
class History:
    runs: list[Run]
    rows: list[Row]


def load_runs(directories: list[Path]) -> list[Run]:
    """Every result file of every directory, oldest run first."""
    seen: dict[Path, Path] = {}
    runs: list[Run] = []
    for directory in directories:
        try:
            exists = directory.exists()
        except OSError as error:  # e.g. a name too long even to look up
            raise ConformanceError(
                f"report directory {directory} cannot be read ({error.strerror or error})"
            ) from None
        if not exists:
            raise ConformanceError(
                f"report directory {directory} does not exist; pass directories written by "
                "`trainjob-conformance run --report DIR` or `matrix --report DIR`"
            )
        resolved = directory.resolve()
        if resolved in seen:
            also = f" (also as {seen[resolved]})" if str(seen[resolved]) != str(directory) else ""
            raise ConformanceError(f"{directory} is given twice{also}; give each report once")
        seen[resolved] = directory
        source = directory if directory.is_dir() else directory.parent
        runs += [Run(source, report) for report in read_reports(directory)]
    # An unknown start time ("") sorts first; ties keep the order given.
    return sorted(runs, key=lambda run: run.report.started)


def build_history(runs: list[Run]) -> History:
    titles: dict[str, str] = {}
    for run in runs:  # oldest first: the newest run's title wins
        for result in run.report.results:
            titles[result.policy] = result.title
    rows = []
    for policy in sorted(titles):
        cells = []
        for run in runs:
            tests = [r for r in run.report.results if r.policy == policy]
            if tests:
                # Judged by the tests that ran: a variant skipped on this cluster
                # (TJ-EDIT-008's that needs containers) does not hide its sibling's word.
                ran = [r for r in tests if r.result != SKIPPED] or tests
                word = worst_result(r.result for r in ran)
                cells.append(Cell(word, round(sum(r.seconds for r in tests), 1), tests))
            else:
                cells.append(Cell(ABSENT, None))
        rows.append(Row(policy, titles[policy], cells))
    return History(runs, rows)
