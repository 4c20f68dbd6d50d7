"""Pod overrides written once, in the policy's terms, shaped per Trainer release.

The Trainer renamed and reshaped this field twice: `podSpecOverrides` (v2.0),
`podTemplateOverrides` (v2.1), `runtimePatches` (v2.2+). A policy states what it
wants on which replicated job; `to_trainjob_fields` says it in the installed
release's words.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from trainjob_conformance.errors import ConformanceError

# The manager key of the harness's own runtime patch; Kueue writes its own
# under `kueue.x-k8s.io/manager`, so the two never collide.
HARNESS_PATCH_MANAGER = "trainjob-conformance.kubeflow.org/policy"


class OverrideShape(enum.Enum):
    POD_SPEC_OVERRIDES = "podSpecOverrides"
    POD_TEMPLATE_OVERRIDES = "podTemplateOverrides"
    RUNTIME_PATCHES = "runtimePatches"


def detect_shape(trainjob_spec_properties: dict[str, Any]) -> OverrideShape:
    """Pick the shape from the live TrainJob CRD schema, never a version string."""
    for shape in (
        OverrideShape.RUNTIME_PATCHES,
        OverrideShape.POD_TEMPLATE_OVERRIDES,
        OverrideShape.POD_SPEC_OVERRIDES,
    ):
        if shape.value in trainjob_spec_properties:
            return shape
    raise ConformanceError(
        "the installed TrainJob CRD has none of runtimePatches, podTemplateOverrides or "
        "podSpecOverrides in spec: is this a Kubeflow Trainer v2 CRD?"
    )


@dataclass(frozen=True)
class PodOverride:
    """What one policy wants on the Pods of one replicated job."""

    target_job: str
    scheduling_gates: tuple[str, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    # Further Pod spec fields, in the API's own words (affinity, imagePullSecrets,
    # securityContext, ...): each Trainer release accepts its own set of them.
    pod_spec: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: Any) -> PodOverride:
        if not isinstance(params, dict):
            raise ConformanceError(
                f"each pod override must be a mapping such as "
                f'{{"target_job": "node", "scheduling_gates": ["example.com/g"]}}, not {params!r}'
            )
        known = {
            "target_job",
            "scheduling_gates",
            "node_selector",
            "tolerations",
            "labels",
            "pod_spec",
        }
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConformanceError(
                f"unknown pod override key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        if not isinstance(params.get("target_job"), str) or not params["target_job"]:
            raise ConformanceError("a pod override needs target_job: the replicated job's name")
        gates = params.get("scheduling_gates", [])
        if not isinstance(gates, list | tuple) or not all(isinstance(g, str) for g in gates):
            raise ConformanceError("pod override scheduling_gates must be a list of strings")
        for key in ("node_selector", "labels"):
            value = params.get(key, {})
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise ConformanceError(f"pod override {key} must map strings to strings")
        tolerations = params.get("tolerations", [])
        if not isinstance(tolerations, list | tuple) or not all(
            isinstance(t, dict) for t in tolerations
        ):
            raise ConformanceError("pod override tolerations must be a list of mappings")
        pod_spec = params.get("pod_spec", {})
        if not isinstance(pod_spec, dict) or not all(isinstance(k, str) for k in pod_spec):
            raise ConformanceError(
                "pod override pod_spec must map Pod spec field names (affinity, ...) to values"
            )
        return cls(
            target_job=params["target_job"],
            scheduling_gates=tuple(gates),
            node_selector=dict(params.get("node_selector", {})),
            tolerations=tuple(tolerations),
            labels=dict(params.get("labels", {})),
            pod_spec=dict(pod_spec),
        )

    def _pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = dict(self.pod_spec)
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        if self.scheduling_gates:
            spec["schedulingGates"] = [{"name": gate} for gate in self.scheduling_gates]
        return spec

    def _metadata(self) -> dict[str, Any]:
        return {"labels": dict(self.labels)} if self.labels else {}


def to_trainjob_fields(overrides: list[PodOverride], shape: OverrideShape) -> dict[str, Any]:
    """The TrainJob.spec fields that carry `overrides` in `shape`."""
    if not overrides:
        return {}
    if shape is OverrideShape.POD_SPEC_OVERRIDES:
        if any(o.labels for o in overrides):
            raise ConformanceError("podSpecOverrides (Trainer v2.0) cannot set Pod labels")
        items = [{"targetJobs": [{"name": o.target_job}], **o._pod_spec()} for o in overrides]
        return {shape.value: items}
    if shape is OverrideShape.POD_TEMPLATE_OVERRIDES:
        items = []
        for override in overrides:
            item: dict[str, Any] = {"targetJobs": [{"name": override.target_job}]}
            if override._metadata():
                item["metadata"] = override._metadata()
            if override._pod_spec():
                item["spec"] = override._pod_spec()
            items.append(item)
        return {shape.value: items}
    replicated_jobs = []
    for override in overrides:
        pod_template: dict[str, Any] = {}
        if override._metadata():
            pod_template["metadata"] = override._metadata()
        if override._pod_spec():
            pod_template["spec"] = override._pod_spec()
        replicated_jobs.append(
            {"name": override.target_job, "template": {"spec": {"template": pod_template}}}
        )
    patch = {
        "manager": HARNESS_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated_jobs}}},
    }
    return {shape.value: [patch]}
