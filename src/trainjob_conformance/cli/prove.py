"""`prove`: break the cluster on purpose and show that each policy's test fails."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainjob_conformance.cli import children
from trainjob_conformance.cli.checks import (
    check_build_cache,
    check_suite_present,
    check_writable,
    count_of,
)
from trainjob_conformance.cli.cluster_args import (
    add_cluster_args,
    check_cluster_args,
    provider_options_of,
)
from trainjob_conformance.cli.profile_args import add_profile, profile_arg
from trainjob_conformance.cluster.registry import provider_kinds
from trainjob_conformance.paths import suite

if TYPE_CHECKING:
    from trainjob_conformance.prove.session import ProveRequest
    from trainjob_conformance.prove.table import ProveReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "prove",
        help="apply each policy's breaks and show that its test fails (exit 1 on any MISSED)",
    )
    add_profile(p)
    add_cluster_args(
        p,
        tuple(kind for kind in provider_kinds() if kind.proves),
        "where to break things: a fresh embedded cluster (default) or yours (--kubeconfig)",
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="ID",
        help="prove only this policy (repeatable; default: every policy)",
    )
    p.add_argument(
        "--pack", action="append", default=[], metavar="DIR", help="a policy pack, with its breaks"
    )
    p.add_argument(
        "--parallel",
        type=count_of("breaks", 1, "1 or more"),
        default=4,
        help="breaks that touch only their tests' namespaces in place at once (default: %(default)s)",
    )
    p.add_argument(
        "--report",
        default="reports",
        help="prove-<profile>.json, .md and .html go to DIR/prove (default: %(default)s)",
    )
    p.set_defaults(func=run_prove)


def run_prove(args: argparse.Namespace) -> int:
    from trainjob_conformance.policies.breaks import load_breaks
    from trainjob_conformance.policies.catalog import load_catalog
    from trainjob_conformance.policies.packs import load_packs, merged_catalog
    from trainjob_conformance.prove.session import ProveRequest, selected_policies

    args.profile = profile_arg(args)
    check_suite_present()
    check_cluster_args(args)
    report_dir = Path(args.report).resolve() / "prove"
    check_writable(report_dir, "the report directory")
    packs = load_packs([Path(pack) for pack in args.pack])
    found = suite()
    catalog = merged_catalog(load_catalog(found.catalog), packs)
    breaks = load_breaks(found.breaks)
    for pack in packs:
        breaks.update(pack.breaks)
    policies = selected_policies(catalog, args.policy)
    run_dir = children.new_run_dir(f"prove-{args.profile}")

    def progress(line: str) -> None:
        print(f"[trainjob-conformance] {line}", file=sys.stderr, flush=True)

    def request(kubeconfig: Path, provider: str) -> ProveRequest:
        return ProveRequest(
            profile=args.profile,
            provider=provider,
            kubeconfig=kubeconfig,
            catalog=catalog,
            breaks=breaks,
            policies=policies,
            templates=found.templates,
            out=run_dir / "runs",
            packs=tuple(pack.root for pack in packs),
            parallel=args.parallel,
        )

    report = _on_cluster(args, run_dir, request, progress)
    return show_prove_report(report, report_dir)


def show_prove_report(report: ProveReport, report_dir: Path) -> int:
    """Write the table to `report_dir` and print it (prove's and `upgrade --prove`'s)."""
    paths = report.write(report_dir)
    for row in report.rows:
        # Cut at a word, marked: a reason cut mid-phrase read as a whole one.
        reason = textwrap.shorten(row.reason, 110, placeholder=" ...")
        print(f"{row.policy:<28} {row.break_name:<48} {row.outcome:<9} {reason}")
    for line in report.restored:
        print(f"NOT RESTORED {line}")
    print(report.summary())
    print(f"written: {', '.join(str(p) for p in paths)}")
    return report.exit_code


def _on_cluster(
    args: argparse.Namespace,
    run_dir: Path,
    request: Callable[[Path, str], ProveRequest],
    progress: Callable[[str], None],
) -> ProveReport:
    """Start (or find) the cluster for this run, prove on it, and stop what was started
    whatever happens."""
    from trainjob_conformance.cluster.provider import ClusterRequest
    from trainjob_conformance.cluster.registry import make_provider, provider_kind
    from trainjob_conformance.prove.session import prove
    from trainjob_conformance.stack.profiles import load_profile

    if provider_kind(args.cluster).needs_build_cache:
        check_build_cache()
    cluster = make_provider(
        ClusterRequest(
            args.cluster, load_profile(args.profile), run_dir / "cluster", provider_options_of(args)
        )
    )
    try:
        handle = cluster.up()
        return prove(request(handle.kubeconfig, args.cluster), progress)
    finally:
        cluster.down()
