"""A TrainJob's activeDeadlineSeconds (Trainer v2.2+): the TrainJob fails once it
has run that long, and time spent suspended does not count (a policy from
upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.kube.kinds import TRAINJOB
from trainjob_conformance.policies.history import named, resource_version, stored_while
from trainjob_conformance.policies.pods import wait_pods_gone, wait_running
from trainjob_conformance.policies.trainjobs import patch_trainjob, seconds_apart
from trainjob_conformance.policies.view import condition, conditions_of

DEADLINE_SECONDS = 4


def _with_deadline(view, name: str, runtime: str, suspend: bool) -> dict[str, Any]:
    manifest = view.trainjob_manifest(name, runtime=runtime, num_nodes=1, suspend=suspend)
    manifest["spec"]["activeDeadlineSeconds"] = DEADLINE_SECONDS
    return view.create(manifest)


def _failed_on_deadline(trainjob: dict[str, Any]) -> bool:
    failed = condition(trainjob, "Failed")
    return failed.get("status") == "True" and failed.get("reason") == "DeadlineExceeded"


@pytest.mark.policy("TJ-DEADLINE-001")
def test_a_trainjob_fails_once_its_active_deadline_passes_and_suspension_does_not_count(
    trainjob_view, training_runtime
):
    view = trainjob_view
    # Pods that run until the deadline stops them (held: they do not complete).
    runtime = training_runtime(hold=True)
    _with_deadline(view, "resumed", runtime, suspend=True)
    running = _with_deadline(view, "running", runtime, suspend=False)

    ended = view.wait_for_condition(TRAINJOB, "running", "Failed", timeout=60)
    failed = condition(ended, "Failed")
    assert failed["reason"] == "DeadlineExceeded", f"TrainJob running failed with {failed}"
    ran = seconds_apart(running["metadata"]["creationTimestamp"], failed["lastTransitionTime"])
    # Both times are whole seconds: it ran its deadline, give or take one.
    assert ran >= DEADLINE_SECONDS - 1, f"TrainJob running failed after {ran:.0f} s"
    wait_pods_gone(view, "running")

    # TrainJob resumed has now been suspended for longer than its deadline: resumed,
    # its Pods must start and run, its deadline counted from the resume.
    since = resource_version(view, TRAINJOB)
    patch_trainjob(view, "resumed", {"suspend": False})
    wait_running(view, "resumed", 1)
    early = stored_while(
        view,
        TRAINJOB,
        since,
        "TrainJob resumed failed on its deadline before its Pods ran",
        _failed_on_deadline,
        field_selector=named("resumed"),
    )
    assert not early, f"the time suspended counted towards the deadline: {early}"
    ended = view.wait_for_condition(TRAINJOB, "resumed", "Failed", timeout=60)
    assert condition(ended, "Failed")["reason"] == "DeadlineExceeded", conditions_of(ended)
