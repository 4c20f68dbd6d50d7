"""What changed between two runs: regressions fail the comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

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
        return out or ["no change"]


def diff_reports(old: list[RunReport], new: list[RunReport]) -> ReportDiff:
    """Compare per (profile, test): yesterday's nightly against today's."""

    def index(reports: list[RunReport]) -> dict[tuple[str, str], tuple[str, str]]:
        return {
            (report.profile, r.test): (r.result, r.policy)
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
        label = f"{(after.get(key) or before[key])[1]} on {profile} ({test})"
        if key not in after:
            # An interrupted run says nothing of the policies it did not reach.
            if profile not in interrupted:
                diff.missing.append(label)
            continue
        if after[key][0] == ERROR:
            diff.stack_broken.append(f"{label}: {before.get(key, ('absent',))[0]} -> {ERROR}")
            continue
        if key not in before:
            diff.added.append(label)
            if after[key][0] in (FAIL, GAP_CLOSED):
                diff.newly_failing.append(label)
            continue
        was, now = before[key][0], after[key][0]
        if was == now:
            continue
        if now in (FAIL, GAP_CLOSED):
            diff.newly_failing.append(f"{label}: {was} -> {now}")
        elif now == SKIPPED:
            diff.missing.append(f"{label}: {was} -> {now}")
        elif now == KNOWN_GAP:
            diff.new_known_gaps.append(f"{label}: {was} -> {now}")
        elif now == PASS and was in (FAIL, GAP_CLOSED):
            diff.newly_passing.append(f"{label}: {was} -> {now}")
        elif now == PASS and was == KNOWN_GAP:
            diff.closed_gaps.append(f"{label}: {was} -> {now}")
        elif was == PASS:
            # pass -> not-applicable: the policy stopped being proven.
            diff.missing.append(f"{label}: {was} -> {now}")
        else:
            diff.other.append(f"{label}: {was} -> {now}")
    return diff
