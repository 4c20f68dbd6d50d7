"""The bench's kind part: the provider against a bare `kind create`, and the suite on kind.

Measured in the same bench run as the embedded stack, with images cached:
  1. a bare `kind create cluster` of the provider's own node image and config
     (the same nodes and host settings), then deleted;
  2. the kind provider: `kind create`, pod networking across the nodes, the
     images loaded, the stack installed and answering admission requests;
  3. the suite on that cluster, as `run --cluster existing` runs it on a user's
     cluster (the embedded bench runs its suite the same way).
The two ratios the kind provider is held to come from these: (2) over (1), and
the suite's wall time over the embedded suite's of the same bench run.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.kind.provider import KindStackCluster
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

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "stack_ready": self.stack_ready, "start_ratio": self.start_ratio}


def bare_create(profile: Profile, run_dir: Path) -> float:
    """Seconds for `kind create` alone, with the provider's node image and config."""
    bare = KindStackCluster(profile, run_dir, bare=True)
    try:
        bare.create_and_install()
        return bare.timings["kind_create"]
    finally:
        bare.down()


def bench_kind(profile: Profile, run_dir: Path, suite: Any) -> KindBench:
    """`suite(kubeconfig, directory)` runs the suite and returns (wall, exit, report file)."""
    say("bench, kind: a bare kind create of the provider's node image and config")
    bare = bare_create(profile, run_dir / "kind-bare")
    say("bench, kind: the provider (create, nodes, images, stack, admission)")
    cluster = KindStackCluster(profile, run_dir / "kind-stack")
    started = time.monotonic()
    try:
        handle = cluster.up()
        say(f"bench, kind: ready in {time.monotonic() - started:.1f}s; the suite on it")
        wall, code, report_file = suite(handle.kubeconfig, run_dir / "kind-suite")
    finally:
        cluster.down()
    counts: dict[str, int] = {}
    if report_file.is_file():
        for row in RunReport.read(report_file).results:
            counts[row.result] = counts.get(row.result, 0) + 1
    result = KindBench(bare, dict(cluster.timings), wall, code, counts)
    say(
        f"bench, kind: bare create {bare:.1f}s, created and ready {result.stack_ready:.1f}s "
        f"({result.start_ratio:.2f}x), suite {wall:.1f}s (exit {code})"
    )
    return result


def table(kind: KindBench, embedded_suite: float) -> str:
    """The kind section of bench.md."""
    suite_ratio = kind.suite_wall / embedded_suite if embedded_suite else 0.0
    rows = [
        ("bare `kind create` (same node image and config)", f"{kind.bare_create:.1f} s"),
        *(
            (f"provider: {phase}", f"{kind.timings.get(phase, 0.0):.1f} s")
            for phase in STACK_PHASES
        ),
        ("created, installed and ready", f"{kind.stack_ready:.1f} s"),
        ("**ratio to bare create** (target 2x)", f"**{kind.start_ratio:.2f}x**"),
        (
            "suite on kind (`run --cluster existing`)",
            f"{kind.suite_wall:.1f} s (exit {kind.suite_exit})",
        ),
        ("suite on the embedded stack, same bench run", f"{embedded_suite:.1f} s"),
        ("**ratio to the embedded suite** (target 1.5x)", f"**{suite_ratio:.2f}x**"),
        ("results on kind", ", ".join(f"{n} {w}" for w, n in sorted(kind.results.items()))),
    ]
    lines = ["", "## kind", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in rows]
    return "\n".join(lines) + "\n"
