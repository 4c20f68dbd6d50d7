"""`outdated`: newer releases of every pinned component, from the Go module proxy."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainjob_conformance.cli.profile_args import add_profiles, profile_list
from trainjob_conformance.stack.profiles import load_profile

if TYPE_CHECKING:
    from trainjob_conformance.stack.outdated import Drift


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


def fixes_brought(rows: list[Drift]) -> list[str]:
    """For each pin with a newer release: the upstream fixes (fixtures/upstream-fixes.yaml)
    that the newest patch of its line and the newest release would bring, once per pin."""
    from trainjob_conformance.policies.fixes import COVERED, brought_by, load_fixes

    fixes = load_fixes()
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for row in rows:
        for newer in dict.fromkeys(v for v in (row.newest_patch, row.newest_release) if v):
            key = (row.component, row.pinned, newer)
            brought = brought_by(fixes, *key)
            if key in seen or not brought:
                continue
            seen.add(key)
            lines.append(
                f"{row.component} {row.pinned} -> {newer} brings {len(brought)} listed fixes:"
            )
            for fix in brought:
                here = (
                    f"covered by {', '.join(fix.policies)}"
                    if fix.outcome == COVERED
                    else fix.outcome
                )
                lines.append(f"  {fix.pr}: {_short(fix.fix)} ({here})")
    if lines:
        lines.insert(0, "upstream fixes a newer release would bring (docs/upstream-fixes.md):")
    return lines


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def run_outdated(args: argparse.Namespace) -> int:
    from trainjob_conformance.stack import outdated
    from trainjob_conformance.stack.goproxy import proxy_url

    rows = outdated.drift(load_profile(name) for name in profile_list(args.profiles))
    print("\n".join([*outdated.table(rows), *fixes_brought(rows)]))
    print(outdated.summary(rows, proxy_url()))
    return 1 if args.exit_code and any(row.outdated for row in rows) else 0
