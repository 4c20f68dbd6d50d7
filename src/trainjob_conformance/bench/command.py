"""`trainjob-conformance bench`: N runs, then the summary table."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.bench import kind as kind_bench
from trainjob_conformance.bench import summary
from trainjob_conformance.bench.runner import BenchRun, bench_once, run_suite
from trainjob_conformance.progress import say
from trainjob_conformance.stack.profiles import Profile


def run_bench(
    profile: Profile,
    run_dir: Path,
    runs: int,
    workers: int,
    output: Path,
    pytest_args: list[str],
    on_run_dir: Callable[[Path], None] = lambda path: None,
    kind: bool = False,
) -> int:
    """Measure `runs` times; write bench.json and bench.md; exit 1 if any suite failed.

    With `kind`, each run then benches the kind provider against a bare `kind create`,
    and the suite on kind against that run's embedded suite (bench/kind.py)."""
    done: list[BenchRun] = []
    on_kind: list[kind_bench.KindBench] = []
    for index in range(1, runs + 1):
        where = run_dir / f"run-{index}"
        done.append(bench_once(index, profile, where, workers, pytest_args, on_run_dir))
        if kind:
            round_ = _bench_kind(profile, where, workers, pytest_args, on_run_dir)
            round_.embedded_suite = done[-1].session_suite
            on_kind.append(round_)
    meta = {
        "profile": profile.name,
        "workers": workers,
        "versions": dict(profile.versions),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_dir": str(run_dir),
    }
    data, markdown, text = summary.write(done, meta, output)
    if on_kind:
        text += kind_bench.table(on_kind)
        markdown.write_text(text)
        written = json.loads(data.read_text())
        written["kind"] = {
            "runs": [round_.to_json() for round_ in on_kind],
            "start_ratio": kind_bench.spread([round_.start_ratio for round_ in on_kind]),
            "suite_ratio": kind_bench.spread([round_.suite_ratio for round_ in on_kind]),
        }
        data.write_text(json.dumps(written, indent=2) + "\n")
    print(text)
    say(f"bench results: {data} and {markdown}")
    failed = [str(run.index) for run in done if run.suite_exit != 0]
    failed += [f"{i} on kind" for i, k in enumerate(on_kind, 1) if k.suite_exit != 0]
    if failed:
        say(f"the suite did not pass in run(s) {', '.join(failed)}: see {run_dir}")
        return 1
    return 0


def _bench_kind(
    profile: Profile,
    run_dir: Path,
    workers: int,
    pytest_args: list[str],
    on_run_dir: Callable[[Path], None],
) -> kind_bench.KindBench:
    directory = run_dir / "kind"
    directory.mkdir(parents=True, exist_ok=True)
    on_run_dir(directory)

    def run_on_kind(where: Path) -> tuple[float, int, Path]:
        where.mkdir(parents=True, exist_ok=True)
        _, wall, code, report, _ = run_suite(
            profile, None, workers, where, pytest_args, cluster="kind"
        )
        return wall, code, report

    return kind_bench.bench_kind(profile, directory, run_on_kind)
