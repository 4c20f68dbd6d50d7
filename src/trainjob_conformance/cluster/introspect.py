"""What a live cluster says about the stack installed on it."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube

TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"


def trainjob_spec_properties(kube: Kube) -> dict[str, Any]:
    """The `spec` properties of the served TrainJob version's schema."""
    try:
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", TRAINJOB_CRD)
    except ApiException as error:
        if error.status == 404:
            raise ConformanceError(
                f"the cluster has no {TRAINJOB_CRD} CRD: install Kubeflow Trainer v2 first"
            ) from None
        raise
    for version in crd["spec"]["versions"]:
        if version.get("served") and version.get("storage"):
            schema = version["schema"]["openAPIV3Schema"]
            return dict(schema["properties"]["spec"]["properties"])
    raise ConformanceError(f"{TRAINJOB_CRD} serves no storage version")
