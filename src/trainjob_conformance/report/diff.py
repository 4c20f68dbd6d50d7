"""What changed between two runs: regressions fail the comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainjob_conformance.report.model import (
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

    @property
    def regressed(self) -> bool:
        return bool(self.newly_failing or self.new_known_gaps or self.missing)

    def lines(self) -> list[str]:
        out = []
        for label, items in (
            ("newly failing", self.newly_failing),
            ("new known gaps", self.new_known_gaps),
            ("no longer run", self.missing),
            ("newly passing", self.newly_passing),
            ("known gaps closed", self.closed_gaps),
            ("new tests", self.added),
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
    for key in sorted(set(before) | set(after)):
        profile, test = key
        label = f"{(after.get(key) or before[key])[1]} on {profile} ({test})"
        if key not in after:
            diff.missing.append(label)
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
    return diff
