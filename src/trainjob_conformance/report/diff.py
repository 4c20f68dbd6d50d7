"""What changed between two runs: regressions fail the comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainjob_conformance.report.flaky import FLAKY, PolicyState
from trainjob_conformance.report.model import (
    ERROR,
    FAIL,
    GAP_CLOSED,
    KNOWN_GAP,
    PASS,
    SKIPPED,
    RunReport,
)


@dataclass
class ReportDiff:
    newly_failing: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    new_known_gaps: list[str] = field(default_factory=list)
    closed_gaps: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the old run, absent now
    added: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # any other change of result word
    stack_broken: list[str] = field(default_factory=list)  # ERROR now: not judged
    unjudged: list[str] = field(default_factory=list)  # the new run was interrupted or broken
    flaky_regressions: int = 0  # regressions in cells the history calls FLAKY

    @property
    def regressed(self) -> bool:
        return bool(self.newly_failing or self.new_known_gaps or self.missing)

    @property
    def exit_code(self) -> int:
        """0 no regression; 1 a conformance regression; 3 the new run cannot be judged."""
        if self.regressed:
            return 1
        return 3 if self.stack_broken or self.unjudged else 0

    def lines(self) -> list[str]:
        out = []
        for label, items in (
            ("newly failing", self.newly_failing),
            ("new known gaps", self.new_known_gaps),
            ("no longer run", self.missing),
            ("newly passing", self.newly_passing),
            ("known gaps closed", self.closed_gaps),
            ("new tests", self.added),
            ("other changes", self.other),
            ("stack broken (not judged)", self.stack_broken),
            ("run not judged", self.unjudged),
        ):
            out += [f"{label}: {item}" for item in items]
        if self.flaky_regressions:
            out.append(
                f"{self.flaky_regressions} of the regressions above are in cells the "
                "history calls FLAKY: they may be that flake again, not a new break"
            )
        return out or ["no change"]


def _flaky_note(state: PolicyState | None) -> str:
    """What a regression's line says when the history calls its cell FLAKY."""
    if state is None or state.state != FLAKY:
        return ""
    flips = "; ".join(state.flips[-3:])
    return f" [already FLAKY: {len(state.flips)} flips in {state.runs} runs; {flips}]"


def diff_reports(
    old: list[RunReport],
    new: list[RunReport],
    states: dict[tuple[str, str, str], PolicyState] | None = None,
) -> ReportDiff:
    """Compare per (profile, test): yesterday's nightly against today's. With the
    history's `states`, a regression in a cell it calls FLAKY says so."""

    def index(reports: list[RunReport]) -> dict[tuple[str, str], tuple[str, str, str]]:
        return {
            (report.profile, r.test): (r.result, r.policy, report.provider)
            for report in reports
            for r in report.results
        }

    before, after = index(old), index(new)
    diff = ReportDiff()
    for report in new:
        if report.interrupted:
            diff.unjudged.append(f"{report.profile}: the run was interrupted")
        diff.unjudged += [f"{report.profile}: {line}" for line in report.stack_errors]
    interrupted = {report.profile for report in new if report.interrupted}
    for key in sorted(set(before) | set(after)):
        profile, test = key
        _, policy, provider = after.get(key) or before[key]
        label = f"{policy} on {profile} ({test})"
        if key not in after:
            # An interrupted run says nothing of the policies it did not reach.
            if profile not in interrupted:
                _regression(diff, diff.missing, label, states, (policy, profile, provider))
            continue
        if after[key][0] == ERROR:
            diff.stack_broken.append(f"{label}: {before.get(key, ('absent',))[0]} -> {ERROR}")
            continue
        if key not in before:
            diff.added.append(label)
            if after[key][0] in (FAIL, GAP_CLOSED):
                _regression(diff, diff.newly_failing, label, states, (policy, profile, provider))
            continue
        was, now = before[key][0], after[key][0]
        if was == now:
            continue
        change = f"{label}: {was} -> {now}"
        bucket = _bucket(diff, was, now)
        if bucket in (diff.newly_failing, diff.new_known_gaps, diff.missing):
            _regression(diff, bucket, change, states, (policy, profile, provider))
        else:
            bucket.append(change)
    return diff


def _bucket(diff: ReportDiff, was: str, now: str) -> list[str]:
    """Where a change of result word goes."""
    if now in (FAIL, GAP_CLOSED):
        return diff.newly_failing
    if now == SKIPPED:
        return diff.missing
    if now == KNOWN_GAP:
        return diff.new_known_gaps
    if now == PASS and was in (FAIL, GAP_CLOSED):
        return diff.newly_passing
    if now == PASS and was == KNOWN_GAP:
        return diff.closed_gaps
    if was == PASS:
        # pass -> not-applicable: the policy stopped being proven.
        return diff.missing
    return diff.other


def _regression(
    diff: ReportDiff,
    bucket: list[str],
    line: str,
    states: dict[tuple[str, str, str], PolicyState] | None,
    cell: tuple[str, str, str],
) -> None:
    note = _flaky_note((states or {}).get(cell))
    diff.flaky_regressions += bool(note)
    bucket.append(line + note)
