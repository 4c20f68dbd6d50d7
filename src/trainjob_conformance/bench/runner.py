"""One bench run: a bare control plane, the whole stack, then the suite on it while warm.

Each run measures, on the same machine within a few seconds of each other:
  1. a bare control plane (kwokctl and its nodes, nothing else), started and stopped;
  2. the embedded stack, with the named phases its start code records;
  3. the conformance suite against that stack, kept up (`run --cluster existing`),
     with every policy test's wall time and cluster timeline (`--trainjob-timeline`),
     and the API server's audit log of writes (`bench.audit`), kept as suite/audit.log.
Ratios are taken within one run, since the machine is shared.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.bench.audit import Write, reaction, read_audit_log, writes_of
from trainjob_conformance.cluster.health.phases import PHASES_FILE, Phase, read_phases
from trainjob_conformance.cluster.provider import (
    AUDIT_LOG_OPTION,
    KUBECONFIG_OPTION,
    ClusterRequest,
)
from trainjob_conformance.cluster.registry import bare_start, make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.invocation import PytestInvocation
from trainjob_conformance.kube.client import HARNESS_USER_AGENT
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.progress import say
from trainjob_conformance.report.model import NOT_APPLICABLE, SKIPPED, RunReport
from trainjob_conformance.stack.gobuild import build_profile
from trainjob_conformance.stack.profiles import Profile

TIMELINE_FILE = "timeline.json"
_NOT_RUN = (SKIPPED, NOT_APPLICABLE)


def harness_share(wall: float, cluster: float) -> float:
    """The harness's overhead: (wall - the cluster's time) / wall."""
    return (wall - cluster) / wall if wall > 0 else 0.0


@dataclass
class PolicySample:
    """One policy test of one run."""

    test: str
    policy: str
    result: str
    wall: float  # setup's start to teardown's end, less the bench's own reading of the timeline
    intrinsic: float  # the cluster's span, from its own timestamps (whole seconds)
    bounds: tuple[float, float]  # the least and the most that span can be
    first: str = ""
    last: str = ""
    began: float = 0.0  # epoch seconds: the test's view was set up
    ended: float = 0.0  # epoch seconds: the test's body was over
    reading: float = 0.0  # seconds the bench spent reading the test's timeline
    namespace: str = ""
    reaction: float = 0.0  # the cluster's time, from the audit log (microseconds)
    requests: int = 0  # the harness's writes the cluster answered

    @property
    def overhead(self) -> float:
        return harness_share(self.wall, self.intrinsic)

    @property
    def audited_overhead(self) -> float:
        return harness_share(self.wall, self.reaction)

    def with_reaction(self, found: dict[str, list[Write]]) -> PolicySample:
        measured = reaction(writes_of(found, self.namespace), self.began, self.ended)
        return dataclasses.replace(self, reaction=measured.seconds, requests=measured.requests)


@dataclass
class BenchRun:
    index: int
    bare_control_plane: float
    phases: list[Phase]
    suite_wall: float
    suite_exit: int
    results: dict[str, int]
    tests: list[PolicySample] = field(default_factory=list)
    suite_started: float = 0.0  # epoch seconds
    suite_ended: float = 0.0
    # The suite as its report times it: the pytest session after the cluster was
    # ready (no process start, no report writing), as the kind round's is taken.
    session_suite: float = 0.0

    @property
    def suite_lead(self) -> float:
        """From the command's start to the first test's view: pytest, workers, cluster checks."""
        began = [t.began for t in self.tests if t.began]
        return min(began) - self.suite_started if began else 0.0

    @property
    def suite_tail(self) -> float:
        """From the last test's end to the command's exit: cleanup, report, shutdown."""
        ended = [t.ended for t in self.tests if t.ended]
        return self.suite_ended - max(ended) if ended else 0.0

    @property
    def reading(self) -> float:
        return sum(t.reading for t in self.tests)

    def phase(self, name: str) -> float | None:
        for phase in self.phases:
            if phase.name == name:
                return phase.seconds
        return None

    @property
    def start_total(self) -> float:
        return self.phase("total") or 0.0

    @property
    def tests_wall(self) -> float:
        return sum(t.wall for t in self.tests)

    @property
    def tests_intrinsic(self) -> float:
        return sum(t.intrinsic for t in self.tests)

    @property
    def overhead(self) -> float:
        return harness_share(self.tests_wall, self.tests_intrinsic)

    @property
    def tests_reaction(self) -> float:
        return sum(t.reaction for t in self.tests)

    @property
    def audited_overhead(self) -> float:
        return harness_share(self.tests_wall, self.tests_reaction)

    @property
    def overhead_bounds(self) -> tuple[float, float]:
        """The overhead if every test's span were the most, and the least, it can be."""
        wall = self.tests_wall
        if wall <= 0:
            return (0.0, 0.0)
        most = sum(t.bounds[1] for t in self.tests)
        least = sum(t.bounds[0] for t in self.tests)
        return ((wall - most) / wall, (wall - least) / wall)

    @property
    def overhead_sigma(self) -> float:
        """At most one standard deviation of `overhead` from whole-second stamps."""
        wall = self.tests_wall
        return 0.5 * math.sqrt(len(self.tests)) / wall if wall > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "bare_control_plane": round(self.bare_control_plane, 3),
            "start_total": self.start_total,
            "start_ratio": round(self.start_total / self.bare_control_plane, 3),
            "phases": [vars(p) for p in self.phases],
            "suite_wall": round(self.suite_wall, 3),
            "suite_lead": round(self.suite_lead, 3),
            "suite_tail": round(self.suite_tail, 3),
            "timeline_reading": round(self.reading, 3),
            "suite_exit": self.suite_exit,
            "results": self.results,
            "tests_wall": round(self.tests_wall, 3),
            "tests_intrinsic": round(self.tests_intrinsic, 3),
            "overhead": round(self.overhead, 4),
            "overhead_bounds": [round(b, 4) for b in self.overhead_bounds],
            "overhead_sigma": round(self.overhead_sigma, 4),
            "tests_reaction": round(self.tests_reaction, 3),
            "audited_overhead": round(self.audited_overhead, 4),
            "tests": [
                {
                    **vars(t),
                    "reaction": round(t.reaction, 3),
                    "overhead": round(t.overhead, 4),
                    "audited_overhead": round(t.audited_overhead, 4),
                }
                for t in sorted(self.tests, key=lambda t: (t.policy, t.test))
            ],
        }


def samples_from(timeline_file: Path) -> list[PolicySample]:
    """The policy tests of a `--trainjob-timeline` file that ran (not skipped)."""
    rows = json.loads(timeline_file.read_text())["tests"]
    samples = []
    for row in rows:
        if row.get("result") in _NOT_RUN:
            continue
        timeline = row.get("timeline") or {}
        if "start" in row and "stop" in row:
            wall = row["stop"] - row["start"]
        else:  # a pytest whose reports carry no start and stop times
            wall = row["setup"] + row["call"] + row["teardown"]
        wall -= timeline.get("collect_seconds", 0.0)
        samples.append(
            PolicySample(
                test=row["test"],
                policy=row["policy"],
                result=row.get("result", "?"),
                wall=round(wall, 3),
                intrinsic=float(timeline.get("intrinsic", 0.0)),
                bounds=tuple(timeline.get("bounds") or (0.0, 0.0)),  # type: ignore[arg-type]
                first=((timeline.get("first") or {}).get("what")) or "",
                last=((timeline.get("last") or {}).get("what")) or "",
                began=float(timeline.get("began", 0.0)),
                ended=float(timeline.get("ended", 0.0)),
                reading=float(timeline.get("collect_seconds", 0.0)),
                namespace=str(timeline.get("namespace", "")),
            )
        )
    return samples


def run_suite(
    profile: Profile,
    kubeconfig: Path | None,
    workers: int,
    run_dir: Path,
    pytest_args: list[str],
    cluster: str = "existing",
) -> tuple[float, float, int, Path, Path]:
    """The suite as `run` starts it, on the cluster at `kubeconfig` (as `existing`),
    or (`cluster="kind"`) on one it starts, in `run_dir` (where its own run
    directory goes, under .runs)."""
    report = run_dir / "report"
    timeline = run_dir / TIMELINE_FILE
    log = run_dir / "suite.log"
    command = PytestInvocation(
        profile=profile.name,
        cluster=cluster,
        run_dir=run_dir / ".runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{profile.name}",
        provider_options={KUBECONFIG_OPTION: str(kubeconfig)} if kubeconfig is not None else {},
        workers=workers,
        report=report,
        junit=True,
        timeline=timeline,
        extra=tuple(pytest_args),
    ).argv()
    started, epoch = time.monotonic(), time.time()
    with log.open("wb") as sink:
        code = subprocess.run(
            command, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            check=False, cwd=run_dir,
        ).returncode  # fmt: skip
    return epoch, time.monotonic() - started, code, report / f"{profile.name}.json", timeline


def bench_once(
    index: int,
    profile: Profile,
    run_dir: Path,
    workers: int,
    pytest_args: list[str],
    on_run_dir: Callable[[Path], None] = lambda path: None,
) -> BenchRun:
    build_profile(profile)  # before the bare start, so neither times a build
    bare_dir, stack_dir, suite_dir = (run_dir / name for name in ("bare", "stack", "suite"))
    for directory in (bare_dir, stack_dir, suite_dir):
        directory.mkdir(parents=True, exist_ok=True)
        on_run_dir(directory)

    say(f"bench run {index}: bare control plane")
    bare = bare_start("embedded", profile, bare_dir)

    say(f"bench run {index}: the stack")
    audit_log = suite_dir / "audit.log"
    # The provider copies its audit log here at `down` (its own directory goes with it).
    cluster = make_provider(
        ClusterRequest("embedded", profile, stack_dir, {AUDIT_LOG_OPTION: str(audit_log)})
    )
    try:
        handle = cluster.up()
        say(f"bench run {index}: the suite on the warm cluster, -n {workers}")
        epoch, wall, code, report_file, timeline_file = run_suite(
            profile, handle.kubeconfig, workers, suite_dir, pytest_args
        )
    finally:
        cluster.down()
    if not timeline_file.is_file() or not report_file.is_file():
        raise ConformanceError(
            f"bench run {index}: the suite wrote no results (exit {code}); see {suite_dir / 'suite.log'}"
        )
    report = RunReport.read(report_file)
    run = BenchRun(
        index=index,
        bare_control_plane=bare,
        phases=read_phases(stack_dir / PHASES_FILE),
        suite_wall=wall,
        suite_exit=code,
        results=report.counts(),
        tests=_with_reactions(samples_from(timeline_file), audit_log, index),
        suite_started=epoch,
        suite_ended=epoch + wall,
        session_suite=report.suite_seconds,
    )
    say(
        f"bench run {index}: bare control plane {bare:.1f}s, start {run.start_total:.1f}s "
        f"({run.start_total / bare:.2f}x), suite {wall:.1f}s (exit {code}), "
        f"harness overhead {run.overhead:.0%} (whole-second stamps), "
        f"{run.audited_overhead:.0%} (audit log)"
    )
    return run


def _with_reactions(samples: list[PolicySample], audit_log: Path, index: int) -> list[PolicySample]:
    if not audit_log.is_file():
        raise ConformanceError(
            f"bench run {index}: the API server wrote no audit log; without it the "
            "cluster's time per test cannot be read to the microsecond"
        )
    found = read_audit_log(audit_log, HARNESS_USER_AGENT)
    return [sample.with_reaction(found) for sample in samples]
