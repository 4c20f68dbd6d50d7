"""`run`: the conformance suite on one profile, as a pytest child process."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from pathlib import Path

from trainjob_conformance.cli import children
from trainjob_conformance.cli.checks import (
    add_workers,
    check_build_cache,
    check_suite_present,
    check_writable,
)
from trainjob_conformance.cli.cluster_args import (
    add_cluster_args,
    check_cluster_args,
    provider_options_of,
)
from trainjob_conformance.cli.profile_args import add_profile, add_with, name_skews, profile_arg
from trainjob_conformance.cluster.registry import provider_kind
from trainjob_conformance.invocation import PytestInvocation
from trainjob_conformance.report.archive import COMMAND_ENV


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run the conformance suite on one profile")
    add_profile(run)
    add_with(run, "the suite")
    add_cluster_options(run)
    run.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="ID",
        help="run only this policy's tests (repeatable; a pack's as PACK/ID)",
    )
    run.set_defaults(func=run_run)


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """Where a suite runs and what it writes: shared by `run` and `matrix`."""
    add_cluster_args(p)
    add_workers(p, "parallel pytest-xdist workers; 0 runs serially (default: %(default)s)")
    p.add_argument(
        "--report",
        default="reports",
        help="directory for results, JUnit XML, diagnostics and the report (default: %(default)s)",
    )
    p.add_argument(
        "--pack",
        action="append",
        default=[],
        metavar="DIR",
        help="a policy pack (policies.yaml, templates/, tests) to run with the "
        "project's policies; repeatable",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="keep every test's record (requests sent, the cluster's answers) in the "
        "diagnostics, for `repro`; FAIL and known-gap results always keep theirs",
    )
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")


def check_run_args(args: argparse.Namespace) -> None:
    from trainjob_conformance.policies.packs import load_packs

    check_suite_present()
    check_cluster_args(args)
    load_packs([Path(pack) for pack in args.pack])
    if args.report:
        check_writable(Path(args.report), "the report directory")
    if provider_kind(args.cluster).needs_build_cache:
        check_build_cache()


def pytest_command(args: argparse.Namespace, profile: str) -> list[str]:
    report = Path(args.report).resolve() if args.report else None
    stop_after = tuple(getattr(args, "stop_after_failure_of", ()))
    return PytestInvocation(
        profile=profile,
        cluster=args.cluster,
        run_dir=children.new_run_dir(profile),
        provider_options=provider_options_of(args),
        workers=args.workers,
        report=report,
        junit=True,
        packs=tuple(Path(pack).resolve() for pack in args.pack),
        policies=tuple(getattr(args, "policy", [])),
        record=bool(getattr(args, "record", False)),
        stop_after_failure_of=stop_after,
        # Tests that must run first (compat's stack checks) go out in collected order,
        # a few to each worker as it asks: worksteal would hand each worker a
        # contiguous half, the checks all to one and the other's tests to the other.
        dist="load" if stop_after else "worksteal",
        extra=tuple(args.pytest_args),
    ).argv()


def record_command() -> None:
    """The command line the results archive records: the user's, not pytest's."""
    os.environ[COMMAND_ENV] = shlex.join(["trainjob-conformance", *sys.argv[1:]])


def run_run(args: argparse.Namespace) -> int:
    args.profile = profile_arg(args)
    check_run_args(args)
    if getattr(args, "cluster", None) != "existing":  # an existing cluster runs what it has
        name_skews(args.profile)
    record_command()
    code = children.run_child(pytest_command(args, args.profile), own_group=args.workers > 0)
    if code < 0:
        return children.after_killed_child(signal.Signals(-code))
    return children.PYTEST_EXIT.get(code, code)
