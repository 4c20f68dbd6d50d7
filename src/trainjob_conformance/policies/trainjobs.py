"""TrainJob steps: submitting with gates, patching the spec, what Kueue injected."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.kube.kinds import TRAINJOB
from trainjob_conformance.kube.timestamps import parse_time
from trainjob_conformance.policies.view import TrainJobView

EXAMPLE_GATES = ["example.com/gate-a", "example.com/gate-b"]
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
# Where Kueue v0.14 notes the index of its first podSpecOverrides entry on a TrainJob.
KUEUE_OVERRIDE_INDEX = "kueue.x-k8s.io/trainjob-override-idx"


def submit_gated(
    view: TrainJobView, name: str, runtime: str, gates: list[str], **values: Any
) -> dict[str, Any]:
    """A TrainJob of two nodes whose trainer job `node` carries `gates`."""
    values.setdefault("num_nodes", 2)
    overrides = [{"target_job": "node", "scheduling_gates": list(gates)}]
    return view.create_trainjob(name, runtime=runtime, pod_overrides=overrides, **values)


def patch_trainjob(
    view: TrainJobView, name: str, spec: dict[str, Any], dry_run: bool = False
) -> dict[str, Any]:
    """One merge-patch request on the TrainJob's spec (judged but not stored with dry_run)."""
    return view.kube.patch(
        *TRAINJOB, name=name, namespace=view.namespace, body={"spec": spec}, dry_run=dry_run
    )


def kueue_pod_template_patch(
    trainjob: dict[str, Any], replicated_job: str
) -> dict[str, Any] | None:
    """What Kueue injected into a replicated job's pod template, in either field.

    From Trainer v2.2 Kueue owns the runtime patch with manager
    kueue.x-k8s.io/manager; before, it appends podTemplateOverrides entries it
    marks with the kueue.x-k8s.io/podset label; for Trainer v2.0 (Kueue v0.14) it
    appends podSpecOverrides entries, which carry no labels, from the index it notes
    in the kueue.x-k8s.io/trainjob-override-idx annotation. None when there is none.
    """
    for patch in trainjob["spec"].get("runtimePatches") or []:
        if patch.get("manager") != KUEUE_PATCH_MANAGER:
            continue
        spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job in spec.get("replicatedJobs") or []:
            if job.get("name") == replicated_job:
                return dict(((job.get("template") or {}).get("spec") or {}).get("template") or {})
        return {}
    for override in trainjob["spec"].get("podTemplateOverrides") or []:
        labels = (override.get("metadata") or {}).get("labels") or {}
        targets = [t.get("name") for t in override.get("targetJobs") or []]
        if labels.get(KUEUE_PODSET_LABEL) and replicated_job in targets:
            return {"metadata": override.get("metadata") or {}, "spec": override.get("spec") or {}}
    return _kueue_pod_spec_override(trainjob, replicated_job)


def _kueue_pod_spec_override(
    trainjob: dict[str, Any], replicated_job: str
) -> dict[str, Any] | None:
    """Kueue v0.14's podSpecOverrides entry for a replicated job, as a pod template."""
    first = (trainjob["metadata"].get("annotations") or {}).get(KUEUE_OVERRIDE_INDEX)
    if first is None or not first.isdigit():
        return None
    for override in (trainjob["spec"].get("podSpecOverrides") or [])[int(first) :]:
        if replicated_job in [t.get("name") for t in override.get("targetJobs") or []]:
            return {
                "metadata": {},
                "spec": {k: v for k, v in override.items() if k != "targetJobs"},
            }
    return None


def kueue_runtime_patches(trainjob: dict[str, Any]) -> list[dict[str, Any]]:
    """The runtime patches Kueue owns (manager kueue.x-k8s.io/manager) on a TrainJob."""
    return [
        patch
        for patch in trainjob["spec"].get("runtimePatches") or []
        if patch.get("manager") == KUEUE_PATCH_MANAGER
    ]


def kueue_override_count(trainjob: dict[str, Any]) -> int:
    """How many overrides of Kueue's a TrainJob carries, in whichever field it has:
    runtime patches of manager kueue.x-k8s.io/manager, podTemplateOverrides entries
    with the kueue.x-k8s.io/podset label, or (Kueue v0.14, which marks none) every
    podSpecOverrides entry: count these only for a TrainJob with none of its own."""
    spec = trainjob["spec"]
    if "runtimePatches" in spec:
        return len(kueue_runtime_patches(trainjob))
    if "podTemplateOverrides" in spec:
        return sum(
            1
            for override in spec["podTemplateOverrides"] or []
            if ((override.get("metadata") or {}).get("labels") or {}).get(KUEUE_PODSET_LABEL)
        )
    return len(spec.get("podSpecOverrides") or [])


def runtime_patch_times(trainjob: dict[str, Any]) -> dict[str, str | None]:
    """Each runtime patch's manager and the time stored with it (None: no time)."""
    patches = trainjob["spec"].get("runtimePatches") or []
    return {patch["manager"]: patch.get("time") for patch in patches}


def seconds_apart(first: str, second: str) -> float:
    """How far apart two RFC 3339 times are, in seconds (second minus first)."""
    parsed = [parse_time(text) for text in (first, second)]
    if parsed[0] is None or parsed[1] is None:
        raise AssertionError(f"not an RFC 3339 time: {first!r} or {second!r}")
    return parsed[1][0] - parsed[0][0]
