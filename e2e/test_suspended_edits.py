"""Policy: pod overrides change only while the TrainJob is suspended and no Job is active."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.kinds import JOBSET, POD, TRAINJOB
from trainjob_conformance.policies.admission import (
    accepted_within,
    admission_answer,
    lasting_rejection,
    rejection_of,
)
from trainjob_conformance.policies.history import named, resource_version, stored_while
from trainjob_conformance.policies.jobs import (
    wait_job_gate,
    wait_jobs_count_terminating,
)
from trainjob_conformance.policies.jobsets import (
    active_by_replicated_job,
    jobset_pod_spec,
    wait_jobset_idle,
    wait_jobset_template,
)
from trainjob_conformance.policies.pods import (
    gate_names,
    keep_terminating,
    pods_of,
    record_pod_gates,
    release_terminating,
    wait_pods,
    wait_pods_gone,
    wait_running,
    wait_terminating,
)
from trainjob_conformance.policies.trainjobs import patch_trainjob
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL

# A nodeSelector no node needs to carry: these policies judge what reaches the
# JobSet and the Pods' specs, not where the Pods land.
PLACEMENT = "trainjob-conformance.kubeflow.org/placement"
GATE_BEFORE = "example.com/before"
GATE_AFTER = "example.com/after"
BEFORE = {
    "target_job": "node",
    "node_selector": {PLACEMENT: "before"},
    "scheduling_gates": [GATE_BEFORE],
}
AFTER = {
    "target_job": "node",
    "node_selector": {PLACEMENT: "after"},
    "scheduling_gates": [GATE_AFTER],
}
# AFTER without gates: the gate that TJ-EDIT-007 removes while suspended.
AFTER_UNGATED = {"target_job": "node", "node_selector": {PLACEMENT: "after"}}


def create(view, runtime, name, suspend, overrides=()):
    view.create_trainjob(
        name,
        runtime=runtime,
        num_nodes=2,
        suspend=suspend,
        pod_overrides=list(overrides),
    )


def start_running(view, runtime, name):
    """A TrainJob whose two held Pods run, with the JobSet reporting them active."""
    create(view, runtime, name, False)
    return wait_running(view, name, 2)


def jobset_shows(view, name, placement, gates):
    return wait_jobset_template(view, name, "node", PLACEMENT, placement, gates)


@pytest.mark.policy("TJ-EDIT-001")
def test_suspended_trainjob_accepts_an_override_edit_that_reaches_the_jobset(
    trainjob_view, trainjob_templates, training_runtime
):
    view = trainjob_view
    since = resource_version(view, POD)
    create(view, training_runtime(), "edit", True, [BEFORE])
    jobset_shows(view, "edit", "before", [GATE_BEFORE])

    patch_trainjob(view, "edit", trainjob_templates.override_fields([AFTER]))

    spec = jobset_shows(view, "edit", "after", [GATE_AFTER])
    assert spec["nodeSelector"][PLACEMENT] == "after"
    assert view.get(JOBSET, "edit")["spec"].get("suspend") is True
    # Over the whole window: the edit of a suspended TrainJob started no Pod.
    started = stored_while(
        view, POD, since, "a Pod of TrainJob edit", lambda _: True, f"{JOBSET_NAME_LABEL}=edit"
    )
    assert started == [], f"Pods existed while TrainJob edit was suspended: {started}"
    assert pods_of(view, "edit") == []


def resume_after_edit(view, templates, runtime, name, edit, gates_after):
    """Create suspended with BEFORE, edit the overrides to `edit`, resume; the Pods."""
    create(view, runtime, name, True, [BEFORE])
    jobset_shows(view, name, "before", [GATE_BEFORE])
    # JobSet creates the Jobs while suspended: the state that resume merges into.
    wait_job_gate(view, name, GATE_BEFORE)
    patch_trainjob(view, name, templates.override_fields([edit]))
    jobset_shows(view, name, "after", gates_after)
    patch_trainjob(view, name, {"suspend": False})
    pods = wait_pods(view, name, 2)
    for pod in pods:
        assert pod["spec"]["nodeSelector"][PLACEMENT] == "after", pod["metadata"]["name"]
    return pods


@pytest.mark.policy("TJ-EDIT-002")
def test_edit_made_while_suspended_reaches_the_pods_on_resume(
    trainjob_view, trainjob_templates, training_runtime
):
    pods = resume_after_edit(
        trainjob_view, trainjob_templates, training_runtime(), "resume", AFTER, [GATE_AFTER]
    )

    for pod in pods:
        assert GATE_AFTER in gate_names(pod["spec"]), pod["metadata"]["name"]


@pytest.mark.policy("TJ-EDIT-007")
def test_gate_removed_while_suspended_is_gone_from_the_pods_after_resume(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    pods = resume_after_edit(
        trainjob_view, trainjob_templates, training_runtime(), "ungate", AFTER_UNGATED, []
    )
    trainjob_policy.gap_exercised(f"the suspended Job carried {GATE_BEFORE} before the edit")
    record_pod_gates(trainjob_view, "ungate", pods, expected="")

    with trainjob_policy.holds():
        for pod in pods:
            name = pod["metadata"]["name"]
            assert gate_names(pod["spec"]) == [], f"{name} still carries {gate_names(pod['spec'])}"


@pytest.mark.policy("TJ-EDIT-003")
def test_running_trainjob_rejects_an_override_edit(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    start_running(view, training_runtime(hold=True), "running")

    refused = rejection_of(
        lambda: patch_trainjob(view, "running", trainjob_templates.override_fields([AFTER_UNGATED]))
    )

    assert refused.status == 403, refused
    assert "Forbidden" in refused.message, refused
    assert trainjob_policy.expected("forbidden_message") in refused.message, refused


@pytest.mark.policy("TJ-EDIT-004")
def test_overrides_cannot_change_while_the_jobset_has_active_jobs(
    trainjob_view, trainjob_templates, training_runtime
):
    view = trainjob_view
    start_running(view, training_runtime(hold=True), "active")
    assert active_by_replicated_job(view.get(JOBSET, "active"))["node"] > 0
    since = resource_version(view, TRAINJOB)

    # One request: suspended after the update (so the suspend rule passes)
    # while the JobSet still reports active Jobs.
    refused = rejection_of(
        lambda: patch_trainjob(
            view,
            "active",
            {"suspend": True, **trainjob_templates.override_fields([AFTER_UNGATED])},
        )
    )

    assert refused.status == 403, refused
    assert (
        "cannot be modified when the JobSet's ReplicatedJob node is still active" in refused.message
    )
    suspended = stored_while(
        view,
        TRAINJOB,
        since,
        "spec.suspend is true",
        lambda t: t["spec"].get("suspend") is True,
        field_selector=named("active"),
    )
    assert suspended == [], f"the refused request was stored after all: {suspended}"
    assert view.get(TRAINJOB, "active")["spec"].get("suspend") in (None, False)


@pytest.mark.policy("TJ-EDIT-005")
def test_suspended_trainjob_without_active_jobs_accepts_the_edit_again(
    trainjob_view, trainjob_templates, training_runtime
):
    view = trainjob_view
    start_running(view, training_runtime(hold=True), "drained")

    patch_trainjob(view, "drained", {"suspend": True})
    wait_jobset_idle(view, "drained")
    # The Trainer's webhook reads the JobSet from its own cache, which can lag
    # behind the idle JobSet just read here (seen once, from a fresh clone).
    edited = accepted_within(
        lambda: patch_trainjob(view, "drained", trainjob_templates.override_fields([AFTER])),
        seconds=10,
        why="the Trainer has seen the idle JobSet",
    )

    assert edited["spec"]["suspend"] is True
    jobset_shows(view, "drained", "after", [GATE_AFTER])


@pytest.mark.policy("TJ-EDIT-008")
def test_overrides_wait_until_the_pods_have_terminated(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    pods = start_running(view, training_runtime(hold=True), "draining")
    keep_terminating(view, pods)

    patch_trainjob(view, "draining", {"suspend": True})
    wait_terminating(view, "draining", 2)
    # The state the Trainer's check reads: the Job controller no longer counts
    # the Terminating Pods as active, and the JobSet has followed its Jobs.
    wait_jobs_count_terminating(view, "draining", 2)
    wait_jobset_idle(view, "draining")
    trainjob_policy.gap_exercised("the JobSet reported no active Job while 2 Pods terminated")

    with trainjob_policy.holds():
        # The Trainer's webhook reads the JobSet from its own cache, which can
        # lag behind the idle JobSet just read here (seen once at load average
        # 20): the edit must stay refused for a while, not just once.
        lasting_rejection(
            lambda: patch_trainjob(
                view, "draining", trainjob_templates.override_fields([AFTER_UNGATED])
            ),
            seconds=3,
            why="the Trainer may not have seen the idle JobSet yet",
        )

    release_terminating(view, pods)
    wait_pods_gone(view, "draining")
    patch_trainjob(view, "draining", trainjob_templates.override_fields([AFTER]))
    jobset_shows(view, "draining", "after", [GATE_AFTER])


# How long the graceful variant's containers take to stop after SIGTERM: long enough
# for the JobSet to go idle and the edit to be tried while they still run.
GRACEFUL_STOP_SECONDS = 25


def still_stopping(view, trainjob, count):
    """Skip, saying why, unless `count` Pods of `trainjob` are Terminating with their
    containers still running: the window this variant judges has closed."""
    pods = pods_of(view, trainjob)
    running = [
        p["metadata"]["name"]
        for p in pods
        if p["metadata"].get("deletionTimestamp")
        and all(
            "running" in (s.get("state") or {})
            for s in p["status"].get("containerStatuses") or [{}]
        )
    ]
    if len(running) < count:
        pytest.skip(
            f"the Pods stopped before the edit could be judged ({len(running)} of {count} still "
            f"running {GRACEFUL_STOP_SECONDS}s after SIGTERM); the cluster was slower than "
            "this variant allows"
        )


@pytest.mark.policy("TJ-EDIT-008")
def test_overrides_wait_until_gracefully_stopping_pods_are_gone(
    trainjob_cluster, trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    if not trainjob_cluster.runs_containers:
        pytest.skip(
            "needs nodes that run containers: on kwok's nodes nothing answers SIGTERM "
            "(the finalizer variant of this policy runs there)"
        )
    view = trainjob_view
    runtime = training_runtime(hold=True, stop_seconds=GRACEFUL_STOP_SECONDS)
    start_running(view, runtime, "stopping")

    patch_trainjob(view, "stopping", {"suspend": True})
    wait_terminating(view, "stopping", 2)
    wait_jobs_count_terminating(view, "stopping", 2)
    wait_jobset_idle(view, "stopping")
    still_stopping(view, "stopping", 2)
    trainjob_policy.gap_exercised(
        "the JobSet reported no active Job while 2 Pods took "
        f"{GRACEFUL_STOP_SECONDS}s to stop after SIGTERM"
    )

    def edit():
        still_stopping(view, "stopping", 2)
        return patch_trainjob(view, "stopping", trainjob_templates.override_fields([AFTER_UNGATED]))

    with trainjob_policy.holds():
        lasting_rejection(edit, seconds=3, why="the Trainer may not have seen the idle JobSet yet")

    wait_pods_gone(view, "stopping")
    patch_trainjob(view, "stopping", trainjob_templates.override_fields([AFTER]))
    jobset_shows(view, "stopping", "after", [GATE_AFTER])


@pytest.mark.policy("TJ-EDIT-006")
def test_patching_overrides_and_resuming_in_one_request(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    create(view, training_runtime(hold=True), "oneshot", True, [BEFORE])
    jobset_shows(view, "oneshot", "before", [GATE_BEFORE])
    one_request = {"suspend": False, **trainjob_templates.override_fields([AFTER_UNGATED])}

    answer = admission_answer(lambda: patch_trainjob(view, "oneshot", one_request))

    assert answer.verdict == trainjob_policy.expected("patch_and_resume"), answer
    # Whatever the verdict, the stored TrainJob must agree with it.
    stored = view.get(TRAINJOB, "oneshot")["spec"]
    assert stored.get("suspend", False) is (answer.verdict == "forbidden"), stored


@pytest.mark.policy("TJ-EDIT-009")
def test_a_dry_run_edit_is_judged_like_the_real_one_and_stores_nothing(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    runtime = training_runtime(hold=True)
    start_running(view, runtime, "running")
    edit = trainjob_templates.override_fields([AFTER_UNGATED])

    dry = rejection_of(lambda: patch_trainjob(view, "running", edit, dry_run=True))
    real = rejection_of(lambda: patch_trainjob(view, "running", edit))

    assert trainjob_policy.expected("forbidden_message") in real.message, real
    assert (dry.status, dry.message) == (real.status, real.message), (
        f"the dry run was answered {dry!r}, the real edit {real!r}"
    )

    create(view, runtime, "suspended", True, [BEFORE])
    jobset = jobset_shows(view, "suspended", "before", [GATE_BEFORE])
    stored = view.wait_for_condition(TRAINJOB, "suspended", "Suspended")
    jobset_generation = view.get(JOBSET, "suspended")["metadata"]["generation"]

    answered = patch_trainjob(view, "suspended", trainjob_templates.override_fields([AFTER]), True)

    assert answered["spec"] != stored["spec"], "the dry run did not apply the edit to its answer"
    after = view.get(TRAINJOB, "suspended")
    # Controllers may still write status (Trainer v2.2 does), so compare what
    # an edit of the spec would move: the generation and the spec itself.
    assert after["metadata"]["generation"] == stored["metadata"]["generation"]
    assert after["spec"] == stored["spec"]
    current = view.get(JOBSET, "suspended")
    assert current["metadata"]["generation"] == jobset_generation
    assert jobset_pod_spec(current, "node") == jobset


@pytest.mark.policy("TJ-EDIT-010")
def test_the_rejection_of_a_running_edit_names_the_override_field(
    trainjob_view, trainjob_templates, training_runtime, trainjob_policy
):
    view = trainjob_view
    start_running(view, training_runtime(hold=True), "running")
    # The field the installed release serves, read from its CRD, not from the message.
    field = f"spec.{trainjob_templates.shape.value}"

    refused = rejection_of(
        lambda: patch_trainjob(view, "running", trainjob_templates.override_fields([AFTER_UNGATED]))
    )

    assert f"{field}: Forbidden: " in refused.message, refused
    reason = refused.message.split(f"{field}: Forbidden: ", 1)[1]
    assert reason.startswith(trainjob_policy.expected("forbidden_message")), refused
    assert "suspended" in reason, refused


@pytest.mark.policy("TJ-EDIT-011")
def test_num_nodes_of_an_existing_trainjob_cannot_change(trainjob_view, trainjob_policy):
    view = trainjob_view
    view.create_trainjob("fixed", num_nodes=2, suspend=True)
    trainjob_policy.gap_exercised("TrainJob fixed was stored suspended with numNodes 2")

    with trainjob_policy.holds():
        refused = rejection_of(lambda: patch_trainjob(view, "fixed", {"trainer": {"numNodes": 3}}))
        assert refused.status == 422, refused
        assert "spec.trainer" in refused.message and "immutable" in refused.message, refused
        stored = view.get(TRAINJOB, "fixed")["spec"]["trainer"]["numNodes"]
        assert stored == 2, f"TrainJob fixed now has numNodes {stored}"
