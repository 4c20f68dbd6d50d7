"""The Trainer x Kueue x JobSet compatibility table `compat` builds from real runs.

Each cell is one combination of releases, run as a composed profile. Its word
is decided from what its run saw, never from a list of pairs kept by hand:

- `compatible`: no FAIL, no ERROR (known gaps allowed, and counted);
- `incompatible`: the stack itself does not work together: the cluster did
  not start or broke, or a stack check failed: a plain TrainJob that never ran
  (TJ-STACK-001), or a Kueue-queued TrainJob that was never admitted and
  resumed (KQ-ADMIT-001, KQ-ADMIT-002);
- `policies broken`: the stack works and some policies FAIL;
- `not run`: the cell could not be run or judged (a release the build refused,
  or a control plane that did not start: the same Kubernetes in every cell, so
  the machine's doing, not the releases'), said in one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainjob_conformance.errors import CONTROL_PLANE_NOT_STARTED, cluster_not_started
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    PASS,
    RunReport,
)
from trainjob_conformance.report.templating import render_page

COMPATIBLE = "compatible"
INCOMPATIBLE = "incompatible"
POLICIES_BROKEN = "policies broken"
NOT_RUN = "not run"
WORDS = (COMPATIBLE, POLICIES_BROKEN, INCOMPATIBLE, NOT_RUN)
# The policies that say whether the stack works at all. A cell whose run has none
# of them (a --policies selection without) is judged on its other results only.
STACK_CHECKS = ("TJ-STACK-001", "KQ-ADMIT-001", "KQ-ADMIT-002")
_BAD = (FAIL, ERROR, GAP_CLOSED)
_CSS = {
    COMPATIBLE: "compatible",
    POLICIES_BROKEN: "broken",
    INCOMPATIBLE: "incompatible",
    NOT_RUN: "notrun",
}
LEGEND = {
    COMPATIBLE: "no FAIL and no ERROR; known gaps allowed, and counted",
    POLICIES_BROKEN: "the stack works (its checks pass) and some policies FAIL",
    INCOMPATIBLE: "the stack does not work together: it did not start or broke, or a "
    "plain TrainJob did not run, or a queued one was not admitted and resumed",
    NOT_RUN: "the build refused a release, the cluster's own Kubernetes did not start "
    "(the machine's doing, the same in every cell), or the run left no result",
}
# What every test of a run says when its cluster's control plane did not start
# (plugin/fixtures.py, errors.ControlPlaneNotStarted).
_CONTROL_PLANE_DOWN = cluster_not_started(CONTROL_PLANE_NOT_STARTED)


@dataclass
class Cell:
    trainer: str
    kueue: str
    jobset: str
    profile: str  # the composed profile the cell ran as
    word: str = NOT_RUN
    reason: str = ""  # the first failing policy and the cluster's words, or why not run
    counts: dict[str, int] = field(default_factory=dict)
    skews: list[str] = field(default_factory=list)  # the schema check's lines, before the run
    skew_seconds: float = 0.0  # how long the schema check took
    run_seconds: float = 0.0
    # When, at the earliest, the run said the stack does not work (its cluster's
    # start and its failing stack check's own time): what the schema check saves.
    found_after_seconds: float | None = None
    report: str = ""  # the cell's result file, relative to the table


def _first(results: Iterable[tuple[str, str, str]]) -> str:
    for policy, word, reason in results:
        return f"{policy} {word}: {reason}"
    return ""


def judge(cell: Cell, report: RunReport | None) -> None:
    """The cell's word, reason and counts from its run's result file (None: no run)."""
    if report is None:
        cell.word = NOT_RUN
        cell.reason = cell.reason or "the run left no result file"
        return
    cell.counts = report.counts()
    cell.run_seconds = round(report.wall_seconds, 1)
    if report.results and all(r.reason.startswith(_CONTROL_PLANE_DOWN) for r in report.results):
        # Before any release was installed: nothing about the releases was seen.
        cell.word = NOT_RUN
        cell.reason = f"not judged: {report.results[0].reason}"
        return
    # One click from the table: the first failure's diagnostics, else the results.
    first_bad = next((r for r in report.results if r.result in _BAD and r.diagnostics), None)
    cell.report = first_bad.diagnostics if first_bad else f"{report.file_stem}.json"
    bad = [(r.policy, r.result, r.reason) for r in report.results if r.result in _BAD]
    stack_bad = [item for item in bad if item[0] in STACK_CHECKS]
    all_error = report.results and all(r.result == ERROR for r in report.results)
    if report.stack_errors or all_error or stack_bad or not report.results:
        cell.word = INCOMPATIBLE
        cell.reason = (
            "; ".join(report.stack_errors)
            or _first(stack_bad)
            or _first(bad)
            or "the run judged no policy"
        )
        # At the earliest, the run said so once its cluster had started and the
        # failing check had run its course (its wait's timeout, typically).
        failed = [r for r in report.results if r.policy in STACK_CHECKS and r.result in _BAD]
        if failed:
            cell.found_after_seconds = round(
                (report.cluster_start_seconds or 0.0) + min(r.seconds for r in failed), 1
            )
        return
    if bad:
        cell.word = POLICIES_BROKEN
        cell.reason = f"{len(bad)} not holding; first: {_first(bad)}"
        return
    cell.word = COMPATIBLE
    gaps = cell.counts.get(KNOWN_GAP, 0)
    cell.reason = f"{cell.counts.get(PASS, 0)} pass" + (f", {gaps} known-gap" if gaps else "")


def disagreements(cells: Iterable[Cell]) -> list[str]:
    """The cells where the run and the schema check, found independently, tell
    different stories: incompatible is expected exactly where the check named a
    missing field, compatible where it named none. A disagreement means the check
    missed a skew, or the stack broke for a reason no schema shows (or the check
    could not read a source)."""
    wrong = []
    for cell in cells:
        named = [line for line in cell.skews if not line.startswith("not checked")]
        unread = [line for line in cell.skews if line.startswith("not checked")]
        expected = INCOMPATIBLE if named else COMPATIBLE
        if unread or cell.word != expected:
            check = "; ".join(cell.skews) or "no missing field"
            wrong.append(
                f"{cell.profile}: the run says {cell.word} ({cell.reason}); "
                f"the schema check says {check}"
            )
    return wrong


@dataclass
class CompatTable:
    cells: list[Cell]
    trainers: list[str]
    kueues: list[str]
    jobsets: list[str]
    policies: str  # "the catalog" or the selection
    notes: list[str] = field(default_factory=list)  # releases left out, each in one line

    def cell(self, trainer: str, kueue: str, jobset: str) -> Cell | None:
        for cell in self.cells:
            if (cell.trainer, cell.kueue, cell.jobset) == (trainer, kueue, jobset):
                return cell
        return None

    def counts(self) -> dict[str, int]:
        return {word: sum(c.word == word for c in self.cells) for word in WORDS}


def markdown(table: CompatTable) -> str:
    lines = ["# Trainer x Kueue compatibility", ""]
    lines.append(f"Judged by {table.policies}; each cell is one run of its combination.")
    lines += ["", *(f"- **{word}**: {LEGEND[word]}" for word in WORDS), ""]
    lines += [f"- {note}" for note in table.notes]
    for jobset in table.jobsets:
        lines += ["", f"## JobSet {jobset}", ""]
        lines.append("| Trainer \\ Kueue | " + " | ".join(table.kueues) + " |")
        lines.append("|---|" + "---|" * len(table.kueues))
        for trainer in table.trainers:
            row = [f"| {trainer} |"]
            for kueue in table.kueues:
                cell = table.cell(trainer, kueue, jobset)
                row.append(f" {_md_cell(cell)} |")
            lines.append("".join(row))
    lines += ["", "## Cells", ""]
    for cell in table.cells:
        skew = f" Schema check: {'; '.join(cell.skews)}." if cell.skews else ""
        link = f" ([results]({cell.report}))" if cell.report else ""
        lines.append(
            f"- Trainer {cell.trainer}, Kueue {cell.kueue}, JobSet {cell.jobset} "
            f"(`{cell.profile}`): **{cell.word}**: {cell.reason}.{skew}{link}"
        )
    return "\n".join(lines) + "\n"


def _md_cell(cell: Cell | None) -> str:
    if cell is None:
        return ""
    return f"[{cell.word}]({cell.report})" if cell.report else cell.word


def html_page(table: CompatTable) -> str:
    """One self-contained page: a table per JobSet release, a word and colour per cell,
    its reason on hover, its result file one click away."""
    legend = [(word, _CSS[word], LEGEND[word]) for word in WORDS]
    return render_page("compat.html.j2", table=table, legend=legend, css_of=_CSS)


def write_table(table: CompatTable, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "compat.md", directory / "compat.html", directory / "compat.json"]
    write_whole(paths[0], markdown(table))
    write_whole(paths[1], html_page(table))
    write_whole(paths[2], json.dumps(asdict(table), indent=2) + "\n")
    return paths
