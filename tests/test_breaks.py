"""The break catalog, the prove plan and table: harness logic, no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite
from trainjob_conformance.policies.breaks import BREAK_LABEL, load_breaks
from trainjob_conformance.policies.catalog import BreakRef, load_catalog
from trainjob_conformance.policies.packs import load_pack
from trainjob_conformance.prove.plan import make_plan
from trainjob_conformance.prove.runner import judge
from trainjob_conformance.prove.table import DETECTED, ERROR, MISSED, ProveReport, Row
from trainjob_conformance.upgrade.standins import ACTIONS

VARIABLES = {"override_field": "runtimePatches", "runtime": "probe-runtime"}


def test_every_policy_names_a_break_that_exists():
    catalog = load_catalog(suite().catalog)
    breaks = load_breaks(suite().breaks)
    for policy in catalog.values():
        assert policy.breaks, f"{policy.id} names no break: nothing shows its test can fail"
        for ref in policy.breaks:
            assert ref.name in breaks, f"{policy.id} names unknown break {ref.name}"
    named = {ref.name for policy in catalog.values() for ref in policy.breaks}
    assert named == set(breaks), f"breaks no policy names: {sorted(set(breaks) - named)}"


def test_every_break_renders_into_objects_bound_to_its_namespaces():
    for item in load_breaks(suite().breaks).values():
        text = item.manifests or item.probe
        if not text:
            assert (item.kind == "manager" and item.component) or (
                item.kind == "stand-in" and item.action in ACTIONS
            ), item.name
            continue
        documents = item.render(text, **VARIABLES)
        assert documents, item.name
        for document in documents:
            assert document["apiVersion"] and document["kind"], item.name
            binding = document["kind"].endswith("Binding")
            if binding:
                selector = document["spec"]["matchResources"]["namespaceSelector"]
                assert selector == {"matchLabels": {BREAK_LABEL: item.label_value}}, item.name


def test_the_example_pack_carries_breaks_for_its_policies():
    pack = load_pack(suite().example_pack)
    for policy in pack.catalog.values():
        assert policy.breaks, policy.id
        for ref in policy.breaks:
            assert ref.name.startswith("queue-required/") and ref.name in pack.breaks
    for item in pack.breaks.values():
        assert "/" not in item.label_value  # a label value cannot hold one


def test_a_break_ref_with_a_release_range_and_verdict(tmp_path):
    catalog = tmp_path / "policies.yaml"
    catalog.write_text(
        "P-1:\n  title: t\n  statement: s\n  source: x\n  trainer: '>=2.0.0'\n"
        "  breaks:\n    - {break: b, trainer: '<2.2.1', verdict: ERROR}\n    - c\n"
    )
    (policy,) = load_catalog(catalog).values()
    assert policy.breaks == (BreakRef("b", "<2.2.1", "ERROR"), BreakRef("c"))
    assert policy.breaks[0].applies_to("2.1.0")
    assert not policy.breaks[0].applies_to("2.2.1")


@pytest.mark.parametrize(
    "entry, words",
    [
        ("  breaks: {b: 1}\n", "breaks must be a list"),
        ("  breaks:\n    - {name: b}\n", "each break is a name or"),
        ("  breaks:\n    - {break: b, verdict: PASS}\n", "verdict 'PASS'"),
    ],
)
def test_a_bad_break_ref_is_one_line(tmp_path, entry, words):
    catalog = tmp_path / "policies.yaml"
    catalog.write_text(
        "P-1:\n  title: t\n  statement: s\n  source: x\n  trainer: '>=2.0.0'\n" + entry
    )
    with pytest.raises(ConformanceError, match=words):
        load_catalog(catalog)


def test_a_bad_break_is_one_line(tmp_path):
    path = tmp_path / "breaks.yaml"
    path.write_text("b:\n  kind: webhook\n  description: d\n")
    with pytest.raises(ConformanceError, match=r"break b \(webhook\) lacks webhook, probe"):
        load_breaks(path)
    path.write_text("b:\n  kind: chaos\n")
    with pytest.raises(ConformanceError, match="kind 'chaos'"):
        load_breaks(path)


def test_the_plan_groups_policies_by_break_and_keeps_unscoped_ones_last():
    catalog = load_catalog(suite().catalog)
    breaks = load_breaks(suite().breaks)
    plan = make_plan(catalog, breaks, list(catalog), {"trainer": "2.2.1"})
    assert plan.unbroken == []
    kinds = [step.item.scoped for step in plan.steps]
    assert kinds == sorted(kinds, reverse=True), "a break that runs alone came before a scoped one"
    by_break = {step.item.name: step.policies for step in plan.steps}
    # Only the break for this release of TJ-EDIT-006's two.
    assert "TJ-EDIT-006" in by_break["trainjob-override-edits-denied"]
    assert "TJ-EDIT-006" not in by_break["trainer-trainjob-validator-narrowed"]
    older = make_plan(catalog, breaks, ["TJ-EDIT-006"], {"trainer": "2.1.0"})
    assert [s.item.name for s in older.steps] == ["trainer-trainjob-validator-narrowed"]


def test_a_policy_naming_an_unknown_break_stops_the_plan():
    catalog = load_catalog(suite().catalog)
    with pytest.raises(ConformanceError, match="unknown break: TJ-GATE-001 names break"):
        make_plan(catalog, {}, ["TJ-GATE-001"], {"trainer": "2.2.1"})


@pytest.mark.parametrize(
    "expected, baseline, verdict, reason, outcome",
    [
        ("FAIL", "pass", "FAIL", "the request was accepted", DETECTED),
        ("FAIL", "pass", "pass", "", MISSED),
        ("FAIL", "known-gap", "known-gap", "KNOWN UPSTREAM GAP", MISSED),
        ("FAIL", "pass", "ERROR", "the stack broke: jobset", ERROR),
        (
            "ERROR",
            "pass",
            "ERROR",
            "the stack broke: jobset (pid 1) is no longer running",
            DETECTED,
        ),
        ("ERROR", "pass", "ERROR", "the stack broke: kueue (pid 1) is no longer running", ERROR),
    ],
)
def test_judging_a_verdict_under_a_break(expected, baseline, verdict, reason, outcome):
    assert judge(expected, baseline, verdict, reason, "jobset") == outcome


def test_the_table_is_written_three_ways_and_missed_exits_one(tmp_path):
    report = ProveReport("trainer-2.0", "embedded", {"trainer": "2.0.1"}, "now", 12.0, 3.0)
    report.rows = [
        Row("A-1", "a", "b1", "FAIL", "FAIL", DETECTED, "accepted | not refused", 1.0),
        Row("A-2", "b", "b2", "FAIL", "pass", MISSED, "", 2.0),
    ]
    paths = report.write(tmp_path)
    names = ["prove-trainer-2.0.json", "prove-trainer-2.0.md", "prove-trainer-2.0.html"]
    assert [p.name for p in paths] == names
    assert json.loads(paths[0].read_text())["rows"][1]["outcome"] == MISSED
    assert "accepted \\| not refused" in paths[1].read_text()
    assert "<td>MISSED</td>" in paths[2].read_text()
    assert report.exit_code == 1
    report.rows.pop()
    assert report.exit_code == 0
    report.restored.append("after b1: webhook x has namespaceSelector {}")
    assert report.exit_code == 3


def test_prove_refuses_an_unknown_policy_in_one_line(capsys, monkeypatch, tmp_path: Path):
    from trainjob_conformance.cli.main import main

    monkeypatch.chdir(tmp_path)
    code = main(["prove", "--policy", "NO-SUCH-1", "--report", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        "trainjob-conformance: error: --policy NO-SUCH-1: not in the catalog "
        "(IDs as in policies.yaml, a pack's as PACK/ID)"
    ]


def test_a_policy_is_judged_by_its_tests_that_ran_not_one_skipped_for_a_capability():
    from trainjob_conformance.prove.runner import verdicts
    from trainjob_conformance.report.model import PolicyResult, RunReport

    def result(policy, word, test, reason=""):
        return PolicyResult(policy, "t", word, 1.0, test, reason)

    report = RunReport("latest", "embedded", {}, "now", 1.0, None, [
        result("TJ-EDIT-008", "known-gap", "finalizer", "gap"),
        result("TJ-EDIT-008", "skipped", "graceful", "needs nodes that run containers"),
        result("KQ-TAS-002", "skipped", "tas", "one node"),
    ])  # fmt: skip
    assert verdicts(report) == {
        "TJ-EDIT-008": ("known-gap", "gap"),
        "KQ-TAS-002": ("skipped", "one node"),
    }


def test_a_break_the_cluster_cannot_host_is_not_run_with_its_reason(tmp_path, monkeypatch):
    """A stopped manager on a cluster whose managers are not the harness's processes
    (kind, a user's): its pairs are `not-run` with the reason, nothing is applied, and
    they do not turn prove's exit into "could not be judged"."""
    from types import SimpleNamespace

    from trainjob_conformance.policies.breaks import MANAGER, Break
    from trainjob_conformance.prove import runner
    from trainjob_conformance.prove.plan import Step, Target
    from trainjob_conformance.prove.table import NOT_RUN

    def never(*args: object) -> None:
        raise AssertionError("nothing is applied on a cluster that cannot host the break")

    monkeypatch.setattr(runner, "AppliedBreak", never)
    said: list[str] = []
    context = SimpleNamespace(
        baseline={"TJ-STACK-001": ("pass", "")},
        settings=SimpleNamespace(kubeconfig=tmp_path / "kind-kubeconfig.yaml"),
        catalog={},
        progress=said.append,
    )
    item = Break("jobset-manager-stopped", MANAGER, "JobSet's manager stopped", component="jobset")
    rows = runner.run_step(context, Step(item, [Target("TJ-STACK-001", "FAIL")]))  # type: ignore[arg-type]
    assert [(r.policy, r.outcome) for r in rows] == [("TJ-STACK-001", NOT_RUN)]
    assert rows[0].reason.startswith("stopping the jobset manager is done only on an embedded")
    assert said == [f"break jobset-manager-stopped: not on this cluster ({rows[0].reason})"]


def test_a_crd_break_reaches_a_nested_field_or_the_schemas_root():
    from trainjob_conformance.prove.breaking import field_schema

    root = {
        "x-kubernetes-validations": [{"rule": "size(self.metadata.name) <= 63"}],
        "properties": {"spec": {"properties": {"trainer": {"type": "object"}}}},
    }
    version = {"schema": {"openAPIV3Schema": root}}

    assert field_schema(version, ".") is root
    assert field_schema(version, "spec.trainer") == {"type": "object"}
    assert field_schema(version, "spec.absent") == {}


def test_a_defaulting_webhooks_probe_reads_a_path_of_the_answer():
    from trainjob_conformance.prove.breaking import value_at

    answer = {"spec": {"runtimePatches": [{"manager": "m", "time": "2026-11-28T03:00:00Z"}]}}

    assert value_at(answer, "spec.runtimePatches.0.time") == "2026-11-28T03:00:00Z"
    assert value_at(answer, "spec.runtimePatches.1.time") is None
    assert value_at(answer, "spec.runtimePatches.0.time.x") is None
    assert value_at({"spec": {}}, "spec.runtimePatches.0.time") is None


def test_a_break_names_the_manager_or_the_worker_cluster(tmp_path):
    path = tmp_path / "breaks.yaml"
    path.write_text("b:\n  kind: admission\n  description: d\n  manifests: m\n  cluster: worker\n")
    assert load_breaks(path)["b"].on_worker
    path.write_text("b:\n  kind: admission\n  description: d\n  manifests: m\n")
    assert not load_breaks(path)["b"].on_worker
    path.write_text("b:\n  kind: admission\n  description: d\n  manifests: m\n  cluster: both\n")
    with pytest.raises(
        ConformanceError, match=r"break b: cluster 'both' \(one of manager, worker\)"
    ):
        load_breaks(path)
    path.write_text(
        "b:\n  kind: webhook\n  description: d\n  webhook: w\n  probe: p\n  cluster: worker\n"
    )
    with pytest.raises(ConformanceError, match="has unknown cluster"):
        load_breaks(path)


class _RecordingKube:
    """What prove sends to the manager cluster, kept instead of sent."""

    def __init__(self) -> None:
        self.applied: list[dict] = []
        self.deleted: list[tuple] = []

    def apply(self, document: dict) -> dict:
        self.applied.append(document)
        return document

    def delete(self, *args: object, **kwargs: object) -> None:
        self.deleted.append(args)


@pytest.mark.parametrize(
    ("interrupted", "outcome"),
    # A child cut short by an interruption fails its tests: that is no detection.
    [(False, DETECTED), (True, "not-run")],
)
def test_a_worker_break_goes_to_the_children_and_not_to_the_manager(
    tmp_path, monkeypatch, interrupted, outcome
):
    """Its policies are written for the child, which applies them to the worker it
    starts; the manager gets only the break's probe namespace."""
    from types import SimpleNamespace

    import yaml

    from trainjob_conformance.prove import runner
    from trainjob_conformance.prove.breaking import PROVE_LABEL
    from trainjob_conformance.prove.plan import Step, Target
    from trainjob_conformance.prove.runner import ChildSettings, pytest_command

    item = load_breaks(suite().breaks)["worker-trainjob-labelled-as-multikueues"]
    handed: list[ChildSettings] = []

    def run_policies(children, settings, policies, label, workers):
        handed.append(settings)
        result = SimpleNamespace(policy="KQ-MK-006", result="FAIL", reason="deleted", seconds=3.0)
        return SimpleNamespace(results=[result], interrupted=interrupted)

    monkeypatch.setattr(runner, "run_policies", run_policies)
    kube = _RecordingKube()
    settings = ChildSettings("latest", tmp_path / "kubeconfig", tmp_path / "out")
    context = SimpleNamespace(
        kube=kube,
        children=runner.Children(),
        settings=settings,
        catalog={},
        baseline={"KQ-MK-006": ("pass", "")},
        variables={},
        restored=[],
        progress=lambda line: None,
    )
    rows = runner.run_step(context, Step(item, [Target("KQ-MK-006", "FAIL")]))  # type: ignore[arg-type]

    assert [(r.policy, r.outcome) for r in rows] == [("KQ-MK-006", outcome)]
    assert [doc["kind"] for doc in kube.applied] == ["Namespace"]
    (given,) = handed
    assert given.worker_break == tmp_path / "out" / item.label_value / "worker-break.yaml"
    documents = list(yaml.safe_load_all(given.worker_break.read_text()))
    assert [doc["kind"] for doc in documents] == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ]
    assert all(doc["metadata"]["labels"][PROVE_LABEL] == "break" for doc in documents)
    assert f"--trainjob-worker-break={given.worker_break}" in pytest_command(
        given, ["KQ-MK-006"], item.label_value, tmp_path, 0
    )
    assert context.restored == []


def test_the_child_applies_the_worker_break_once_its_policies_judge(tmp_path, monkeypatch):
    from trainjob_conformance.prove import worker_break

    settled: list[tuple] = []
    monkeypatch.setattr(worker_break, "settle", lambda *args: settled.append(args))
    path = worker_break.write_worker_break(
        tmp_path / "worker-break.yaml",
        [
            {"kind": "MutatingAdmissionPolicy", "metadata": {"name": "b"}},
            {"kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "b"}},
        ],
    )
    kube = _RecordingKube()

    applied = worker_break.apply_worker_break(kube, path)  # type: ignore[arg-type]

    assert applied == ["MutatingAdmissionPolicy b", "MutatingAdmissionPolicyBinding b"]
    assert len(kube.applied) == 2
    assert [args[-1] for args in settled] == [True]
    with pytest.raises(ConformanceError, match=r"the worker's break .* cannot be read"):
        worker_break.apply_worker_break(kube, tmp_path / "absent.yaml")  # type: ignore[arg-type]
