"""What an upgrade's bundle does around the upgrade, for each UP policy with a known gap:
the objects it creates on the old releases, what it waits for and remembers then,
and what it observes once the new releases run.

The objects are the ones `trainjob-conformance upgrade` puts in flight
(upgrade/inflight.py), rendered with the same templates for the old Trainer's
override field; the observations are the policy's statement in kubectl's terms.
Plain data: script.py writes it as bash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.workloads import condition_path
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.upgrade.inflight import (
    POD_CPU,
    QUEUE,
    SUSPENDED_OVERRIDES,
    UPGRADE_GATE,
)
from trainjob_conformance.upgrade.record import ADMITTED, QUEUED, SUSPENDED

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# How long the never-statement of UP-KQ-001 is read after the last step: the
# newer Kueue deleted the Workload about 50 s after its step began, measured
# (docs/upgrades.md).
KUEUE_WINDOW_SECONDS = 120
# How long a queued TrainJob gets to be admitted once the quota frees.
ADMISSION_SECONDS = 120


@dataclass(frozen=True)
class Read:
    """A `kubectl get ... -o jsonpath=...` in the bundle's namespace (or cluster-wide)."""

    resource: str
    jsonpath: str
    name: str = ""
    selector: str = ""

    def args(self) -> list[str]:
        target = [self.resource, *([self.name] if self.name else [])]
        where = ["-n", "$NS"]
        chosen = ["-l", self.selector] if self.selector else []
        return ["get", *target, *where, *chosen, "-o", f"jsonpath={self.jsonpath}"]


@dataclass(frozen=True)
class Wait:
    """Polled until `how` (equals, contains, nonempty) holds for `want`."""

    title: str
    read: Read
    how: str
    want: str = ""


@dataclass(frozen=True)
class Remember:
    """A value read once into a shell variable, for an observation after the upgrade."""

    title: str
    variable: str
    read: Read


@dataclass(frozen=True)
class Delete:
    """A request after the upgrade that sets an observation up (accepted, as in the run)."""

    title: str
    resource: str
    name: str


@dataclass(frozen=True)
class Observe:
    """The policy's statement: `how` is `equals` (the value is `expected` within
    `seconds`) or `stays` (it is `expected` at every read for `seconds`); `expected`
    may name a remembered variable as `$NAME`."""

    title: str
    read: Read
    how: str
    expected: str
    seconds: int = 0


@dataclass(frozen=True)
class Scenario:
    policy: str
    namespace: str
    kueue_managed: bool
    # (file name, manifest): created in this order, each retried while a webhook that
    # just started is not routed yet.
    objects: list[tuple[str, dict[str, Any]]]
    # Cluster-scoped objects it creates, deleted when the script ends.
    outside: list[tuple[str, str]]
    before: list[Wait | Remember]
    after: list[Delete | Observe]
    # What the policy expects, in its words, for the README.
    expected: str = ""
    notes: list[str] = field(default_factory=list)


WORKLOADS = "workloads.kueue.x-k8s.io"


def _workload_uid(trainjob: str) -> Read:
    return Read(
        WORKLOADS, f'{{.items[?(@.metadata.ownerReferences[0].name=="{trainjob}")].metadata.uid}}'
    )


def _workload_condition(trainjob: str, condition_type: str) -> Read:
    return Read(WORKLOADS, condition_path(trainjob, condition_type))


def _pods_of(trainjob: str, jsonpath: str) -> Read:
    return Read("pods", f"{{.items[*]{jsonpath}}}", selector=f"{JOBSET_NAME_LABEL}={trainjob}")


def _runtime(templates: TemplateSet, name: str) -> tuple[str, dict[str, Any]]:
    return ("runtime.yaml", templates.render_one("clustertrainingruntime", name=name, hold=True))


def _queue_objects(templates: TemplateSet, namespace: str) -> list[tuple[str, dict[str, Any]]]:
    render = templates.render_one
    name = namespace
    return [
        ("resourceflavor.yaml", render("resourceflavor", name=name)),
        (
            "clusterqueue.yaml",
            render(
                "clusterqueue",
                name=name,
                namespace=namespace,
                flavor=name,
                cpu=POD_CPU,
                memory="1Gi",
            ),
        ),
        (
            "localqueue.yaml",
            render("localqueue", name=QUEUE, namespace=namespace, cluster_queue=name),
        ),
    ]


def _suspended(templates: TemplateSet, namespace: str) -> Scenario:
    field_name = templates.shape.value if templates.shape else "podTemplateOverrides"
    trainjob = templates.render_one(
        "trainjob",
        name=SUSPENDED,
        namespace=namespace,
        runtime=namespace,
        num_nodes=2,
        suspend=True,
        pod_overrides=SUSPENDED_OVERRIDES,
    )
    gates = (
        '{.spec.replicatedJobs[?(@.name=="node")].template.spec.template.spec'
        ".schedulingGates[*].name}"
    )
    overrides = Read("trainjob", f"{{.spec.{field_name}}}", name=SUSPENDED)
    return Scenario(
        policy="UP-SUSP-001",
        namespace=namespace,
        kueue_managed=False,
        objects=[_runtime(templates, namespace), ("trainjob.yaml", trainjob)],
        outside=[("clustertrainingruntime", namespace)],
        before=[
            Wait(
                f"JobSet {SUSPENDED} to carry {UPGRADE_GATE} from the overrides",
                Read("jobset", gates, name=SUSPENDED),
                "contains",
                UPGRADE_GATE,
            ),
            Remember(f"TrainJob {SUSPENDED}'s spec.{field_name}", "OVERRIDES", overrides),
        ],
        after=[
            Observe(
                f"TrainJob {SUSPENDED}'s spec.{field_name}, as stored on the old release",
                overrides,
                "equals",
                "$OVERRIDES",
            ),
            Observe(
                f"TrainJob {SUSPENDED} is still suspended",
                Read("trainjob", "{.spec.suspend}", name=SUSPENDED),
                "equals",
                "true",
            ),
        ],
        expected=(f"the suspended TrainJob keeps spec.{field_name} as stored, and stays suspended"),
    )


def _queued_trainjob(templates: TemplateSet, namespace: str, name: str) -> dict[str, Any]:
    """A TrainJob of the Kueue namespace: one Pod of POD_CPU, submitted to QUEUE."""
    resources = {"requests": {"cpu": POD_CPU, "memory": "256Mi"}}
    return templates.render_one(
        "trainjob",
        name=name,
        namespace=namespace,
        runtime=namespace,
        queue_name=QUEUE,
        resources_per_node=resources,
    )


def _kueue_objects(templates: TemplateSet, namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """As the upgrade seeds them: one TrainJob admitted on the whole quota, one queued."""
    return [
        _runtime(templates, namespace),
        *_queue_objects(templates, namespace),
        ("trainjob-admitted.yaml", _queued_trainjob(templates, namespace, ADMITTED)),
        ("trainjob-queued.yaml", _queued_trainjob(templates, namespace, QUEUED)),
    ]


def _kueue_outside(namespace: str) -> list[tuple[str, str]]:
    return [
        ("clustertrainingruntime", namespace),
        ("clusterqueue.kueue.x-k8s.io", namespace),
        ("resourceflavor.kueue.x-k8s.io", namespace),
    ]


def _kueue_waits() -> list[Wait | Remember]:
    return [
        Wait(
            f"the Workload of TrainJob {ADMITTED} to be Admitted",
            _workload_condition(ADMITTED, "Admitted"),
            "equals",
            "True",
        ),
        Wait(
            f"the Pod of TrainJob {ADMITTED} to run",
            _pods_of(ADMITTED, ".status.phase"),
            "equals",
            "Running",
        ),
        Wait(
            f"the Workload of TrainJob {QUEUED} to wait for quota",
            _workload_condition(QUEUED, "QuotaReserved"),
            "equals",
            "False",
        ),
    ]


def _admission(templates: TemplateSet, namespace: str) -> Scenario:
    workload = _workload_uid(ADMITTED)
    pods = _pods_of(ADMITTED, ".metadata.uid")
    return Scenario(
        policy="UP-KQ-001",
        namespace=namespace,
        kueue_managed=True,
        objects=_kueue_objects(templates, namespace),
        outside=_kueue_outside(namespace),
        before=[
            *_kueue_waits(),
            Remember(f"the uid of TrainJob {ADMITTED}'s Workload", "WORKLOAD", workload),
            Remember(f"the uid of TrainJob {ADMITTED}'s Pod", "POD", pods),
        ],
        after=[
            Observe(
                f"the Workload of TrainJob {ADMITTED}, admitted on the old release "
                "(a new uid, or none, is a Workload deleted)",
                workload,
                "stays",
                "$WORKLOAD",
                KUEUE_WINDOW_SECONDS,
            ),
            Observe(
                f"the Pod of TrainJob {ADMITTED} (a new uid, or none, is a Pod deleted)",
                pods,
                "stays",
                "$POD",
            ),
        ],
        expected=(
            "the admitted TrainJob keeps the Workload the old Kueue admitted and its running "
            "Pod: neither is deleted nor recreated"
        ),
        notes=[
            "A uid that changes cannot change back, so a Workload or Pod deleted at any time "
            "since the upgrade began shows at every read after it: the Workload is read for "
            f"{KUEUE_WINDOW_SECONDS} s after the last step (the newer Kueue acts once it has "
            "started), the Pod once more at the end."
        ],
    )


def _queued(templates: TemplateSet, namespace: str) -> Scenario:
    return Scenario(
        policy="UP-KQ-002",
        namespace=namespace,
        kueue_managed=True,
        objects=_kueue_objects(templates, namespace),
        outside=_kueue_outside(namespace),
        before=_kueue_waits(),
        after=[
            Delete(f"delete TrainJob {ADMITTED}, freeing the quota", "trainjob", ADMITTED),
            Observe(
                f"TrainJob {QUEUED}, queued on the old release, unsuspended once admitted",
                Read("trainjob", "{.spec.suspend}", name=QUEUED),
                "equals",
                "false",
                ADMISSION_SECONDS,
            ),
        ],
        expected=(
            "once the admitted TrainJob is deleted, the TrainJob queued on the old release is "
            "admitted and unsuspended"
        ),
    )


SCENARIOS: dict[str, Callable[[TemplateSet, str], Scenario]] = {
    "UP-SUSP-001": _suspended,
    "UP-KQ-001": _admission,
    "UP-KQ-002": _queued,
}


def check_scenario(policy: str) -> None:
    """One line for an upgrade policy without a bundle."""
    if policy not in SCENARIOS:
        raise ConformanceError(
            f"{policy} has no upgrade bundle: repro writes one for "
            f"{', '.join(sorted(SCENARIOS))}, the upgrade policies with a known gap"
        )


def scenario_for(policy: str, templates: TemplateSet) -> Scenario:
    """The scenario of `policy`, its objects rendered for the old release's Trainer."""
    check_scenario(policy)
    return SCENARIOS[policy](templates, f"repro-{policy.lower()}")


def namespace_labels(scenario: Scenario) -> dict[str, str]:
    """A namespace Kueue leaves alone is labelled so, as the upgrade's own are."""
    return {} if scenario.kueue_managed else {KUEUE_MANAGED_LABEL: "false"}
