"""The times the Trainer stores with runtime patches (Trainer v2.2+): set on
creation, renewed on an update only for the patches it changed (policies from
upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import copy

import pytest

from trainjob_conformance.kube.kinds import TRAINJOB
from trainjob_conformance.policies.trainjobs import (
    patch_trainjob,
    runtime_patch_times,
    seconds_apart,
)
from trainjob_conformance.render.overrides import HARNESS_PATCH_MANAGER

# A label the patches set on the trainer job's Pods; changing its value changes a patch.
PATCH_LABEL = "example.com/patched"
SECOND_MANAGER = "example.com/second-manager"
# A time long past, sent with the patches: kept where a patch is unchanged.
EARLIER = "2020-01-01T00:00:00Z"


def _patched(view, name: str, value: str = "1") -> dict:
    return view.trainjob_manifest(
        name,
        suspend=True,
        pod_overrides=[{"target_job": "node", "labels": {PATCH_LABEL: value}}],
    )


@pytest.mark.policy("TJ-PATCH-001")
def test_every_runtime_patch_of_a_new_trainjob_gets_a_time(trainjob_view):
    view = trainjob_view
    view.create(_patched(view, "timed"))

    stored = view.get(TRAINJOB, "timed")
    time = runtime_patch_times(stored).get(HARNESS_PATCH_MANAGER)
    assert time, (
        f"the runtime patch was stored without a time: {stored['spec'].get('runtimePatches')}"
    )
    created = stored["metadata"]["creationTimestamp"]
    assert abs(seconds_apart(created, time)) <= 60, f"patch time {time}, TrainJob created {created}"


@pytest.mark.policy("TJ-PATCH-002")
def test_an_update_renews_the_time_of_the_runtime_patches_it_changes_only(trainjob_view):
    view = trainjob_view
    manifest = _patched(view, "retimed")
    first = manifest["spec"]["runtimePatches"][0]
    second = {**copy.deepcopy(first), "manager": SECOND_MANAGER}
    for patch in (first, second):
        patch["time"] = EARLIER
    manifest["spec"]["runtimePatches"] = [first, second]
    view.create(manifest)
    stored = view.get(TRAINJOB, "retimed")
    sent = {HARNESS_PATCH_MANAGER: EARLIER, SECOND_MANAGER: EARLIER}
    assert runtime_patch_times(stored) == sent, "the times sent at creation were not stored"

    changed = copy.deepcopy(stored["spec"]["runtimePatches"])
    pod_template = changed[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod_template["template"]["spec"]["template"]["metadata"]["labels"][PATCH_LABEL] = "2"
    patch_trainjob(view, "retimed", {"runtimePatches": changed})

    times = runtime_patch_times(view.get(TRAINJOB, "retimed"))
    assert times[SECOND_MANAGER] == EARLIER, f"the unchanged patch's time is now {times}"
    renewed = times[HARNESS_PATCH_MANAGER]
    assert renewed and renewed != EARLIER, f"the changed patch kept its time: {times}"
    created = stored["metadata"]["creationTimestamp"]
    assert seconds_apart(created, renewed) >= -1, (
        f"renewed to {renewed}, before the creation {created}"
    )
