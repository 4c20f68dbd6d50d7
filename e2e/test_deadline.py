"""A TrainJob's activeDeadlineSeconds (Trainer v2.2+): the TrainJob fails once it
has run that long, and time spent suspended does not count (a policy from
upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.kube.kinds import TRAINJOB
from trainjob_conformance.policies.pods import pods_resource_version, wait_pods_gone, watch_pods
from trainjob_conformance.policies.trainjobs import patch_trainjob, seconds_apart
from trainjob_conformance.policies.view import condition, conditions_of

DEADLINE_SECONDS = 4


def _with_deadline(view, name: str, runtime: str, suspend: bool) -> dict[str, Any]:
    manifest = view.trainjob_manifest(name, runtime=runtime, num_nodes=1, suspend=suspend)
    manifest["spec"]["activeDeadlineSeconds"] = DEADLINE_SECONDS
    return view.create(manifest)


def _one_ran(history: dict[str, list[dict[str, Any]]]) -> bool:
    return any(
        (version.get("status") or {}).get("phase") == "Running"
        for versions in history.values()
        for version in versions
    )


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

    # TrainJob resumed has now been suspended for longer than its deadline. Resumed,
    # its Pods must start and run, and its deadline count from the resume. The deadline
    # may end them seconds later (before a poll of the Pods on a busy cluster), so
    # they are judged from a watch over the window, not from their latest state.
    since_pods = pods_resource_version(view)
    patch_trainjob(view, "resumed", {"suspend": False})
    watch_pods(view, "resumed", since_pods, _one_ran, "a Running Pod of TrainJob resumed")
    ended = view.wait_for_condition(TRAINJOB, "resumed", "Failed", timeout=60)
    failed = condition(ended, "Failed")
    assert failed["reason"] == "DeadlineExceeded", f"TrainJob resumed failed with {failed}"
    resume = condition(ended, "Suspended")
    assert resume.get("status") == "False", f"TrainJob resumed has no resume: {resume}"
    ran = seconds_apart(resume["lastTransitionTime"], failed["lastTransitionTime"])
    # Had the time suspended counted, it would have failed on its resume (0 s).
    assert ran >= DEADLINE_SECONDS - 1, (
        f"TrainJob resumed failed {ran:.0f} s after its resume: the time suspended counted "
        f"towards its deadline ({conditions_of(ended)})"
    )
