"""`upgrade`: start a cluster on one profile, keep TrainJobs in flight, move its
components to another profile's releases one at a time, judge after each step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

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
from trainjob_conformance.cli.profile_args import add_with, composed, name_skews
from trainjob_conformance.cli.prove import show_prove_report
from trainjob_conformance.cluster.registry import provider_kinds
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
from trainjob_conformance.report.model import ERROR, FAIL

if TYPE_CHECKING:
    from trainjob_conformance.policies.breaks import Break
    from trainjob_conformance.policies.catalog import Policy
    from trainjob_conformance.upgrade.steps import UpgradePlan


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "upgrade",
        help="upgrade JobSet, Trainer and Kueue in place with TrainJobs in flight and judge "
        "them after each step (exit 1 on a FAIL, 3 when a step broke the stack)",
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="PROFILE",
        help="the profile the cluster starts on (a composed one too: latest+kueue=v0.16.6)",
    )
    p.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="PROFILE",
        help="the profile whose releases it is upgraded to",
    )
    add_with(p, "the upgrade's target (--to)")
    add_cluster_args(
        p,
        tuple(kind for kind in provider_kinds() if kind.upgrades),
        "where to upgrade: a fresh embedded cluster (default)",
    )
    add_workers(
        p, "pytest-xdist workers of the catalog run after the upgrade (default: %(default)s)"
    )
    p.add_argument(
        "--report",
        default="reports",
        help="the column <FROM>-to-<TO>.json goes to DIR, the upgrade's page to DIR/upgrade "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--manifests",
        metavar="DIR",
        help="with --cluster existing installed by other means (a Helm chart): the new "
        "releases as that installer renders them, one folder per component moved "
        "(DIR/jobset, DIR/trainer, DIR/kueue, DIR/training-operator); a component without "
        "one gets its release's own manifests",
    )
    p.add_argument(
        "--prove",
        action="store_true",
        help="apply each upgrade policy's breaks (fixtures/breaks.yaml) after the last step and "
        "show that each turns its policy: a table to DIR/prove (exit 1 on any MISSED)",
    )
    p.set_defaults(func=run_upgrade_command)


def upgrade_profiles(args: argparse.Namespace) -> tuple[str, str]:
    """--from and --to (with --with) as profile names, checked in one line each."""
    from trainjob_conformance.stack.profiles import load_profile

    names = []
    for option, name, with_ in (("--from", args.source, []), ("--to", args.target, args.with_)):
        try:
            profile = load_profile(name)
        except ConformanceError as error:
            raise ConformanceError(f"{option}: {error}") from None
        # Not the cluster's: on `existing` too, --with composes the releases the
        # upgrade applies, not what is installed.
        names.append(composed(argparse.Namespace(with_=with_), profile, option))
    return names[0], names[1]


def run_upgrade_command(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.provider import (
        WINDOW_AUDIT_OPTION,
        ClusterRequest,
        UpgradesInPlace,
    )
    from trainjob_conformance.cluster.registry import make_provider, provider_kind
    from trainjob_conformance.policies.catalog import load_catalog
    from trainjob_conformance.stack.profiles import load_profile
    from trainjob_conformance.stack.skew import skews
    from trainjob_conformance.upgrade.report import column_report, prove_report, write_upgrade
    from trainjob_conformance.upgrade.session import UpgradeRequest, run_upgrade
    from trainjob_conformance.upgrade.steps import plan_upgrade

    check_suite_present()
    check_cluster_args(args)
    source, target = upgrade_profiles(args)
    plan = plan_upgrade(load_profile(source), load_profile(target))
    _check_user_manifests(args, plan)
    report_dir = Path(args.report).resolve()
    check_writable(report_dir, "the report directory")
    if provider_kind(args.cluster).needs_build_cache:
        check_build_cache()
    catalog = load_catalog(suite().catalog)
    run_dir = children.new_run_dir(f"upgrade-{plan.source.name}")

    def progress(line: str) -> None:
        print(f"[trainjob-conformance] {line}", file=sys.stderr, flush=True)

    progress(f"upgrade {plan.column}: " + ", ".join(step.label for step in plan.steps))
    for note in plan.notes:
        progress(note)
    name_skews(plan.source.name)
    # Between two steps the stack mixes releases: the skews each such state carries.
    skewed = [(when, s.line()) for when, versions in plan.states() for s in skews(versions)]
    for when, line in skewed:
        progress(f"schema skew {when}: {line}")
    options = provider_options_of(args)
    if any(o.name == WINDOW_AUDIT_OPTION for o in provider_kind(args.cluster).options):
        # Where the API server can keep one, an audit log of the custom resources'
        # writes covers the window's watch at each CRD replacement.
        options[WINDOW_AUDIT_OPTION] = "on"
    cluster = make_provider(ClusterRequest(args.cluster, plan.source, run_dir / "cluster", options))
    # The --cluster choices are the providers whose kind says `upgrades`.
    upgradable = cast(UpgradesInPlace, cluster)
    if refused := upgradable.upgrade_refused():
        print(f"trainjob-conformance: {refused}", file=sys.stderr)
        return 2
    request = UpgradeRequest(
        plan,
        args.cluster,
        catalog,
        suite().templates,
        run_dir / "upgrade",
        workers=args.workers,
        breaks=_breaks(catalog) if args.prove else {},
        skews=[f"{when}: {line}" for when, line in skewed],
    )
    try:
        handle = cluster.up()
        run = run_upgrade(request, upgradable, handle, progress)
    except ConformanceError as error:
        # The input was checked above: from here a failure is the stack's or a
        # judge's (a cluster that did not start, a pytest child killed), not bad input.
        print(f"trainjob-conformance: {error}", file=sys.stderr)
        return 3
    finally:
        cluster.down()
    if args.prove:
        return show_prove_report(prove_report(run, catalog), report_dir / "prove")
    column = column_report(run, catalog)
    paths = write_upgrade(run, column, report_dir)
    for result in column.results:
        if result.policy.startswith("UP-"):
            print(f"{result.policy:<14} {result.result:<10} {result.reason[:150]}")
    counts = column.counts()
    print(f"{plan.column}: " + ", ".join(f"{n} {w}" for w, n in sorted(counts.items())))
    print(f"written: {', '.join(str(p) for p in paths)}")
    if counts.get(ERROR) or column.stack_errors:
        return 3
    return 1 if counts.get(FAIL) else 0


def _check_user_manifests(args: argparse.Namespace, plan: UpgradePlan) -> None:
    """--manifests fits the cluster and the upgrade's steps, before anything starts."""
    if args.manifests is None:
        return
    from trainjob_conformance.cluster.releases.user_manifests import (
        plan_refusals,
        read_user_manifests,
    )

    if args.cluster != "existing":
        raise ConformanceError(
            f"--manifests is for --cluster existing: a cluster of {args.cluster} runs the "
            "releases' own manifests, and its upgrade applies those"
        )
    # Absolute from here: the provider reads it again, and the step's notes name it.
    args.manifests = str(Path(args.manifests).resolve())
    manifests = read_user_manifests(Path(args.manifests))
    refused = plan_refusals(manifests, ((s.component, s.to_version) for s in plan.steps))
    if refused:
        raise ConformanceError("; ".join(refused))


def _breaks(catalog: dict[str, Policy]) -> dict[str, list[Break]]:
    """Each upgrade policy's breaks, read from the project's break catalog."""
    from trainjob_conformance.policies.breaks import load_breaks

    known = load_breaks(suite().breaks)
    found: dict[str, list[Break]] = {}
    for policy_id, policy in catalog.items():
        if not policy.upgrade_only:
            continue
        missing = [ref.name for ref in policy.breaks if ref.name not in known]
        if missing:
            raise ConformanceError(f"{policy_id} names breaks not in breaks.yaml: {missing}")
        found[policy_id] = [known[ref.name] for ref in policy.breaks]
    return found
