"""One upgrade on a cluster that is up on the old profile: the objects in flight,
the window, a judge before the first step and after each, the catalog at the end.

The judges and the catalog are pytest children against the cluster through its
kubeconfig (as `existing`), as `prove`'s are; the cluster's state names the
releases each step left running, so each child judges what runs then.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.readiness import stack_probes
from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.cluster.labels import KUEUE_MANAGED_LABEL
from trainjob_conformance.cluster.provider import (
    ComponentUpgrade,
    UpgradesInPlace,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.kinds import (
    JOBSET,
    POD,
    PYTORCHJOB,
    RESOURCE_FLAVOR,
    TRAINJOB,
    WORKLOAD,
    Kind,
)
from trainjob_conformance.kube.namespaces import temporary_namespace
from trainjob_conformance.policies.breaks import BREAK_LABEL, STAND_IN, Break
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.prove.breaking import AppliedBreak
from trainjob_conformance.prove.runner import Children, ChildSettings, NoResults, run_policies
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet
from trainjob_conformance.report.model import ERROR, PolicyResult, RunReport
from trainjob_conformance.upgrade.availability import Availability, ProbeFigures
from trainjob_conformance.upgrade.inflight import (
    HOLD_GATE,
    UPGRADE_GATE,
    create_queue,
    create_runtime,
    seed_kueue_objects,
    seed_pytorchjob,
    seed_running_objects,
    seed_suspended_objects,
)
from trainjob_conformance.upgrade.record import (
    BEFORE,
    FINAL,
    MANAGED_PYTORCHJOB,
    SETTLED,
    UpgradeRecord,
)
from trainjob_conformance.upgrade.standins import act
from trainjob_conformance.upgrade.steps import Step, UpgradePlan
from trainjob_conformance.upgrade.window import AUDIT_COVERS, WATCH_GAP, Window

# Judged once, after the last step: it changes what it judges (frees the quota).
FINAL_POLICIES = ("UP-KQ-002",)
# Statements over the whole window, judged again once the last step's judge is over,
# before the final judge changes what they judge (it deletes the admitted TrainJob).
WINDOW_POLICIES = ("UP-GATE-001", "UP-KQ-001")


@dataclass
class UpgradeRequest:
    plan: UpgradePlan
    provider: str
    catalog: dict[str, Policy]
    templates: Path
    out: Path  # the record, the window, the children's reports and logs
    workers: int = 2
    # `--prove`: each UP policy's breaks, all applied after the last step, before its
    # judges; the catalog is then not run on the broken stack.
    breaks: dict[str, list[Break]] = field(default_factory=dict)
    # The schema skews of the stack between the steps (stack/skew.py), one line each.
    skews: list[str] = field(default_factory=list)


@dataclass
class StepResult:
    step: Step
    done: ComponentUpgrade | None  # None: the step failed, and `error` says how
    error: str = ""
    availability: dict[str, ProbeFigures] = field(default_factory=dict)


@dataclass
class UpgradeRun:
    """What one upgrade saw: per phase, each UP policy's result; the steps; the catalog."""

    plan: UpgradePlan
    provider: str
    started: str
    phases: dict[str, RunReport] = field(default_factory=dict)  # BEFORE, a step's label, FINAL
    steps: list[StepResult] = field(default_factory=list)
    catalog: RunReport | None = None
    window_problems: list[str] = field(default_factory=list)
    broke: dict[str, str] = field(default_factory=dict)  # `--prove`: policy -> break applied
    not_restored: list[str] = field(default_factory=list)  # what a revert left changed
    skews: list[str] = field(default_factory=list)  # the request's, for the page
    seconds: float = 0.0


class _Judges:
    """The pytest children of one upgrade."""

    def __init__(self, request: UpgradeRequest, kubeconfig: Path) -> None:
        self.request = request
        self.kubeconfig = kubeconfig
        self.children = Children()

    def run(self, label: str, policies: list[str], record: Path | None, workers: int) -> RunReport:
        settings = ChildSettings(
            self.request.plan.source.name,
            self.kubeconfig,
            self.request.out / "children",
            upgrade_record=record,
        )
        # A judge's label names a step (`jobset v0.11.1 -> v0.12.0`): its directory's name.
        directory = label.replace(" -> ", "-to-").replace(" ", "-")
        # The upgrade's breaks are bound to its own namespaces, not the judges'.
        try:
            return run_policies(
                self.children, settings, policies, directory, workers, labelled=False
            )
        except NoResults as lost:
            if self.children.stopping or not lost.killed_from_outside:
                raise
            # A judge killed from outside (SIGKILL, the OOM killer) loses its own
            # verdicts, not the upgrade's: its policies are ERROR with its words,
            # and the steps and judges after it still run and are reported.
            return _lost_judge(self.request.plan.source.name, policies, str(lost))


def _lost_judge(profile: str, policies: list[str], reason: str) -> RunReport:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    report = RunReport(profile, "upgrade", {}, started, 0.0, None)
    report.results = [PolicyResult(p, p, ERROR, 0.0, "", reason) for p in policies]
    return report


@dataclass
class _Namespaces:
    running: str  # the running TrainJob with gated Pods
    suspended: str  # the suspended TrainJob, and the one MultiKueue manages
    kueue: str  # the admitted and the queued TrainJob


# Where the objects of each UP policy live: a break scoped to namespaces (an
# admission policy, a narrowed webhook) is bound to that namespace alone, so the
# breaks of `upgrade --prove` act on their own policy's objects only.
# The namespace of the object each policy with a namespace-scoped break judges: one
# such break per namespace, since the break's label has one value.
_POLICY_NAMESPACE = {"UP-EDIT-001": "running", "UP-EDIT-002": "suspended"}


def _scoped_labels(breaks: dict[str, list[Break]]) -> dict[str, dict[str, str]]:
    labels: dict[str, dict[str, str]] = {"running": {}, "suspended": {}, "kueue": {}}
    for policy, items in breaks.items():
        for item in items:
            if not item.scoped:
                continue
            if policy not in _POLICY_NAMESPACE:
                raise ConformanceError(
                    f"break {item.name} of {policy} acts on labelled namespaces; the upgrade "
                    f"binds such breaks only for {', '.join(_POLICY_NAMESPACE)}"
                )
            labels[_POLICY_NAMESPACE[policy]][BREAK_LABEL] = item.label_value
    return labels


def _namespaces(
    stack: contextlib.ExitStack, kube: Kube, breaks: dict[str, list[Break]]
) -> _Namespaces:
    labels = _scoped_labels(breaks)
    unmanaged = {KUEUE_MANAGED_LABEL: "false"}

    def make(name: str, extra: dict[str, str]) -> str:
        return stack.enter_context(temporary_namespace(kube, f"upgrade-{name}", extra))

    return _Namespaces(
        running=make("running", {**unmanaged, **labels["running"]}),
        suspended=make("suspended", {**unmanaged, **labels["suspended"]}),
        kueue=make("kueue", labels["kueue"]),
    )


def _apply_breaks(
    items: list[tuple[str, Break]],
    context: _BreakContext,
    progress: Callable[[str], None],
) -> None:
    # Stand-ins first: an admission break could refuse the write a stand-in makes.
    for policy, item in sorted(items, key=lambda pair: pair[1].kind != STAND_IN):
        if item.kind == STAND_IN:
            done = act(item.action, context.kube, context.record)
        else:
            applied = AppliedBreak(context.kube, item, context.variables, context.kubeconfig)
            context.applied.append(applied)
            applied.apply()
            done = f"{item.kind} break applied"
        context.broke[policy] = item.name
        progress(f"break {item.name} ({policy}): {done}")


@dataclass
class _BreakContext:
    kube: Kube
    record: UpgradeRecord
    variables: dict[str, str]
    kubeconfig: Path
    applied: list[AppliedBreak] = field(default_factory=list)
    broke: dict[str, str] = field(default_factory=dict)  # policy -> the break applied for it

    def revert(self) -> list[str]:
        return [line for applied in reversed(self.applied) for line in applied.revert()]


def _audited(
    kube: Kube, cluster: UpgradesInPlace, watched: dict[str, tuple[Kind, str]]
) -> dict[str, Any]:
    """The record's audit log and the watches it covers: the custom resources' (a
    Pod's watch has no gap, its kind has no CRD to replace)."""
    audit_log = cluster.window_audit_log()
    if audit_log is None:
        return {}
    audited = {}
    for name, (kind, namespace) in watched.items():
        if "/" not in kind.api_version:  # the core group: Pods
            continue
        resource = kube.resource(*kind)
        audited[name] = [str(resource.group), str(resource.name), namespace]
    return {"audit_log": str(audit_log), "audited": audited}


def _covered(gaps: list[str], record: UpgradeRecord) -> list[str]:
    """The watch's gaps, said as covered by the audit log, and what the log added."""
    covered = [gap.replace(WATCH_GAP, AUDIT_COVERS) for gap in gaps]
    added = {
        name: len(record.window_events(name)) - len(record.window_events_watched(name))
        for name in record.audited
    }
    summary = ", ".join(f"{name} {count}" for name, count in sorted(added.items()))
    return [*covered, f"versions the audit log of writes gave beyond the watch's: {summary}"]


def _keep_audit_log(record: UpgradeRecord, kept: Path) -> str:
    """The log goes with the cluster: the window's part of it is kept beside the watch's."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(record.audit_log, kept)
    return str(kept)


def run_upgrade(
    request: UpgradeRequest,
    cluster: UpgradesInPlace,
    handle: ClusterHandle,
    progress: Callable[[str], None],
) -> UpgradeRun:
    began = time.monotonic()
    run = UpgradeRun(
        request.plan,
        request.provider,
        datetime.now(UTC).isoformat(timespec="seconds"),
        skews=list(request.skews),
    )
    kube = handle.kube
    shape = detect_shape(trainjob_spec_properties(kube))
    templates = TemplateSet(request.templates, shape, kube.concrete(RESOURCE_FLAVOR.api_version))
    up_policies = sorted(p for p, policy in request.catalog.items() if policy.upgrade_only)
    step_policies = [p for p in up_policies if p not in FINAL_POLICIES]
    catalog_policies = sorted(p for p, policy in request.catalog.items() if not policy.upgrade_only)
    judges = _Judges(request, handle.kubeconfig)
    record_path = request.out / "record.json"
    with contextlib.ExitStack() as stack:
        stack.callback(judges.children.stop)
        namespaces = _namespaces(stack, kube, request.breaks)
        views = {
            name: TrainJobView(handle, getattr(namespaces, name), templates)
            for name in ("running", "suspended", "kueue")
        }
        for view in views.values():
            stack.callback(view.cleanup.run)
        progress(
            f"the objects in flight, on {request.plan.source.name} "
            f"({namespaces.running}, {namespaces.suspended}, {namespaces.kueue})"
        )
        runtime = create_runtime(views["suspended"], namespaces.suspended)
        cluster_queue = create_queue(views["kueue"], namespaces.kueue)
        objects = seed_suspended_objects(views["suspended"], runtime)
        objects.update(seed_running_objects(views["running"], runtime))
        objects.update(seed_kueue_objects(views["kueue"], runtime))
        watched = {
            "running-pods": (POD, namespaces.running),
            "kueue-pods": (POD, namespaces.kueue),
            "workloads": (WORKLOAD, namespaces.kueue),
            "jobsets": (JOBSET, namespaces.suspended),
            "trainjobs": (TRAINJOB, namespaces.suspended),
        }
        if _runs_training_operator(request.plan):
            # Its Pods, were the operator to make any, show in the kueue-pods watch.
            objects.update(seed_pytorchjob(views["kueue"]))
            watched["pytorchjobs"] = (PYTORCHJOB, namespaces.kueue)
        window = Window.begin(kube, watched, request.out / "window")
        stack.callback(window.end)
        record = UpgradeRecord(
            column=request.plan.column,
            source=request.plan.source.name,
            target=request.plan.target.name,
            source_versions=dict(handle.versions),
            phase=BEFORE,
            steps_done=[],
            override_field=shape.value,
            gate=UPGRADE_GATE,
            hold_gate=HOLD_GATE,
            objects=objects,
            cluster_queue=cluster_queue,
            window=window.files(),
            window_started=window.started,
            **_audited(kube, cluster, watched),
        )
        record.write(record_path)
        breaking = _BreakContext(
            kube, record, {"override_field": shape.value, "runtime": runtime}, handle.kubeconfig
        )
        stack.callback(lambda: run.not_restored.extend(breaking.revert()))
        progress(f"judge before the upgrade: {len(step_policies)} policies")
        run.phases[BEFORE] = judges.run(BEFORE, step_policies, record_path, workers=0)
        broken = ""
        for number, step in enumerate(request.plan.steps, start=1):
            progress(f"upgrade {step.label}")
            availability = Availability(kube, stack_probes(handle.versions)).start()
            result = StepResult(step, None)
            try:
                result.done = cluster.upgrade_component(step.component, step.to_version)
            except ConformanceError as error:
                result.error = str(error)
            finally:
                result.availability = availability.stop()
            run.steps.append(result)
            if result.done is None:
                broken = f"the upgrade of {step.label} failed: {result.error}"
                progress(broken)
                break
            record.phase = step.component
            record.steps_done.append(step.label)
            record.write(record_path)
            if number == len(request.plan.steps):
                # `--prove`: the stack as a faulty upgrade would leave it, before its last
                # judges. All at once: the queue's hold keeps the quota that a recreated
                # Workload frees from going to the queued TrainJob before its own judge.
                in_flight = [p for p in up_policies if _NEEDS.get(p, "") in ("", *objects)]
                _apply_breaks(_breaks_of(request.breaks, in_flight), breaking, progress)
            progress(f"judge after {step.label}")
            run.phases[step.label] = judges.run(step.label, step_policies, record_path, workers=0)
        if not broken:
            record.phase = SETTLED
            record.write(record_path)
            progress("judge the whole window again, once the last step's judge is over")
            settled = [p for p in step_policies if p in WINDOW_POLICIES]
            run.phases[SETTLED] = judges.run(SETTLED, settled, record_path, workers=0)
            record.phase = FINAL
            record.write(record_path)
            progress("judge after the last step: the queued TrainJob gets the freed quota")
            run.phases[FINAL] = judges.run(FINAL, list(FINAL_POLICIES), record_path, workers=0)
        window.end()
        run.window_problems = window.problems()
        if record.audit_log:
            run.window_problems = _covered(run.window_problems, record)
            record.audit_log = _keep_audit_log(record, request.out / "window" / "audit.log")
            record.write(record_path)
        run.broke = dict(breaking.broke)
        if not broken and not request.breaks:
            progress(f"the catalog on the upgraded stack: {len(catalog_policies)} policies")
            run.catalog = judges.run("catalog", catalog_policies, None, request.workers)
    run.seconds = round(time.monotonic() - began, 1)
    return run


# The object in flight a policy judges, where not every path has it: without it the
# policy's test skips, and `--prove` applies no break of it (its row is not-run).
_NEEDS = {"UP-MB-002": MANAGED_PYTORCHJOB}


def _runs_training_operator(plan: UpgradePlan) -> bool:
    """A PyTorchJob is put in flight only where the training-operator runs before the
    upgrade and after it (an upgrade neither installs nor removes it)."""
    return plan.source.has("training-operator") and plan.target.has("training-operator")


def _breaks_of(breaks: dict[str, list[Break]], policies: list[str]) -> list[tuple[str, Break]]:
    return [(policy, item) for policy in policies for item in breaks.get(policy, [])]
