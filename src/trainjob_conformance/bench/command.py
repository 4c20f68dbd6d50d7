"""`trainjob-conformance bench`: N runs, then the summary table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.bench import summary
from trainjob_conformance.bench.runner import BenchRun, bench_once
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
) -> int:
    """Measure `runs` times; write bench.json and bench.md; exit 1 if any suite failed."""
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
    print(text)
    say(f"bench results: {data} and {markdown}")
    failed = [run.index for run in done if run.suite_exit != 0]
    if failed:
        say(f"the suite did not pass in run(s) {', '.join(map(str, failed))}: see {run_dir}")
        return 1
    return 0
