"""The kinds the harness reads and writes, in one typed registry.

A `Kind` unpacks as `(api_version, kind)`, so `kube.get(*TRAINJOB, ...)`
reads as it always has; the served versions live here and nowhere else.

Kueue's kinds name their group and `served`: Kueue v0.15+ serves v1beta2 (and
v1beta1), v0.14 only v1beta1, so the version is the newest of `KNOWN_VERSIONS`
that the live cluster serves, resolved by `Kube.served_version`, as the
override field is read from the live TrainJob CRD.
"""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    api_version: str
    kind: str

    def __str__(self) -> str:
        return self.kind


SERVED = "served"
KUEUE_GROUP = "kueue.x-k8s.io"
# The versions of a group whose fields the harness knows, newest first.
KNOWN_VERSIONS: dict[str, tuple[str, ...]] = {KUEUE_GROUP: ("v1beta2", "v1beta1")}

TRAINJOB = Kind("trainer.kubeflow.org/v1alpha1", "TrainJob")
CLUSTER_TRAINING_RUNTIME = Kind("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")
TRAINING_RUNTIME = Kind("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
JOBSET = Kind("jobset.x-k8s.io/v1alpha2", "JobSet")
JOB = Kind("batch/v1", "Job")
# The previous generation (training-operator v1).
PYTORCHJOB = Kind("kubeflow.org/v1", "PyTorchJob")
SERVICE = Kind("v1", "Service")
POD = Kind("v1", "Pod")
NODE = Kind("v1", "Node")
NAMESPACE = Kind("v1", "Namespace")
EVENT = Kind("v1", "Event")
WORKLOAD = Kind(f"{KUEUE_GROUP}/{SERVED}", "Workload")
LOCAL_QUEUE = Kind(f"{KUEUE_GROUP}/{SERVED}", "LocalQueue")
CLUSTER_QUEUE = Kind(f"{KUEUE_GROUP}/{SERVED}", "ClusterQueue")
ADMISSION_CHECK = Kind(f"{KUEUE_GROUP}/{SERVED}", "AdmissionCheck")
MULTIKUEUE_CLUSTER = Kind(f"{KUEUE_GROUP}/{SERVED}", "MultiKueueCluster")
RESOURCE_FLAVOR = Kind(f"{KUEUE_GROUP}/{SERVED}", "ResourceFlavor")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
VALIDATING_WEBHOOKS = Kind("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
MUTATING_WEBHOOKS = Kind("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
VALIDATING_POLICY_BINDING = Kind(
    "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"
)
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding")
SUBJECT_ACCESS_REVIEW = Kind("authorization.k8s.io/v1", "SubjectAccessReview")

# What a policy's namespace holds, in the order a reader follows a TrainJob.
TRAINJOB_CHAIN: tuple[Kind, ...] = (TRAINJOB, JOBSET, JOB, POD, WORKLOAD)
