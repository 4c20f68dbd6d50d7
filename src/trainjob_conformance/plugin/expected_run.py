"""The expected-run guard: a conformance run that judged fewer policies than the
catalog holds is an ERROR of the run, each missing policy named.

A nightly that lost policies (a test module that failed to import, a pack that
did not load, a deselection left in a workflow) would otherwise look green.
Every policy the run is asked for gives a result, even where it does not
apply (not-applicable) or cannot run here (skipped, with the reason): so a
policy with no result at all is one whose test never ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.plugin.options import Settings
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.policies.layers import HARNESS
from trainjob_conformance.report.model import ERROR, PolicyResult

# The marker expression the harness itself passes (`run`): not a user's selection.
_HARNESS_MARKEXPR = ("", "not harness")
MISSING_REASON = (
    "the catalog expects this policy to be judged, but no test of it ran: a test module "
    "that was not collected, a pack that did not load, or a deselection"
)


def guard_off_reason(config: pytest.Config) -> str | None:
    """Why the guard cannot know what to expect: the user selected tests by name or
    marker (say so, rather than guess what -k would have matched)."""
    if config.getoption("keyword", ""):
        return f"-k {config.getoption('keyword')!r} selects tests"
    markexpr = config.getoption("markexpr", "")
    if markexpr not in _HARNESS_MARKEXPR:
        return f"-m {markexpr!r} selects tests"
    return None


def project_tests_given(args: list[str], tests: Path) -> bool:
    """Whether the command line asks for the project's policy tests: no path at all
    (pytest's testpaths), or the project's test directory or a folder holding it. A
    run of a pack's directory alone (`pytest my-pack --trainjob-pack my-pack`) judges
    the pack's policies only."""
    paths = [Path(arg.split("::", 1)[0]).resolve() for arg in args if not arg.startswith("-")]
    return not paths or any(path == tests or path in tests.parents for path in paths)


def expected_policies(
    settings: Settings, catalog: dict[str, Policy], with_project: bool = True
) -> list[str]:
    """The policies this run must judge: those it asked for by ID, else the whole
    catalog (the packs', and the project's where its tests were given) but what only
    an upgrade judges (or, in an upgrade's judge, only that)."""
    if settings.policies:
        return sorted(settings.policies)
    upgrade = settings.upgrade_record is not None
    return sorted(
        p
        for p, policy in catalog.items()
        if policy.upgrade_only == upgrade and (with_project or "/" in p)
    )


def missing_results(
    expected: list[str], rows: list[PolicyResult], catalog: dict[str, Policy]
) -> list[PolicyResult]:
    """An ERROR row for each expected policy without a result."""
    judged = {row.policy for row in rows}
    return [
        PolicyResult(policy, catalog[policy].title, ERROR, 0.0, "", MISSING_REASON, layer=HARNESS)
        for policy in expected
        if policy not in judged
    ]
