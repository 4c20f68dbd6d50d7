"""Schema skew read from the releases' sources (stack/skew.py)."""

from __future__ import annotations

import pytest

from trainjob_conformance.stack.profiles import load_profile, profile_names
from trainjob_conformance.stack.skew import (
    crd_spec_fields,
    required_version,
    skews,
    struct_fields,
    used_fields,
)

pytestmark = pytest.mark.harness

GO_TYPES = """
type TrainJobSpec struct {
	// a comment
	RuntimeRef RuntimeRef `json:"runtimeRef"`
	PodTemplateOverrides []PodTemplateOverride `json:"podTemplateOverrides,omitempty"`
	Suspend *bool `json:"suspend,omitempty"`
}

type Other struct {
	Ignored string `json:"ignored"`
}
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
  - name: v1alpha1
    served: true
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties: {runtimeRef: {}, runtimePatches: {}, suspend: {}}
  - name: v1old
    served: false
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties: {podTemplateOverrides: {}}
"""


def test_the_struct_of_a_go_file_maps_field_names_to_json_names():
    assert struct_fields(GO_TYPES, "TrainJobSpec") == {
        "RuntimeRef": "runtimeRef",
        "PodTemplateOverrides": "podTemplateOverrides",
        "Suspend": "suspend",
    }
    assert struct_fields(GO_TYPES, "Missing") == {}


def test_only_spec_fields_of_the_struct_read_outside_tests_count(tmp_path):
    (tmp_path / "controller.go").write_text(
        "x := t.Spec.PodTemplateOverrides\ny := pod.Spec.Containers\nz := t.Spec.Suspend\n"
    )
    (tmp_path / "controller_test.go").write_text("t.Spec.RuntimeRef\n")

    used = used_fields([tmp_path], struct_fields(GO_TYPES, "TrainJobSpec"))

    assert used == {"podTemplateOverrides", "suspend"}


def test_a_crd_gives_the_spec_fields_of_its_served_versions():
    assert crd_spec_fields(CRD) == {"runtimeRef", "runtimePatches", "suspend"}


def test_the_required_version_of_a_module_in_a_go_mod():
    gomod = "module x\n\nrequire (\n\tgithub.com/kubeflow/trainer/v2 v2.2.1\n\tsigs.k8s.io/jobset v0.11.1 // indirect\n)\n"
    assert required_version(gomod, "github.com/kubeflow/trainer/v2") == "v2.2.1"
    assert required_version(gomod, "sigs.k8s.io/jobset") == "v0.11.1"
    assert required_version(gomod, "sigs.k8s.io/kueue") is None


@pytest.mark.parametrize("name", profile_names())
def test_the_pinned_profiles_carry_no_skew(name):
    assert skews(load_profile(name).versions) == []


def test_kueue_built_for_trainer_2_1_under_trainer_2_3_is_named():
    found = skews(load_profile("latest+kueue=v0.16.6").versions)

    assert [s.field for s in found] == ["labels", "podTemplateOverrides"]
    assert found[1].line() == (
        "kueue v0.16.6 reads TrainJob spec.podTemplateOverrides (it is built against trainer "
        "v2.1.0); trainer v2.3.0's TrainJob CRD has no such field"
    )


TEMPLATE_SCHEMA = {
    "properties": {
        "replicatedJobs": {
            "items": {
                "required": ["template"],
                "properties": {
                    "groupName": {"default": "default"},
                    "template": {"properties": {"mode": {"default": "Indexed"}}},
                    "optionalThing": {"properties": {"deep": {"default": "x"}}},
                },
            }
        },
        "volumeClaimPolicies": {"items": {"properties": {"when": {"default": "Delete"}}}},
    }
}


def test_only_defaults_every_object_gets_count():
    """A default under an optional parent (a policy list nobody sets, an object left
    out) is written only where that parent is; replicated jobs are in every runtime."""
    from trainjob_conformance.stack.skew import defaulted_paths

    found = defaulted_paths(TEMPLATE_SCHEMA, frozenset({"replicatedJobs"}))

    assert found == [
        ("replicatedJobs", "[]", "groupName"),
        ("replicatedJobs", "[]", "template", "mode"),
    ]
    assert defaulted_paths(TEMPLATE_SCHEMA) == []


def test_a_path_is_declared_down_to_its_end_or_where_unknown_fields_are_kept():
    from trainjob_conformance.stack.skew import declares

    target = {"properties": {"replicatedJobs": {"items": {"properties": {"template": {}}}}}}
    assert declares(target, ("replicatedJobs", "[]", "template"))
    assert not declares(target, ("replicatedJobs", "[]", "groupName"))
    kept = {"properties": {"replicatedJobs": {"x-kubernetes-preserve-unknown-fields": True}}}
    assert declares(kept, ("replicatedJobs", "[]", "groupName"))


def test_trainer_2_1_under_jobset_0_8_is_named_for_the_group_name_its_runtimes_default():
    """Seen on 2026-11-29: every JobSet apply refused, "field not declared in schema"."""
    found = skews({"trainer": "v2.1.0", "jobset": "v0.8.2"})

    assert [s.line() for s in found] == [
        "trainer v2.1.0 writes JobSet spec.replicatedJobs[].groupName, which its CRD's "
        "template defaults (it is built against jobset v0.10.1); jobset v0.8.2's JobSet CRD "
        "has no such field"
    ]
    assert skews({"trainer": "v2.1.0", "jobset": "v0.10.1"}) == []
