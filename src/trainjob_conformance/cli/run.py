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
from trainjob_conformance.cli.profile_args import add_profile, add_with, profile_arg
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
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
    p.add_argument(
        "--cluster",
        choices=["embedded", "existing", "kind"],
        default="embedded",
        help="where to run (default: %(default)s)",
    )
    p.add_argument("--kubeconfig", help="kubeconfig of the cluster for --cluster existing")
    p.add_argument(
        "--image-source",
        choices=["local", "upstream"],
        default="local",
        help="--cluster kind: images built here from pinned sources (local) or the release "
        "images the manifests name, pulled from their registries (upstream) (default: %(default)s)",
    )
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


def check_cluster_args(args: argparse.Namespace) -> None:
    if args.cluster == "existing" and not args.kubeconfig:
        raise ConformanceError(
            "--cluster existing needs --kubeconfig PATH (the current kubectl context is never used)"
        )
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise ConformanceError(f"kubeconfig {args.kubeconfig} does not exist")
    if args.kubeconfig:
        from trainjob_conformance.kube.kubeconfig import check_kubeconfig

        check_kubeconfig(Path(args.kubeconfig))


def check_run_args(args: argparse.Namespace) -> None:
    from trainjob_conformance.policies.packs import load_packs

    check_suite_present()
    check_cluster_args(args)
    load_packs([Path(pack) for pack in args.pack])
    if args.report:
        check_writable(Path(args.report), "the report directory")
    if args.cluster == "embedded":
        check_build_cache()


def pytest_command(args: argparse.Namespace, profile: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(suite().tests),
        f"--trainjob-run-dir={children.new_run_dir(profile)}",
        f"--trainjob-profile={profile}",
        f"--trainjob-cluster={args.cluster}",
        "-n",
        str(args.workers),
        # A worker that runs out of tests takes queued ones from the other
        # (xdist's default hands each worker its share up front): the last
        # tests no longer wait behind a long one. Measured: docs/performance.md.
        # Ignored with -n 0; a later --dist given after -- wins.
        "--dist",
        "worksteal",
        "-p",
        "no:cacheprovider",
        # The harness's own tests belong to ./scripts/test, not to a conformance run.
        "-m",
        "not harness",
    ]
    if args.kubeconfig:
        command.append(f"--trainjob-kubeconfig={Path(args.kubeconfig).resolve()}")
    if args.cluster == "kind":
        command.append(f"--trainjob-image-source={args.image_source}")
    command += [f"--trainjob-pack={Path(pack).resolve()}" for pack in args.pack]
    command += [f"--trainjob-policy={policy}" for policy in getattr(args, "policy", [])]
    if getattr(args, "record", False):
        command.append("--trainjob-record")
    if args.report:
        report = Path(args.report).resolve()
        command += [f"--trainjob-report={report}", f"--junitxml={report / f'{profile}-junit.xml'}"]
    return [*command, *args.pytest_args]


def record_command() -> None:
    """The command line the results archive records: the user's, not pytest's."""
    os.environ[COMMAND_ENV] = shlex.join(["trainjob-conformance", *sys.argv[1:]])


def run_run(args: argparse.Namespace) -> int:
    args.profile = profile_arg(args)
    check_run_args(args)
    record_command()
    code = children.run_child(pytest_command(args, args.profile), own_group=args.workers > 0)
    if code < 0:
        return children.after_killed_child(signal.Signals(-code))
    return children.PYTEST_EXIT.get(code, code)
