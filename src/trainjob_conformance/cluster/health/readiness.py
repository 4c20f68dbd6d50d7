"""The stack is ready when each webhook has answered a real admission request.

A port that accepts connections proves little; a server-side dry-run goes
through every matching webhook (failurePolicy Fail), and the negative probe
proves the Trainer's validator is registered and judging, not merely reachable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainjob_conformance.cluster.health.phases import PhaseClock
from trainjob_conformance.cluster.introspect import TRAINER_VALIDATOR
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import CRD, RESOURCE_FLAVOR
from trainjob_conformance.kube.timestamps import parse_time
from trainjob_conformance.kube.waits import POLL_INTERVAL, NotYet, WaitTimeout, wait_for

PROBE_NAMESPACE = "default"
# Kueue's TrainJob webhook would also deny a missing runtime, and the API
# server reports whichever validating webhook answers first; the negative probe
# runs where Kueue does not look, so only the Trainer can answer it.
UNMANAGED_PROBE_NAMESPACE = "trainjob-conformance-probe"
MISSING_RUNTIME = "trainjob-conformance-no-such-runtime"
TORCH_RUNTIME = "torch-distributed"
# kube-apiserver holds a create of a custom resource for 2 s when the kind's
# CRD became Established less than 2 s before, by the condition's
# lastTransitionTime, which is in whole seconds (apiextensions-apiserver,
# customresource_handler.go, "justCreated": so that another API server of an
# HA pair has seen the CRD too). A probe sent in that window cost the start
# 2.0 s in most bench runs; waiting out the window costs only what is left of it.
CREATE_HOLD = 2.0


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


def stack_probes(components: Iterable[str]) -> list[AdmissionProbe]:
    """The probes of a stack running these components (the training-operator's where it runs)."""
    probes = standard_probes()
    if "training-operator" in components:
        probes += training_operator_probes()
    return probes


def answered(kube: Kube, probe: AdmissionProbe) -> tuple[bool, str]:
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
            ok, answer = answered(kube, probe)
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


def _established_at(kube: Kube, manifest: dict[str, Any]) -> float | None:
    """When the API server says the manifest's CRD became Established; None for a built-in kind."""
    try:
        resource = kube.resource(manifest["apiVersion"], manifest["kind"])
        crd = kube.get(*CRD, name=f"{resource.name}.{resource.group}")
    except ApiError:
        return None  # a built-in kind (no CRD of that name), or not served
    condition = established_condition(crd)
    if condition is None:
        return None
    parsed = parse_time(condition.get("lastTransitionTime") or "")
    return parsed[0] if parsed else None


def established_condition(crd: dict[str, Any]) -> dict[str, Any] | None:
    """The CRD's Established condition, if the API server has set it True."""
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Established" and condition.get("status") == "True":
            return condition
    return None


def wait_past_create_hold(
    kube: Kube, probes: list[AdmissionProbe], interval: float = POLL_INTERVAL
) -> None:
    """Wait until no probe's create would be held by the API server (see CREATE_HOLD).

    Only where the harness and the API server share a clock: the embedded cluster.
    """
    moments = [at for probe in probes if (at := _established_at(kube, probe.manifest))]
    if not moments:
        return
    served_from = max(moments) + CREATE_HOLD

    def past() -> bool | NotYet:
        left = served_from - time.time()
        return left <= 0 or NotYet(f"{left:.2f} s of the API server's create hold left")

    wait_for(
        "the probed kinds' CRDs to be Established for 2 s",
        past,
        timeout=CREATE_HOLD + 1,
        interval=interval,
    )
