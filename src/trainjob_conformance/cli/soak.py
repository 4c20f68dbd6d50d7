"""`soak`: the catalog many times on the same stack, on one kept cluster and on fresh
ones; the flake table of every result that was not a policy's usual one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainjob_conformance.cli.checks import (
    add_workers,
    check_build_cache,
    check_suite_present,
    check_writable,
    whole_number,
)
from trainjob_conformance.cli.cluster_args import (
    add_cluster_args,
    check_cluster_args,
    provider_options_of,
)
from trainjob_conformance.cli.profile_args import add_profile, profile_arg
from trainjob_conformance.cluster.registry import provider_kind, provider_kinds
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.soak import FRESH, KEPT, SoakRun, flake_table, write_soak


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "soak",
        help="the catalog N times on one kept cluster and M times on fresh ones: the flake table",
        description="Exit codes: 0 no policy flaked and every run left results; 1 a policy "
        "flaked (its results differ between runs of the same stack); 2 bad input; 3 a run "
        "left no result (its cluster did not start, its pytest was killed).",
    )
    add_profile(p)
    p.add_argument("--runs", default="10", help="runs on one kept cluster (default: %(default)s)")
    p.add_argument(
        "--fresh",
        default="2",
        help="runs each on a fresh cluster (default: %(default)s)",
    )
    add_cluster_args(
        p,
        tuple(kind for kind in provider_kinds() if kind.name != "existing"),
        "where the clusters come from (default: embedded)",
    )
    add_workers(p, "pytest-xdist workers of each run (default: %(default)s)")
    p.add_argument(
        "--report",
        default="reports/soak",
        help="soak.md and soak.json, and each run's results under DIR/<run> (default: %(default)s)",
    )
    p.add_argument(
        "--combine",
        nargs="+",
        metavar="SOAK_DIR",
        help="run nothing: one flake table (in --report) over the runs of soaks written "
        "before, e.g. an embedded and a kind soak, or several nights' soaks",
    )
    p.set_defaults(func=run_soak_command)


def run_soak_command(args: argparse.Namespace) -> int:
    from trainjob_conformance.bench.soak import SoakRequest, run_soak

    if args.combine:
        return _combine(args)
    check_suite_present()
    check_cluster_args(args)
    profile = profile_arg(args)
    args.runs = whole_number("--runs", args.runs, 0, "how many runs, 0 or more")
    args.fresh = whole_number("--fresh", args.fresh, 0, "how many runs, 0 or more")
    if args.runs + args.fresh == 0:
        raise ConformanceError("--runs 0 --fresh 0 runs nothing; give at least one run")
    report = Path(args.report).resolve()
    check_writable(report, "the report directory")
    if provider_kind(args.cluster).needs_build_cache:
        check_build_cache()

    def progress(line: str) -> None:
        print(f"[trainjob-conformance] soak {line}", file=sys.stderr, flush=True)

    request = SoakRequest(
        profile,
        args.cluster,
        provider_options_of(args),
        args.runs,
        args.fresh,
        report,
        args.workers,
    )
    outcome = run_soak(
        request,
        progress,
        lambda so_far: write_soak(flake_table(so_far.runs), so_far.runs, report, so_far.problems),
    )
    return _conclude(outcome.runs, outcome.problems, report)


def _combine(args: argparse.Namespace) -> int:
    from trainjob_conformance.report.soak import read_soak

    report = Path(args.report).resolve()
    check_writable(report, "the report directory")
    runs, problems = [], []
    for directory in args.combine:
        read_runs, read_problems = read_soak(Path(directory))
        runs += read_runs
        problems += read_problems
    return _conclude(runs, problems, report)


def _conclude(runs: list[SoakRun], problems: list[str], report: Path) -> int:
    rows = flake_table(runs)
    paths = write_soak(rows, runs, report, problems)
    flaky = [row for row in rows if row.flaky]
    print(
        f"soak: {len(runs)} runs ({sum(r.mode == KEPT for r in runs)} kept, "
        f"{sum(r.mode == FRESH for r in runs)} fresh), {len(flaky)} of {len(rows)} "
        f"policies flaked; {', '.join(str(p) for p in paths)}"
    )
    for row in flaky:
        print(
            f"  FLAKY {row.policy} ({row.provider}): {row.words}; {row.odd[0][0]}: {row.odd[0][2][:200]}"
        )
    for problem in problems:
        print(f"  no result: {problem}")
    if flaky:
        return 1
    return 3 if problems else 0
