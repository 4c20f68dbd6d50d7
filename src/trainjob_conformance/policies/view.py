"""What a policy test sees of its namespace, and how it waits on it.

The view is generic: create (with cleanup), get, find, list, bounded waits
that print objects, events and controller logs on timeout. Steps and
observations that belong to one kind of object live in the module named
after it (trainjobs, jobsets, jobs, pods, workloads).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.cleanup import Cleanup
from trainjob_conformance.kube.diagnostics import namespace_report
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import Kind
from trainjob_conformance.kube.waits import NotYet, wait_for
from trainjob_conformance.render.templates import TemplateSet

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


class TrainJobView:
    """A test's namespace on one cluster, with waits that explain their failures."""

    def __init__(
        self,
        cluster: ClusterHandle,
        namespace: str,
        templates: TemplateSet | None = None,
        cleanup: Cleanup | None = None,
    ) -> None:
        self.cluster = cluster
        self.kube = cluster.kube
        self.namespace = namespace
        self.templates = templates
        self.cleanup = cleanup or Cleanup()
        # Views of the same namespace on other clusters the test drives (a
        # MultiKueue worker), by role: a timeout here prints what they held too,
        # since what the manager waits for is decided there.
        self.companions: dict[str, TrainJobView] = {}

    def on(self, cluster: ClusterHandle, role: str) -> TrainJobView:
        """The namespace of the same name on another cluster, sharing this test's cleanup;
        this view's diagnostics include it under `role`."""
        companion = TrainJobView(cluster, self.namespace, self.templates, self.cleanup)
        self.companions[role] = companion
        return companion

    def render(self, template: str, **values: Any) -> dict[str, Any]:
        if self.templates is None:
            raise ConformanceError(f"this view has no templates to render {template!r} from")
        return self.templates.render_one(template, **values)

    def trainjob_manifest(self, name: str, **values: Any) -> dict[str, Any]:
        """A TrainJob in this namespace, from the `trainjob` template."""
        return self.render("trainjob", name=name, namespace=self.namespace, **values)

    def create_trainjob(self, name: str, **values: Any) -> dict[str, Any]:
        return self.create(self.trainjob_manifest(name, **values))

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create; an object outside the namespace is deleted when the test ends."""
        created = self.kube.create(manifest)
        if manifest["metadata"].get("namespace") != self.namespace:
            self.cleanup.register(self.kube, manifest)
        return created

    def get(self, kind: Kind, name: str) -> dict[str, Any]:
        return self.kube.get(*kind, name=name, namespace=self.namespace)

    def find(self, kind: Kind, name: str) -> dict[str, Any] | None:
        try:
            return self.get(kind, name)
        except NotFound:
            return None

    def list(self, kind: Kind, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.kube.list(*kind, namespace=self.namespace, label_selector=label_selector)

    def of_trainjob(self, kind: Kind, trainjob: str) -> list[dict[str, Any]]:
        """The JobSet's children (Jobs, Pods) of one TrainJob, by JobSet's name label."""
        return self.list(kind, f"{JOBSET_NAME_LABEL}={trainjob}")

    def diagnostics(self) -> str:
        names = ["trainer", "jobset", "kueue"]
        if "training-operator" in self.cluster.versions:
            names.append("training-operator")
        logs = {name: self.cluster.controller_log_tail(name, 25) for name in names}
        report = namespace_report(self.kube, self.namespace, logs)
        for role, companion in self.companions.items():
            report += f"\n===== on the {role} =====\n" + companion.diagnostics()
        return report

    def record_wait(
        self,
        what: str,
        kind: Kind,
        *,
        name: str | None = None,
        selector: str | None = None,
        jsonpath: str | None = None,
        condition: str | None = None,
        dry_run_create: dict[str, Any] | None = None,
        **match: Any,
    ) -> None:
        """Note a wait in kubectl's terms, for a reproduction (see kube/record.py).

        The object is `name`, or the objects of a label `selector` (Pods and
        Jobs, whose names a controller generates). With neither `jsonpath`
        nor `condition` it is a wait for the object to exist. `match` is one
        of equals=TEXT, contains=WORD, count=N (words) or nonempty=True, on
        what `kubectl get -o jsonpath=...` prints (of `kubectl create
        --dry-run=server -f` of `dry_run_create`, a wait on a webhook's answer).
        """
        if self.kube.recorder is None:
            return
        self.kube.recorder.wait(
            what,
            **self._target(kind, name, selector),
            jsonpath=jsonpath,
            condition=condition,
            match=match,
            **({"dry_run_create": dry_run_create} if dry_run_create else {}),
        )

    def _target(self, kind: Kind, name: str | None, selector: str | None) -> dict[str, Any]:
        """What a recorded wait or observation is about, in this test's namespace."""
        return _target(
            self.kube.concrete(kind.api_version), kind.kind, self.namespace, name, selector
        )

    @contextlib.contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Requests that poll (a probe sent until its answer changes) stay out of the
        record; the caller notes the wait itself, in kubectl's terms."""
        recorder, self.kube.recorder = self.kube.recorder, None
        try:
            yield
        finally:
            self.kube.recorder = recorder

    @contextlib.contextmanager
    def unobserved(self) -> Iterator[None]:
        """Requests inside a policy's holds() that set the next observation up (a
        refusal lifted) rather than being judged: recorded, not observations."""
        if self.kube.recorder is None:
            yield
            return
        with self.kube.recorder.observing(False):
            yield

    def record_observation(
        self,
        what: str,
        kind: Kind,
        *,
        jsonpath: str,
        expected: str,
        observed: str,
        name: str | None = None,
        selector: str | None = None,
        within: float = 0,
        substring: bool = False,
    ) -> None:
        """Note what a policy judges, as kubectl prints it: the value the policy
        expects, and the value this run saw. `within`: the seconds the policy gives
        the cluster to show the expected value (a reproduction reads again until
        then); 0, the state the waits before it led to, read once. `substring`: the
        policy expects the value to contain `expected` (words in a message)."""
        if self.kube.recorder is None:
            return
        self.kube.recorder.observation(
            what,
            **self._target(kind, name, selector),
            jsonpath=jsonpath,
            expected=expected,
            observed=observed,
            **({"within": within} if within else {}),
            **({"substring": True} if substring else {}),
        )

    def wait(
        self,
        description: str,
        probe: Callable[[], T | NotYet | None],
        timeout: float = DEFAULT_TIMEOUT,
    ) -> T:
        """Poll until `probe` gives something truthy; a NotYet says why it has not."""
        __tracebackhide__ = True
        return wait_for(
            description,
            probe,
            timeout=timeout,
            diagnostics=self.diagnostics,
            retry_on=(NotFound,),
            abort=self.cluster.health.raise_if_broken,
        )

    def wait_for_condition(
        self,
        kind: Kind,
        name: str,
        condition_type: str,
        status: str = "True",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | NotYet:
            obj = self.get(kind, name)
            found = condition(obj, condition_type)
            if found.get("status") == status:
                return obj
            seen = f"{found.get('status')} ({found.get('reason')})" if found else "absent"
            return NotYet(f"{condition_type} is {seen}")

        description = f"{kind.kind} {name} condition {condition_type}={status}"
        self.record_wait(description, kind, name=name, condition=f"{condition_type}={status}")
        return self.wait(description, probe, timeout)


def _target(
    api_version: str, kind: str, namespace: str, name: str | None, selector: str | None
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "selector": selector,
    }


def condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    """The status condition of that type, or {} when there is none."""
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == condition_type:
            return dict(entry)
    return {}


def conditions_of(obj: dict[str, Any]) -> str:
    """The object's status conditions as `Type=Status (Reason)`, for a failure's message."""
    entries = (obj.get("status") or {}).get("conditions") or []
    listed = [f"{e.get('type')}={e.get('status')} ({e.get('reason')})" for e in entries]
    return ", ".join(listed) or "none"
