"""What Kueue's user-facing roles allow (a policy from upstream's fixes,
docs/upstream-fixes.md): the person a platform team gives Kueue's batch-user role
can run TrainJobs."""

from __future__ import annotations

import pytest

from trainjob_conformance.kube.conflicts import until_no_conflict
from trainjob_conformance.kube.errors import Rejected
from trainjob_conformance.kube.kinds import CLUSTER_ROLE, TRAINJOB
from trainjob_conformance.policies.access import bind_cluster_role, may, service_account_user

BATCH_USER_ROLE = "kueue-batch-user-role"


def _update_as(view, kube, name: str) -> None:
    """An update (PUT) of TrainJob `name` sent through `kube`: a label added. The
    Trainer writes the new TrainJob's status meanwhile, so a version read a moment
    before may be stale: read again and resend, a few times at most."""

    def write() -> None:
        stored = view.get(TRAINJOB, name)
        stored["metadata"].setdefault("labels", {})["example.com/owner"] = "user"
        kube.replace(stored)

    until_no_conflict(write, f"TrainJob {name}")


@pytest.mark.policy("KQ-RBAC-001")
def test_a_user_bound_to_kueues_batch_user_role_may_create_update_and_delete_trainjobs(
    trainjob_view, trainjob_policy, training_runtime
):
    view = trainjob_view
    if view.find(CLUSTER_ROLE, BATCH_USER_ROLE) is None:
        pytest.skip(
            f"needs Kueue's user roles (ClusterRole {BATCH_USER_ROLE}, as Kueue's release "
            "installs it); this cluster has none"
        )
    runtime = training_runtime()
    bind_cluster_role(view, "batch-user", BATCH_USER_ROLE, "user")
    user = service_account_user(view.namespace, "user")
    # The binding is in effect once the role's oldest grant, Jobs (every Kueue
    # release's batch-user role aggregates them), is allowed: RBAC reads bindings
    # and aggregated rules from caches that lag a create by a moment.
    with view.unrecorded():
        view.wait(
            f"{user} to be allowed to create Jobs through {BATCH_USER_ROLE}",
            lambda: may(view, user, "create", "batch", "jobs"),
            timeout=30,
        )
    trainjob_policy.gap_exercised(
        f"ServiceAccount user is bound to {BATCH_USER_ROLE} and may create Jobs through it"
    )

    kube = view.kube.impersonating(user)
    verb = "create"
    with trainjob_policy.holds():
        try:
            # Each request as the user, as `kubectl --as` sends it.
            kube.create(view.trainjob_manifest("theirs", runtime=runtime, suspend=True))
            verb = "update"
            _update_as(view, kube, "theirs")
            verb = "delete"
            kube.delete(*TRAINJOB, name="theirs", namespace=view.namespace)
        except Rejected as refused:
            raise AssertionError(
                f"{user}, bound to {BATCH_USER_ROLE}, may not {verb} a TrainJob: {refused.message}"
            ) from None
