"""The flake table of a soak: each policy over many catalog runs of the same stack,
on one kept cluster and on fresh ones, with every result that was not its usual one.

A policy is flaky when its runs of the same releases and catalog did not all give
the same word (skipped results, a run that did not reach the policy, aside): a
known gap every time is steady, a pass once and a FAIL once is not.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.report.model import SKIPPED, RunReport, read_reports

KEPT = "kept"
FRESH = "fresh"


@dataclass(frozen=True)
class SoakRun:
    label: str  # kept-003, fresh-001
    mode: str  # KEPT: one cluster for all such runs; FRESH: a cluster of its own
    provider: str  # where the cluster came from (the run itself judges it as `existing`)
    report: RunReport
    results_dir: Path | None = None  # the run's directory, when read back from disk


@dataclass
class PolicyFlakes:
    policy: str
    provider: str
    runs: int = 0
    kept: int = 0
    fresh: int = 0
    words: dict[str, int] = field(default_factory=dict)
    # Each result other than the policy's usual word: (run, word, reason).
    odd: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def flaky(self) -> bool:
        return len([w for w in self.words if w != SKIPPED]) > 1

    @property
    def usual(self) -> str:
        """The word most of its runs gave; a skip only where nothing else was given
        (a policy whose one test variant is skipped on this cluster, and whose other
        is a known gap, is usually a known gap)."""
        judged = Counter({w: n for w, n in self.words.items() if w != SKIPPED})
        counts = judged or Counter(self.words)
        return counts.most_common(1)[0][0] if counts else ""


def flake_table(runs: list[SoakRun]) -> list[PolicyFlakes]:
    rows: dict[tuple[str, str], PolicyFlakes] = {}
    seen: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for run in runs:
        by_policy: dict[str, list[tuple[str, str]]] = {}
        for result in run.report.results:
            by_policy.setdefault(result.policy, []).append((result.result, result.reason))
        for policy, results in by_policy.items():
            key = (policy, run.provider)
            row = rows.setdefault(key, PolicyFlakes(policy, run.provider))
            row.runs += 1
            row.kept += run.mode == KEPT
            row.fresh += run.mode == FRESH
            for word, reason in results:
                row.words[word] = row.words.get(word, 0) + 1
                seen.setdefault(key, []).append((run.label, word, reason))
    for key, row in rows.items():
        usual = row.usual
        row.odd = [item for item in seen[key] if item[1] not in (usual, SKIPPED)]
    return sorted(rows.values(), key=lambda r: (not r.flaky, r.policy, r.provider))


def markdown(rows: list[PolicyFlakes], runs: list[SoakRun]) -> str:
    kept = sum(r.mode == KEPT for r in runs)
    fresh = len(runs) - kept
    flaky = [r for r in rows if r.flaky]
    lines = [
        "# Soak: flakes over repeated catalog runs",
        "",
        f"{len(runs)} catalog runs: {kept} on one kept cluster, {fresh} on a fresh cluster each. "
        f"{len(flaky)} of {len(rows)} policies flaked.",
        "",
        "| policy | provider | runs (kept/fresh) | results | flaky | other results (run: word: reason) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        words = ", ".join(f"{n} {w}" for w, n in sorted(row.words.items()))
        odd = "; ".join(f"{label}: {word}: {reason[:160]}" for label, word, reason in row.odd[:5])
        more = f" (+{len(row.odd) - 5} more)" if len(row.odd) > 5 else ""
        lines.append(
            f"| {row.policy} | {row.provider} | {row.runs} ({row.kept}/{row.fresh}) | {words} | "
            f"{'FLAKY' if row.flaky else 'steady'} | {odd}{more} |"
        )
    return "\n".join(lines) + "\n"


def write_soak(
    rows: list[PolicyFlakes],
    runs: list[SoakRun],
    directory: Path,
    problems: list[str] | None = None,
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    md, data = directory / "soak.md", directory / "soak.json"
    text = markdown(rows, runs)
    if problems:
        text += "\nRuns that left no result:\n\n" + "".join(f"- {p}\n" for p in problems)
    write_whole(md, text)
    summary = {
        "runs": [
            {
                "label": r.label,
                "mode": r.mode,
                "provider": r.provider,
                "seconds": r.report.wall_seconds,
                # Where its results are, from the table's directory: a combined table
                # points into the soaks it read.
                "results": _relative(r.results_dir, directory) if r.results_dir else r.label,
            }
            for r in runs
        ],
        "problems": problems or [],
        "policies": [{**asdict(row), "flaky": row.flaky} for row in rows],
    }
    write_whole(data, json.dumps(summary, indent=2) + "\n")
    return [md, data]


def _relative(path: Path, start: Path) -> str:
    return os.path.relpath(path.resolve(), start.resolve())


def read_soak(directory: Path) -> tuple[list[SoakRun], list[str]]:
    """The runs (and runs that left no result) of a soak written before, from its
    soak.json and each run's result file: for one table over several soaks (kept
    and fresh, embedded and kind, tonight's and last week's)."""
    index = directory / "soak.json"
    try:
        data = json.loads(index.read_text())
        entries = data["runs"]
        problems = [f"{directory.name}/{p}" for p in data.get("problems", [])]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConformanceError(
            f"{directory} holds no soak that can be read ({error}); give a directory "
            "a `soak` wrote (its --report)"
        ) from None
    runs = []
    for entry in entries:
        results_dir = directory / entry.get("results", entry["label"])
        report = read_reports(results_dir)[0]
        runs.append(
            SoakRun(
                f"{directory.name}/{entry['label']}",
                entry["mode"],
                entry["provider"],
                report,
                results_dir,
            )
        )
    return runs, problems
