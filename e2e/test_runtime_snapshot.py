"""Which runtime a TrainJob runs: from Trainer v2.3.0 the runtime as it was when the
Trainer first reconciled the TrainJob (a snapshot it keeps), before that the runtime
as it is when the JobSet is rendered again on resume (a policy from upstream's
fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.kube.kinds import CLUSTER_TRAINING_RUNTIME
from trainjob_conformance.policies.jobsets import wait_jobset
from trainjob_conformance.policies.pods import pods_resource_version, watch_pods
from trainjob_conformance.policies.runtimes import pod_template
from trainjob_conformance.policies.trainjobs import patch_trainjob

# A Pod label the test adds to the runtime's trainer job after the TrainJob exists.
EDIT_LABEL = "example.com/runtime-edit"
EDITED = "after-creation"
NODES = 2


def _edit_runtime(view, runtime: str) -> None:
    """One edit of the ClusterTrainingRuntime: its trainer Pods get EDIT_LABEL.

    A merge patch of its replicated jobs, not a replace: before v2.3.0 the runtime
    controller adds its finalizer to a runtime in use at about this moment, and a
    replace of the version read before would conflict with that write."""
    stored = view.kube.get(*CLUSTER_TRAINING_RUNTIME, name=runtime)
    template = pod_template(stored, "node")
    template.setdefault("metadata", {}).setdefault("labels", {})[EDIT_LABEL] = EDITED
    jobs = stored["spec"]["template"]["spec"]["replicatedJobs"]
    view.kube.patch(
        *CLUSTER_TRAINING_RUNTIME,
        name=runtime,
        body={"spec": {"template": {"spec": {"replicatedJobs": jobs}}}},
    )


def _labels_seen(history: dict[str, list[dict[str, Any]]]) -> dict[str, set[str | None]]:
    """Per Pod, every value of EDIT_LABEL in any of its versions (None: absent)."""
    return {
        name: {(v["metadata"].get("labels") or {}).get(EDIT_LABEL) for v in versions}
        for name, versions in history.items()
    }


@pytest.mark.policy("TJ-RT-006")
def test_an_edit_of_the_runtime_reaches_a_suspended_trainjob_as_the_release_says(
    trainjob_view, trainjob_policy, training_runtime
):
    view = trainjob_view
    follows = trainjob_policy.expected("follows_runtime_edits")
    runtime = training_runtime()
    view.create_trainjob("edited", runtime=runtime, num_nodes=NODES, suspend=True)
    # Its JobSet exists: the Trainer has reconciled it (from v2.3.0, taken its snapshot).
    wait_jobset(view, "edited")

    _edit_runtime(view, runtime)
    since = pods_resource_version(view)
    patch_trainjob(view, "edited", {"suspend": False})
    # Every version of its Pods from before their creation: the label is judged
    # wherever it appears in the window, not only on the Pods' latest state.
    history = watch_pods(
        view, "edited", since, lambda h: len(h) == NODES, f"the {NODES} Pods of TrainJob edited"
    )
    seen = _labels_seen(history)
    if follows:
        assert all(values == {EDITED} for values in seen.values()), (
            f"the runtime's edit did not reach every Pod of TrainJob edited on resume: "
            f"{EDIT_LABEL} per Pod {seen}"
        )
    else:
        assert all(values == {None} for values in seen.values()), (
            f"an edit of the runtime made after TrainJob edited was reconciled reached its "
            f"Pods: {EDIT_LABEL} per Pod {seen}"
        )
