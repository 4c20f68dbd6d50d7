"""The soak's flake table (report/soak.py) and its runs on kept and fresh clusters
(bench/soak.py), with a stand-in provider and stand-in pytest children."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainjob_conformance.bench import soak
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.model import PolicyResult, RunReport
from trainjob_conformance.report.soak import (
    FRESH,
    KEPT,
    SoakRun,
    flake_table,
    markdown,
    read_soak,
    write_soak,
)

pytestmark = pytest.mark.harness


def report(*results: tuple[str, str, str]) -> RunReport:
    out = RunReport("latest", "existing", {}, "t", 60.0, None)
    out.results = [PolicyResult(p, "t", w, 1.0, f"t::{p}", r) for p, w, r in results]
    return out


def test_a_policy_whose_word_changed_between_runs_is_flaky_with_the_odd_results():
    runs = [
        SoakRun("kept-001", KEPT, "embedded", report(("A", "pass", ""), ("B", "known-gap", "gap"))),
        SoakRun(
            "kept-002",
            KEPT,
            "embedded",
            report(("A", "FAIL", "timed out after 60s"), ("B", "known-gap", "gap")),
        ),
        SoakRun(
            "fresh-001", FRESH, "embedded", report(("A", "pass", ""), ("B", "known-gap", "gap"))
        ),
    ]

    rows = {row.policy: row for row in flake_table(runs)}

    assert rows["A"].flaky and not rows["B"].flaky  # a steady known gap is no flake
    assert (rows["A"].runs, rows["A"].kept, rows["A"].fresh) == (3, 2, 1)
    assert rows["A"].odd == [("kept-002", "FAIL", "timed out after 60s")]
    assert (
        "| A | embedded | 3 (2/1) | 1 FAIL, 2 pass | FLAKY | kept-002: FAIL: timed out"
        in markdown(list(rows.values()), runs)
    )


def test_a_known_gap_beside_a_skipped_variant_in_every_run_is_usual_not_odd():
    runs = [
        SoakRun(
            f"kept-00{i}", KEPT, "embedded", report(("A", "skipped", "no"), ("A", "known-gap", "g"))
        )
        for i in (1, 2)
    ]
    (row,) = flake_table(runs)
    assert (row.usual, row.flaky, row.odd) == ("known-gap", False, [])


def test_a_skip_is_neither_a_flake_nor_an_odd_result():
    runs = [
        SoakRun("kept-001", KEPT, "kind", report(("A", "pass", ""))),
        SoakRun("kept-002", KEPT, "kind", report(("A", "skipped", "no second cluster"))),
    ]
    (row,) = flake_table(runs)
    assert not row.flaky and row.odd == []


class StandInCluster:
    started: list[str] = []

    def __init__(self, run_dir: Path, fail: bool = False) -> None:
        self.run_dir, self.fail = run_dir, fail

    def up(self):
        if self.fail:
            raise ConformanceError("etcd did not answer")
        StandInCluster.started.append(self.run_dir.name)
        return type("Handle", (), {"kubeconfig": self.run_dir / "kubeconfig"})()

    def down(self) -> None:
        StandInCluster.started.append(f"down {self.run_dir.name}")


def test_kept_runs_share_one_cluster_fresh_runs_get_one_each(tmp_path, monkeypatch):
    StandInCluster.started = []
    monkeypatch.setattr(soak, "make_provider", lambda request: StandInCluster(request.run_dir))
    judged: list[str] = []

    def child(children, settings, policies, label, workers, labelled):
        judged.append(label)
        if label == "kept-002":
            raise ConformanceError(
                "the tests under kept-002 wrote no results (pytest killed by SIGKILL)"
            )
        return report(("A", "pass", ""))

    monkeypatch.setattr(soak, "run_policies", child)
    request = soak.SoakRequest("latest", "embedded", {}, 3, 2, tmp_path, 2)

    outcome = soak.run_soak(request, lambda line: None)

    assert StandInCluster.started == [
        "kept-cluster", "down kept-cluster",
        "fresh-001-cluster", "down fresh-001-cluster",
        "fresh-002-cluster", "down fresh-002-cluster",
    ]  # fmt: skip
    assert judged == ["kept-001", "kept-002", "kept-003", "fresh-001", "fresh-002"]
    assert [run.label for run in outcome.runs] == ["kept-001", "kept-003", "fresh-001", "fresh-002"]
    assert outcome.problems == [
        "kept-002: the tests under kept-002 wrote no results (pytest killed by SIGKILL)"
    ]
    paths = write_soak(flake_table(outcome.runs), outcome.runs, tmp_path)
    assert json.loads(paths[1].read_text())["runs"][0] == {
        "label": "kept-001", "mode": "kept", "provider": "embedded", "seconds": 60.0,
        "results": "kept-001",
    }  # fmt: skip


def test_a_cluster_that_does_not_start_is_a_problem_of_its_runs_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(
        soak, "make_provider", lambda request: StandInCluster(request.run_dir, fail=True)
    )
    outcome = soak.run_soak(soak.SoakRequest("latest", "embedded", {}, 2, 0, tmp_path, 2), print)
    assert outcome.runs == []
    assert outcome.problems == [
        "kept-001: the cluster did not start: etcd did not answer",
        "kept-002: the cluster did not start: etcd did not answer",
    ]


def test_the_table_is_rewritten_after_each_run_so_a_stopped_soak_keeps_one(tmp_path, monkeypatch):
    monkeypatch.setattr(soak, "make_provider", lambda request: StandInCluster(request.run_dir))
    monkeypatch.setattr(soak, "run_policies", lambda *a, **k: report(("A", "pass", "")))
    seen: list[int] = []

    soak.run_soak(
        soak.SoakRequest("latest", "embedded", {}, 2, 1, tmp_path, 2),
        lambda line: None,
        lambda so_far: seen.append(len(so_far.runs)),
    )

    assert seen == [1, 2, 3]


def test_soaks_written_before_combine_into_one_table_per_provider(tmp_path):
    for name, provider, word in (("embedded", "embedded", "pass"), ("kind", "kind", "FAIL")):
        directory = tmp_path / name
        runs = []
        for label in ("kept-001", "fresh-001"):
            run = report(("A", "pass", ""), ("B", word if label == "fresh-001" else "pass", "why"))
            run.write(directory / label)
            runs.append(SoakRun(label, label[:-4], provider, run, directory / label))
        write_soak(flake_table(runs), runs, directory, ["kept-002: the cluster did not start"])

    runs, problems = read_soak(tmp_path / "embedded")
    more_runs, more_problems = read_soak(tmp_path / "kind")
    rows = {(r.policy, r.provider): r for r in flake_table(runs + more_runs)}

    assert [run.label for run in runs] == ["embedded/kept-001", "embedded/fresh-001"]
    assert not rows["B", "embedded"].flaky and rows["B", "kind"].flaky
    assert rows["B", "kind"].odd == [("kind/fresh-001", "FAIL", "why")]
    assert problems == ["embedded/kept-002: the cluster did not start"]
    assert more_problems == ["kind/kept-002: the cluster did not start"]
    combined = write_soak(flake_table(runs + more_runs), runs + more_runs, tmp_path / "all")
    first = json.loads(combined[1].read_text())["runs"][0]
    assert first["results"] == "../embedded/kept-001"


def test_a_directory_without_a_soak_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConformanceError, match="holds no soak that can be read"):
        read_soak(tmp_path)
