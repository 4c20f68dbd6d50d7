"""`trainjob-conformance bench`: N runs, then the summary table."""

from __future__ import annotations

import json
import statistics
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

    With `kind`, then the kind provider against a bare `kind create`, and the suite
    on kind against the embedded suite of the same bench (bench/kind.py)."""
    done: list[BenchRun] = []
    for index in range(1, runs + 1):
        done.append(
            bench_once(index, profile, run_dir / f"run-{index}", workers, pytest_args, on_run_dir)
        )
    meta = {
        "profile": profile.name,
        "workers": workers,
        "versions": dict(profile.versions),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_dir": str(run_dir),
    }
    data, markdown, text = summary.write(done, meta, output)
    on_kind = None
    if kind:
        on_kind = _bench_kind(profile, run_dir, workers, pytest_args, on_run_dir)
        embedded = statistics.median(run.suite_wall for run in done)
        section = kind_bench.table(on_kind, embedded)
        text += section
        markdown.write_text(text)
        written = json.loads(data.read_text())
        written["kind"] = {**on_kind.to_json(), "embedded_suite_median": embedded}
        data.write_text(json.dumps(written, indent=2) + "\n")
    print(text)
    say(f"bench results: {data} and {markdown}")
    failed = [str(run.index) for run in done if run.suite_exit != 0]
    if on_kind is not None and on_kind.suite_exit != 0:
        failed.append("kind")
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

    def suite(kubeconfig: Path, where: Path) -> tuple[float, int, Path]:
        where.mkdir(parents=True, exist_ok=True)
        _, wall, code, report, _ = run_suite(profile, kubeconfig, workers, where, pytest_args)
        return wall, code, report

    return kind_bench.bench_kind(profile, directory, suite)
