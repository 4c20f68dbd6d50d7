"""Pods of a TrainJob: gates, scheduling, the hold, running, and their history."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from trainjob_conformance.cluster.hold import HOLD_ANNOTATION
from trainjob_conformance.kube.errors import watch_error
from trainjob_conformance.kube.kinds import POD
from trainjob_conformance.kube.waits import NotYet, WaitTimeout
from trainjob_conformance.policies.finalizers import keep_when_deleted, let_go
from trainjob_conformance.policies.jobsets import wait_jobset_active
from trainjob_conformance.policies.view import (
    DEFAULT_TIMEOUT,
    JOBSET_NAME_LABEL,
    TrainJobView,
    condition,
)

_WATCH_ROUND_SECONDS = 2
Pod = dict[str, Any]


def pods_of(view: TrainJobView, trainjob: str) -> list[Pod]:
    return view.of_trainjob(POD, trainjob)


def gate_names(pod_spec: dict[str, Any]) -> list[str]:
    return sorted(gate["name"] for gate in pod_spec.get("schedulingGates") or [])


def is_scheduling_gated(pod: Pod) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return bool(
        scheduled
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "SchedulingGated"
    )


def _phases(pods: list[Pod]) -> str:
    return ", ".join(
        f"{p['metadata']['name']} {(p.get('status') or {}).get('phase', '?')}" for p in pods
    )


def _selector(trainjob: str) -> str:
    return f"{JOBSET_NAME_LABEL}={trainjob}"


# kubectl's jsonpath for the gates of every Pod a selector finds, in one line.
POD_GATES_JSONPATH = "{.items[*].spec.schedulingGates[*].name}"


def record_pod_gates(view: TrainJobView, trainjob: str, pods: list[Pod], expected: str) -> None:
    """Note what a gate policy judges of the Pods, as `kubectl get -o jsonpath` prints it."""
    seen = " ".join(
        gate["name"] for pod in pods for gate in pod["spec"].get("schedulingGates") or []
    )
    view.record_observation(
        f"the scheduling gates of the Pods of TrainJob {trainjob}",
        POD,
        selector=_selector(trainjob),
        jsonpath=POD_GATES_JSONPATH,
        expected=expected,
        observed=seen,
    )


def record_pod_label(
    view: TrainJobView,
    trainjob: str,
    history: dict[str, list[Pod]],
    label: str,
    expected: str,
) -> None:
    """Note what a policy judges of a label on the Pods (their latest versions), as
    `kubectl get -o jsonpath` prints it: the values, in the order of the Pods' names."""
    latest = [versions[-1] for _, versions in sorted(history.items())]
    seen = " ".join(
        (pod["metadata"].get("labels") or {})[label]
        for pod in latest
        if label in (pod["metadata"].get("labels") or {})
    )
    escaped = label.replace(".", "\\.")
    view.record_observation(
        f"the {label} label of the Pods of TrainJob {trainjob}",
        POD,
        selector=_selector(trainjob),
        jsonpath=f"{{.items[*].metadata.labels.{escaped}}}",
        expected=expected,
        observed=seen,
    )


def _record_pods_wait(
    view: TrainJobView, trainjob: str, what: str, jsonpath: str, **match: object
) -> None:
    """The record's note of a wait on the Pods of `trainjob`, in kubectl's terms."""
    view.record_wait(what, POD, selector=_selector(trainjob), jsonpath=jsonpath, **match)


def wait_pods(
    view: TrainJobView, trainjob: str, count: int, timeout: float = DEFAULT_TIMEOUT
) -> list[Pod]:
    _record_pods_wait(
        view,
        trainjob,
        f"{count} Pods of TrainJob {trainjob}",
        "{.items[*].metadata.name}",
        count=count,
    )

    def probe() -> list[Pod] | NotYet:
        pods = pods_of(view, trainjob)
        return pods if len(pods) == count else NotYet(f"{len(pods)} of {count} Pods")

    return view.wait(f"{count} Pods of TrainJob {trainjob}", probe, timeout)


def wait_bound_to(view: TrainJobView, trainjob: str, count: int, node: str) -> list[Pod]:
    """The TrainJob's `count` Pods once each is bound to `node`."""

    def probe() -> list[Pod] | NotYet:
        pods = pods_of(view, trainjob)
        where = {p["metadata"]["name"]: p["spec"].get("nodeName") or "unbound" for p in pods}
        done = len(pods) == count and set(where.values()) == {node}
        return pods if done else NotYet(f"Pods and their nodes: {where or 'none'}")

    return view.wait(f"the {count} Pods of TrainJob {trainjob} bound to {node}", probe)


def wait_scheduling_gated(view: TrainJobView, trainjob: str, count: int) -> list[Pod]:
    """`count` Pods that kube-scheduler reports as SchedulingGated."""

    def probe() -> list[Pod] | NotYet:
        pods = pods_of(view, trainjob)
        gated = [p for p in pods if is_scheduling_gated(p)]
        if len(pods) == count and len(gated) == count:
            return pods
        return NotYet(f"{len(gated)} of {count} Pods SchedulingGated ({_phases(pods)})")

    return view.wait(f"{count} Pods of {trainjob} reported SchedulingGated", probe)


def patch_pod(view: TrainJobView, name: str, body: dict[str, Any]) -> Pod:
    return view.kube.patch(*POD, name=name, namespace=view.namespace, body=body)


def release_held_pods(view: TrainJobView, trainjob: str) -> None:
    """Let the held Pods finish: their container (or the fake node) waits for this."""
    for pod in pods_of(view, trainjob):
        body = {"metadata": {"annotations": {HOLD_ANNOTATION: None}}}
        patch_pod(view, pod["metadata"]["name"], body)


def keep_terminating(view: TrainJobView, pods: list[Pod]) -> None:
    """Once deleted, these Pods stay Terminating until `release_terminating`."""
    for pod in pods:
        keep_when_deleted(view, POD, pod["metadata"]["name"])


def release_terminating(view: TrainJobView, pods: list[Pod]) -> None:
    for pod in pods:
        let_go(view, POD, pod["metadata"]["name"])


def wait_terminating(view: TrainJobView, trainjob: str, count: int) -> list[Pod]:
    """`count` Pods deleted but still present: Terminating."""

    _record_pods_wait(
        view,
        trainjob,
        f"{count} Terminating Pods of TrainJob {trainjob}",
        "{.items[?(@.metadata.deletionTimestamp)].metadata.name}",
        count=count,
    )

    def probe() -> list[Pod] | NotYet:
        pods = pods_of(view, trainjob)
        terminating = [p for p in pods if p["metadata"].get("deletionTimestamp")]
        if len(terminating) == count:
            return terminating
        return NotYet(f"{len(terminating)} of {count} Pods Terminating ({_phases(pods)})")

    return view.wait(f"{count} Terminating Pods of TrainJob {trainjob}", probe)


def wait_pods_gone(view: TrainJobView, trainjob: str) -> None:
    _record_pods_wait(
        view,
        trainjob,
        f"the Pods of TrainJob {trainjob} to be gone",
        "{.items[*].metadata.name}",
        count=0,
    )

    def probe() -> bool | NotYet:
        pods = pods_of(view, trainjob)
        return True if not pods else NotYet(f"Pods left: {_phases(pods)}")

    view.wait(f"the Pods of TrainJob {trainjob} to be gone", probe)


def wait_running(view: TrainJobView, trainjob: str, count: int) -> list[Pod]:
    """`count` Pods Running and the JobSet reporting them active."""
    _record_pods_wait(
        view,
        trainjob,
        f"{count} Running Pods of TrainJob {trainjob}",
        "{.items[*].status.phase}",
        equals=" ".join(["Running"] * count),
    )

    def probe() -> list[Pod] | NotYet:
        pods = pods_of(view, trainjob)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        if len(running) == count and len(pods) == count:
            return pods
        return NotYet(f"{len(running)} of {count} Pods Running ({_phases(pods)})")

    pods = view.wait(f"{count} Running Pods of TrainJob {trainjob}", probe)
    wait_jobset_active(view, trainjob)
    return pods


def pods_resource_version(view: TrainJobView) -> str:
    """A point in time to watch Pods from, taken before creating what makes them."""
    return str(view.kube.list_object(*POD, namespace=view.namespace)["metadata"]["resourceVersion"])


def watch_pods(
    view: TrainJobView,
    trainjob: str,
    since: str,
    until: Callable[[dict[str, list[Pod]]], bool],
    description: str,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, list[Pod]]:
    """Every version of the TrainJob's Pods since `since`, in order, until `until` holds.

    A watch sees each intermediate state, so a test can assert the order in
    which things happened, not only where they ended.
    """
    __tracebackhide__ = True
    history: dict[str, list[Pod]] = {}
    deadline = time.monotonic() + timeout
    selector = urllib.parse.urlencode({"labelSelector": f"{JOBSET_NAME_LABEL}={trainjob}"})
    while (remaining := deadline - time.monotonic()) > 0:
        view.cluster.health.raise_if_broken()
        path = f"/api/v1/namespaces/{view.namespace}/pods?{selector}&resourceVersion={since}"
        # Short rounds, so a broken stack ends the watch early.
        for event in view.kube.raw_watch(path, max(1, min(_WATCH_ROUND_SECONDS, int(remaining)))):
            error = watch_error(event)
            if error is not None:
                raise error
            pod = event["object"]
            since = pod["metadata"]["resourceVersion"]
            history.setdefault(pod["metadata"]["name"], []).append(pod)
            if until(history):
                return history
    seen = {name: len(versions) for name, versions in history.items()}
    raise WaitTimeout(
        f"timed out after {timeout:.0f}s watching for {description}\n"
        f"Pod versions seen: {seen}\n{view.diagnostics()}"
    )
