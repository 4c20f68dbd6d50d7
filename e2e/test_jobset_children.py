"""Which Jobs a JobSet counts as its own (a policy from upstream's fixes,
docs/upstream-fixes.md)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from trainjob_conformance.kube.kinds import EVENT, JOB, JOBSET
from trainjob_conformance.kube.waits import NotYet
from trainjob_conformance.policies.finalizers import keep_when_deleted, let_go
from trainjob_conformance.policies.history import named, replay, resource_version
from trainjob_conformance.policies.jobs import jobs_of, wait_jobs
from trainjob_conformance.policies.jobsets import (
    delete_jobset,
    wait_jobset_active,
    wait_jobset_replaced,
)

# The counts of a replicated job's status, each a number of Jobs.
COUNTS = ("ready", "active", "succeeded", "failed", "suspended")
# JobSet's event when it cannot create a Job (the name taken, here).
CREATION_FAILED = "JobCreationFailed"
GARBAGE_COLLECTED_WITHIN = 120.0


def counted(jobset: dict[str, Any]) -> int:
    """The most Jobs any count of the JobSet's status gives one replicated job."""
    statuses = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    return max((int(s.get(count) or 0) for s in statuses for count in COUNTS), default=0)


def overcounted(events: list[dict[str, Any]], uid: str, owned: int) -> list[str]:
    """The versions of JobSet `uid` among `events` that count more Jobs than `owned`."""
    return [
        f"{e['type']} at resourceVersion {o['metadata']['resourceVersion']}: "
        f"replicatedJobsStatus {o['status']['replicatedJobsStatus']}"
        for e in events
        if (o := e["object"])["metadata"]["uid"] == uid and counted(o) > owned
    ]


def owned_by(view, trainjob: str, uid: str) -> list[dict[str, Any]]:
    return [
        job
        for job in jobs_of(view, trainjob)
        if any(ref["uid"] == uid for ref in job["metadata"].get("ownerReferences") or [])
    ]


@pytest.mark.policy("JS-OWNED-001")
def test_a_jobset_created_again_under_its_name_counts_only_its_own_jobs(
    trainjob_view, trainjob_policy, training_runtime
):
    view = trainjob_view
    view.create_trainjob("again", runtime=training_runtime(hold=True), num_nodes=1)
    # Counted by its JobSet first: a JobSet that took it for its own would count it too.
    wait_jobset_active(view, "again")
    (held,) = wait_jobs(view, "again", 1)
    held_name = held["metadata"]["name"]
    keep_when_deleted(view, JOB, held_name)

    since = resource_version(view, JOBSET)
    old_uid = delete_jobset(view, "again")
    # The garbage collector deletes it once it watches JobSets, which it finds by
    # rediscovering the API every 30 s: on a cluster whose JobSet CRD is new, up to
    # that long after the JobSet went (seen: this test took 45 s on a fresh embedded
    # cluster, 4.5 s on one up for a minute).
    view.wait(
        f"Job {held_name} to be Terminating, held by the test's finalizer",
        lambda: bool(view.get(JOB, held_name)["metadata"].get("deletionTimestamp")),
        timeout=GARBAGE_COLLECTED_WITHIN,
    )
    uid = wait_jobset_replaced(view, "again", old_uid)["metadata"]["uid"]
    trainjob_policy.gap_exercised(
        f"the Trainer created JobSet again anew (uid {uid}) while Job {held_name} of the "
        f"deleted one (uid {old_uid}) is held, under the name the new one's Job would take"
    )

    def creation_failed():
        query = urllib.parse.urlencode(
            {"fieldSelector": f"involvedObject.uid={uid},reason={CREATION_FAILED}"}
        )
        return view.kube.raw("GET", f"/api/v1/namespaces/{view.namespace}/events?{query}")["items"]

    def answered():
        # Its controller has looked at it: it counted the held Job as its own, or
        # tried to create its own Job under the name the held one takes.
        if (view.get(JOBSET, "again").get("status") or {}).get("replicatedJobsStatus"):
            return True
        return bool(creation_failed()) or NotYet(
            f"no status of JobSet again and no {CREATION_FAILED} event"
        )

    with trainjob_policy.holds():
        view.wait("the JobSet controller to act on the new JobSet again", answered)
        # In kubectl's terms (what a reproduction reads): a JobSet that does not take
        # the held Job for its own tries to create its own under that name.
        view.record_observation(
            f"the JobSet named by a {CREATION_FAILED} event (one that tried to create its "
            f"own Job while Job {held_name} of the deleted JobSet took the name)",
            EVENT,
            jsonpath=f'{{.items[?(@.reason=="{CREATION_FAILED}")].involvedObject.name}}',
            expected="again",
            observed="again" if creation_failed() else "",
            within=30,
        )
        # While the held Job takes its name, the new JobSet owns no Job.
        assert owned_by(view, "again", uid) == [], "the new JobSet again owns a Job already"
        still = view.get(JOB, held_name)["metadata"]["ownerReferences"]
        assert [ref["uid"] for ref in still] == [old_uid], f"Job {held_name}'s owners: {still}"
        while_held = replay(view, JOBSET, since, field_selector=named("again"))
        wrong = overcounted(while_held, uid, owned=0)
        assert not wrong, (
            f"JobSet again counts Job {held_name} of the deleted JobSet as its own: {wrong}"
        )

        # Once the held Job goes, the new JobSet makes its own and counts that one.
        let_go(view, JOB, held_name)
        view.wait("the new JobSet again's own Job", lambda: owned_by(view, "again", uid) or None)
        view.wait(
            "JobSet again to count its own Job",
            lambda: counted(view.get(JOBSET, "again")) > 0 or None,
        )
        after = replay(
            view, JOBSET, while_held[-1]["object"]["metadata"]["resourceVersion"]
            if while_held else since, field_selector=named("again"),
        )  # fmt: skip
        wrong = overcounted(after, uid, owned=1)
        assert not wrong, f"JobSet again counts more Jobs than its one: {wrong}"
