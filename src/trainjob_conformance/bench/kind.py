"""The bench's kind part: the provider against a bare `kind create`, and the suite on kind.

Measured in the same bench run as the embedded stack, with images cached:
  1. a bare `kind create cluster` of the provider's own node image and config
     (the same nodes and host settings), then deleted;
  2. the catalog as a user runs it, `run --cluster kind`: the provider's start
     (`kind create`, pod networking across the nodes, the stack installed and
     answering admission requests), with the MultiKueue worker cluster starting
     beside the end of it (plugin/peer.py), then the suite. The start is the
     provider's own figure (TIMINGS_FILE in the run's directory); the suite is
     the run's wall time after its cluster was ready.
The two ratios the kind provider is held to come from these: (2)'s start over
(1), and (2)'s suite over the embedded suite of the same bench run (`run
--cluster existing` on the embedded stack, whose MultiKueue worker starts
inside its suite: about 10 s of the embedded suite). Both suites are timed by
their reports (the pytest session after its cluster was ready), not by the
command's wall time, which adds Python's and pytest's start (about 5 s).
With several runs each kind round follows its embedded run, so a ratio's two
sides share the machine's load of the moment, and the table gives each run
and the min / median / max (the machines are shared and noisy).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.health.phases import TIMINGS_FILE
from trainjob_conformance.cluster.registry import bare_start
from trainjob_conformance.progress import say
from trainjob_conformance.report.model import RunReport
from trainjob_conformance.stack.profiles import Profile

# Phases of the provider's own timings that make "created, installed and ready".
# `kind_create` includes what of the install ran beside it (`install beside kind create`).
STACK_PHASES = ("kind_create", "nodes", "install", "admission")


@dataclass
class KindBench:
    bare_create: float
    timings: dict[str, float]
    suite_wall: float
    suite_exit: int
    results: dict[str, int] = field(default_factory=dict)
    # The suite on the embedded stack in the same bench run.
    embedded_suite: float = 0.0
    # The whole `run --cluster kind`: the cluster's start, then the suite.
    run_wall: float = 0.0

    @property
    def stack_ready(self) -> float:
        """From `kind create`'s start to admission ready, as the provider measured it;
        the phases' sum for timings without it."""
        if "ready" in self.timings:
            return self.timings["ready"]
        return sum(self.timings.get(phase, 0.0) for phase in STACK_PHASES)

    @property
    def start_ratio(self) -> float:
        return self.stack_ready / self.bare_create if self.bare_create else 0.0

    @property
    def suite_ratio(self) -> float:
        return self.suite_wall / self.embedded_suite if self.embedded_suite else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "stack_ready": self.stack_ready,
            "start_ratio": self.start_ratio,
            "suite_ratio": self.suite_ratio,
        }


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def start_timings(run_dirs: Path) -> dict[str, float]:
    """The provider's timings of the run's cluster (not its MultiKueue worker's, one
    level down), from the run directory that `run` made under `run_dirs`."""
    found = sorted(run_dirs.glob(f"*/{TIMINGS_FILE}"))
    return json.loads(found[-1].read_text()) if found else {}


def bench_kind(profile: Profile, run_dir: Path, run_on_kind: Any) -> KindBench:
    """`run_on_kind(directory)` runs `run --cluster kind` in `directory` (its run
    directories go in `directory/.runs`) and returns (wall, exit, report file)."""
    say("bench, kind: a bare kind create of the provider's node image and config")
    bare = bare_start("kind", profile, run_dir / "kind-bare")
    say("bench, kind: run --cluster kind (the provider's start, then the suite)")
    where = run_dir / "kind-run"
    wall, code, report_file = run_on_kind(where)
    timings = start_timings(where / ".runs")
    counts: dict[str, int] = {}
    suite = wall
    if report_file.is_file():
        report = RunReport.read(report_file)
        counts, suite = report.counts(), report.suite_seconds
    result = KindBench(bare, timings, suite, code, counts, run_wall=wall)
    say(
        f"bench, kind: bare create {bare:.1f}s, created and ready {result.stack_ready:.1f}s "
        f"({result.start_ratio:.2f}x), suite {suite:.1f}s (exit {code}), run {wall:.1f}s"
    )
    return result


def table(runs: list[KindBench]) -> str:
    """The kind section of bench.md: a column per run, then min / median / max."""

    def seconds(value: float) -> str:
        return f"{value:.1f} s"

    def ratio(value: float) -> str:
        return f"**{value:.2f}x**"

    rows: list[tuple[str, Any, Any]] = [
        ("bare `kind create` (same node image and config)", lambda k: k.bare_create, seconds),
        *(
            (f"provider: {phase}", lambda k, p=phase: k.timings.get(p, 0.0), seconds)
            for phase in STACK_PHASES
        ),
        ("created, installed and ready", lambda k: k.stack_ready, seconds),
        ("**ratio to bare create** (target 2x)", lambda k: k.start_ratio, ratio),
        ("suite on kind (`run --cluster kind`, once ready)", lambda k: k.suite_wall, seconds),
        (
            "suite on the embedded stack, same bench run (its report's)",
            lambda k: k.embedded_suite,
            seconds,
        ),
        ("**ratio to the embedded suite** (target 1.5x)", lambda k: k.suite_ratio, ratio),
        ("the whole `run --cluster kind`", lambda k: k.run_wall, seconds),
    ]
    several = len(runs) > 1
    header = [f"run {index}" for index in range(1, len(runs) + 1)] if several else [""]
    if several:
        header.append("min / median / max")
    lines = ["", "## kind", "", "| | " + " | ".join(header) + " |"]
    lines.append("|---" * (len(header) + 1) + "|")
    for label, value, shown in rows:
        cells = [shown(value(k)) for k in runs]
        if several:
            figures = spread([value(k) for k in runs])
            cells.append(" / ".join(shown(figures[m]).strip("*") for m in ("min", "median", "max")))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    exits = [f"exit {k.suite_exit}" for k in runs]
    lines.append("| suite exit | " + " | ".join(exits) + (" | |" if several else " |"))
    results = [", ".join(f"{n} {w}" for w, n in sorted(k.results.items())) for k in runs]
    lines.append("| results on kind | " + " | ".join(results) + (" | |" if several else " |"))
    return "\n".join(lines) + "\n"
