"""The policy x profile matrix as Markdown and as one self-contained HTML page."""

from __future__ import annotations

import html
from pathlib import Path

from trainjob_conformance.report.files import write_whole
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    NOT_APPLICABLE,
    PASS,
    SKIPPED,
    PolicyResult,
    RunReport,
    worst_result,
)
from trainjob_conformance.stack.compose import describe

_SYMBOL = {
    PASS: "pass",
    FAIL: "FAIL",
    KNOWN_GAP: "known gap",
    GAP_CLOSED: "GAP CLOSED",
    SKIPPED: "not run",
    NOT_APPLICABLE: "n/a",
    ERROR: "ERROR",
}
_CSS_CLASS = {
    PASS: "pass",
    FAIL: "fail",
    KNOWN_GAP: "gap",
    GAP_CLOSED: "fail",
    SKIPPED: "gap",
    NOT_APPLICABLE: "na",
    ERROR: "fail",
}


def _cell(results: list[PolicyResult]) -> str:
    """One policy on one profile; a parametrized policy is the worst of its tests."""
    if not results:
        return ""
    return worst_result(r.result for r in results)


def _rows(reports: list[RunReport]) -> list[tuple[str, str, dict[str, list[PolicyResult]]]]:
    titles: dict[str, str] = {}
    cells: dict[str, dict[str, list[PolicyResult]]] = {}
    for report in reports:
        for result in report.results:
            titles.setdefault(result.policy, result.title)
            cells.setdefault(result.policy, {}).setdefault(report.profile, []).append(result)
    return [(policy, titles[policy], cells[policy]) for policy in sorted(cells)]


def _problems(reports: list[RunReport]) -> list[tuple[str, PolicyResult]]:
    return [
        (report.profile, r)
        for report in reports
        for r in report.results
        if r.result in (ERROR, FAIL, GAP_CLOSED, SKIPPED, KNOWN_GAP)
    ]


def _totals(report: RunReport) -> str:
    counts = report.counts()
    return ", ".join(f"{counts[k]} {_SYMBOL[k]}" for k in _SYMBOL if k in counts)


def _versions(report: RunReport) -> str:
    """The versions that ran, and for a composed profile what it was composed from."""
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    composed = describe(report.profile)
    return f"{versions}; {composed}" if composed else versions


def markdown(reports: list[RunReport]) -> str:
    profiles = [r.profile for r in reports]
    lines = ["# TrainJob conformance", ""]
    for report in reports:
        versions = _versions(report)
        lines.append(
            f"- **{report.profile}** ({report.provider}, {report.started}, "
            f"{report.wall_seconds:.0f}s): {versions}. {_totals(report)}"
        )
    lines += ["", "| policy | title | " + " | ".join(profiles) + " |"]
    lines.append("|---|---|" + "---|" * len(profiles))
    for policy, title, cells in _rows(reports):
        row = [_SYMBOL.get(_cell(cells.get(p, [])), "") for p in profiles]
        lines.append(f"| {policy} | {title} | " + " | ".join(row) + " |")
    problems = _problems(reports)
    if problems:
        lines += ["", "## Failures and known gaps", ""]
        for profile, result in problems:
            where = f" ([diagnostics]({result.diagnostics}))" if result.diagnostics else ""
            lines.append(
                f"- {_SYMBOL[result.result]} **{result.policy}** on {profile}: {result.reason}{where}"
            )
    return "\n".join(lines) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}.pass{background:#dff5df}.fail{background:#f8d0d0;font-weight:bold}
.gap{background:#fff2c2}.na{color:#888}li{margin:.3em 0}code{font-size:90%}
"""


def html_page(reports: list[RunReport]) -> str:
    esc = html.escape
    profiles = [r.profile for r in reports]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>TrainJob conformance</title>",
        f"<style>{_STYLE}</style></head><body><h1>TrainJob conformance</h1><ul>",
    ]
    for report in reports:
        versions = _versions(report)
        parts.append(
            f"<li><b>{esc(report.profile)}</b> ({esc(report.provider)}, {esc(report.started)}, "
            f"{report.wall_seconds:.0f}s): {esc(versions)}. {esc(_totals(report))}</li>"
        )
    parts.append("</ul><table><tr><th>policy</th><th>title</th>")
    parts += [f"<th>{esc(p)}</th>" for p in profiles]
    parts.append("</tr>")
    for policy, title, cells in _rows(reports):
        parts.append(f"<tr><td><code>{esc(policy)}</code></td><td>{esc(title)}</td>")
        for profile in profiles:
            value = _cell(cells.get(profile, []))
            css = _CSS_CLASS.get(value, "na")
            parts.append(f"<td class='{css}'>{esc(_SYMBOL.get(value, ''))}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    problems = _problems(reports)
    if problems:
        parts.append("<h2>Failures and known gaps</h2><ul>")
        for profile, result in problems:
            link = (
                f" (<a href='{esc(result.diagnostics)}'>diagnostics</a>)"
                if result.diagnostics
                else ""
            )
            parts.append(
                f"<li><span class='{_CSS_CLASS[result.result]}'>{esc(_SYMBOL[result.result])}</span> "
                f"<code>{esc(result.policy)}</code> on {esc(profile)}: {esc(result.reason)}{link}</li>"
            )
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_reports(reports: list[RunReport], directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / "conformance.md"
    page = directory / "conformance.html"
    write_whole(md, markdown(reports))
    write_whole(page, html_page(reports))
    return md, page
