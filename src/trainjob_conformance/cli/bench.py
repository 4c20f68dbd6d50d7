"""`bench`: start phases, the suite on a warm cluster, and the harness's overhead."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainjob_conformance.cli import children
from trainjob_conformance.cli.checks import (
    add_workers,
    check_build_cache,
    check_suite_present,
    check_writable,
    count_of,
)
from trainjob_conformance.cli.profile_args import add_profile, profile_arg
from trainjob_conformance.stack.profiles import load_profile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "bench",
        help="time the start phases, the suite on a warm cluster, and the harness's overhead",
        description="Each run starts a bare control plane, then the embedded stack (timing its "
        "phases), then runs the suite on it (as `run --cluster existing`), reading each policy "
        "test's cluster timeline from the objects' own timestamps. Writes bench.json and "
        "bench.md; exit 1 if a suite did not pass.",
    )
    add_profile(bench)
    bench.add_argument(
        "--runs", type=run_count, default=1, help="how many runs (default: %(default)s)"
    )
    add_workers(bench, "pytest-xdist workers of the suite (default: %(default)s)")
    bench.add_argument(
        "--output", default="reports/bench", help="where to write (default: %(default)s)"
    )
    bench.add_argument(
        "--kind",
        action="store_true",
        help="then the kind provider: a bare kind create against create and install, and "
        "the suite on kind against the embedded suite of the same bench (needs Docker)",
    )
    bench.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    bench.set_defaults(func=run_bench_command)


run_count = count_of("runs", 1, "1 or more")


def run_bench_command(args: argparse.Namespace) -> int:
    from trainjob_conformance.bench.command import run_bench

    args.profile = profile_arg(args)
    check_suite_present()
    check_build_cache()
    check_writable(Path(args.output), "the bench output directory")
    run_dir = children.new_run_dir("bench")
    return run_bench(
        load_profile(args.profile),
        run_dir,
        args.runs,
        args.workers,
        Path(args.output).resolve(),
        args.pytest_args,
        on_run_dir=children.RUN_DIRS.append,
        kind=args.kind,
    )
