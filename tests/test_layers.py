"""The layer behind a FAIL, known gap or ERROR: the cluster's words first, the
catalog's declaration where they name no responder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import load_catalog
from trainjob_conformance.policies.layers import (
    DECLARABLE,
    check_declared,
    counts_by_kind,
    kind_of,
    layer_of,
)
from trainjob_conformance.report.model import PolicyResult, RunReport

ROOT = Path(__file__).resolve().parents[1]
DECLARED = "controller reconcile: Trainer"


@pytest.mark.parametrize(
    ("reason", "layer"),
    [
        (
            'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
            "spec.podTemplateOverrides: Forbidden: podTemplateOverrides can only be edited "
            "while the TrainJob is suspended",
            "admission webhook: validator.trainjob.trainer.kubeflow.org",
        ),
        (
            'Internal error occurred: failed calling webhook "mtrainjob.kb.io": failed to '
            'call webhook: Post "https://x.svc:443/mutate": connection refused',
            "admission webhook: mtrainjob.kb.io (did not answer)",
        ),
        (
            'trainjobs.trainer.kubeflow.org "edit" is forbidden: ValidatingAdmissionPolicy '
            "'trainjob-override-edits-denied' with binding 'b' denied request: no",
            "admission policy: trainjob-override-edits-denied",
        ),
        (
            'TrainJob.trainer.kubeflow.org "mb" is invalid: spec.managedBy: Invalid value: '
            '"string": ManagedBy value is immutable',
            "CEL/CRD validation: TrainJob spec.managedBy",
        ),
        (
            'Pod "p-0" is invalid: spec.schedulingGates: Forbidden: only deletion is allowed, '
            "but found new scheduling gate 'example.com/late'",
            "API validation: Pod spec.schedulingGates",
        ),
        (
            "system:serviceaccount:ns:user, bound to kueue-batch-user-role, may not create a "
            'TrainJob: trainjobs.trainer.kubeflow.org is forbidden: User "system:serviceaccount:'
            'ns:user" cannot create resource "trainjobs" in API group "trainer.kubeflow.org" in '
            'the namespace "ns"',
            "authorization: system:serviceaccount:ns:user cannot create trainjobs",
        ),
        # Accepted where it should not have been, a wait that ran out, a known gap:
        # no responder named, so the layer the policy is about.
        ("the request was accepted, but the policy says it must be rejected", DECLARED),
        ("timed out after 60s waiting for 2 Running Pods of TrainJob placed", DECLARED),
        ("KNOWN UPSTREAM GAP TJ-EDIT-007 on Trainer v2.3.0: JobSet unions ...", DECLARED),
    ],
)
def test_the_reason_names_the_layer_or_the_catalog_does(reason: str, layer: str) -> None:
    assert layer_of("FAIL", reason, DECLARED) == layer


def test_an_error_is_the_stack_or_the_harness_never_the_policy() -> None:
    assert layer_of("ERROR", "the stack broke: kueue exited (code 2)", DECLARED) == (
        "stack: kueue exited (code 2)"
    )
    assert layer_of("ERROR", "the cluster did not start: etcd did not answer", DECLARED) == "stack"
    assert layer_of("ERROR", "no result: the run collected no test for it", DECLARED) == "harness"
    # A webhook that did not answer is named even when the run called it an ERROR.
    unanswered = 'failed calling webhook "vjobset.kb.io": connection refused'
    assert (
        layer_of("ERROR", unanswered, DECLARED)
        == "admission webhook: vjobset.kb.io (did not answer)"
    )


def test_counts_go_by_kind_in_a_fixed_order() -> None:
    layers = [
        "controller reconcile: JobSet",
        "admission webhook: a",
        "",
        "admission webhook: b",
        "stack: kueue exited",
    ]
    assert counts_by_kind(layers) == {
        "admission webhook": 2,
        "controller reconcile": 1,
        "stack": 1,
    }
    assert kind_of("Kueue admission: PodSets") == "Kueue admission"


def test_every_policy_of_the_catalog_and_the_example_pack_declares_a_layer() -> None:
    for path in (ROOT / "fixtures/policies.yaml", ROOT / "examples/queue-required/policies.yaml"):
        catalog = load_catalog(path)
        undeclared = [policy.id for policy in catalog.values() if not policy.layer]
        assert undeclared == [], f"{path.name}: no layer: {undeclared}"
        assert all(kind_of(p.layer) in DECLARABLE for p in catalog.values())


def test_a_catalog_layer_outside_the_vocabulary_is_one_line(tmp_path: Path) -> None:
    catalog = tmp_path / "policies.yaml"
    catalog.write_text(
        "X-1:\n  title: t\n  statement: s\n  source: src\n  layer: the kernel\n"
        '  trainer: ">=2.0.0"\n'
    )
    with pytest.raises(ConformanceError) as refused:
        load_catalog(catalog)
    assert "policy X-1: layer 'the kernel' is not one of: admission webhook" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert check_declared("stack") is not None  # only an ERROR is the stack's


def test_a_result_file_keeps_the_layer_and_older_files_still_read(tmp_path: Path) -> None:
    report = RunReport("latest", "embedded", {"trainer": "v2.3.0"}, "t", 1.0, None)
    report.results.append(
        PolicyResult("TJ-EDIT-003", "t", "FAIL", 1.0, "x::y", "accepted", layer=DECLARED)
    )
    path = report.write(tmp_path)
    assert RunReport.read(path).results[0].layer == DECLARED
    older = json.loads(path.read_text())
    older["format"] = 2
    del older["results"][0]["layer"]
    path.write_text(json.dumps(older))
    assert RunReport.read(path).results[0].layer == ""
