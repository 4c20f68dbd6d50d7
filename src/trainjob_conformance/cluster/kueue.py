"""Where Kueue runs and which namespaces it manages, for every provider.

The harness labels Trainer-only test namespaces (cluster/labels.py) and every
cluster it installs scopes Kueue away from them, as Kueue's Helm chart does:
the configuration's `managedJobsNamespaceSelector`, and the same selector on
the job integrations' webhooks. Without it Kueue's TrainJob webhook judges
those TrainJobs too, and the API server reports whichever validating webhook
denied first.
"""

from __future__ import annotations

from typing import Any

from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL

# Upstream's default namespace (config/default, the Helm chart's default).
KUEUE_NAMESPACE = "kueue-system"
KUEUE_API_GROUP = "kueue.x-k8s.io"
# The job frameworks Kueue integrates on every cluster the harness installs: those of
# the stack it runs. Kueue's config/default also enables Ray, MPI and AppWrapper,
# whose CRDs nothing here installs; MultiKueue then wants them on every worker
# (a worker without RayService's was refused: no matches for kind "RayService").
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
KUEUE_MANAGED_NAMESPACES: dict[str, Any] = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", KUEUE_NAMESPACE],
        },
        {"key": KUEUE_MANAGED_LABEL, "operator": "NotIn", "values": ["false"]},
    ]
}


def webhook_groups(webhook: dict[str, Any]) -> set[str]:
    return {group for rule in webhook.get("rules", []) for group in rule.get("apiGroups", [])}


def is_job_integration(webhook: dict[str, Any]) -> bool:
    """A Kueue webhook of a job integration (not of Kueue's own kinds): the ones the
    Helm chart scopes with managedJobsNamespaceSelector."""
    groups = webhook_groups(webhook)
    return bool(groups) and KUEUE_API_GROUP not in groups
