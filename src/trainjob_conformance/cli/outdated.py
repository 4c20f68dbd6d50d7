"""`outdated`: newer releases of every pinned component, from the Go module proxy."""

from __future__ import annotations

import argparse

from trainjob_conformance.cli.profile_args import add_profiles, profile_list
from trainjob_conformance.stack.profiles import load_profile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    outdated = sub.add_parser(
        "outdated",
        help="newer releases of every pinned component, from the Go module proxy",
        description="Asks the Go module proxy (GOPROXY) for the releases of each pinned "
        "component and prints, per profile, the newest patch of the pinned minor and the "
        "newest release (pre-releases left out). Exit codes: 0; with --exit-code, 1 when a "
        "pin has a newer release; 2 when the proxy cannot be reached or the input is bad.",
    )
    add_profiles(outdated)
    outdated.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when a pin has a newer release (for a job that should turn red)",
    )
    outdated.set_defaults(func=run_outdated)


def run_outdated(args: argparse.Namespace) -> int:
    from trainjob_conformance.stack import outdated
    from trainjob_conformance.stack.goproxy import proxy_url

    rows = outdated.drift(load_profile(name) for name in profile_list(args.profiles))
    print("\n".join(outdated.table(rows)))
    print(outdated.summary(rows, proxy_url()))
    return 1 if args.exit_code and any(row.outdated for row in rows) else 0
