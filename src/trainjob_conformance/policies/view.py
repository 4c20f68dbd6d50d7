"""What a policy test sees of its namespace, and how it waits on it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import watch

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.diagnostics import namespace_report
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import JOB, JOBSET, POD, TRAINJOB, Kind
from trainjob_conformance.kube.waits import WaitTimeout, wait_for
from trainjob_conformance.render.templates import TemplateSet

T = TypeVar("T")

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
DEFAULT_TIMEOUT = 60.0
_WATCH_ROUND_SECONDS = 2


class TrainJobView:
    """A test's namespace on one cluster, with waits that explain their failures."""

    def __init__(
        self, cluster: ClusterHandle, namespace: str, templates: TemplateSet | None = None
    ) -> None:
        self.cluster = cluster
        self.kube = cluster.kube
        self.namespace = namespace
        self.templates = templates

    def trainjob_manifest(self, name: str, **values: Any) -> dict[str, Any]:
        """A TrainJob in this namespace, from the `trainjob` template."""
        if self.templates is None:
            raise ConformanceError("this view has no templates to render a TrainJob from")
        return self.templates.render_one("trainjob", name=name, namespace=self.namespace, **values)

    def create_trainjob(self, name: str, **values: Any) -> dict[str, Any]:
        return self.create(self.trainjob_manifest(name, **values))

    def diagnostics(self) -> str:
        logs = {
            name: self.cluster.controller_log_tail(name, 25)
            for name in ("trainer", "jobset", "kueue")
        }
        return namespace_report(self.kube, self.namespace, logs)

    def wait(
        self, description: str, probe: Callable[[], T | None], timeout: float = DEFAULT_TIMEOUT
    ) -> T:
        __tracebackhide__ = True
        return wait_for(
            description,
            probe,
            timeout=timeout,
            diagnostics=self.diagnostics,
            retry_on=(NotFound,),
            abort=self.cluster.health.raise_if_broken,
        )

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.kube.create(manifest)

    def get(self, kind: Kind, name: str) -> dict[str, Any]:
        return self.kube.get(*kind, name=name, namespace=self.namespace)

    def find(self, kind: Kind, name: str) -> dict[str, Any] | None:
        try:
            return self.get(kind, name)
        except NotFound:
            return None

    def trainjob(self, name: str) -> dict[str, Any]:
        return self.get(TRAINJOB, name)

    def jobset(self, name: str) -> dict[str, Any]:
        return self.get(JOBSET, name)

    def jobs(self, trainjob: str) -> list[dict[str, Any]]:
        return self.kube.list(
            *JOB, namespace=self.namespace, label_selector=f"{JOBSET_NAME_LABEL}={trainjob}"
        )

    def pods(self, trainjob: str) -> list[dict[str, Any]]:
        return self.kube.list(
            *POD, namespace=self.namespace, label_selector=f"{JOBSET_NAME_LABEL}={trainjob}"
        )

    def wait_for_pods(
        self, trainjob: str, count: int, timeout: float = DEFAULT_TIMEOUT
    ) -> list[dict[str, Any]]:
        def probe() -> list[dict[str, Any]] | None:
            pods = self.pods(trainjob)
            return pods if len(pods) == count else None

        return self.wait(f"{count} Pods of TrainJob {trainjob}", probe, timeout)

    def wait_for_condition(
        self,
        kind: Kind,
        name: str,
        condition_type: str,
        status: str = "True",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            return obj if condition(obj, condition_type).get("status") == status else None

        description = f"{kind[1]} {name} condition {condition_type}={status}"
        return self.wait(description, probe, timeout)

    def pods_resource_version(self) -> str:
        """A point in time to watch Pods from, taken before creating what makes them."""
        return str(self.kube.core.list_namespaced_pod(self.namespace).metadata.resource_version)

    def watch_pods(
        self,
        trainjob: str,
        since: str,
        until: Callable[[dict[str, list[dict[str, Any]]]], bool],
        description: str,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[str, list[dict[str, Any]]]:
        """Every version of the TrainJob's Pods since `since`, in order, until `until` holds.

        A watch sees each intermediate state, so a test can assert the order in
        which things happened, not only where they ended.
        """
        __tracebackhide__ = True
        history: dict[str, list[dict[str, Any]]] = {}
        deadline = time.monotonic() + timeout
        stream = watch.Watch()
        while (remaining := deadline - time.monotonic()) > 0:
            self.cluster.health.raise_if_broken()
            for event in stream.stream(
                self.kube.core.list_namespaced_pod,
                self.namespace,
                label_selector=f"{JOBSET_NAME_LABEL}={trainjob}",
                resource_version=since,
                # Short rounds, so a broken stack ends the watch early.
                timeout_seconds=max(1, min(_WATCH_ROUND_SECONDS, int(remaining))),
            ):
                pod = self.kube.api_client.sanitize_for_serialization(event["object"])
                since = pod["metadata"]["resourceVersion"]
                history.setdefault(pod["metadata"]["name"], []).append(pod)
                if until(history):
                    stream.stop()
                    return history
        seen = {name: len(versions) for name, versions in history.items()}
        raise WaitTimeout(
            f"timed out after {timeout:.0f}s watching for {description}\n"
            f"Pod versions seen: {seen}\n{self.diagnostics()}"
        )


def condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    """The status condition of that type, or {} when there is none."""
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == condition_type:
            return dict(entry)
    return {}
