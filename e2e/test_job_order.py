"""The order in which a JobSet creates its Jobs: a job that depends on another
waits for it (a policy from upstream's fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_conformance.kube.kinds import JOB
from trainjob_conformance.policies.admission import accepted_within
from trainjob_conformance.policies.history import replay, resource_version
from trainjob_conformance.policies.jobs import jobs_of, replicated_job_of
from trainjob_conformance.policies.runtimes import namespaced, with_depends_on, with_first
from trainjob_conformance.policies.view import JOBSET_NAME_LABEL

INITIALIZER = "dataset-initializer"


def _complete(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


@pytest.mark.policy("JS-DEP-001")
def test_no_node_job_exists_until_the_dataset_initializer_job_has_succeeded(trainjob_view):
    view = trainjob_view
    rendered = view.render(
        "clustertrainingruntime", name="ordered", initializers={INITIALIZER: {"cpu": "10m"}}
    )
    runtime = with_depends_on(
        with_first(namespaced(rendered, view.namespace), INITIALIZER), "node", [INITIALIZER]
    )
    view.create(runtime)
    since = resource_version(view, JOB)
    manifest = view.trainjob_manifest("ordered", runtime="ordered", runtime_kind="TrainingRuntime")
    accepted_within(
        lambda: view.create(manifest), 30, "the Trainer's webhook sees TrainingRuntime ordered"
    )
    view.wait(
        "the node Job of TrainJob ordered",
        lambda: [j for j in jobs_of(view, "ordered") if replicated_job_of(j) == "node"] or None,
    )

    # The Jobs' stored versions in the order they were stored: the node Job's
    # creation must come after a version of the initializer Job that is Complete.
    history = replay(view, JOB, since, label_selector=f"{JOBSET_NAME_LABEL}=ordered")
    order = [
        f"{e['type']} {replicated_job_of(e['object'])}{' Complete' if _complete(e['object']) else ''}"
        for e in history
    ]
    node_created = next(
        i
        for i, e in enumerate(history)
        if e["type"] == "ADDED" and replicated_job_of(e["object"]) == "node"
    )
    done = [
        i
        for i, e in enumerate(history)
        if replicated_job_of(e["object"]) == INITIALIZER and _complete(e["object"])
    ]
    assert done and done[0] < node_created, (
        f"the node Job was created before the {INITIALIZER} Job was Complete: {order}"
    )
