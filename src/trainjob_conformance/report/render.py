"""The policy x profile matrix as Markdown and as one self-contained HTML page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.fixes import lacking_line, load_fixes, summary_line
from trainjob_conformance.policies.layers import counts_by_kind
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    SKIPPED,
    PolicyResult,
    RunReport,
    worst_result,
)
from trainjob_conformance.report.templating import render_page
from trainjob_conformance.report.words import ABSENT, WORDS, Word, lookup
from trainjob_conformance.stack.compose import describe


@dataclass(frozen=True)
class Profile:
    """One profile's line above the matrix."""

    profile: str
    provider: str
    started: str
    seconds: str  # the run's wall time, whole seconds
    versions: str
    totals: str


@dataclass(frozen=True)
class MatrixRow:
    policy: str
    title: str
    cells: list[Word]  # one per profile; ABSENT's entry where the profile has no result


@dataclass(frozen=True)
class Problem:
    """A failure or known gap, listed under the matrix with its reason."""

    profile: str
    result: PolicyResult
    word: Word


def _cell(results: list[PolicyResult]) -> Word:
    """One policy on one profile; a parametrized policy is the worst of its tests."""
    if not results:
        return lookup(ABSENT)
    return WORDS[worst_result(r.result for r in results)]


def _rows(reports: list[RunReport]) -> list[MatrixRow]:
    titles: dict[str, str] = {}
    cells: dict[str, dict[str, list[PolicyResult]]] = {}
    for report in reports:
        for result in report.results:
            titles.setdefault(result.policy, result.title)
            cells.setdefault(result.policy, {}).setdefault(report.profile, []).append(result)
    return [
        MatrixRow(
            policy, titles[policy], [_cell(cells[policy].get(r.profile, [])) for r in reports]
        )
        for policy in sorted(cells)
    ]


def _problems(reports: list[RunReport]) -> list[Problem]:
    return [
        Problem(report.profile, r, WORDS[r.result])
        for report in reports
        for r in report.results
        if r.result in (ERROR, FAIL, GAP_CLOSED, SKIPPED, KNOWN_GAP)
    ]


def _totals(report: RunReport) -> str:
    counts = report.counts()
    totals = ", ".join(
        f"{counts[word]} {entry.word}" for word, entry in WORDS.items() if word in counts
    )
    routed = counts_by_kind(r.layer for r in report.results)
    if routed:
        totals += "; by layer: " + ", ".join(f"{kind} {n}" for kind, n in routed.items())
    return totals


def _versions(report: RunReport) -> str:
    """The versions that ran, and for a composed profile what it was composed from."""
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    composed = describe(report.profile)
    return f"{versions}; {composed}" if composed else versions


def _profiles(reports: list[RunReport]) -> list[Profile]:
    return [
        Profile(r.profile, r.provider, r.started, f"{r.wall_seconds:.0f}", _versions(r), _totals(r))
        for r in reports
    ]


def _fixes_lines(reports: list[RunReport]) -> list[str]:
    """The upstream-fix figure, and per run the listed fixes its releases lack; none
    where the list cannot be read (the report still renders)."""
    try:
        fixes = load_fixes()
    except ConformanceError:
        return []
    lines = [summary_line(fixes) + " (docs/upstream-fixes.md)."]
    for report in reports:
        lacking = lacking_line(fixes, report.versions)
        if lacking:
            lines.append(f"{report.profile}: {lacking}.")
    return lines


def markdown(reports: list[RunReport]) -> str:
    lines = ["# TrainJob conformance", ""]
    lines += [
        f"- **{p.profile}** ({p.provider}, {p.started}, {p.seconds}s): {p.versions}. {p.totals}"
        for p in _profiles(reports)
    ]
    lines += [f"- {line}" for line in _fixes_lines(reports)]
    lines += ["", "| policy | title | " + " | ".join(r.profile for r in reports) + " |"]
    lines.append("|---|---|" + "---|" * len(reports))
    for row in _rows(reports):
        lines.append(
            f"| {row.policy} | {row.title} | " + " | ".join(c.text for c in row.cells) + " |"
        )
    problems = _problems(reports)
    if problems:
        lines += ["", "## Failures and known gaps", ""]
        for problem in problems:
            result = problem.result
            where = f" ([diagnostics]({result.diagnostics}))" if result.diagnostics else ""
            layer = f" [{result.layer}]" if result.layer else ""
            lines.append(
                f"- {problem.word.word} **{result.policy}** on {problem.profile}{layer}: "
                f"{result.reason}{where}"
            )
    return "\n".join(lines) + "\n"


def html_page(reports: list[RunReport]) -> str:
    return render_page(
        "conformance.html.j2",
        profiles=_profiles(reports),
        fixes=_fixes_lines(reports),
        rows=_rows(reports),
        problems=_problems(reports),
    )


def write_reports(reports: list[RunReport], directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / "conformance.md"
    page = directory / "conformance.html"
    write_whole(md, markdown(reports))
    write_whole(page, html_page(reports))
    return md, page
