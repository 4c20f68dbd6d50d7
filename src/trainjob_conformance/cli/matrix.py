"""`matrix`: the suite on several profiles, one cluster each, and one report."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.cli import children
from trainjob_conformance.cli.checks import whole_number
from trainjob_conformance.cli.profile_args import add_profiles, add_with, name_skews, profile_list
from trainjob_conformance.cli.run import (
    add_cluster_options,
    check_run_args,
    pytest_command,
    record_command,
)
from trainjob_conformance.cluster.registry import provider_kind
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.stack.profiles import load_profile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    matrix = sub.add_parser(
        "matrix", help="run the suite on several profiles and report the matrix"
    )
    add_profiles(matrix)
    add_with(matrix, "every profile")
    matrix.add_argument(
        "-j",
        "--jobs",
        default="1",
        help="profiles run at once, each on its own cluster, its output in "
        "<report>/logs/<profile>.log when more than 1 (default: %(default)s)",
    )
    add_cluster_options(matrix)
    matrix.set_defaults(func=run_matrix)


def job_count(text: str) -> int:
    return whole_number("--jobs", text, 1, "1 (one profile at a time, the default) or more")


def run_matrix(args: argparse.Namespace) -> int:
    from trainjob_conformance.fanout import FanOut, Task, worst
    from trainjob_conformance.report.model import read_reports
    from trainjob_conformance.report.render import write_reports

    args.jobs = job_count(args.jobs)
    profiles = profile_list(args.profiles, args)
    check_run_args(args)
    if args.cluster != "existing":
        for name in profiles:
            name_skews(name)
    record_command()
    if args.jobs > 1 and provider_kind(args.cluster).needs_build_cache:
        _build_before_fanning_out(profiles)
    tasks = [Task(name, matrix_child(args, name)) for name in profiles]
    outcomes = FanOut(tasks, args.jobs, exit_code=lambda c: children.PYTEST_EXIT.get(c, c)).run()
    md, page = write_reports(read_reports(Path(args.report)), Path(args.report))
    print(f"matrix report: {md} and {page}")
    return worst(outcomes)


def _build_before_fanning_out(profiles: list[str]) -> None:
    """Profiles share components (Kubernetes, etcd, KWOK): children started together
    would build the same one in the same work directory at once. Built here, one
    after another; with a warm cache this only finds the files."""
    from trainjob_conformance.stack.gobuild import build_profile

    for name in profiles:
        build_profile(load_profile(name))


def matrix_child(
    args: argparse.Namespace, profile: str, to_log: bool = False
) -> Callable[[], subprocess.Popen[bytes]]:
    """How one profile's pytest starts: its own run directory (so its own cluster,
    ports and ledger); with --jobs > 1, or `to_log`, its output goes to
    <report>/logs/<profile>.log so that concurrent runs stay readable."""

    def start() -> subprocess.Popen[bytes]:
        command = pytest_command(args, profile)
        if args.jobs == 1 and not to_log:
            return subprocess.Popen(command, preexec_fn=die_with_parent)
        log = Path(args.report).resolve() / "logs" / f"{profile}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"[trainjob-conformance] profile {profile}: log {log}", file=sys.stderr, flush=True)
        with log.open("wb") as sink:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )

    return start
