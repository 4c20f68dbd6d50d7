"""The upstream-fix list (fixtures/upstream-fixes.yaml): what a release carries,
what a newer one brings, the coverage figure, and the docs written from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
from trainjob_conformance.policies.catalog import load_catalog
from trainjob_conformance.policies.fixes import (
    COVERED,
    Fix,
    brought_by,
    coverage,
    lacking_line,
    load_fixes,
    main,
    summary_line,
    write_markdown,
)

pytestmark = pytest.mark.harness

REPO = Path(__file__).resolve().parents[1]


def fix(*releases: str, component: str = "kueue", outcome: str = "candidate") -> Fix:
    return Fix(component, "a fix", "org/repo#1", releases, outcome, "candidate policy: ...")


def test_a_release_carries_a_fix_from_the_listed_patch_of_its_line_and_in_newer_lines():
    backported = fix("v0.14.8", "v0.15.3", "v0.16.0")

    assert backported.carried_by("v0.14.8") and backported.carried_by("v0.14.9")
    assert not backported.carried_by("v0.14.7")
    assert not backported.carried_by("v0.15.2") and backported.carried_by("v0.15.3")
    assert backported.carried_by("v0.16.0") and backported.carried_by("v0.19.2")
    assert not fix("v0.16.0").carried_by("v0.13.9")


def test_a_newer_release_brings_the_fixes_the_pinned_one_lacks():
    fixes = [fix("v0.16.7", "v0.17.0"), fix("v0.14.0"), fix("v2.3.0", component="trainer")]

    assert brought_by(fixes, "kueue", "v0.16.6", "v0.16.9") == [fixes[0]]
    assert brought_by(fixes, "kueue", "v0.16.7", "v0.19.2") == []
    assert brought_by(fixes, "trainer", "v2.2.1", "v2.3.0") == [fixes[2]]


def test_every_policy_the_list_names_is_in_the_catalog():
    ids = set(load_catalog(suite().catalog))
    named = {p for f in load_fixes() for p in f.policies}

    assert named and named <= ids, sorted(named - ids)
    assert all(f.policies for f in load_fixes() if f.outcome == COVERED)


def test_the_docs_tables_are_written_from_the_list():
    page = REPO / "docs" / "upstream-fixes.md"

    assert write_markdown(page.read_text(), load_fixes()) == page.read_text(), (
        "docs/upstream-fixes.md is out of date: "
        "python -m trainjob_conformance.policies.fixes --markdown docs/upstream-fixes.md"
    )


def test_the_figure_counts_each_outcome_per_component():
    fixes = load_fixes()
    counts = coverage(fixes)

    assert counts["total"].entries == len(fixes)
    assert sum(counts[c].entries for c in ("kueue", "trainer", "jobset")) == len(fixes)
    total = counts["total"]
    assert total.covered + total.candidates + total.not_testable == total.entries
    assert summary_line(fixes).startswith(f"Upstream fixes: {total.covered} of {total.entries}")


def test_a_run_is_told_how_many_listed_fixes_its_releases_lack():
    fixes = [fix("v0.16.7", "v0.17.0"), fix("v2.3.0", component="trainer")]

    assert lacking_line(fixes, {"kueue": "v0.16.6", "trainer": "v2.3.0"}) == (
        "its releases lack 1 listed upstream fixes (Kueue 1)"
    )
    assert lacking_line(fixes, {"kueue": "v0.17.0", "trainer": "v2.3.0"}) == ""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fixes: 3\n", "a list under `fixes`"),
        ("fixes:\n- {component: kueue}\n", "lacks fix, pr, releases, outcome, here"),
        (
            "fixes:\n- {component: kueue, fix: f, pr: p, releases: [0.14], outcome: covered, "
            "policies: [KQ-ADMIT-001], here: h}\n",
            "releases 0.14 are not vX.Y.Z",
        ),
        (
            "fixes:\n- {component: kueue, fix: f, pr: p, releases: [v0.14.0], outcome: covered, "
            "here: h}\n",
            "`policies` goes with outcome covered",
        ),
    ],
)
def test_a_bad_list_is_one_line_naming_the_entry(tmp_path, text, says):
    path = tmp_path / "upstream-fixes.yaml"
    path.write_text(text)

    with pytest.raises(ConformanceError, match=r"upstream-fixes\.yaml") as raised:
        load_fixes(path)
    assert says in str(raised.value)


def test_a_page_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--markdown", str(tmp_path / "missing.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err and "Traceback" not in err
