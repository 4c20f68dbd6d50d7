"""One `prove` run on a cluster that is already up: leftovers, baseline, breaks, table."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.cluster.introspect import trainjob_spec_properties
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import NotFound
from trainjob_conformance.kube.kinds import RESOURCE_FLAVOR
from trainjob_conformance.policies.breaks import Break
from trainjob_conformance.policies.catalog import Policy
from trainjob_conformance.prove.leftovers import remove_leftovers
from trainjob_conformance.prove.plan import make_plan
from trainjob_conformance.prove.runner import (
    Children,
    ChildSettings,
    StepContext,
    check_baseline,
    run_plan,
    run_policies,
)
from trainjob_conformance.prove.table import ProveReport
from trainjob_conformance.render.overrides import detect_shape
from trainjob_conformance.render.templates import TemplateSet

# The ClusterTrainingRuntime that a break's probe may name.
PROBE_RUNTIME = "tjc-prove-probe"


@dataclass
class ProveRequest:
    profile: str
    provider: str
    kubeconfig: Path
    catalog: dict[str, Policy]
    breaks: dict[str, Break]
    policies: list[str]
    templates: Path
    out: Path  # the children's reports
    packs: tuple[Path, ...] = ()
    parallel: int = 4
    workers: int = 2


def prove(request: ProveRequest, progress: Callable[[str], None]) -> ProveReport:
    began = time.monotonic()
    kube = Kube(api_client_for(request.kubeconfig))
    for line in remove_leftovers(kube, request.kubeconfig):
        progress(f"removed what an interrupted prove left: {line}")
    shape = detect_shape(trainjob_spec_properties(kube))
    templates = TemplateSet(request.templates, shape, kube.concrete(RESOURCE_FLAVOR.api_version))
    children = Children()
    settings = ChildSettings(request.profile, request.kubeconfig, request.out, request.packs)
    progress(f"baseline: {len(request.policies)} policies, no break")
    try:
        baseline_report = run_policies(
            children, settings, request.policies, "baseline", request.workers
        )
    except BaseException:
        children.stop()
        raise
    baseline = check_baseline(baseline_report)
    baseline_seconds = time.monotonic() - began
    progress(f"baseline clean in {baseline_seconds:.0f} s")
    plan = make_plan(request.catalog, request.breaks, request.policies, baseline_report.versions)
    report = ProveReport(
        profile=request.profile,
        provider=request.provider,
        versions=baseline_report.versions,
        started=baseline_report.started,
        baseline_seconds=baseline_seconds,
    )
    kube.apply(templates.render_one("clustertrainingruntime", name=PROBE_RUNTIME))
    try:
        context = StepContext(
            kube=kube,
            children=children,
            settings=settings,
            catalog=request.catalog,
            baseline=baseline,
            variables={"override_field": shape.value, "runtime": PROBE_RUNTIME},
            restored=report.restored,
            progress=progress,
        )
        report.rows = run_plan(context, plan, request.parallel)
    finally:
        with contextlib.suppress(NotFound):
            kube.delete("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", PROBE_RUNTIME)
    report.rows.sort(key=lambda row: (row.policy, row.break_name))
    report.wall_seconds = time.monotonic() - began
    return report


def selected_policies(catalog: dict[str, Policy], wanted: list[str]) -> list[str]:
    unknown = [policy for policy in wanted if policy not in catalog]
    if unknown:
        raise ConformanceError(
            f"--policy {', '.join(unknown)}: not in the catalog (IDs as in policies.yaml, "
            "a pack's as PACK/ID)"
        )
    upgrade_only = [policy for policy in wanted if catalog[policy].upgrade_only]
    if upgrade_only:
        raise ConformanceError(
            f"--policy {', '.join(upgrade_only)}: judged only during an upgrade; its breaks "
            "are `trainjob-conformance upgrade --break`"
        )
    return list(wanted) or [policy for policy in catalog if not catalog[policy].upgrade_only]
