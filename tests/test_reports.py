import json
from dataclasses import asdict
from pathlib import Path

import pytest

from trainjob_conformance.cli import main
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.diff import diff_reports
from trainjob_conformance.report.model import PolicyResult, RunReport, read_reports
from trainjob_conformance.report.render import html_page, markdown


def run(profile, *results):
    return RunReport(
        profile=profile,
        provider="embedded",
        versions={"trainer": "v2.3.0"},
        started="2026-11-22T00:00:00Z",
        wall_seconds=60.0,
        cluster_start_seconds=15.0,
        results=[
            PolicyResult(
                policy=p,
                title=f"title of {p}",
                result=r,
                seconds=1.0,
                test=f"e2e/t.py::{p}",
                reason=why,
            )
            for p, r, why in results
        ],
    )


def test_matrix_has_one_row_per_policy_and_one_column_per_profile():
    text = markdown(
        [
            run("latest", ("TJ-A", "pass", ""), ("TJ-B", "pass", "")),
            run("trainer-2.2", ("TJ-A", "pass", ""), ("TJ-B", "known-gap", "gap #1")),
        ]
    )
    assert "| policy | title | latest | trainer-2.2 |" in text
    assert "| TJ-A | title of TJ-A | pass | pass |" in text
    assert "| TJ-B | title of TJ-B | pass | known-gap |" in text
    assert "known-gap **TJ-B** on trainer-2.2: gap #1" in text


def test_parametrized_policy_shows_its_worst_result():
    report = run("latest", ("TJ-A", "pass", ""), ("TJ-A", "FAIL", "boom"))
    report.results[1].test = "e2e/t.py::TJ-A[2]"
    assert "| TJ-A | title of TJ-A | FAIL |" in markdown([report])


def test_html_is_self_contained_and_escapes_reasons():
    page = html_page([run("latest", ("TJ-A", "FAIL", "<script>alert(1)</script>"))])
    assert page.startswith("<!doctype html>") and "<style>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "src=" not in page and "<link" not in page


def test_reports_round_trip_through_files(tmp_path):
    original = run("latest", ("TJ-A", "known-gap", "gap"))
    original.write(tmp_path)
    (loaded,) = read_reports(tmp_path)
    assert loaded == original


def test_unreadable_results_are_one_clear_error(tmp_path):
    (tmp_path / "latest.json").write_text("{}")
    with pytest.raises(ConformanceError, match="is not a trainjob-conformance result file"):
        read_reports(tmp_path)
    with pytest.raises(ConformanceError, match="no trainjob-conformance results"):
        read_reports(tmp_path / "nowhere")


def test_diff_names_regressions_and_improvements():
    old = [
        run(
            "latest",
            ("TJ-A", "pass", ""),
            ("TJ-B", "FAIL", "x"),
            ("TJ-C", "pass", ""),
            ("TJ-D", "known-gap", ""),
        )
    ]
    new = [
        run(
            "latest",
            ("TJ-A", "FAIL", "y"),
            ("TJ-B", "pass", ""),
            ("TJ-C", "known-gap", ""),
            ("TJ-D", "pass", ""),
        )
    ]
    diff = diff_reports(old, new)
    assert diff.regressed
    assert diff.newly_failing == ["TJ-A on latest (e2e/t.py::TJ-A): pass -> FAIL"]
    assert diff.newly_passing == ["TJ-B on latest (e2e/t.py::TJ-B): FAIL -> pass"]
    assert diff.new_known_gaps == ["TJ-C on latest (e2e/t.py::TJ-C): pass -> known-gap"]
    assert diff.closed_gaps == ["TJ-D on latest (e2e/t.py::TJ-D): known-gap -> pass"]


def test_diff_of_identical_runs_is_no_change():
    same = [run("latest", ("TJ-A", "pass", ""))]
    diff = diff_reports(same, same)
    assert not diff.regressed and diff.lines() == ["no change"]


def test_a_policy_that_stops_running_is_a_regression():
    diff = diff_reports(
        [run("latest", ("TJ-A", "pass", ""))], [run("latest", ("TJ-A", "skipped", "why"))]
    )
    assert diff.regressed
    assert diff.missing == ["TJ-A on latest (e2e/t.py::TJ-A): pass -> skipped"]
    assert "| TJ-A | title of TJ-A | skipped |" in markdown(
        [run("latest", ("TJ-A", "skipped", "x"))]
    )


def test_a_policy_that_disappears_is_a_regression():
    diff = diff_reports([run("latest", ("TJ-A", "pass", ""))], [run("latest")])
    assert diff.regressed and diff.missing == ["TJ-A on latest (e2e/t.py::TJ-A)"]


def test_cli_diff_exits_non_zero_on_regression(tmp_path, capsys):
    run("latest", ("TJ-A", "pass", "")).write(tmp_path / "yesterday")
    run("latest", ("TJ-A", "FAIL", "boom")).write(tmp_path / "today")
    assert main(["diff", str(tmp_path / "yesterday"), str(tmp_path / "today")]) == 1
    assert "newly failing: TJ-A on latest" in capsys.readouterr().out
    assert main(["diff", str(tmp_path / "yesterday"), str(tmp_path / "yesterday")]) == 0


def test_cli_report_renders_both_formats(tmp_path):
    run("latest", ("TJ-A", "pass", "")).write(tmp_path)
    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "conformance.md").is_file() and (tmp_path / "conformance.html").is_file()


def _run(profile: str, results: list[tuple[str, str]], **extra: object) -> RunReport:
    rows = [
        PolicyResult(policy=p, title="t", result=r, seconds=1.0, test=f"t::{p}") for p, r in results
    ]
    return RunReport(
        profile=profile,
        provider="embedded",
        versions={},
        started="",
        wall_seconds=1.0,
        cluster_start_seconds=1.0,
        results=rows,
        **extra,  # type: ignore[arg-type]
    )


def test_pass_to_not_applicable_is_a_regression() -> None:
    diff = diff_reports(
        [_run("latest", [("P", "pass")])], [_run("latest", [("P", "not-applicable")])]
    )
    assert diff.exit_code == 1
    assert any("pass -> not-applicable" in line for line in diff.lines())


def test_a_broken_stack_is_neither_pass_nor_regression() -> None:
    old = [_run("latest", [("P", "pass"), ("Q", "pass")])]
    new = [_run("latest", [("P", "ERROR"), ("Q", "pass")], stack_errors=["trainer manager died"])]
    diff = diff_reports(old, new)
    assert not diff.regressed
    assert diff.exit_code == 3
    assert "stack broken (not judged): P on latest (t::P): pass -> ERROR" in diff.lines()


def test_an_interrupted_run_does_not_count_absent_policies_as_regressions() -> None:
    old = [_run("latest", [("P", "pass"), ("Q", "pass")])]
    new = [_run("latest", [("P", "pass")], interrupted=True)]
    diff = diff_reports(old, new)
    assert diff.missing == []
    assert diff.exit_code == 3


def test_a_real_regression_wins_over_a_broken_stack() -> None:
    old = [_run("latest", [("P", "pass"), ("Q", "pass")])]
    new = [_run("latest", [("P", "ERROR"), ("Q", "FAIL")])]
    assert diff_reports(old, new).exit_code == 1


def test_format_one_files_still_read(tmp_path: Path) -> None:
    data = asdict(_run("latest", [("P", "pass")]))
    data["format"] = 1
    del data["interrupted"], data["stack_errors"]
    (tmp_path / "latest.json").write_text(json.dumps(data))
    (report,) = read_reports(tmp_path)
    assert report.interrupted is False and report.stack_errors == []
