"""The compatibility table: each cell's word from what its run saw (report/compat.py),
and how `compat` names the combinations it runs (cli/compat.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainjob_conformance.cli.compat import cell_profile
from trainjob_conformance.cli.main import main
from trainjob_conformance.report.compat import (
    COMPATIBLE,
    INCOMPATIBLE,
    NOT_RUN,
    POLICIES_BROKEN,
    Cell,
    CompatTable,
    disagreements,
    html_page,
    judge,
    markdown,
    write_table,
)
from trainjob_conformance.report.model import PolicyResult, RunReport

pytestmark = pytest.mark.harness


def run_of(*results: tuple[str, str, str], stack_errors: list[str] | None = None) -> RunReport:
    report = RunReport("latest+kueue=v0.16.6", "embedded", {}, "t", 90.0, 12.0)
    for policy, word, reason in results:
        diagnostics = f"diagnostics/{policy}.txt" if word != "pass" else ""
        report.results.append(PolicyResult(policy, "t", word, 61.0, "t::t", reason, diagnostics))
    report.stack_errors = stack_errors or []
    return report


def judged(report: RunReport | None) -> Cell:
    cell = Cell("v2.3.0", "v0.16.6", "v0.12.0", "latest+kueue=v0.16.6")
    judge(cell, report)
    return cell


def test_a_cell_without_fail_or_error_is_compatible_and_counts_its_known_gaps():
    cell = judged(run_of(("TJ-STACK-001", "pass", ""), ("TJ-EDIT-007", "known-gap", "gap")))
    assert (cell.word, cell.reason) == (COMPATIBLE, "1 pass, 1 known-gap")
    assert cell.report == "latest+kueue=v0.16.6.json"


def test_a_failing_stack_check_makes_the_cell_incompatible_in_the_clusters_words():
    never = "timed out after 60s waiting for TrainJob q to be resumed"
    cell = judged(run_of(("TJ-STACK-001", "pass", ""), ("KQ-ADMIT-002", "FAIL", never)))
    assert cell.word == INCOMPATIBLE
    assert cell.reason == f"KQ-ADMIT-002 FAIL: {never}"
    # One click to the failure's diagnostics; found no earlier than start + its wait.
    assert cell.report == "diagnostics/KQ-ADMIT-002.txt"
    assert cell.found_after_seconds == 73.0


def test_a_stack_that_broke_or_never_started_is_incompatible_not_failed():
    broke = judged(
        run_of(stack_errors=["kueue exited (code 1): unknown field spec.runtimePatches"])
    )
    assert broke.word == INCOMPATIBLE and "unknown field" in broke.reason
    errors = judged(run_of(("TJ-STACK-001", "ERROR", "the cluster did not start: kueue")))
    assert errors.word == INCOMPATIBLE


def test_a_control_plane_that_did_not_start_leaves_the_cell_unjudged_not_incompatible():
    # The same Kubernetes in every cell, down before any release was installed: an
    # etcd whose port was taken says nothing of the releases.
    down = "the cluster did not start: the control plane did not start: kwokctl create failed"
    cell = judged(run_of(("TJ-STACK-001", "ERROR", down), ("KQ-ADMIT-001", "ERROR", down)))
    assert (cell.word, cell.reason) == (NOT_RUN, f"not judged: {down}")
    # The run and the schema check cannot agree on a cell that was not judged.
    assert disagreements([cell]) != []
    # A stack that broke after its control plane started is still the releases'.
    late = judged(run_of(("TJ-STACK-001", "ERROR", "the cluster did not start: kueue exited")))
    assert late.word == INCOMPATIBLE


def test_other_policies_failing_on_a_working_stack_is_policies_broken():
    cell = judged(run_of(("TJ-STACK-001", "pass", ""), ("KQ-PODSET-002", "FAIL", "counts 5 Pods")))
    assert cell.word == POLICIES_BROKEN
    assert cell.reason == "1 not holding; first: KQ-PODSET-002 FAIL: counts 5 Pods"


def test_a_cell_without_a_run_is_not_run_with_its_reason():
    cell = Cell("v2.3.0", "v0.14.0", "v0.12.0", "p", reason="the build refused it: go: exit 1")
    judge(cell, None)
    assert (cell.word, cell.reason) == (NOT_RUN, "the build refused it: go: exit 1")


def test_run_and_schema_check_agree_where_a_named_skew_meant_incompatible_and_none_compatible():
    def cell(word: str, skews: list[str]) -> Cell:
        out = Cell("v2.3.0", "v0.16.6", "v0.12.0", f"{word}-{len(skews)}", word, "why")
        out.skews = skews
        return out

    agreeing = [
        cell(INCOMPATIBLE, ["kueue reads spec.podTemplateOverrides, absent from TrainJob"]),
        cell(COMPATIBLE, []),
    ]
    assert disagreements(agreeing) == []
    wrong = disagreements(
        [
            cell(
                COMPATIBLE, ["kueue reads spec.x, absent"]
            ),  # the check saw a skew the run did not
            cell(INCOMPATIBLE, []),  # the stack broke where no schema shows why
            cell(POLICIES_BROKEN, []),
            cell(COMPATIBLE, ["not checked: no module cache"]),  # no prediction to agree with
        ]
    )
    assert [line.split(":")[0] for line in wrong] == [
        "compatible-1", "incompatible-0", "policies broken-0", "compatible-1"
    ]  # fmt: skip
    assert "the run says incompatible (why); the schema check says no missing field" in wrong[1]


def test_the_table_is_one_grid_per_jobset_release_with_a_word_per_cell(tmp_path: Path):
    cells = [
        judged(run_of(("TJ-STACK-001", "pass", ""))),
        Cell("v2.2.1", "v0.16.6", "v0.12.0", "trainer-2.2+kueue=v0.16.6", reason="no build"),
    ]
    judge(cells[1], None)
    table = CompatTable(cells, ["v2.2.1", "v2.3.0"], ["v0.16.6"], ["v0.12.0"], "the catalog")

    text = markdown(table)

    assert "## JobSet v0.12.0" in text
    assert "| v2.3.0 | [compatible](latest+kueue=v0.16.6.json) |" in text
    assert "| v2.2.1 | not run |" in text
    paths = write_table(table, tmp_path)
    assert json.loads(paths[2].read_text())["cells"][0]["word"] == COMPATIBLE
    page = paths[1].read_text()
    assert '<td class="compatible" title="' in page
    assert '<a href="latest+kueue=v0.16.6.json">compatible</a>' in page
    assert '<td class="notrun" title="no build">not run</td>' in page


def test_the_page_escapes_what_the_cluster_said(tmp_path: Path):
    cell = judged(run_of(("TJ-STACK-001", "FAIL", "<script>x</script> & 'quoted'")))
    table = CompatTable([cell], ["v2.3.0"], ["v0.16.6"], ["v0.12.0"], "the catalog")

    page = html_page(table)

    assert "<script>x</script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt; &amp; &#39;quoted&#39;" in page


def test_a_cell_runs_as_the_profile_of_its_trainer_composed_with_its_kueue_and_jobset():
    assert cell_profile("v2.3.0", "v0.19.2", "v0.12.0") == "latest"
    assert cell_profile("v2.2.1", "v0.19.2", "v0.11.1") == "trainer-2.2"
    assert cell_profile("v2.3.0", "v0.16.6", "v0.12.0") == "latest+kueue=v0.16.6"
    assert (
        cell_profile("v2.2.1", "v0.16.6", "v0.12.0") == "trainer-2.2+jobset=v0.12.0+kueue=v0.16.6"
    )
    # A Trainer no profile pins: latest, with the Trainer composed too.
    assert cell_profile("v2.3.1", "v0.19.2", "v0.12.0") == "latest+trainer=v2.3.1"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["--kueue", "v0.16.6,,v0.19.2"],
            "--kueue 'v0.16.6,,v0.19.2': give comma-separated releases",
        ),
        (["--kueue", "0.16"], "no kueue release left to run"),
        (
            ["--cluster", "existing", "--kubeconfig", "/dev/null"],
            "--cluster existing checks the releases installed there: drop --trainer, --jobset",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(argv, words, capsys, tmp_path):
    code = main(
        ["compat", "--trainer", "v2.3.0", "--jobset", "v0.12.0", "--report", str(tmp_path), *argv]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert words in err
    assert "Traceback" not in err


def test_each_cell_writes_its_pytest_output_to_its_log_even_one_at_a_time(
    monkeypatch, tmp_path: Path
):
    import argparse
    import subprocess

    from trainjob_conformance.cli import matrix

    started: list[dict] = []

    def popen(command, **kwargs):
        started.append({"stdout": getattr(kwargs.get("stdout"), "name", None)})
        return None

    monkeypatch.setattr(matrix, "pytest_command", lambda args, profile: ["pytest"])
    monkeypatch.setattr(subprocess, "Popen", popen)
    args = argparse.Namespace(jobs=1, report=str(tmp_path))
    matrix.matrix_child(args, "latest+kueue=v0.16.6", to_log=True)()
    matrix.matrix_child(args, "latest")()
    assert started == [
        {"stdout": str(tmp_path / "logs" / "latest+kueue=v0.16.6.log")},
        {"stdout": None},
    ]
