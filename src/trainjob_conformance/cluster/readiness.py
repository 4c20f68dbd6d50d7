"""The stack is ready when each webhook has answered a real admission request.

A port that accepts connections proves little; a server-side dry-run goes
through every matching webhook (failurePolicy Fail), and the negative probe
proves the Trainer's validator is registered and judging, not merely reachable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainjob_conformance.cluster.manifests import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.phases import PhaseClock
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import RESOURCE_FLAVOR
from trainjob_conformance.kube.waits import POLL_INTERVAL, WaitTimeout, wait_for

PROBE_NAMESPACE = "default"
# Kueue's TrainJob webhook would also deny a missing runtime, and the API
# server reports whichever validating webhook answers first; the negative probe
# runs where Kueue does not look, so only the Trainer can answer it.
UNMANAGED_PROBE_NAMESPACE = "trainjob-conformance-probe"
MISSING_RUNTIME = "trainjob-conformance-no-such-runtime"
TRAINER_VALIDATOR = "validator.trainjob.trainer.kubeflow.org"
TORCH_RUNTIME = "torch-distributed"


@dataclass(frozen=True)
class AdmissionProbe:
    description: str
    manifest: dict[str, Any]
    denied_by: str | None = None  # None: the request must be allowed


def _container() -> dict[str, Any]:
    return {"name": "probe", "image": "registry.k8s.io/pause:3.10"}


def _trainjob(runtime: str, namespace: str = PROBE_NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "readiness-probe", "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime}},
    }


def standard_probes() -> list[AdmissionProbe]:
    pod_template = {"spec": {"restartPolicy": "Never", "containers": [_container()]}}
    return [
        AdmissionProbe(
            "Kueue ResourceFlavor webhooks",
            {
                "apiVersion": RESOURCE_FLAVOR.api_version,
                "kind": "ResourceFlavor",
                "metadata": {"name": "readiness-probe"},
            },
        ),
        AdmissionProbe(
            "Kueue batch/Job webhooks",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "readiness-probe", "namespace": PROBE_NAMESPACE},
                "spec": {"suspend": True, "template": pod_template},
            },
        ),
        AdmissionProbe(
            "JobSet and Kueue JobSet webhooks",
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "readiness-probe", "namespace": PROBE_NAMESPACE},
                "spec": {
                    "suspend": True,
                    "replicatedJobs": [
                        {"name": "probe", "template": {"spec": {"template": pod_template}}}
                    ],
                },
            },
        ),
        AdmissionProbe("Trainer and Kueue TrainJob webhooks", _trainjob(TORCH_RUNTIME)),
        AdmissionProbe(
            "Trainer TrainJob validator (negative)",
            _trainjob(MISSING_RUNTIME, UNMANAGED_PROBE_NAMESPACE),
            denied_by=TRAINER_VALIDATOR,
        ),
    ]


PYTORCHJOB_VALIDATOR = "validator.pytorchjob.training-operator.kubeflow.org"


def training_operator_probes() -> list[AdmissionProbe]:
    """The training-operator's PyTorchJob validator, judging: an unknown managedBy is denied."""
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "readiness-probe", "namespace": UNMANAGED_PROBE_NAMESPACE},
        "spec": {
            "runPolicy": {"managedBy": "trainjob-conformance.kubeflow.org/no-such-manager"},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{**_container(), "name": "pytorch"}]}},
                }
            },
        },
    }
    return [
        AdmissionProbe(
            "training-operator PyTorchJob validator (negative)", job, denied_by=PYTORCHJOB_VALIDATOR
        )
    ]


def _answered(kube: Kube, probe: AdmissionProbe) -> tuple[bool, str]:
    try:
        kube.create(probe.manifest, dry_run=True)
    except ApiError as error:
        if probe.denied_by and probe.denied_by in error.message:
            return True, error.message
        return False, repr(error)
    if probe.denied_by:
        return False, f"allowed, but {probe.denied_by} should have denied it"
    return True, "allowed"


def probe_namespace_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": UNMANAGED_PROBE_NAMESPACE, "labels": {KUEUE_MANAGED_LABEL: "false"}},
    }


def wait_for_admission(
    kube: Kube,
    probes: list[AdmissionProbe],
    timeout: float,
    log_tails: Callable[[], str],
    phases: PhaseClock | None = None,
    interval: float = POLL_INTERVAL,
) -> None:
    kube.apply(probe_namespace_manifest())
    for probe in probes:
        last = {"answer": ""}
        started = phases.now() if phases else 0.0

        def check(probe: AdmissionProbe = probe, last: dict[str, str] = last) -> bool:
            ok, answer = _answered(kube, probe)
            last["answer"] = answer
            return ok

        try:
            wait_for(
                f"{probe.description} to answer a dry-run request",
                check,
                timeout=timeout,
                interval=interval,
            )
        except WaitTimeout:
            raise ConformanceError(
                f"{probe.description} did not answer an admission request within {timeout:.0f}s; "
                f"last answer: {last['answer']}\n{log_tails()}"
            ) from None
        if phases is not None:
            phases.record(f"admission: {probe.description}", started)
