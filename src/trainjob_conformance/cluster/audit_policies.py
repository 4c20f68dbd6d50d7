"""Audit policies an API server the harness starts keeps, whatever the provider."""

from __future__ import annotations

# For `upgrade`: every write of the custom resources whose watch the upgrade's
# window keeps, with the object stored (RequestResponse), and nothing else. A
# watch of a custom resource ends when its CRD is replaced; these writes are every
# version stored meanwhile (upgrade/audit_window.py).
WINDOW_AUDIT_RESOURCES = (
    ("trainer.kubeflow.org", "trainjobs"),
    ("jobset.x-k8s.io", "jobsets"),
    ("kueue.x-k8s.io", "workloads"),
    ("kubeflow.org", "pytorchjobs"),
)
WINDOW_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {
            "level": "RequestResponse",
            "resources": [
                {"group": group, "resources": [resource, f"{resource}/status"]}
                for group, resource in WINDOW_AUDIT_RESOURCES
            ],
        },
        {"level": "None"},
    ],
}
