"""The prove table: policy x break -> detected / MISSED / ERROR, as JSON, Markdown and HTML."""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainjob_conformance.report.files import write_whole

DETECTED = "detected"
MISSED = "MISSED"
ERROR = "ERROR"  # the break could not be judged (applied, reverted, or the run broke)
NOT_RUN = "not-run"  # the policy did not run here (skipped or not applicable in the baseline)


@dataclass
class Row:
    policy: str
    title: str
    break_name: str
    expected: str  # the verdict the break must produce
    verdict: str  # the verdict it produced ("" if none)
    outcome: str  # DETECTED, MISSED, ERROR or NOT_RUN
    reason: str
    seconds: float = 0.0


@dataclass
class ProveReport:
    profile: str
    provider: str
    versions: dict[str, str]
    started: str
    wall_seconds: float = 0.0
    baseline_seconds: float = 0.0
    restored: list[str] = field(default_factory=list)  # what a revert left changed
    rows: list[Row] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for row in self.rows if row.outcome == outcome)

    @property
    def exit_code(self) -> int:
        """1 if a test could not fail; 3 if something could not be judged; else 0."""
        if self.count(MISSED):
            return 1
        if self.count(ERROR) or self.restored:
            return 3
        return 0

    def summary(self) -> str:
        counts = ", ".join(
            f"{self.count(o)} {o}" for o in (DETECTED, MISSED, ERROR, NOT_RUN) if self.count(o)
        )
        return (
            f"prove on {self.profile}: {len(self.rows)} policy x break pairs: {counts or 'none'} "
            f"in {self.wall_seconds:.0f} s"
        )

    def write(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        # Not with_suffix: a profile such as trainer-2.0 has a dot of its own.
        paths = [directory / f"prove-{self.profile}.{ext}" for ext in ("json", "md", "html")]
        write_whole(paths[0], json.dumps(asdict(self), indent=2) + "\n")
        write_whole(paths[1], self.markdown())
        write_whole(paths[2], self.html())
        return paths

    def _header(self) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items()))
        return (
            f"Profile {self.profile} on the {self.provider} cluster ({versions}), started "
            f"{self.started}; baseline {self.baseline_seconds:.0f} s, whole run "
            f"{self.wall_seconds:.0f} s."
        )

    def markdown(self) -> str:
        lines = [
            f"# Every policy can fail: prove on {self.profile}",
            "",
            self._header(),
            "",
            self.summary(),
            "",
            "| policy | break | must give | gave | outcome | reason | s |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in self.rows:
            reason = row.reason.replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {row.policy} | {row.break_name} | {row.expected} | {row.verdict or '-'} | "
                f"{row.outcome} | {reason} | {row.seconds:.0f} |"
            )
        if self.restored:
            lines += ["", "Not restored after a break:", ""] + [f"- {r}" for r in self.restored]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        colours = {DETECTED: "#d4edda", MISSED: "#f8d7da", ERROR: "#fff3cd", NOT_RUN: "#eee"}
        cells = []
        for row in self.rows:
            values = (
                row.policy,
                row.break_name,
                row.expected,
                row.verdict or "-",
                row.outcome,
                row.reason,
                f"{row.seconds:.0f}",
            )
            tds = "".join(f"<td>{html.escape(v)}</td>" for v in values)
            cells.append(f'<tr style="background:{colours.get(row.outcome, "#fff")}">{tds}</tr>')
        head = "".join(
            f"<th>{h}</th>"
            for h in ("policy", "break", "must give", "gave", "outcome", "reason", "s")
        )
        return (
            "<!doctype html><meta charset=utf-8>"
            f"<title>prove {html.escape(self.profile)}</title>"
            "<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:4px;"
            "vertical-align:top}table{border-collapse:collapse}</style>"
            f"<h1>Every policy can fail: prove on {html.escape(self.profile)}</h1>"
            f"<p>{html.escape(self._header())}</p><p>{html.escape(self.summary())}</p>"
            f"<table><tr>{head}</tr>{''.join(cells)}</table>\n"
        )
