"""The kinds the harness reads and writes, in one typed registry.

A `Kind` unpacks as `(api_version, kind)`, so `kube.get(*TRAINJOB, ...)`
reads as it always has; the served versions live here and nowhere else.
"""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    api_version: str
    kind: str

    def __str__(self) -> str:
        return self.kind


TRAINJOB = Kind("trainer.kubeflow.org/v1alpha1", "TrainJob")
CLUSTER_TRAINING_RUNTIME = Kind("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")
JOBSET = Kind("jobset.x-k8s.io/v1alpha2", "JobSet")
JOB = Kind("batch/v1", "Job")
POD = Kind("v1", "Pod")
NODE = Kind("v1", "Node")
NAMESPACE = Kind("v1", "Namespace")
WORKLOAD = Kind("kueue.x-k8s.io/v1beta2", "Workload")
LOCAL_QUEUE = Kind("kueue.x-k8s.io/v1beta2", "LocalQueue")
CLUSTER_QUEUE = Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue")
ADMISSION_CHECK = Kind("kueue.x-k8s.io/v1beta2", "AdmissionCheck")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")

# What a policy's namespace holds, in the order a reader follows a TrainJob.
TRAINJOB_CHAIN: tuple[Kind, ...] = (TRAINJOB, JOBSET, JOB, POD, WORKLOAD)
