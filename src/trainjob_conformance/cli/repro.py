"""`repro ID`: a bundle a maintainer can run with kubectl alone, from a test's record.

The record comes from the profile's last results (`--results`, default
`reports/`: the `<profile>-results.tar.gz` there, else its diagnostics), or
from `<results>/repro-<id>/`. With none, the policy's test runs once with
recording on (a fresh embedded cluster, or `--kubeconfig`'s) into
`<results>/repro-<id>/`, beside a full run's report, never over it.
"""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from trainjob_conformance.cli.profile_args import add_profile, profile_arg
from trainjob_conformance.errors import ConformanceError

if TYPE_CHECKING:
    from trainjob_conformance.policies.catalog import Policy

_POLICY_TEST = re.compile(r'@pytest\.mark\.policy\("([^"]+)"\)\s*(?:@[^\n]*\s*)*def (test_\w+)')


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repro = sub.add_parser(
        "repro",
        help="write a reproduction bundle (manifests, repro.sh, a draft upstream issue) of a policy",
    )
    repro.add_argument("policy", metavar="ID", help="the policy, e.g. TO-MB-004")
    add_profile(repro)
    repro.add_argument("--out", help="the bundle's directory (default: repro-<ID>-<profile>)")
    repro.add_argument(
        "--results",
        default="reports",
        help="a report directory or results archive holding the record (default: %(default)s)",
    )
    repro.add_argument(
        "--kubeconfig",
        help="with no record yet: record the test on this cluster, not a fresh embedded one",
    )
    repro.add_argument(
        "--from",
        dest="source",
        metavar="PROFILE",
        help="an upgrade's policy (UP-*): the profile the bundle installs first",
    )
    repro.add_argument(
        "--to",
        dest="target",
        metavar="PROFILE",
        help="an upgrade's policy (UP-*): the profile whose releases it upgrades to",
    )
    repro.set_defaults(func=run_repro)


def policy_test_name(policy: str, tests: Path) -> str:
    """The name of the test that proves `policy` in the suite."""
    for path in sorted(tests.glob("test_*.py")):
        for found, name in _POLICY_TEST.findall(path.read_text()):
            if found == policy:
                return name
    raise ConformanceError(f"no test in {tests} proves {policy}")


def _record_once(args: argparse.Namespace, profile: str, results: Path, test: str) -> None:
    from trainjob_conformance.cli import run

    print(f"no record of {args.policy} in {results}: running {test} with recording on")
    run_args = argparse.Namespace(
        profile=profile,
        with_=[],
        cluster="existing" if args.kubeconfig else "embedded",
        kubeconfig=args.kubeconfig,
        image_source="local",
        workers=0,
        report=str(results),
        pack=[],
        record=True,
        pytest_args=["-k", test],
    )
    code = run.run_run(run_args)
    if code not in (0, 1):
        raise ConformanceError(
            f"recording {test} did not complete (exit {code}); see the output above"
        )


def _check_paths(results: Path, out: Path) -> None:
    """Refuse before a cluster is started, not after."""
    from trainjob_conformance.report.archive import SUFFIX

    if results.name.endswith((".tar.gz", ".tgz")) and not results.is_file():
        raise ConformanceError(
            f"--results {results}: no such results archive; pass a *{SUFFIX} or a report directory"
        )
    if out.exists() and not out.is_dir():
        raise ConformanceError(f"--out {out} is a file; pass a new or empty directory")


def _known_gap_paths(policy: Policy) -> list[str]:
    """The upgrades between adjacent profiles (by Trainer release) on which `policy` is a
    known gap."""
    from trainjob_conformance.policies.catalog import Outcome
    from trainjob_conformance.policies.versions import parse_version
    from trainjob_conformance.stack.profiles import load_profile, profile_names

    profiles = sorted(
        (load_profile(name) for name in profile_names()),
        key=lambda p: parse_version(p.version("trainer")),
    )
    return [
        f"--from {old.name} --to {new.name}"
        for old, new in itertools.pairwise(profiles)
        if policy.outcome(new.version("trainer"), old.versions, new.versions) == Outcome.KNOWN_GAP
    ]


def _upgrade_repro(args: argparse.Namespace, policy: Policy, templates: Path) -> int:
    """An upgrade's bundle: the old releases installed, the objects in flight, each
    component upgraded, the observation; written from the catalog and the releases."""
    from trainjob_conformance.cli.upgrade import upgrade_profiles
    from trainjob_conformance.cluster.releases.manifests import release_install_steps
    from trainjob_conformance.policies.catalog import Outcome
    from trainjob_conformance.progress import step
    from trainjob_conformance.report.repro.bundle import write_files
    from trainjob_conformance.stack.gobuild import build_component
    from trainjob_conformance.stack.profiles import Profile, load_profile
    from trainjob_conformance.upgrade.repro.bundle import upgrade_bundle_files
    from trainjob_conformance.upgrade.repro.scenarios import check_scenario
    from trainjob_conformance.upgrade.steps import plan_upgrade

    check_scenario(policy.id)
    if not args.source or not args.target:
        paths = "; ".join(_known_gap_paths(policy)) or "no path between adjacent profiles"
        raise ConformanceError(
            f"{policy.id} is judged during an upgrade: name the upgrade with --from and --to "
            f"(its known gap: {paths})"
        )
    names = upgrade_profiles(argparse.Namespace(source=args.source, target=args.target, with_=[]))
    plan = plan_upgrade(load_profile(names[0]), load_profile(names[1]))
    out = Path(args.out or f"repro-{policy.id.lower()}-{plan.source.name}-to-{plan.target.name}")
    if out.exists() and not out.is_dir():
        raise ConformanceError(f"--out {out} is a file; pass a new or empty directory")
    trainer = plan.target.version("trainer")
    if policy.outcome(trainer, plan.source.versions, plan.target.versions) != Outcome.KNOWN_GAP:
        print(
            f"note: {policy.id} is not a known gap of {plan.column}: "
            "the bundle should print NOT REPRODUCED there"
        )
    kubectl = build_component("kubernetes", plan.source.version("kubernetes"))["kubectl"]

    def steps_of(profile: Profile, only: list[str] | None) -> list:
        return release_install_steps(profile, kubectl, None, only)

    with step(f"the manifests of {plan.column}"):
        files = upgrade_bundle_files(policy, plan, steps_of, templates)
    written = write_files(files, out)
    print(f"{policy.id} on an upgrade {plan.column}: bundle in {out}/")
    for path in written:
        if path.parent.parent.name != "releases":
            print(f"  {path.relative_to(out)}")
    print(
        f"  releases/ (the manifests of each step: {', '.join(sorted(p.name for p in (out / 'releases').iterdir()))})"
    )
    print(f"run it on a new cluster: {out}/repro.sh KUBECONFIG")
    return 0


def run_repro(args: argparse.Namespace) -> int:
    from trainjob_conformance.paths import require_suite
    from trainjob_conformance.policies.catalog import load_catalog
    from trainjob_conformance.report.repro.bundle import write_bundle
    from trainjob_conformance.report.repro.records import record_of

    profile = profile_arg(args)
    suite = require_suite()
    catalog = load_catalog(suite.catalog)
    policy = catalog.get(args.policy)
    if policy is None:
        gaps = ", ".join(sorted(p for p, entry in catalog.items() if entry.has_known_gap))
        raise ConformanceError(
            f"{args.policy} is not a policy of the catalog; the known gaps are {gaps}"
        )
    if policy.upgrade_only:
        return _upgrade_repro(args, policy, suite.templates)
    if args.source or args.target:
        raise ConformanceError(
            f"--from and --to name an upgrade; {policy.id} is judged by a run: use --profile"
        )
    results = Path(args.results)
    out = Path(args.out or f"repro-{policy.id.lower()}-{profile}")
    _check_paths(results, out)
    record = record_of(policy.id, results, profile)
    # A run of the one test goes beside the results, never over a full run's report.
    own = results / f"repro-{policy.id.lower()}"
    if record is None and results.is_file():
        raise ConformanceError(
            f"{results} holds no record of {policy.id} for profile {profile}; "
            "run `trainjob-conformance run --record` or pass a report directory"
        )
    if record is None:
        record = record_of(policy.id, own, profile)
    if record is None:
        _record_once(args, profile, own, policy_test_name(policy.id, suite.tests))
        record = record_of(policy.id, own, profile)
        if record is None:
            raise ConformanceError(
                f"the run left no record of {policy.id} in {own} (see its summary above)"
            )
    if record.get("result") not in ("known-gap", "FAIL"):
        print(
            f"note: {policy.id} was {record.get('result')} in the recorded run: "
            "the bundle will print NOT REPRODUCED there"
        )
    written = write_bundle(record, policy, suite.templates, out)
    print(f"{policy.id} ({record.get('result')} on {profile}): bundle in {out}/")
    for path in written:
        print(f"  {path.relative_to(out)}")
    print(f"run it: {out}/repro.sh KUBECONFIG")
    return 0
