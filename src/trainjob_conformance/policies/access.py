"""Who may do what: a RoleBinding of the test's namespace, and the API server's own
answer to "may this user do that here" (a SubjectAccessReview, as `kubectl auth
can-i --as` asks it)."""

from __future__ import annotations

from trainjob_conformance.kube.kinds import ROLE_BINDING, SUBJECT_ACCESS_REVIEW
from trainjob_conformance.policies.view import TrainJobView


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def bind_cluster_role(view: TrainJobView, name: str, cluster_role: str, account: str) -> None:
    """RoleBinding `name` in the test's namespace: ServiceAccount `account` of that
    namespace gets `cluster_role` there (the account need not exist for a review)."""
    view.create(
        {
            "apiVersion": ROLE_BINDING.api_version,
            "kind": ROLE_BINDING.kind,
            "metadata": {"name": name, "namespace": view.namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": view.namespace}],
        }
    )


def may(view: TrainJobView, user: str, verb: str, group: str, resource: str) -> bool:
    """The API server's answer for `user` (a ServiceAccount's name, with the groups
    every ServiceAccount of the namespace has) doing `verb` on `resource` here."""
    namespace = user.split(":")[2]
    review = view.kube.create(
        {
            "apiVersion": SUBJECT_ACCESS_REVIEW.api_version,
            "kind": SUBJECT_ACCESS_REVIEW.kind,
            "metadata": {},
            "spec": {
                "user": user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "namespace": view.namespace,
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                },
            },
        }
    )
    return bool((review.get("status") or {}).get("allowed"))
