"""The bench's own logic: phase clock, timestamps, a test's cluster span, the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.bench.runner import BenchRun, PolicySample, samples_from
from trainjob_conformance.bench.summary import spread, summarize, table
from trainjob_conformance.bench.timeline import object_stamps, timeline_of
from trainjob_conformance.cli import main
from trainjob_conformance.cluster.health.phases import Phase, PhaseClock, read_phases
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.timestamps import parse_time

T0 = 1_800_000_000.0  # a whole second


def iso(seconds: float, micro: bool = False) -> str:
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(seconds, UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_timestamps_parse_with_their_resolution() -> None:
    assert parse_time(iso(T0)) == (T0, False)
    assert parse_time(iso(T0 + 0.25, micro=True)) == (T0 + 0.25, True)
    assert parse_time("not a time") is None
    assert parse_time("2026-11-22T23:45:15") is None  # no zone: not a Kubernetes time


def test_every_timestamp_of_an_object_is_found_but_probes_are_not() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "creationTimestamp": iso(T0),
            "managedFields": [{"manager": "kubelet", "time": iso(T0 + 1)}],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "lastTransitionTime": iso(T0 + 2), "lastProbeTime": iso(T0 + 9)}
            ],
            "containerStatuses": [{"state": {"running": {"startedAt": iso(T0 + 3)}}}],
        },
    }
    found = {s.what: s for s in object_stamps(pod)}
    assert set(found) == {
        "Pod p metadata.creationTimestamp",
        "Pod p metadata.managedFields[kubelet].time",
        "Pod p status.conditions[Ready].lastTransitionTime",
        "Pod p status.containerStatuses[0].state.running.startedAt",
    }
    ready = found["Pod p status.conditions[Ready].lastTransitionTime"]
    assert (ready.lo, ready.hi) == (T0 + 2, T0 + 3)
    event = {"kind": "Event", "metadata": {"name": "e"}, "eventTime": iso(T0 + 0.5, micro=True)}
    (exact,) = object_stamps(event)
    assert exact.lo == exact.hi == T0 + 0.5


class FakeKube:
    """Lists and gets from fixed objects; enough for the timeline's reads."""

    def __init__(self, by_kind: dict[str, list[dict[str, Any]]]) -> None:
        self.by_kind = by_kind

    def resource(self, api_version: str, kind: str) -> None:
        pass

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict]:
        return [dict(o) for o in self.by_kind.get(kind, [])]

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        for obj in self.by_kind.get(kind, []):
            if obj["metadata"]["name"] == name:
                return dict(obj)
        raise NotFound(404, "NotFound", f"{kind} {name} not found")


def test_the_span_runs_from_the_first_creation_to_the_last_instant_before_the_end() -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt", "creationTimestamp": iso(T0)},
    }
    trainjob = {
        "kind": "TrainJob",
        "metadata": {"name": "tj", "creationTimestamp": iso(T0 + 1)},
        "status": {"conditions": [{"type": "Complete", "lastTransitionTime": iso(T0 + 3)}]},
    }
    late = {  # after the test had ended: not something it waited for
        "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": iso(T0 + 1)},
        "status": {"startTime": iso(T0 + 9)},
    }
    event = {"kind": "Event", "metadata": {"name": "e"}, "eventTime": iso(T0 + 2.5, micro=True)}
    kube = FakeKube(
        {
            "TrainJob": [trainjob],
            "Pod": [late],
            "Event": [event],
            "ClusterTrainingRuntime": [runtime],
        }
    )
    began, ended = T0 + 0.5, T0 + 3.2

    timeline = timeline_of(kube, "ns", [(kube, runtime)], began, ended)  # type: ignore[arg-type]

    assert timeline.first is not None and timeline.last is not None
    assert "ClusterTrainingRuntime rt" in timeline.first.what
    assert "Complete" in timeline.last.what
    assert timeline.intrinsic == 3.0  # whole seconds, the resolution all stamps share
    # At least from the runtime's last possible instant (T0+1) to the Complete
    # condition's first (T0+3); at most from the test's start to its end.
    assert timeline.bounds == pytest.approx((2.0, ended - began))


def test_a_test_that_created_nothing_has_no_span() -> None:
    timeline = timeline_of(FakeKube({}), "ns", [], T0, T0 + 1)  # type: ignore[arg-type]
    assert timeline.first is None and timeline.intrinsic == 0.0


def test_phases_keep_their_offsets_and_may_overlap(tmp_path: Path) -> None:
    clock = PhaseClock()
    with clock.phase("a"):
        started_b = clock.now()
    clock.record("b", started_b - 0.01)
    with pytest.raises(RuntimeError), clock.phase("failed"):
        raise RuntimeError
    phases = {p.name: p for p in clock.phases}
    assert set(phases) == {"a", "b"}  # a block that raised did not complete
    assert phases["b"].offset < phases["a"].end  # overlapping phases keep their own offsets
    assert clock.seconds("failed") is None
    clock.write(tmp_path / "phases.json")
    assert {p.name for p in read_phases(tmp_path / "phases.json")} == {"a", "b"}


def test_samples_leave_out_skipped_tests_and_the_bench_s_own_reading(tmp_path: Path) -> None:
    path = tmp_path / "timeline.json"
    timeline = {"intrinsic": 1.0, "bounds": [0.5, 1.5], "collect_seconds": 0.2}
    rows = [
        {"test": "t1", "policy": "P-1", "result": "pass", "setup": 0.5, "call": 2.0,
         "teardown": 0.2, "timeline": timeline},
        {"test": "t2", "policy": "P-2", "result": "skipped", "setup": 0.1, "call": 0.0,
         "teardown": 0.0},
    ]  # fmt: skip
    path.write_text(json.dumps({"tests": rows}))
    (sample,) = samples_from(path)
    assert sample.wall == pytest.approx(2.5)
    assert sample.overhead == pytest.approx(1.5 / 2.5)


def test_a_test_s_wall_time_includes_what_runs_between_its_phases(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from trainjob_conformance.plugin.timeline import TIMELINE, TimelineRecorder

    recorder = TimelineRecorder(tmp_path / "timeline.json")
    timeline = {"intrinsic": 1.0, "bounds": [0.5, 1.5], "collect_seconds": 0.2}
    # 0.3 s of verdict hooks and reporting between call and teardown, in no phase.
    phases = [("setup", T0, T0 + 0.5, []), ("call", T0 + 0.5, T0 + 2.5, [("policy", "P-1")]),
              ("teardown", T0 + 2.8, T0 + 3.0, [(TIMELINE, timeline)])]  # fmt: skip
    for when, start, stop, props in phases:
        report = SimpleNamespace(
            nodeid="t1", when=when, duration=stop - start, start=start, stop=stop,
            user_properties=props,
        )  # fmt: skip
        recorder.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    recorder.pytest_sessionfinish(None)  # type: ignore[arg-type]

    (sample,) = samples_from(tmp_path / "timeline.json")
    assert sample.wall == pytest.approx(3.0 - 0.2)  # not 0.5 + 2.0 + 0.2 - 0.2


def _run(index: int, bare: float, total: float, wall: float, intrinsic: float) -> BenchRun:
    return BenchRun(
        index=index,
        bare_control_plane=bare,
        phases=[Phase("control plane", 0.0, bare), Phase("total", 0.0, total)],
        suite_wall=wall + 3,
        suite_exit=0,
        results={"pass": 1},
        tests=[
            PolicySample(
                "e2e/t.py::test_a", "P-1", "pass", wall, intrinsic, (0.0, wall),
                reaction=intrinsic - 0.5, requests=index,
            )
        ],
    )  # fmt: skip


def test_the_summary_gives_min_median_max_and_ratios_within_each_run() -> None:
    runs = [_run(1, 4.0, 8.0, 10.0, 8.0), _run(2, 5.0, 15.0, 10.0, 9.0), _run(3, 3.0, 6.0, 10, 7)]
    summary = summarize(runs, {"profile": "latest", "workers": 2})
    assert spread([3, 1, 2]) == (1, 2, 3)
    assert summary["start_ratio"] == (2.0, 2.0, 3.0)
    assert summary["overhead"] == pytest.approx((0.1, 0.2, 0.3))
    text = table(summary)
    assert "| **start / bare control plane** | | 2.00x / 2.00x / 3.00x |" in text
    assert summary["audited_overhead"] == pytest.approx((0.15, 0.25, 0.35))
    assert "| P-1 | 10.0 / 10.0 / 10.0 | 6.5 / 7.5 / 8.5 | 15% / 25% / 35% | 1 / 2 / 3 |" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bench", "--runs", "0"], "0 runs: give 1 or more"),
        (["bench", "--runs", "many"], "'many' is not a number of runs"),
        (["bench", "-n", "-1"], "-1 workers: give 0 (serial) or more"),
    ],
)
def test_bad_bench_arguments_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert expected in capsys.readouterr().err


def test_bench_without_its_suite_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installation that lost its suite (a broken wheel) says so before starting anything."""
    from trainjob_conformance import paths

    broken = paths.Suite(
        tmp_path,
        tmp_path / "p.yaml",
        tmp_path / "b.yaml",
        tmp_path / "t",
        tmp_path / "e2e",
        tmp_path,
    )
    monkeypatch.setattr(paths, "suite", lambda: broken)
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the conformance suite is incomplete" in line
    assert "reinstall trainjob-conformance" in line


STAND_IN = """
import pytest
from pathlib import Path
from trainjob_conformance.cluster.handle import ClusterHandle

@pytest.fixture(scope="session")
def trainjob_cluster():
    return ClusterHandle(provider="stand-in", kubeconfig=Path("/nonexistent"),
                         versions={"trainer": "v2.3.0"})
"""
CATALOG = """
TJ-X-001:
  title: t
  statement: s
  source: src
  trainer: ">=2.0.0"
"""


def test_the_plugin_records_each_policy_test_s_durations(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", policies=CATALOG)
    pytester.makeconftest(STAND_IN)
    pytester.makepyfile(
        """
import pytest
@pytest.mark.policy("TJ-X-001")
def test_policy():
    pass

def test_not_a_policy():
    pass
"""
    )
    result = pytester.runpytest(
        "--trainjob-catalog=policies.yaml", "--trainjob-timeline=out/timeline.json"
    )
    result.assert_outcomes(passed=2)
    (row,) = json.loads((pytester.path / "out" / "timeline.json").read_text())["tests"]
    assert row["policy"] == "TJ-X-001" and row["result"] == "pass"
    assert {"setup", "call", "teardown"} <= set(row)


def test_a_timeline_among_the_result_files_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", policies=CATALOG)
    result = pytester.runpytest(
        "--trainjob-catalog=policies.yaml",
        "--trainjob-report=reports",
        "--trainjob-timeline=reports/timeline.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trainjob-timeline*is in the report directory*"])


def test_the_kind_bench_reports_both_ratios_from_its_own_figures():
    from trainjob_conformance.bench.kind import KindBench, table

    kind = KindBench(
        bare_create=30.0,
        timings={
            "images": 0.7,
            "kind_create": 31.0,
            "nodes": 5.0,
            "install": 50.0,
            "admission": 1.0,
        },
        suite_wall=150.0,
        suite_exit=0,
        results={"pass": 38, "known-gap": 4},
        embedded_suite=100.0,
    )
    assert kind.stack_ready == 87.0  # the cached images step is not the cluster's start
    assert round(kind.start_ratio, 2) == 2.9
    text = table([kind])
    assert "**2.90x**" in text and "**1.50x**" in text
    assert "38 pass" in text and "4 known-gap" in text
    assert "min / median / max" not in text  # one run: nothing to spread


def test_several_kind_rounds_give_each_run_and_the_spread_of_both_ratios():
    from trainjob_conformance.bench.kind import KindBench, table

    def round_(bare: float, ready: float, suite: float, embedded: float) -> KindBench:
        return KindBench(bare, {"ready": ready}, suite, 0, {"pass": 37}, embedded)

    # Each round's suite ratio is over its own run's embedded suite, not a median of them.
    runs = [
        round_(25.0, 50.0, 90.0, 45.0),
        round_(20.0, 50.0, 88.0, 44.0),
        round_(25.0, 45.0, 99.0, 45.0),
    ]
    assert [round(k.suite_ratio, 2) for k in runs] == [2.0, 2.0, 2.2]
    lines = table(runs).splitlines()
    header = next(line for line in lines if line.startswith("| | run 1"))
    assert header == "| | run 1 | run 2 | run 3 | min / median / max |"
    start = next(line for line in lines if "ratio to bare create" in line)
    assert start.endswith("| **2.00x** | **2.50x** | **1.80x** | 1.80x / 2.00x / 2.50x |")
    suite = next(line for line in lines if "ratio to the embedded suite" in line)
    assert suite.endswith("| 2.00x / 2.00x / 2.20x |")


def test_the_kind_start_is_the_providers_wall_time_when_the_install_overlaps_kind():
    from trainjob_conformance.bench.kind import KindBench

    # kind_create includes what of the install ran beside it; the provider's own
    # wall time from kind's start is the figure, not a sum of its phases.
    timings = {"kind_create": 43.6, "install beside kind create": 20.0, "nodes": 0.8,
               "install": 11.4, "admission": 0.2, "ready": 55.7}  # fmt: skip
    kind = KindBench(bare_create=29.3, timings=timings, suite_wall=115.0, suite_exit=0)

    assert kind.stack_ready == 55.7
    assert round(kind.start_ratio, 2) == 1.90


def test_the_kind_round_takes_the_start_from_the_provider_and_the_suite_after_ready(
    tmp_path, monkeypatch
):
    # `run --cluster kind` as a user runs it: the suite is the run's wall time after
    # its cluster was ready, the start the provider's own (not the worker's, one level
    # down); a stand-in for the run and for the bare create.
    from trainjob_conformance.bench import kind as kind_bench
    from trainjob_conformance.report.model import PolicyResult, RunReport
    from trainjob_conformance.stack.profiles import load_profile

    monkeypatch.setattr(kind_bench, "bare_start", lambda provider, profile, where: 25.0)

    def run_on_kind(where):
        run = where / ".runs" / "20261127-latest-1"
        (run / "worker-2").mkdir(parents=True)
        (run / kind_bench.TIMINGS_FILE).write_text('{"kind_create": 30.0, "ready": 45.0}')
        (run / "worker-2" / kind_bench.TIMINGS_FILE).write_text('{"ready": 80.0}')
        row = PolicyResult("KQ-MK-002", "t", "pass", 9.0, "e2e/test_kueue.py::t")
        report = RunReport("latest", "kind", {}, "now", 140.0, 48.0, [row])
        return 141.0, 0, report.write(where / "report")

    result = kind_bench.bench_kind(load_profile("latest"), tmp_path, run_on_kind)
    assert (result.stack_ready, result.start_ratio) == (45.0, 1.8)
    assert (result.suite_wall, result.run_wall, result.results) == (92.0, 141.0, {"pass": 1})
    result.embedded_suite = 46.0
    assert result.suite_ratio == 2.0
    assert "| the whole `run --cluster kind` | 141.0 s |" in kind_bench.table([result])


def test_each_kind_round_is_held_to_its_embedded_suite_as_the_report_times_it(
    tmp_path, monkeypatch
):
    # Both suites by their reports (the session after the cluster was ready): the
    # embedded command's wall adds Python's and pytest's start.
    from trainjob_conformance.bench import command
    from trainjob_conformance.bench.kind import KindBench
    from trainjob_conformance.stack.profiles import load_profile

    def once(index, *args):
        run = _run(index, 4.0, 8.0, 47.0, 40.0)  # the command's wall: 50 s
        run.session_suite = 45.0
        return run

    monkeypatch.setattr(command, "bench_once", once)
    monkeypatch.setattr(
        command, "_bench_kind", lambda *args: KindBench(25.0, {"ready": 50.0}, 90.0, 0, {})
    )
    code = command.run_bench(
        load_profile("latest"), tmp_path, 1, 2, tmp_path / "out", [], kind=True
    )
    written = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert code == 0
    assert written["kind"]["runs"][0]["embedded_suite"] == 45.0
    assert written["kind"]["suite_ratio"]["median"] == 2.0
