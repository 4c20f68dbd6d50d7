"""PASSING, FAILING and FLAKY over a history's runs (report/flaky.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainjob_conformance.report.flaky import (
    FAILING,
    FLAKY,
    PASSING,
    badge,
    policy_states,
    summary,
)
from trainjob_conformance.report.history import write_history
from trainjob_conformance.report.history_grid import Run
from trainjob_conformance.report.model import PolicyResult, RunReport

pytestmark = pytest.mark.harness


def night(
    day: int, word: str, trainer: str = "v2.3.0", digest: str = "c1", policy: str = "P-1"
) -> Run:
    report = RunReport(
        "latest",
        "embedded",
        {"trainer": trainer},
        f"2026-11-{day:02d}T02:17:00+00:00",
        60.0,
        10.0,
        [PolicyResult(policy, "a policy", word, 1.0, "e2e/t.py::t", f"night {day}")],
        catalog_digest=digest,
    )
    return Run(Path(f"/nights/{day}"), report)


def state_of(*runs: Run) -> str:
    (state,) = policy_states(runs)
    return state.state


def test_a_failure_that_passes_again_on_the_same_stack_is_flaky():
    states = policy_states([night(1, "pass"), night(2, "FAIL"), night(3, "pass")])

    assert [s.state for s in states] == [FLAKY]
    assert states[0].flips == [
        "2026-11-02T02:17:00+00:00: pass -> FAIL (night 2)",
        "2026-11-03T02:17:00+00:00: FAIL -> pass (night 3)",
    ]


@pytest.mark.parametrize(
    ("runs", "state"),
    [
        # A new failure is a failure until it recovers.
        ((night(1, "pass"), night(2, "pass"), night(3, "FAIL")), FAILING),
        # A change of releases or of the catalog is that change's, not a flake.
        ((night(1, "FAIL"), night(2, "pass", trainer="v2.3.1")), PASSING),
        ((night(1, "FAIL"), night(2, "pass", digest="c2")), PASSING),
        ((night(1, "pass"), night(2, "FAIL", trainer="v2.3.1"), night(3, "pass")), PASSING),
        # Skipped says nothing either way; a known gap is a good outcome.
        ((night(1, "pass"), night(2, "skipped"), night(3, "known-gap")), PASSING),
        ((night(1, "ERROR"), night(2, "pass"), night(3, "pass")), FLAKY),
        ((night(1, "pass"), night(2, "GAP-CLOSED")), FAILING),
    ],
)
def test_the_state_of_a_policy_over_the_nights(runs, state):
    assert state_of(*runs) == state


def test_the_summary_counts_per_profile_and_provider():
    states = policy_states([night(1, "pass"), night(2, "FAIL"), night(3, "pass")])

    data = summary(states, window=3)

    assert data["counts"] == {"latest (embedded)": {PASSING: 0, FAILING: 0, FLAKY: 1}}
    assert data["window_runs"] == 3


def test_the_badge_says_the_worse_of_failing_and_flaky():
    flaky = policy_states([night(1, "pass"), night(2, "FAIL"), night(3, "pass")])
    passing = policy_states([night(1, "pass")])

    assert "1 flaky" in badge("latest", flaky) and "#ef6c00" in badge("latest", flaky)
    assert "1 passing" in badge("latest", passing)
    assert badge("latest", passing).startswith("<svg")


def test_the_history_page_tags_a_flaky_policy_and_writes_states_and_badges(tmp_path):
    directories = []
    for run in (night(1, "pass"), night(2, "FAIL"), night(3, "pass")):
        directory = tmp_path / run.source.name
        run.report.write(directory)
        directories.append(directory)

    page, _, _ = write_history(directories, tmp_path / "h.html")

    assert "FLAKY latest (embedded)" in page.read_text()
    assert (tmp_path / "h-states.json").is_file()
    assert "1 flaky" in (tmp_path / "badge-latest.svg").read_text()


def test_diff_marks_a_regression_in_a_cell_the_history_calls_flaky(tmp_path, capsys):
    from trainjob_conformance.cli.main import main

    directories = []
    for run in (night(1, "pass"), night(2, "FAIL"), night(3, "pass"), night(4, "pass")):
        directory = tmp_path / run.source.name
        run.report.write(directory)
        directories.append(directory)
    write_history(directories, tmp_path / "h.html")
    tonight = tmp_path / "5"
    night(5, "FAIL").report.write(tonight)

    code = main(
        ["diff", str(directories[-1]), str(tonight), "--states", str(tmp_path / "h-states.json")]
    )

    out = capsys.readouterr().out
    # Still a regression (exit 1), said to be in a flaky cell, with its flips.
    assert code == 1
    assert (
        "newly failing: P-1 on latest (e2e/t.py::t): pass -> FAIL [already FLAKY: 2 flips in 4 runs;"
        in out
    )
    assert "2026-11-02T02:17:00+00:00: pass -> FAIL (night 2)" in out
    assert "1 of the regressions above are in cells the history calls FLAKY" in out
    # Without the states, the same regression is plain.
    assert main(["diff", str(directories[-1]), str(tonight)]) == 1
    assert "FLAKY" not in capsys.readouterr().out


def test_diff_refuses_a_file_that_is_not_history_states_in_one_line(tmp_path, capsys):
    from trainjob_conformance.cli.main import main

    night(1, "pass").report.write(tmp_path / "1")
    (tmp_path / "states.json").write_text('{"counts": {}}')

    code = main(
        [
            "diff",
            str(tmp_path / "1"),
            str(tmp_path / "1"),
            "--states",
            str(tmp_path / "states.json"),
        ]
    )

    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.endswith("(no list of policies); give the <page>-states.json beside a history page")
    assert "\n" not in err and "Traceback" not in err
