"""The history page: policies x runs in time order, colours, absent cells, trends, escaping."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.history_pages import HOSTILE, Page, result, write_run
from trainjob_conformance.cli import main
from trainjob_conformance.report.history import (
    ABSENT,
    build_history,
    load_runs,
    write_history,
)

EVERY_WORD = ["pass", "FAIL", "known-gap", "GAP-CLOSED", "not-applicable", "skipped", "ERROR"]
CSS = {
    "pass": "pass",
    "FAIL": "fail",
    "known-gap": "known-gap",
    "GAP-CLOSED": "gap-closed",
    "not-applicable": "not-applicable",
    "skipped": "skipped",
    "ERROR": "error",
    ABSENT: "absent",
}


@pytest.fixture
def nights(tmp_path: Path) -> list[Path]:
    """Two nights: the first ran latest and trainer-2.2, the second latest only.

    TJ-B is absent from the second night; TJ-C is new in it.
    """
    first, second = tmp_path / "night-1", tmp_path / "night-2"
    write_run(
        first,
        "latest",
        "2026-11-20T02:00:00Z",
        result("TJ-A", "pass", 2.0),
        result("TJ-B", "known-gap", 3.0, reason="gap #1", diagnostics="diagnostics/latest/b.txt"),
    )
    write_run(
        first,
        "trainer-2.2",
        "2026-11-20T02:01:00Z",
        result("TJ-A", "pass", 4.0),
        result("TJ-B", "pass", 1.0),
    )
    write_run(
        second,
        "latest",
        "2026-11-21T02:00:00Z",
        result("TJ-A", "FAIL", 3.0, reason="boom", diagnostics="diagnostics/latest/a.txt"),
        result("TJ-C", "pass", 1.0),
    )
    return [first, second]


def page_of(directories: list[Path], output: Path) -> Page:
    write_history(directories, output)
    return Page(output.read_text())


def test_columns_are_runs_in_time_order_whatever_order_the_directories_come_in(
    nights: list[Path], tmp_path: Path
) -> None:
    runs = load_runs(list(reversed(nights)))
    assert [(r.label, r.report.profile) for r in runs] == [
        ("night-1", "latest"),
        ("night-1", "trainer-2.2"),
        ("night-2", "latest"),
    ]
    page = page_of(list(reversed(nights)), tmp_path / "h.html")
    assert [run["text"] for run in page.runs] == [
        "latest02:00 · v2.3.0",
        "trainer-2.202:01 · v2.3.0",
        "latest02:00 · v2.3.0",
    ]
    # One night's profiles share one group header.
    assert [(g["text"], g["colspan"]) for g in page.groups] == [
        ("night-12026-11-20", "2"),
        ("night-22026-11-21", "1"),
    ]
    assert "kubernetes v1.36.2" in page.runs[0]["title"]


def test_rows_are_policies_with_a_cell_per_run_and_absent_where_a_run_lacks_one(
    nights: list[Path], tmp_path: Path
) -> None:
    history = build_history(load_runs(nights))
    assert [(row.policy, [c.result for c in row.cells]) for row in history.rows] == [
        ("TJ-A", ["pass", "pass", "FAIL"]),
        ("TJ-B", ["known-gap", "pass", ABSENT]),
        ("TJ-C", [ABSENT, ABSENT, "pass"]),
    ]
    page = page_of(nights, tmp_path / "h.html")
    assert len(page.cells) == 9
    assert page.css(1, 2) == "absent" and page.cell(1, 2)["text"] == ""
    assert "absent: this run has no result for the policy" in page.cell(1, 2)["title"]
    assert page.detail(1, 2)["tests"] == []


@pytest.mark.parametrize("word", EVERY_WORD)
def test_every_result_word_has_its_own_colour(word: str, tmp_path: Path) -> None:
    write_run(tmp_path / "r", "latest", "2026-11-20T02:00:00Z", result("TJ-A", word))
    page = page_of([tmp_path / "r"], tmp_path / "h.html")
    assert page.css(0, 0) == CSS[word]
    assert page.cell(0, 0)["data-result"] == word
    # The cell says the word itself, as the report and the terminal do: no abbreviation.
    assert page.cell(0, 0)["text"] == word


def test_the_colours_are_all_different(nights: list[Path], tmp_path: Path) -> None:
    text = write_history(nights, tmp_path / "h.html")[0].read_text()
    style = text.split("<style>", 1)[1].split("</style>", 1)[0]
    rules = {
        css: line.split("{", 1)[1]
        for line in style.splitlines()
        for css in CSS.values()
        if line.startswith(f".{css}{{")
    }
    assert set(rules) == set(CSS.values())
    assert len(set(rules.values())) == len(CSS), rules


def test_a_parametrized_policy_shows_its_worst_test_and_every_reason(tmp_path: Path) -> None:
    write_run(
        tmp_path / "r",
        "latest",
        "2026-11-20T02:00:00Z",
        result("TJ-A", "pass", 1.5, test="t.py::a[1]"),
        result("TJ-A", "FAIL", 2.5, reason="second broke", test="t.py::a[2]"),
    )
    page = page_of([tmp_path / "r"], tmp_path / "h.html")
    assert page.css(0, 0) == "fail"
    assert "t.py::a[2]: second broke" in page.cell(0, 0)["title"]
    detail = page.detail(0, 0)
    assert detail["seconds"] == 4.0
    assert [t["test"] for t in detail["tests"]] == ["t.py::a[1]", "t.py::a[2]"]


def test_reasons_and_titles_cannot_inject_html(tmp_path: Path) -> None:
    bad = result("TJ-A", "FAIL", reason=HOSTILE, diagnostics="diagnostics/latest/a.txt")
    bad.title = HOSTILE
    write_run(tmp_path / "r", "latest", "2026-11-20T02:00:00Z", bad)
    write_history([tmp_path / "r"], tmp_path / "h.html")
    text = (tmp_path / "h.html").read_text()
    assert "<img" not in text and "<script>alert" not in text and "</td><script" not in text
    page = Page(text)
    # The parser sees exactly one table cell and one script: the page's own.
    assert len(page.cells) == 1 and page.tags.count("script") == 1
    assert "img" not in page.tags
    # The text arrives intact, as text.
    assert HOSTILE in page.cell(0, 0)["title"]
    assert page.detail(0, 0)["tests"][0]["reason"] == HOSTILE
    assert page.detail(0, 0)["title"] == HOSTILE


@pytest.mark.parametrize(
    "diagnostics",
    ["javascript:alert(1)", "/etc/passwd", "../../secret.txt", "diagnostics\\..\\x.txt"],
)
def test_a_diagnostics_path_that_is_not_plain_is_not_linked(
    tmp_path: Path, diagnostics: str
) -> None:
    write_run(
        tmp_path / "r",
        "latest",
        "2026-11-20T02:00:00Z",
        result("TJ-A", "FAIL", reason="x", diagnostics=diagnostics),
    )
    page = page_of([tmp_path / "r"], tmp_path / "h.html")
    assert page.detail(0, 0)["tests"][0]["link"] == ""


def test_diagnostics_links_are_relative_to_the_page(nights: list[Path], tmp_path: Path) -> None:
    page = page_of(nights, tmp_path / "site" / "nightly" / "history.html")
    assert page.detail(0, 2)["tests"][0]["link"] == "../../night-2/diagnostics/latest/a.txt"
    assert page.detail(1, 0)["tests"][0]["link"] == "../../night-1/diagnostics/latest/b.txt"
    assert "click for the diagnostics" in page.cell(0, 2)["title"]


def test_the_trend_counts_the_runs_that_did_work(tmp_path: Path) -> None:
    for night, (word, seconds) in enumerate(
        [("pass", 1.0), ("FAIL", 3.0), ("skipped", 0.0), ("known-gap", 2.0), ("pass", 6.0)]
    ):
        write_run(
            tmp_path / f"n{night}",
            "latest",
            f"2026-11-2{night}T02:00:00Z",
            result("TJ-A", word, seconds, reason="r" if word != "pass" else ""),
        )
    write_run(tmp_path / "n5", "latest", "2026-11-25T02:00:00Z", result("TJ-B", "pass"))
    directories = [tmp_path / f"n{night}" for night in range(6)]
    (row, _) = build_history(load_runs(directories)).rows
    # Skipped (0.0 s, nothing ran) and absent are left out: 1, 3, 2, 6.
    assert row.trend.seconds == [1.0, 3.0, None, 2.0, 6.0, None]
    assert row.trend.summary() == (1.0, 2.5, 6.0)
    page_text = write_history(directories, tmp_path / "h.html")[0].read_text()
    assert "duration over 4 runs: min 1.0s, median 2.5s, max 6.0s" in page_text
    # One dot per timed run, joined by one line.
    spark = page_text.split("<svg class='spark'", 2)[1].split("</svg>", 1)[0]
    assert spark.count("<circle") == 4 and spark.count("<polyline") == 1
    assert "class='fail'" in spark  # the dot of the failed run has the FAIL colour


def test_a_policy_never_timed_has_no_numbers(tmp_path: Path) -> None:
    write_run(tmp_path / "r", "latest", "2026-11-20T02:00:00Z", result("TJ-A", "skipped", 0.0))
    (row,) = build_history(load_runs([tmp_path / "r"])).rows
    assert row.trend.summary() is None
    assert "no timed run" in write_history([tmp_path / "r"], tmp_path / "h.html")[0].read_text()


def test_an_interrupted_run_and_its_stack_errors_are_said_in_its_header(tmp_path: Path) -> None:
    write_run(
        tmp_path / "r",
        "latest",
        "2026-11-20T02:00:00Z",
        result("TJ-A", "ERROR", reason="the stack broke: kueue manager exited 1"),
        interrupted=True,
        stack_errors=["the stack broke: kueue manager exited 1"],
    )
    page = page_of([tmp_path / "r"], tmp_path / "h.html")
    assert page.runs[0]["text"].endswith("interrupted")
    assert "stack broke: the stack broke: kueue manager exited 1" in page.runs[0]["title"]


def test_the_page_is_self_contained(nights: list[Path], tmp_path: Path) -> None:
    text = write_history(nights, tmp_path / "h.html")[0].read_text()
    assert text.startswith("<!doctype html>") and "<style>" in text
    for remote in ("http://", "https://", "src=", "<link", "@import"):
        assert remote not in text


def test_cli_writes_history_html_in_the_current_directory_by_default(
    nights: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["history", *map(str, nights)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "history.html: 3 policies x 3 runs"
    assert lines[0].startswith("states: history-states.json; badges: ")
    assert len(Page((tmp_path / "history.html").read_text()).cells) == 9
    assert main(["history", str(nights[0]), "--output", str(tmp_path / "out" / "h.html")]) == 0
    assert len(Page((tmp_path / "out" / "h.html").read_text()).cells) == 4


def test_a_variant_skipped_on_this_cluster_does_not_hide_its_siblings_word(tmp_path):
    from trainjob_conformance.report.history_grid import Run, build_history
    from trainjob_conformance.report.model import PolicyResult, RunReport

    report = RunReport("latest", "embedded", {}, "2026-11-28T08:00:00Z", 60.0, None)
    report.results = [
        PolicyResult("TJ-EDIT-008", "t", "skipped", 0.0, "t::a", "needs containers"),
        PolicyResult("TJ-EDIT-008", "t", "known-gap", 1.0, "t::b", "gap"),
    ]
    (row,) = build_history([Run(tmp_path / "night-1", report)]).rows
    assert row.cells[0].result == "known-gap"


def test_a_flaky_tag_comes_before_the_title_which_the_column_may_cut_short(tmp_path):
    """The policy column ends in an ellipsis: a tag after a long title was never seen
    (docs/measurements.md, 2026-11-29 morning)."""
    from tests.history_pages import result, write_run
    from trainjob_conformance.report.history import write_history

    nights = [tmp_path / f"night-{n}" for n in range(3)]
    for night, (hour, word) in zip(nights, [(1, "pass"), (2, "FAIL"), (3, "pass")], strict=True):
        write_run(night, "latest", f"2026-11-20T0{hour}:00:00Z", result("TJ-A", word))

    page, _, states = write_history(nights, tmp_path / "history.html")

    assert [state.state for state in states] == ["FLAKY"]
    text = page.read_text()
    cell = text[text.index("<code>TJ-A</code>") :]
    cell = cell[: cell.index("</th>")]
    assert cell.index("class='state flaky'") < cell.index("</small>title of TJ-A")
