"""What becomes of a finished TrainJob (a policy from upstream's fixes,
docs/upstream-fixes.md)."""

from __future__ import annotations

import pytest

from trainjob_conformance.cluster.health.readiness import TORCH_RUNTIME
from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.policies.history import named, resource_version, stored_while
from trainjob_conformance.policies.jobsets import (
    delete_jobset,
    record_no_jobset,
    wait_jobset_replaced,
)


@pytest.mark.policy("TJ-DONE-001")
def test_the_deleted_jobset_of_a_finished_trainjob_is_not_created_again(
    trainjob_view, trainjob_policy, schedulable_nodes, runnable_runtime
):
    view = trainjob_view
    schedulable_nodes(1)
    runtime = runnable_runtime(TORCH_RUNTIME)
    view.create_trainjob("done", runtime=runtime, num_nodes=1)
    view.wait_for_condition(JOBSET, "done", "Completed", timeout=90)
    # A TrainJob that has not finished: its JobSet is created again once deleted,
    # which shows the Trainer has answered both deletions.
    view.create_trainjob("control", runtime=runtime, num_nodes=1, suspend=True)
    view.wait("JobSet control", lambda: view.find(JOBSET, "control"))

    since = resource_version(view, JOBSET)
    delete_jobset(view, "done")
    control_uid = delete_jobset(view, "control")
    trainjob_policy.gap_exercised("the JobSet of the finished TrainJob done was deleted")
    wait_jobset_replaced(view, "control", control_uid)

    with trainjob_policy.holds():
        # The end of the window in kubectl's terms (what a reproduction checks), then
        # every version stored in it.
        found = view.find(JOBSET, "done")
        record_no_jobset(view, "done", found)
        again = stored_while(
            view,
            JOBSET,
            since,
            "a JobSet of the finished TrainJob done, stored after its deletion began",
            lambda _: True,
            field_selector=named("done"),
        )
        created = [line for line in again if line.startswith("ADDED")]
        assert not created, f"the Trainer created the JobSet again: {created}"
        assert found is None, "TrainJob done has a JobSet again"
