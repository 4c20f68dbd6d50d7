"""`upgrade`'s own logic, no cluster: the steps, the window's readings, the record,
the column and the prove table, the catalog's `judged_by`, and the collection rule."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from trainjob_conformance.cluster.health.readiness import AdmissionProbe
from trainjob_conformance.cluster.provider import ComponentUpgrade
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.paths import suite
from trainjob_conformance.policies.catalog import Outcome, load_catalog
from trainjob_conformance.prove.session import selected_policies
from trainjob_conformance.prove.table import NOT_RUN
from trainjob_conformance.report.model import ERROR, FAIL, PASS, SKIPPED, PolicyResult, RunReport
from trainjob_conformance.stack.profiles import Profile, load_profile
from trainjob_conformance.upgrade.availability import Availability
from trainjob_conformance.upgrade.judging import (
    fields_lost,
    first_workload,
    pod_changes,
    runtime_settings,
    workload_changes,
)
from trainjob_conformance.upgrade.record import (
    BEFORE,
    FINAL,
    GATED,
    SETTLED,
    InFlightObject,
    UpgradeRecord,
)
from trainjob_conformance.upgrade.report import column_report, prove_report, upgrade_markdown
from trainjob_conformance.upgrade.session import StepResult, UpgradeRun
from trainjob_conformance.upgrade.standins import act
from trainjob_conformance.upgrade.steps import Step, plan_upgrade

pytestmark = pytest.mark.harness


def profile(name: str, **versions: str) -> Profile:
    base = {"kubernetes": "v1.36.3", "etcd": "v3.6.16", "kwok": "v0.8.0"}
    return Profile(name, name, {**base, **versions})


def test_steps_go_jobset_trainer_kueue_and_skip_what_is_unchanged():
    plan = plan_upgrade(load_profile("trainer-2.1"), load_profile("latest"))

    assert [s.component for s in plan.steps] == ["jobset", "trainer", "kueue"]
    assert plan.steps[1] == Step("trainer", "v2.1.0", "v2.3.0")
    assert plan.column == "trainer-2.1 -> latest"
    assert any("training-operator" in note and "does not install it" in note for note in plan.notes)


def test_a_component_with_one_release_in_both_is_named_and_not_restarted():
    plan = plan_upgrade(load_profile("trainer-2.2"), load_profile("latest"))

    assert [s.component for s in plan.steps] == ["jobset", "trainer"]
    assert any(note.startswith("kueue v0.19.2: the same release") for note in plan.notes)


def test_a_downgrade_is_a_path_too_and_says_so():
    plan = plan_upgrade(load_profile("latest"), load_profile("trainer-2.2"))

    assert all(step.downgrade for step in plan.steps)


@pytest.mark.parametrize(
    ("source", "target", "words"),
    [
        (
            profile("a", jobset="v0.12.0", trainer="v2.3.0", kueue="v0.19.2"),
            profile("b", jobset="v0.12.0", trainer="v2.3.0", kueue="v0.19.2"),
            "there is nothing to upgrade",
        ),
        (
            profile("a", trainer="v2.3.0"),
            Profile("b", "b", {"kubernetes": "v1.35.0", "etcd": "v3.6.16", "trainer": "v2.3.1"}),
            "keeps Kubernetes",
        ),
    ],
)
def test_a_path_that_is_no_upgrade_is_one_line(source, target, words):
    with pytest.raises(ConformanceError, match=words):
        plan_upgrade(source, target)


def test_fields_lost_names_missing_and_changed_fields_not_added_ones():
    before = {"suspend": True, "runtimePatches": [{"a": 1}], "trainer": {"numNodes": 2}}
    after = {"suspend": True, "trainer": {"numNodes": 3, "new": "default"}}

    assert fields_lost(before, after) == [
        "spec.runtimePatches",
        "spec.trainer.numNodes (was 2, now 3)",
    ]
    assert fields_lost(before, {**before, "added": 1}) == []


def pod(name: str, uid: str, gates: list[str]) -> dict:
    return {
        "metadata": {"name": name, "uid": uid, "resourceVersion": "1"},
        "spec": {"schedulingGates": [{"name": g} for g in gates]},
    }


def event(kind: str, obj: dict, t: float = 10.0) -> dict:
    return {"t": t, "type": kind, "object": obj}


def test_pod_changes_see_a_gate_gained_a_deletion_a_recreation_and_an_absent_pod():
    events = [
        event("LISTED", pod("a", "1", ["hold"])),
        event("MODIFIED", pod("a", "1", ["hold", "extra"]), 12.5),
        event("LISTED", pod("b", "2", ["hold"])),
        event("DELETED", pod("b", "2", ["hold"])),
        event("ADDED", pod("b", "3", ["hold"])),
    ]

    found = pod_changes(events, {"a": "1", "b": "2", "c": "4"}, began=10.0)

    assert found == [
        "Pod a gained ['extra'] (+2.5s MODIFIED rv 1)",
        "Pod b was deleted (+0.0s DELETED rv 1)",
        "Pod b was recreated (+0.0s ADDED rv 1)",
        "Pod c is not in the window at all",
    ]
    assert pod_changes(events[:1], {"a": "1"}, began=10.0) == []


def workload(uid: str, owner: str, **conditions: str) -> dict:
    return {
        "metadata": {
            "name": f"wl-{uid}",
            "uid": uid,
            "resourceVersion": "5",
            "ownerReferences": [{"kind": "TrainJob", "name": owner}],
        },
        "status": {"conditions": [{"type": k, "status": v} for k, v in conditions.items()]},
    }


def test_workload_changes_see_lost_admission_a_second_workload_and_reserved_quota():
    clean = [
        event("LISTED", workload("1", "admitted", Admitted="True")),
        event("LISTED", workload("2", "queued", QuotaReserved="False")),
    ]
    assert workload_changes(clean, "admitted", "queued", 10.0) == []

    found = workload_changes(
        [
            *clean,
            event("MODIFIED", workload("1", "admitted", Admitted="False")),
            event("ADDED", workload("3", "admitted", Admitted="True")),
            event("MODIFIED", workload("2", "queued", QuotaReserved="True")),
        ],
        "admitted",
        "queued",
        10.0,
    )
    assert found[0].startswith("Workload wl-1 of TrainJob admitted stored with Admitted=False")
    assert found[1].startswith("Workload wl-2 of TrainJob queued reserved quota")
    assert found[2].startswith("TrainJob admitted had 2 Workloads")
    assert found[2].endswith("the later one's PodSets are the same as the first one's")


def test_a_recreated_workload_names_where_its_podsets_differ_from_the_first_ones():
    def with_podsets(obj: dict, container: dict) -> dict:
        return {
            **obj,
            "spec": {
                "podSets": [{"name": "node", "template": {"spec": {"containers": [container]}}}]
            },
        }

    first = with_podsets(
        workload("1", "admitted", Admitted="True"),
        {"name": "node", "env": [{"name": "PET_NNODES", "value": "1"}], "image": "a"},
    )
    later = with_podsets(
        workload("3", "admitted", Admitted="True"), {"name": "node", "image": "b", "args": ["x"]}
    )
    found = workload_changes(
        [event("LISTED", first), event("DELETED", first), event("ADDED", later)],
        "admitted",
        "queued",
        10.0,
    )
    assert found[-2].endswith(
        "the later one's PodSets differ from the first one's: "
        "spec.podSets[0].template.spec.containers[0].args added, "
        "spec.podSets[0].template.spec.containers[0].env dropped, "
        "spec.podSets[0].template.spec.containers[0].image changed"
    )
    assert found[-1] == "TrainJob queued has no Workload in the window"


def record(tmp_path: Path) -> UpgradeRecord:
    window = tmp_path / "running-pods.jsonl"
    window.write_text(json.dumps(event("LISTED", pod("a", "1", ["hold"]))) + "\n")
    return UpgradeRecord(
        column="a -> b",
        source="a",
        target="b",
        source_versions={"trainer": "v2.1.0"},
        phase=BEFORE,
        steps_done=[],
        override_field="runtimePatches",
        gate="g",
        hold_gate="hold",
        objects={
            GATED: InFlightObject(GATED, "TrainJob", "gated", "ns", {"x": 1}, "u", {"a": "1"})
        },
        cluster_queue="cq",
        window={"running-pods": str(window), "kueue-pods": str(tmp_path / "absent.jsonl")},
        window_started=1.0,
    )


def test_the_record_reads_back_with_its_window(tmp_path):
    path = tmp_path / "record.json"
    record(tmp_path).write(path)

    read = UpgradeRecord.read(path)

    assert read.objects[GATED].pods == {"a": "1"}
    assert [e["object"]["metadata"]["name"] for e in read.window_events("running-pods")] == ["a"]
    assert read.window_events("kueue-pods") == []


def test_a_file_that_is_no_record_is_one_line(tmp_path):
    path = tmp_path / "record.json"
    path.write_text("{}")
    with pytest.raises(ConformanceError, match="is not an upgrade record"):
        UpgradeRecord.read(path)


def test_an_unknown_stand_in_is_one_line(tmp_path):
    with pytest.raises(ConformanceError, match="not one the upgrade knows"):
        act("reboot-the-cluster", None, record(tmp_path))  # type: ignore[arg-type]


def phase_report(*results: tuple[str, str, str]) -> RunReport:
    return RunReport(
        "a",
        "existing",
        {},
        "now",
        1.0,
        None,
        [
            PolicyResult(p, p, word, 1.0, f"e2e/test_upgrade.py::{p}", reason)
            for p, word, reason in results
        ],
    )


def upgrade_run(**phases: RunReport) -> UpgradeRun:
    plan = plan_upgrade(load_profile("trainer-2.2"), load_profile("latest"))
    done = ComponentUpgrade("jobset", "v0.11.1", "v0.12.0", 1.0, 2.0, 0.5)
    run = UpgradeRun(plan, "embedded", "now", seconds=12.0)
    run.steps = [StepResult(plan.steps[0], done), StepResult(plan.steps[1], done)]
    run.phases = dict(phases)
    return run


def test_the_column_takes_each_policys_worst_phase_and_names_it():
    catalog = load_catalog(suite().catalog)
    step = "trainer v2.2.1 -> v2.3.0"
    run = upgrade_run(
        **{
            BEFORE: phase_report(("UP-SUSP-001", PASS, ""), ("UP-GATE-001", PASS, "")),
            step: phase_report(
                ("UP-SUSP-001", FAIL, "lost spec.runtimePatches"), ("UP-GATE-001", PASS, "")
            ),
            FINAL: phase_report(("UP-KQ-002", PASS, "")),
        }
    )

    column = column_report(run, catalog)
    results = {r.policy: r for r in column.results}

    assert column.profile == "trainer-2.2 -> latest" and column.file_stem == "trainer-2.2-to-latest"
    assert results["UP-SUSP-001"].result == FAIL
    assert results["UP-SUSP-001"].reason == f"after {step}: lost spec.runtimePatches"
    assert results["UP-GATE-001"].reason == f"held before the upgrade, after {step}"
    # Never judged (no phase ran it): an ERROR saying so, never a silent pass.
    assert results["UP-MB-001"].result == ERROR
    # Routed like any result: the catalog's layer where the reason names no responder;
    # an ERROR the harness's (no phase ran it); a pass none.
    assert results["UP-SUSP-001"].layer == "CEL/CRD validation: TrainJob CRD schema"
    assert results["UP-MB-001"].layer == "harness"
    assert results["UP-GATE-001"].layer == ""
    assert column.versions["trainer"] == "v2.2.1 -> v2.3.0"
    assert "| UP-SUSP-001 | pass | FAIL |  | FAIL |" in upgrade_markdown(run, column)


def test_a_failed_step_makes_every_upgrade_policy_an_error_naming_it():
    catalog = load_catalog(suite().catalog)
    run = upgrade_run(**{BEFORE: phase_report(("UP-SUSP-001", PASS, ""))})
    run.steps[1] = StepResult(
        run.steps[1].step, None, "trainer did not answer an admission request"
    )

    column = column_report(run, catalog)

    assert {r.result for r in column.results} == {ERROR}
    assert column.stack_errors == [
        "the upgrade of trainer v2.2.1 -> v2.3.0 failed: trainer did not answer an admission request"
    ]


def test_prove_counts_a_break_detected_only_where_the_policy_held_before_it():
    catalog = load_catalog(suite().catalog)
    step = "trainer v2.2.1 -> v2.3.0"
    run = upgrade_run(
        **{
            BEFORE: phase_report(("UP-SUSP-001", PASS, ""), ("UP-EDIT-001", PASS, "")),
            step: phase_report(("UP-SUSP-001", FAIL, "lost"), ("UP-EDIT-001", PASS, "")),
        }
    )
    run.broke = {
        "UP-SUSP-001": "overrides-stripped-by-the-upgrade",
        "UP-EDIT-001": "trainer-trainjob-validator-narrowed",
    }

    rows = {row.policy: row for row in prove_report(run, catalog).rows}

    assert rows["UP-SUSP-001"].outcome == "detected"
    assert rows["UP-EDIT-001"].outcome == "MISSED"
    assert rows["UP-MB-001"].outcome == "ERROR"  # its break was not applied


def test_a_failure_seen_only_once_the_last_steps_judge_is_over_turns_the_column():
    # Kueue v0.16.6 deleted the admitted TrainJob's Workload a moment after its own step's
    # judge had read the window: the judge of the whole window after it sees it.
    catalog = load_catalog(suite().catalog)
    step = "trainer v2.2.1 -> v2.3.0"
    deleted = "Workload w of TrainJob admitted was deleted (+15.3s DELETED rv 648)"
    run = upgrade_run(
        **{
            BEFORE: phase_report(("UP-KQ-001", PASS, "")),
            step: phase_report(("UP-KQ-001", PASS, "")),
            SETTLED: phase_report(("UP-KQ-001", FAIL, deleted)),
            FINAL: phase_report(("UP-KQ-002", PASS, "")),
        }
    )
    column = column_report(run, catalog)
    results = {r.policy: r for r in column.results}
    assert results["UP-KQ-001"].result == FAIL and deleted in results["UP-KQ-001"].reason
    assert "the whole window, after the last step's judge" in upgrade_markdown(run, column)

    # Under `--prove` that judge reads the stack its breaks left: not a baseline.
    run.phases[step] = phase_report(("UP-KQ-001", FAIL, deleted))
    run.broke = {"UP-KQ-001": "workload-recreated-by-the-upgrade"}
    rows = {row.policy: row for row in prove_report(run, catalog).rows}
    assert rows["UP-KQ-001"].outcome == "detected"


def test_judged_by_is_checked(tmp_path):
    catalog = tmp_path / "policies.yaml"
    catalog.write_text(
        "P-1:\n  title: t\n  statement: s\n  source: x\n  trainer: '>=2.0.0'\n  judged_by: nightly\n"
    )
    with pytest.raises(ConformanceError, match="judged_by 'nightly': give one of run, upgrade"):
        load_catalog(catalog)


def test_prove_leaves_the_upgrade_policies_to_upgrade():
    catalog = load_catalog(suite().catalog)

    assert not any(p.startswith("UP-") for p in selected_policies(catalog, []))
    with pytest.raises(ConformanceError, match="judged only during an upgrade"):
        selected_policies(catalog, ["UP-SUSP-001"])


def test_an_expectation_upgraded_from_a_range_holds_only_on_such_an_upgrade():
    policy = load_catalog(suite().catalog)["UP-SUSP-001"]

    assert policy.outcome("v2.3.0", {"trainer": "v2.1.0"}) is Outcome.KNOWN_GAP
    assert "kubeflow/trainer#3199" in policy.gap_reference("v2.3.0", {"trainer": "v2.1.0"})
    assert policy.outcome("v2.3.0", {"trainer": "v2.2.1"}) is Outcome.HOLDS
    assert policy.outcome("v2.3.0") is Outcome.HOLDS


@pytest.mark.parametrize(
    ("trainer_before", "kueue_before", "outcome"),
    [
        ("v2.1.0", "v0.16.6", Outcome.KNOWN_GAP),  # trainer-2.1 -> latest
        ("v2.3.0", "v0.16.6", Outcome.KNOWN_GAP),  # latest+kueue=v0.16.6 -> latest
        ("v2.2.1", "v0.19.2", Outcome.HOLDS),  # trainer-2.2 -> latest
        (None, None, Outcome.HOLDS),  # no upgrade
    ],
)
def test_a_queued_trainjob_is_a_known_gap_when_the_trainer_or_the_kueue_before_is_too_old(
    trainer_before, kueue_before, outcome
):
    policy = load_catalog(suite().catalog)["UP-KQ-002"]
    before = {"trainer": trainer_before, "kueue": kueue_before} if trainer_before else {}

    assert policy.outcome("v2.3.0", before) is outcome
    if outcome is Outcome.KNOWN_GAP and trainer_before == "v2.3.0":
        assert "kubernetes-sigs/kueue#10127" in policy.gap_reference("v2.3.0", before)


@pytest.mark.parametrize(
    ("kueue_before", "kueue_now", "outcome"),
    [
        ("v0.14.0", "v0.16.6", Outcome.KNOWN_GAP),  # trainer-2.0 -> trainer-2.1, Kueue's step
        ("v0.14.0", "v0.14.0", Outcome.HOLDS),  # the same path before Kueue's step
        ("v0.14.0", "v0.14.4", Outcome.HOLDS),  # both built with Trainer v2.0.1
        ("v0.16.6", "v0.19.2", Outcome.HOLDS),  # trainer-2.1 -> trainer-2.2
        (None, "v0.19.2", Outcome.HOLDS),  # no upgrade
    ],
)
def test_admission_across_kueues_built_with_trainer_v2_0_and_v2_1_is_a_known_gap(
    kueue_before, kueue_now, outcome
):
    policy = load_catalog(suite().catalog)["UP-KQ-001"]
    before = {"trainer": "v2.0.1", "kueue": kueue_before} if kueue_before else {}
    now = {"trainer": "v2.1.0", "kueue": kueue_now}

    assert policy.outcome("v2.1.0", before, now) is outcome
    if outcome is Outcome.KNOWN_GAP:
        assert "kubernetes-sigs/kueue#7586" in policy.gap_reference("v2.1.0", before, now)


def test_an_expectation_on_the_kueue_running_now_needs_a_valid_range(tmp_path):
    catalog = tmp_path / "policies.yaml"
    catalog.write_text(
        "P-1:\n  title: t\n  statement: s\n  source: x\n  trainer: '>=2.0.0'\n"
        "  expectations:\n    - trainer: '>=2.0.0'\n      kueue: 'new'\n"
        "      outcome: known-gap\n"
    )
    with pytest.raises(ConformanceError, match="P-1: bad version range clause 'new'"):
        load_catalog(catalog)


class RefusingForAWhile:
    """A stand-in API client for the prober's own logic: refuses calls 2-4."""

    def __init__(self) -> None:
        self.calls = 0

    def create(self, manifest: dict, dry_run: bool = False) -> dict:
        self.calls += 1
        if 2 <= self.calls <= 4:
            raise ApiError(500, "InternalError", 'failed calling webhook "x": connection refused')
        return manifest


def test_availability_counts_refusals_and_times_the_outage_to_the_next_answer():
    fake = RefusingForAWhile()
    probe = AdmissionProbe("a probe", {"kind": "X", "metadata": {"name": "p"}})
    availability = Availability(fake, [probe]).start()  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while fake.calls < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    figures = availability.stop()["a probe"]

    assert figures.refused == 3 and figures.requests >= 6
    assert figures.longest_outage >= 0.2  # three rounds 0.1 s apart, to the answer after them
    assert figures.window_seconds >= 0.1
    assert figures.words == [
        'HTTP 500 InternalError: failed calling webhook "x": connection refused'
    ]


def test_the_states_between_the_steps_mix_the_releases_in_order():
    plan = plan_upgrade(load_profile("trainer-2.1"), load_profile("latest"))

    states = dict(plan.states())

    mixed = states["after trainer v2.1.0 -> v2.3.0"]
    assert (mixed["jobset"], mixed["trainer"], mixed["kueue"]) == ("v0.12.0", "v2.3.0", "v0.16.6")
    assert states["after kueue v0.16.6 -> v0.19.2"]["kueue"] == "v0.19.2"


def test_prove_says_not_run_for_a_policy_whose_object_this_path_has_not():
    """UP-MB-002 on a path without the training-operator: its test skipped in every
    judge and its break was not applied; a not-run row, not an ERROR that fails prove."""
    catalog = load_catalog(suite().catalog)
    step = "trainer v2.2.1 -> v2.3.0"
    skip = "no PyTorchJob was in flight: the stack before the upgrade ran no training-operator"
    run = upgrade_run(
        **{
            BEFORE: phase_report(("UP-MB-002", SKIPPED, skip)),
            step: phase_report(("UP-MB-002", SKIPPED, skip)),
        }
    )

    rows = {row.policy: row for row in prove_report(run, catalog).rows}

    assert (rows["UP-MB-002"].outcome, rows["UP-MB-002"].reason) == (NOT_RUN, skip)


def _judges_whose_child_ends(monkeypatch, tmp_path: Path, code: int):
    from types import SimpleNamespace

    from trainjob_conformance.prove import runner
    from trainjob_conformance.upgrade import session

    def ended(*args, **kwargs):
        raise runner.NoResults(f"the tests under catalog wrote no results (pytest {code})", code)

    monkeypatch.setattr(session, "run_policies", ended)
    plan = SimpleNamespace(source=SimpleNamespace(name="trainer-2.2"))
    request = SimpleNamespace(plan=plan, out=tmp_path)
    return session._Judges(request, tmp_path / "kubeconfig")


def test_a_judge_killed_from_outside_loses_its_verdicts_not_the_upgrade(monkeypatch, tmp_path):
    judges = _judges_whose_child_ends(monkeypatch, tmp_path, -9)

    report = judges.run("catalog", ["TJ-GATE-001", "KQ-ADMIT-001"], None, 2)

    assert [(r.policy, r.result) for r in report.results] == [
        ("TJ-GATE-001", ERROR),
        ("KQ-ADMIT-001", ERROR),
    ]
    assert report.results[0].reason == "the tests under catalog wrote no results (pytest -9)"


@pytest.mark.parametrize("code", [-2, -15, 1])
def test_a_judge_interrupted_or_broken_stops_the_upgrade(monkeypatch, tmp_path, code):
    judges = _judges_whose_child_ends(monkeypatch, tmp_path, code)

    with pytest.raises(ConformanceError, match="wrote no results"):
        judges.run("catalog", ["TJ-GATE-001"], None, 2)


def test_the_runtime_settings_of_a_workload_are_named_per_podset_and_container():
    workload = {
        "spec": {
            "podSets": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "node",
                                    "env": [{"name": "PET_NNODES"}, {"name": "PET_MASTER_PORT"}],
                                    "ports": [{"containerPort": 29500}],
                                },
                                {"name": "sidecar"},
                            ]
                        }
                    },
                }
            ]
        }
    }
    events = [
        {"type": "ADDED", "object": {"metadata": {"ownerReferences": []}}},
        {
            "type": "ADDED",
            "object": {
                "metadata": {"ownerReferences": [{"kind": "TrainJob", "name": "admitted"}]},
                **workload,
            },
        },
    ]

    first = first_workload(events, "admitted")

    assert first is not None
    assert runtime_settings(first) == [
        "PodSet node container node: env PET_NNODES, PET_MASTER_PORT; ports 29500"
    ]
    assert first_workload(events, "queued") is None
