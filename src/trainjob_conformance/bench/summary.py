"""min / median / max over bench runs, as JSON and as a short Markdown table."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainjob_conformance.bench.runner import BenchRun

Spread = tuple[float, float, float]
BARE = "bare control plane (a cluster of its own)"


def spread(values: Iterable[float]) -> Spread:
    ordered = sorted(values)
    if not ordered:
        return (0.0, 0.0, 0.0)
    return (ordered[0], statistics.median(ordered), ordered[-1])


def _phase_names(runs: list[BenchRun]) -> list[str]:
    offsets: dict[str, list[float]] = {}
    for run in runs:
        for phase in run.phases:
            offsets.setdefault(phase.name, []).append(phase.offset)
    # "total" last; the rest in the order they began.
    return sorted(offsets, key=lambda n: (n == "total", statistics.median(offsets[n]), n))


def summarize(runs: list[BenchRun], meta: dict[str, Any]) -> dict[str, Any]:
    phases = {}
    for name in _phase_names(runs):
        found = [p for run in runs for p in run.phases if p.name == name]
        phases[name] = {
            "offset_median": statistics.median(p.offset for p in found),
            "seconds": spread(p.seconds for p in found),
        }
    tests: dict[str, dict[str, Any]] = {}
    for run in runs:
        for sample in run.tests:
            row = tests.setdefault(
                sample.test,
                {
                    "policy": sample.policy,
                    "wall": [],
                    "intrinsic": [],
                    "overhead": [],
                    "reaction": [],
                    "audited_overhead": [],
                    "requests": [],
                    "results": [],
                },
            )
            row["wall"].append(sample.wall)
            row["intrinsic"].append(sample.intrinsic)
            row["overhead"].append(sample.overhead)
            row["reaction"].append(sample.reaction)
            row["audited_overhead"].append(sample.audited_overhead)
            row["requests"].append(sample.requests)
            row["results"].append(sample.result)
    return {
        **meta,
        "runs": len(runs),
        "bare_control_plane": spread(r.bare_control_plane for r in runs),
        "start_total": spread(r.start_total for r in runs),
        "start_ratio": spread(r.start_total / r.bare_control_plane for r in runs),
        "phases": phases,
        "suite_wall": spread(r.suite_wall for r in runs),
        "suite_lead": spread(r.suite_lead for r in runs),
        "suite_tail": spread(r.suite_tail for r in runs),
        "timeline_reading": spread(r.reading for r in runs),
        "tests_wall": spread(r.tests_wall for r in runs),
        "tests_intrinsic": spread(r.tests_intrinsic for r in runs),
        "overhead": spread(r.overhead for r in runs),
        "overhead_sigma": spread(r.overhead_sigma for r in runs),
        "overhead_bounds": [r.overhead_bounds for r in runs],
        "tests_reaction": spread(r.tests_reaction for r in runs),
        "audited_overhead": spread(r.audited_overhead for r in runs),
        "results": [r.results for r in runs],
        "policies": {
            test: {
                "policy": row["policy"],
                "results": sorted(set(row["results"])),
                "wall": spread(row["wall"]),
                "intrinsic": spread(row["intrinsic"]),
                "overhead": spread(row["overhead"]),
                "reaction": spread(row["reaction"]),
                "audited_overhead": spread(row["audited_overhead"]),
                "requests": spread(row["requests"]),
            }
            for test, row in sorted(tests.items(), key=lambda kv: (kv[1]["policy"], kv[0]))
        },
    }


def _s(values: Spread) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def _pct(values: Spread) -> str:
    return " / ".join(f"{v:.0%}" for v in values)


def _label(test: str, policy: str, labels: list[str]) -> str:
    """The policy ID; with the test's name (and parameters) when a policy has several tests."""
    if labels.count(policy) == 1:
        return policy
    name = test.rsplit("::", 1)[-1]
    return f"{policy} `{name.removeprefix('test_')}`"


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"profile {summary['profile']}, {summary['runs']} run(s), suite with -n "
        f"{summary['workers']}; min / median / max in seconds",
        "",
        "| start phase | begins at (median) | seconds |",
        "|---|---|---|",
        f"| {BARE} | | {_s(summary['bare_control_plane'])} |",
    ]
    for name, phase in summary["phases"].items():
        lines.append(f"| {name} | {phase['offset_median']:.1f} | {_s(phase['seconds'])} |")
    ratio = " / ".join(f"{v:.2f}x" for v in summary["start_ratio"])
    bounds = ", ".join(f"{lo:.0%}..{hi:.0%}" for lo, hi in summary["overhead_bounds"])
    lines += [
        f"| **start / bare control plane** | | {ratio} |",
        "",
        "| suite on the warm cluster | value |",
        "|---|---|",
        f"| wall time (`run --cluster existing`) | {_s(summary['suite_wall'])} s |",
        f"| of which before the first test (pytest, workers, cluster checks) | "
        f"{_s(summary['suite_lead'])} s |",
        f"| of which after the last test (report, shutdown) | {_s(summary['suite_tail'])} s |",
        f"| the bench's own reading of timelines, summed over tests | "
        f"{_s(summary['timeline_reading'])} s |",
        f"| policy tests' wall time, summed | {_s(summary['tests_wall'])} s |",
        f"| cluster-intrinsic time from the objects' whole-second stamps, summed | "
        f"{_s(summary['tests_intrinsic'])} s |",
        f"| harness overhead from those stamps, (wall - intrinsic) / wall | "
        f"{_pct(summary['overhead'])} |",
        f"| its standard deviation from whole-second stamps, at most | "
        f"{_pct(summary['overhead_sigma'])} |",
        f"| its hard bounds, run by run | {bounds} |",
        f"| cluster reaction time from the audit log (microseconds), summed | "
        f"{_s(summary['tests_reaction'])} s |",
        f"| **harness overhead from the audit log**, (wall - reaction) / wall | "
        f"{_pct(summary['audited_overhead'])} |",
        "",
        "| policy | wall (s) | cluster reaction (s, audit log) | overhead (audit log) "
        "| harness writes |",
        "|---|---|---|---|---|",
    ]
    policies = [row["policy"] for row in summary["policies"].values()]
    for test, row in summary["policies"].items():
        label = _label(test, row["policy"], policies)
        requests = " / ".join(f"{v:.0f}" for v in row["requests"])
        lines.append(
            f"| {label} | {_s(row['wall'])} | {_s(row['reaction'])} | "
            f"{_pct(row['audited_overhead'])} | {requests} |"
        )
    return "\n".join(lines) + "\n"


def write(runs: list[BenchRun], meta: dict[str, Any], output: Path) -> tuple[Path, Path, str]:
    """bench.json (every run, and the summary) and bench.md (the table)."""
    summary = summarize(runs, meta)
    output.mkdir(parents=True, exist_ok=True)
    data = output / "bench.json"
    data.write_text(
        json.dumps({"summary": summary, "runs": [r.to_json() for r in runs]}, indent=2) + "\n"
    )
    text = table(summary)
    markdown = output / "bench.md"
    markdown.write_text(text)
    return data, markdown, text
