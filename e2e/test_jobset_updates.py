"""What JobSet's own webhook lets change in a stored JobSet (a policy from upstream's
fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import copy

import pytest

from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.cluster.introspect import mutating_webhook
from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.history import named, replay, versions_where
from trainjob_conformance.policies.jobsets import plain_jobset, wait_jobset


@pytest.mark.policy("JS-EDIT-001")
def test_the_replicated_jobs_of_a_stored_jobset_cannot_change(trainjob_view, trainjob_policy):
    view = trainjob_view
    created = view.create(plain_jobset("fixed-set", view.namespace, HOLD_IMAGE))
    more = copy.deepcopy(created["spec"]["replicatedJobs"])
    more[0]["replicas"] = 2

    with trainjob_policy.holds():
        refused = rejection_of(
            lambda: view.kube.patch(
                *JOBSET,
                name="fixed-set",
                namespace=view.namespace,
                body={"spec": {"replicatedJobs": more}},
            )
        )
        assert "spec.replicatedJobs" in refused.message, refused
        assert "immutable" in refused.message, refused
        wanted = trainjob_policy.expected("status")
        assert refused.status == wanted, (
            f"refused with status {refused.status}, the policy says {wanted}: {refused.message}"
        )
        stored = view.get(JOBSET, "fixed-set")["spec"]["replicatedJobs"][0]["replicas"]
        assert stored == 1, f"JobSet fixed-set now has {stored} replicas of its job"


# JobSet's defaulting webhook. Registered for UPDATE too, it rewrote a JobSet that a
# controller had just patched, the controller patched it back, and so on for ever
# (kubernetes-sigs/jobset#926).
JOBSET_DEFAULTER = "mjobset.kb.io"
# A controller and a webhook that fight over an object write it many times a second;
# a JobSet that settles is not written at all once built.
QUIET_SECONDS = 10


@pytest.mark.policy("JS-SETTLE-001")
def test_the_jobset_of_a_suspended_trainjob_settles(trainjob_view, training_runtime):
    view = trainjob_view
    view.create_trainjob("settled", runtime=training_runtime(), suspend=True)
    jobset = wait_jobset(view, "settled")
    generation = jobset["metadata"]["generation"]

    # The Trainer applies the JobSet of a suspended TrainJob on every reconcile, and a
    # change of the JobSet is a reason to reconcile: watched for the whole interval.
    events = replay(
        view,
        JOBSET,
        jobset["metadata"]["resourceVersion"],
        field_selector=named("settled"),
        seconds=QUIET_SECONDS,
    )
    rewritten = versions_where(
        events,
        "its spec written again",
        lambda found: found["metadata"].get("generation") != generation,
    )
    last = events[-1]["object"]["metadata"] if events else jobset["metadata"]
    view.record_observation(
        f"the generation of JobSet settled {QUIET_SECONDS} s after it was built",
        JOBSET,
        name="settled",
        jsonpath="{.metadata.generation}",
        expected=str(generation),
        observed=str(last.get("generation")),
        within=QUIET_SECONDS,
    )
    assert not rewritten, (
        f"JobSet settled was written {len(rewritten)} times in {QUIET_SECONDS} s while "
        f"nothing changed its TrainJob (generation {generation} -> {last.get('generation')}); "
        f"first: {rewritten[0]}"
    )
    registered = mutating_webhook(view.kube, JOBSET_DEFAULTER)
    if registered is not None:
        configuration, webhook = registered
        operations = sorted(
            {op for rule in webhook.get("rules") or [] for op in rule.get("operations") or []}
        )
        assert operations == ["CREATE"], (
            f"{JOBSET_DEFAULTER} ({configuration}) is registered for {operations}: defaulting "
            "a JobSet on UPDATE rewrites what a controller just patched"
        )
