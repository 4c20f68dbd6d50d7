from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.render.overrides import (
    HARNESS_PATCH_MANAGER,
    OverrideShape,
    PodOverride,
    detect_shape,
)
from trainjob_conformance.render.templates import TemplateSet

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
GATED = {
    "target_job": "node",
    "scheduling_gates": ["example.com/a", "example.com/b"],
    "node_selector": {"pool": "x"},
    "labels": {"team": "ml"},
}


def render(shape, **values):
    values.setdefault("name", "tj")
    values.setdefault("namespace", "ns")
    return TemplateSet(TEMPLATES, shape).render_one("trainjob", **values)


def test_v20_shape_puts_gates_in_pod_spec_overrides():
    spec = render(OverrideShape.POD_SPEC_OVERRIDES, pod_overrides=[{**GATED, "labels": {}}])["spec"]
    assert spec["podSpecOverrides"] == [
        {
            "targetJobs": [{"name": "node"}],
            "nodeSelector": {"pool": "x"},
            "schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/b"}],
        }
    ]
    assert "podTemplateOverrides" not in spec and "runtimePatches" not in spec


def test_v20_shape_refuses_labels_it_cannot_express():
    with pytest.raises(ConformanceError, match="cannot set Pod labels"):
        render(OverrideShape.POD_SPEC_OVERRIDES, pod_overrides=[GATED])


def test_v21_shape_splits_metadata_and_spec():
    spec = render(OverrideShape.POD_TEMPLATE_OVERRIDES, pod_overrides=[GATED])["spec"]
    assert spec["podTemplateOverrides"] == [
        {
            "targetJobs": [{"name": "node"}],
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "nodeSelector": {"pool": "x"},
                "schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/b"}],
            },
        }
    ]


def test_v22_shape_is_one_runtime_patch_keyed_by_the_harness_manager():
    spec = render(OverrideShape.RUNTIME_PATCHES, pod_overrides=[GATED])["spec"]
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == HARNESS_PATCH_MANAGER
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == "node"
    pod = job["template"]["spec"]["template"]
    assert pod["metadata"] == {"labels": {"team": "ml"}}
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/a"}, {"name": "example.com/b"}]


def test_no_overrides_renders_no_override_field():
    for shape in OverrideShape:
        spec = render(shape)["spec"]
        assert not {"podSpecOverrides", "podTemplateOverrides", "runtimePatches"} & set(spec)


def test_shape_is_detected_from_schema_properties():
    assert detect_shape({"runtimePatches": {}, "trainer": {}}) is OverrideShape.RUNTIME_PATCHES
    assert detect_shape({"podTemplateOverrides": {}}) is OverrideShape.POD_TEMPLATE_OVERRIDES
    assert detect_shape({"podSpecOverrides": {}}) is OverrideShape.POD_SPEC_OVERRIDES
    with pytest.raises(ConformanceError, match="Trainer v2 CRD"):
        detect_shape({"trainer": {}})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"num_nodes": "2"}, "num_nodes must be integer, got str"),
        ({"num_nodes": True}, "num_nodes must be integer, got bool"),
        ({"suspend": "yes"}, "suspend must be boolean"),
        ({"replicas": 3}, "unknown parameter"),
        ({"pod_overrides": [{"target_job": "node", "gates": ["a"]}]}, "unknown pod override key"),
        ({"pod_overrides": [{"scheduling_gates": ["a"]}]}, "needs target_job"),
        ({"pod_overrides": [{"target_job": "n", "scheduling_gates": "a"}]}, "list of strings"),
    ],
)
def test_bad_values_fail_before_rendering(values, message):
    with pytest.raises(ConformanceError, match=message):
        render(OverrideShape.RUNTIME_PATCHES, **values)


def test_missing_required_parameter_is_named():
    with pytest.raises(ConformanceError, match="parameter name is required"):
        TemplateSet(TEMPLATES, OverrideShape.RUNTIME_PATCHES).render_one("trainjob", namespace="n")


def test_overrides_without_a_known_shape_are_refused():
    with pytest.raises(ConformanceError, match="no override shape is known"):
        TemplateSet(TEMPLATES).render_one(
            "trainjob", name="a", namespace="b", pod_overrides=[GATED]
        )


def test_undefined_variable_in_a_template_is_an_error(tmp_path):
    (tmp_path / "t.yaml.j2").write_text("a: {{ missing }}\n")
    (tmp_path / "t.params.yaml").write_text("{}\n")
    with pytest.raises(ConformanceError, match="'missing' is undefined"):
        TemplateSet(tmp_path).render_one("t")


def test_unknown_template_lists_the_known_ones():
    with pytest.raises(ConformanceError, match=r"no template .nope.*there are: clusterqueue"):
        TemplateSet(TEMPLATES).render_one("nope")


def test_pod_override_objects_are_accepted_as_is():
    override = PodOverride(target_job="node", scheduling_gates=("g",))
    spec = render(OverrideShape.POD_TEMPLATE_OVERRIDES, pod_overrides=[override])["spec"]
    assert spec["podTemplateOverrides"][0]["spec"] == {"schedulingGates": [{"name": "g"}]}


def test_a_runtime_whose_containers_take_their_time_to_stop_after_sigterm():
    def node_pod(**params):
        runtime = TemplateSet(TEMPLATES).render_one("clustertrainingruntime", name="r", **params)
        job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
        return job["template"]["spec"]["template"]["spec"]

    plain = node_pod(hold=True)
    assert "terminationGracePeriodSeconds" not in plain
    assert "trap" not in plain["containers"][0]["command"][-1]
    stopping = node_pod(hold=True, stop_seconds=25)
    # Grace beyond the stop, so the kubelet does not kill the container first.
    assert stopping["terminationGracePeriodSeconds"] == 40
    script = stopping["containers"][0]["command"][-1]
    assert script.startswith("trap 'sleep 25; exit 0' TERM;")
    assert "& wait $!" in script  # the trap runs at once, not after the next sleep
