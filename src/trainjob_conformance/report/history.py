"""Many nights on one page: policies as rows, runs as columns, in time order.

Each report directory (`run`/`matrix --report DIR`) holds one result file per
profile; every result file is one column. Columns are sorted by the run's
start time, and consecutive columns from the same directory (one night's
profiles) share a header. The page is one self-contained HTML file: inline
CSS, a few lines of inline JavaScript for the detail panel, no network.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from trainjob_conformance.errors import ConformanceError
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
    read_reports,
    worst_result,
)
from trainjob_conformance.stack.compose import describe

ABSENT = "absent"  # the run has no result for the policy
# Durations of these results are the policy's own work; skipped and
# not-applicable tests return at once, so they would only drag the trend down.
_TIMED = (PASS, FAIL, KNOWN_GAP, GAP_CLOSED, ERROR)
# Result word -> (CSS class, the short text in the cell).
_CELL = {
    PASS: ("pass", "pass"),
    FAIL: ("fail", "FAIL"),
    KNOWN_GAP: ("known-gap", "gap"),
    GAP_CLOSED: ("gap-closed", "CLOSED"),
    NOT_APPLICABLE: ("not-applicable", "n/a"),
    SKIPPED: ("skipped", "skip"),
    ERROR: ("error", "ERROR"),
    ABSENT: ("absent", ""),
}
LEGEND = (PASS, FAIL, KNOWN_GAP, GAP_CLOSED, NOT_APPLICABLE, SKIPPED, ERROR, ABSENT)


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
        return Trend([c.seconds if c.result in _TIMED else None for c in self.cells])


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
                word = worst_result(r.result for r in tests)
                cells.append(Cell(word, round(sum(r.seconds for r in tests), 1), tests))
            else:
                cells.append(Cell(ABSENT, None))
        rows.append(Row(policy, titles[policy], cells))
    return History(runs, rows)


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


_SPARK_W, _SPARK_H = 120, 22


def sparkline(trend: Trend, cells: list[Cell]) -> str:
    """An inline SVG: one point per run (x in column order), 0 s at the bottom."""
    esc = html.escape
    title = f"<title>{esc(_trend_text(trend))}</title>"
    values = trend.values
    if not values:
        return f"<svg class='spark' width='{_SPARK_W}' height='{_SPARK_H}'>{title}</svg>"
    top = max(values) or 1.0
    count = len(trend.seconds)
    step = (_SPARK_W - 6) / max(count - 1, 1)
    points = []
    dots = []
    for index, (value, cell) in enumerate(zip(trend.seconds, cells, strict=True)):
        if value is None:
            continue
        x = 3 + index * step if count > 1 else _SPARK_W / 2
        y = _SPARK_H - 3 - (value / top) * (_SPARK_H - 6)
        points.append(f"{x:.1f},{y:.1f}")
        dots.append(f"<circle class='{_CELL[cell.result][0]}' cx='{x:.1f}' cy='{y:.1f}' r='2.2'/>")
    line = f"<polyline points='{' '.join(points)}'/>" if len(points) > 1 else ""
    return (
        f"<svg class='spark' width='{_SPARK_W}' height='{_SPARK_H}' "
        f"viewBox='0 0 {_SPARK_W} {_SPARK_H}'>{title}{line}{''.join(dots)}</svg>"
    )


def _counts(report: RunReport) -> str:
    counts = report.counts()
    return ", ".join(f"{counts[word]} {word}" for word in LEGEND if word in counts)


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
        _counts(report),
        *(f"{name} {version}" for name, version in report.versions.items()),
    ]
    if report.interrupted:
        lines.append("interrupted: policies it did not reach are absent")
    lines += [f"stack broke: {error}" for error in report.stack_errors]
    return "\n".join(line for line in lines if line)


def _groups(runs: list[Run]) -> list[tuple[Run, int]]:
    """Consecutive columns of one report directory: (first run, how many)."""
    groups: list[tuple[Run, int]] = []
    for run in runs:
        if groups and groups[-1][0].source == run.source:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((run, 1))
    return groups


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
                    "css": _CELL[test.result][0],
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
        f"{test.result}: {test.reason}" if len(cell.tests) == 1 else f"{test.test}: {test.reason}"
        for test in cell.tests
        if test.reason
    ]
    if any(test.diagnostics for test in cell.tests):
        lines.append("click for the diagnostics")
    return "\n".join(lines)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;font-size:14px}
h1{font-size:1.4em;margin:0 0 .2em}.sub{color:#555;margin:0 0 1em}
.legend span{display:inline-block;margin:0 .8em .4em 0}
.legend i{display:inline-block;width:1.1em;height:1.1em;vertical-align:-.2em;margin-right:.3em;
border:1px solid #bbb}
.wrap{overflow-x:auto}
table{border-collapse:separate;border-spacing:0}
th,td{border-right:1px solid #fff;border-bottom:1px solid #fff;padding:.25em .45em;white-space:nowrap}
thead th{background:#eceff1;font-weight:600;text-align:center;vertical-align:bottom}
thead th.group{background:#cfd8dc;border-left:2px solid #fff}
thead small{display:block;font-weight:400;color:#455a64}
th.policy{position:sticky;left:0;background:#fafafa;text-align:left;font-weight:400;
max-width:28em;overflow:hidden;text-overflow:ellipsis;z-index:1}
th.policy code{font-weight:600;margin-right:.5em}
td.trend{background:#fafafa;text-align:right;font-size:12px;color:#555}
td.cell{text-align:center;font-size:12px;min-width:3.6em;cursor:pointer}
td.cell.first{border-left:2px solid #fff}
td.cell:hover,td.cell.selected{outline:2px solid #1565c0;outline-offset:-2px}
.pass{background:#66bb6a;color:#fff}.fail{background:#e53935;color:#fff;font-weight:700}
.known-gap{background:#ffca28;color:#000}.gap-closed{background:#8e24aa;color:#fff;font-weight:700}
.not-applicable{background:#e0e0e0;color:#666}.skipped{background:#b0bec5;color:#263238}
.error{background:#212121;color:#ffab40;font-weight:700}
.absent{background:repeating-linear-gradient(45deg,#fff 0 4px,#eee 4px 8px);color:#999}
svg.spark{vertical-align:middle;margin-right:.4em}
svg.spark polyline{fill:none;stroke:#78909c;stroke-width:1.2}
svg.spark circle{stroke:none}svg.spark circle.pass{fill:#43a047}
svg.spark circle.known-gap{fill:#f9a825}svg.spark circle.fail{fill:#e53935}
svg.spark circle.gap-closed{fill:#8e24aa}svg.spark circle.error{fill:#212121}
#detail{position:fixed;right:1em;bottom:1em;max-width:46em;max-height:45vh;overflow:auto;
background:#fff;border:1px solid #90a4ae;box-shadow:0 2px 10px rgba(0,0,0,.25);padding:.8em 1em;
z-index:2}
#detail h2{font-size:1.05em;margin:0 0 .3em}#detail p{margin:.3em 0;white-space:pre-wrap}
#detail .close{float:right;cursor:pointer;border:0;background:none;font-size:1.2em}
"""

# The detail panel: built with textContent and element properties only, so a
# reason is never parsed as HTML. A cell's id in the URL (#c3-7) opens it.
_SCRIPT = """
(function () {
  var panel = document.getElementById('detail');
  function add(parent, tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    parent.appendChild(node);
    return node;
  }
  function show(cell) {
    var d = JSON.parse(cell.getAttribute('data-detail'));
    var old = document.querySelector('td.cell.selected');
    if (old) old.classList.remove('selected');
    cell.classList.add('selected');
    panel.replaceChildren();
    var close = add(panel, 'button', '\\u00d7', 'close');
    close.title = 'close';
    close.onclick = function () { panel.hidden = true; cell.classList.remove('selected'); };
    add(panel, 'h2', d.policy + ' \\u2014 ' + d.title);
    add(panel, 'p', d.run + ': ' + d.result +
        (d.seconds === null ? '' : ', ' + d.seconds.toFixed(1) + 's'));
    d.tests.forEach(function (t) {
      var p = add(panel, 'p', undefined, 'test');
      add(p, 'span', ' ' + t.result + ' ', 'word ' + t.css);
      add(p, 'span', ' ' + t.test + ' (' + t.seconds.toFixed(1) + 's)');
      if (t.reason) add(p, 'div', t.reason, 'reason');
      if (t.link) {
        var a = add(p, 'a', 'diagnostics', 'diagnostics');
        a.href = t.link;
      }
    });
    panel.hidden = false;
  }
  document.querySelectorAll('td.cell').forEach(function (cell) {
    cell.addEventListener('click', function () {
      try { history.replaceState(null, '', '#' + cell.id); } catch (e) {}
      show(cell);
    });
  });
  var target = location.hash && document.getElementById(location.hash.slice(1));
  if (target && target.classList.contains('cell')) show(target);
})();
"""


def html_page(history: History, page_dir: Path) -> str:
    esc = html.escape
    runs = history.runs
    sources = {run.source for run in runs}
    first = runs[0].report.started or "?"
    last = runs[-1].report.started or "?"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>TrainJob conformance history</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>TrainJob conformance history</h1>",
        f"<p class='sub'>{len(history.rows)} policies, {len(runs)} runs from "
        f"{len(sources)} report director{'ies' if len(sources) != 1 else 'y'}, "
        f"{esc(first)} to {esc(last)}. Hover a cell for its reason; click it for the "
        "details and the diagnostics.</p><p class='legend'>",
    ]
    totals = {word: 0 for word in LEGEND}
    for row in history.rows:
        for cell in row.cells:
            totals[cell.result] += 1
    parts += [
        f"<span><i class='{_CELL[word][0]}'></i>{esc(word)} ({totals[word]})</span>"
        for word in LEGEND
    ]
    parts.append("</p><div class='wrap'><table><thead><tr>")
    parts.append("<th rowspan='2' class='policy'>policy</th><th rowspan='2'>duration trend</th>")
    for run, span in _groups(runs):
        date = (run.report.started or "time unknown")[:10]
        parts.append(
            f"<th class='group' colspan='{span}' title='{esc(str(run.source))}'>"
            f"{esc(run.label)}<small>{esc(date)}</small></th>"
        )
    parts.append("</tr><tr>")
    for index, run in enumerate(runs):
        report = run.report
        clock = report.started[11:16] if len(report.started) >= 16 else ""
        trainer = report.versions.get("trainer", "")
        notes = [clock, trainer]
        # The embedded cluster is the usual case; say when a run was elsewhere.
        notes += [report.provider] if report.provider != "embedded" else []
        notes += ["interrupted"] if report.interrupted else []
        parts.append(
            f"<th class='run' id='r{index}' title='{esc(_run_tooltip(run))}'>"
            f"{esc(report.profile)}<small>{esc(' · '.join(n for n in notes if n))}</small></th>"
        )
    parts.append("</tr></thead><tbody>")
    firsts = set()
    column = 0
    for _, span in _groups(runs):
        firsts.add(column)
        column += span
    for row_index, row in enumerate(history.rows):
        trend = row.trend
        summary = trend.summary()
        parts.append(
            f"<tr><th class='policy' title='{esc(row.policy + ': ' + row.title)}'>"
            f"<code>{esc(row.policy)}</code>{esc(row.title)}</th>"
            f"<td class='trend' title='{esc(_trend_text(trend))}'>{sparkline(trend, row.cells)}"
            f"{esc(_seconds(summary[1])) if summary else ''}</td>"
        )
        for column, (run, cell) in enumerate(zip(runs, row.cells, strict=True)):
            css, text = _CELL[cell.result]
            edge = " first" if column in firsts else ""
            parts.append(
                f"<td id='c{row_index}-{column}' class='cell {css}{edge}' "
                f"data-result='{esc(cell.result)}' title='{esc(_cell_tooltip(row, run, cell))}' "
                f"data-detail='{esc(_detail(row, run, cell, page_dir))}'>{esc(text)}</td>"
            )
        parts.append("</tr>")
    parts.append("</tbody></table></div><div id='detail' hidden></div>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(parts)


def _check_output(output: Path) -> None:
    """Refuse an output that cannot be a file before reading anything."""
    if output.is_dir():
        raise ConformanceError(f"--output {output} is a directory; give a file, e.g. history.html")
    blocker = next((p for p in output.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConformanceError(f"--output {output} cannot be written: {blocker} is a file")


def write_history(directories: list[Path], output: Path) -> tuple[Path, History]:
    def refuse(error: OSError) -> ConformanceError:
        return ConformanceError(
            f"--output {output} cannot be written ({error.strerror or error}); choose another path"
        )

    try:
        _check_output(output)
    except OSError as error:  # e.g. a name too long even to look up
        raise refuse(error) from None
    history = build_history(load_runs(directories))
    page = html_page(history, output.parent)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page)
    except OSError as error:
        raise refuse(error) from None
    return output, history
