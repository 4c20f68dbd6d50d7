"""What JobSet's own webhook lets change in a stored JobSet (a policy from upstream's
fixes, docs/upstream-fixes.md)."""

from __future__ import annotations

import copy

import pytest

from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.kube.kinds import JOBSET
from trainjob_conformance.policies.admission import rejection_of
from trainjob_conformance.policies.jobsets import plain_jobset


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
