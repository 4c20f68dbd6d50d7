"""The history page: what each header, cell and sparkline says, for history.html.j2.

The page is one self-contained HTML file: inline CSS, a few lines of inline
JavaScript for the detail panel, no network. This module works out the text
and numbers; the template writes the markup and escapes every value.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from trainjob_conformance.report.flaky import FAILING, FLAKY, PASSING, PolicyState
from trainjob_conformance.report.history_grid import Cell, History, Row, Run, Trend
from trainjob_conformance.report.templating import render_page
from trainjob_conformance.report.words import ABSENT, Word, every_word, lookup
from trainjob_conformance.stack.compose import describe

SPARK_WIDTH, SPARK_HEIGHT = 120, 22


@dataclass(frozen=True)
class Spark:
    """A policy's duration trend as an inline SVG: one dot per timed run, 0 s at the bottom."""

    title: str
    points: list[str]  # "x,y" per timed run, in column order
    dots: list[tuple[Word, str, str]]  # (its result's entry, x, y)


@dataclass(frozen=True)
class GroupHeader:
    """Consecutive columns of one report directory (one night's profiles)."""

    run: Run
    span: int
    date: str


@dataclass(frozen=True)
class RunHeader:
    run: Run
    notes: str
    tooltip: str


@dataclass(frozen=True)
class PageCell:
    id: str
    word: Word
    first: bool  # the first column of its report directory
    tooltip: str
    detail: str  # JSON for the detail panel


@dataclass(frozen=True)
class PageRow:
    row: Row
    trend: str  # the trend in words
    median: str
    spark: Spark
    cells: list[PageCell]
    # The policy's FLAKY and FAILING states (report/flaky.py): (tag, the flips in words).
    states: tuple[tuple[str, str], ...] = ()


def diagnostics_link(run: Run, diagnostics: str, page_dir: Path) -> str:
    """The diagnostics file as a link relative to the page, or "" if it is not a plain path.

    A result file is data, possibly from elsewhere: an absolute path, `..` or a
    scheme such as `javascript:` never becomes a link.
    """
    if not diagnostics or ":" in diagnostics or "\\" in diagnostics:
        return ""
    path = PurePosixPath(diagnostics)
    if path.is_absolute() or ".." in path.parts:
        return ""
    target = os.path.relpath(run.source.resolve() / path, page_dir.resolve())
    return quote(Path(target).as_posix())


def _seconds(value: float) -> str:
    return f"{value:.1f}s"


def _trend_text(trend: Trend) -> str:
    summary = trend.summary()
    if summary is None:
        return "no timed run"
    low, mid, high = summary
    runs = len(trend.values)
    return (
        f"duration over {runs} run{'s' * (runs != 1)}: min {_seconds(low)}, "
        f"median {_seconds(mid)}, max {_seconds(high)}"
    )


def sparkline(trend: Trend, cells: list[Cell]) -> Spark:
    points: list[str] = []
    dots: list[tuple[Word, str, str]] = []
    top = max(trend.values, default=0.0) or 1.0
    count = len(trend.seconds)
    step = (SPARK_WIDTH - 6) / max(count - 1, 1)
    for index, (value, cell) in enumerate(zip(trend.seconds, cells, strict=True)):
        if value is None:
            continue
        x = 3 + index * step if count > 1 else SPARK_WIDTH / 2
        y = SPARK_HEIGHT - 3 - (value / top) * (SPARK_HEIGHT - 6)
        points.append(f"{x:.1f},{y:.1f}")
        dots.append((lookup(cell.result), f"{x:.1f}", f"{y:.1f}"))
    return Spark(_trend_text(trend), points, dots)


def _counts(run: Run) -> str:
    counts = run.report.counts()
    return ", ".join(f"{counts[w.word]} {w.word}" for w in every_word() if w.word in counts)


def _run_tooltip(run: Run) -> str:
    report = run.report
    lines = [
        f"{report.profile} on {report.provider}, started {report.started or 'at an unknown time'}",
        describe(report.profile),
        f"report directory: {run.source}",
        f"wall time {_seconds(report.wall_seconds)}"
        + (
            f", cluster start {_seconds(report.cluster_start_seconds)}"
            if report.cluster_start_seconds is not None
            else ""
        ),
        _counts(run),
        *(f"{name} {version}" for name, version in report.versions.items()),
    ]
    if report.interrupted:
        lines.append("interrupted: policies it did not reach are absent")
    lines += [f"stack broke: {error}" for error in report.stack_errors]
    return "\n".join(line for line in lines if line)


def _run_header(run: Run) -> RunHeader:
    report = run.report
    clock = report.started[11:16] if len(report.started) >= 16 else ""
    notes = [clock, report.versions.get("trainer", "")]
    # The embedded cluster is the usual case; say when a run was elsewhere.
    notes += [report.provider] if report.provider != "embedded" else []
    notes += ["interrupted"] if report.interrupted else []
    return RunHeader(run, " · ".join(n for n in notes if n), _run_tooltip(run))


def _groups(runs: list[Run]) -> list[GroupHeader]:
    groups: list[tuple[Run, int]] = []
    for run in runs:
        if groups and groups[-1][0].source == run.source:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((run, 1))
    return [
        GroupHeader(run, span, (run.report.started or "time unknown")[:10]) for run, span in groups
    ]


def _detail(row: Row, run: Run, cell: Cell, page_dir: Path) -> str:
    """What the detail panel shows for a cell, as JSON (read by the page's script)."""
    return json.dumps(
        {
            "policy": row.policy,
            "title": row.title,
            "run": f"{run.report.profile}, {run.report.started or 'time unknown'} ({run.label})",
            "result": cell.result,
            "seconds": cell.seconds,
            "tests": [
                {
                    "test": test.test,
                    "result": test.result,
                    "seconds": test.seconds,
                    "reason": test.reason,
                    "layer": test.layer,
                    "css": lookup(test.result).css,
                    "link": diagnostics_link(run, test.diagnostics, page_dir),
                }
                for test in cell.tests
            ],
        }
    )


def _cell_tooltip(row: Row, run: Run, cell: Cell) -> str:
    head = f"{row.policy} on {run.report.profile} ({run.report.started or 'time unknown'}): "
    if cell.result == ABSENT:
        return head + "absent: this run has no result for the policy"
    lines = [f"{head}{cell.result}, {_seconds(cell.seconds or 0.0)}"]
    lines += [
        (f"{test.result}" if len(cell.tests) == 1 else test.test)
        + (f" [{test.layer}]" if test.layer else "")
        + f": {test.reason}"
        for test in cell.tests
        if test.reason
    ]
    if any(test.diagnostics for test in cell.tests):
        lines.append("click for the diagnostics")
    return "\n".join(lines)


def _state_tags(states: list[PolicyState]) -> tuple[tuple[str, str], ...]:
    """A tag per profile and provider where the policy is not PASSING, with its flips."""
    tags = []
    for state in states:
        if state.state == PASSING:
            continue
        where = f"{state.profile} ({state.provider})"
        detail = "\n".join(state.flips) or f"newest: {state.last}"
        tags.append((f"{state.state} {where}", f"{state.state} over {state.runs} runs:\n{detail}"))
    return tuple(tags)


def _page_row(
    index: int,
    row: Row,
    history: History,
    firsts: set[int],
    page_dir: Path,
    states: list[PolicyState] | None = None,
) -> PageRow:
    trend = row.trend
    summary = trend.summary()
    cells = [
        PageCell(
            id=f"c{index}-{column}",
            word=lookup(cell.result),
            first=column in firsts,
            tooltip=_cell_tooltip(row, run, cell),
            detail=_detail(row, run, cell, page_dir),
        )
        for column, (run, cell) in enumerate(zip(history.runs, row.cells, strict=True))
    ]
    median = _seconds(summary[1]) if summary else ""
    return PageRow(
        row,
        _trend_text(trend),
        median,
        sparkline(trend, row.cells),
        cells,
        _state_tags(states or []),
    )


def html_page(history: History, page_dir: Path, states: list[PolicyState] | None = None) -> str:
    runs = history.runs
    by_policy: dict[str, list[PolicyState]] = {}
    for state in states or []:
        by_policy.setdefault(state.policy, []).append(state)
    groups = _groups(runs)
    firsts: set[int] = set()
    column = 0
    for group in groups:
        firsts.add(column)
        column += group.span
    totals = {entry.word: 0 for entry in every_word()}
    for row in history.rows:
        for cell in row.cells:
            totals[cell.result] += 1
    sources = {run.source for run in runs}
    return render_page(
        "history.html.j2",
        policies=len(history.rows),
        runs=len(runs),
        directories=f"{len(sources)} report director{'ies' if len(sources) != 1 else 'y'}",
        first=runs[0].report.started or "?",
        last=runs[-1].report.started or "?",
        totals=totals,
        groups=groups,
        headers=[_run_header(run) for run in runs],
        rows=[
            _page_row(i, row, history, firsts, page_dir, by_policy.get(row.policy))
            for i, row in enumerate(history.rows)
        ],
        flaky=sum(s.state == FLAKY for s in states or []),
        failing=sum(s.state == FAILING for s in states or []),
        spark_width=SPARK_WIDTH,
        spark_height=SPARK_HEIGHT,
    )
