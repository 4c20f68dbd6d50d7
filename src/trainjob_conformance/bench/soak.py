"""A soak: the catalog run again and again on the same stack, on one kept cluster
and on a fresh cluster each time, every run's results kept (report/soak.py reads
them into the flake table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.cluster.provider import ClusterRequest
from trainjob_conformance.cluster.registry import make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.prove.runner import Children, ChildSettings, run_policies
from trainjob_conformance.report.soak import FRESH, KEPT, SoakRun
from trainjob_conformance.stack.profiles import load_profile


@dataclass(frozen=True)
class SoakRequest:
    profile: str
    provider: str  # the provider the clusters come from; each run judges as `existing`
    options: dict[str, str]
    kept: int  # runs on one cluster kept for all of them
    fresh: int  # runs each on a cluster of its own
    out: Path
    workers: int
    packs: tuple[Path, ...] = ()


@dataclass
class SoakOutcome:
    runs: list[SoakRun]
    problems: list[str]  # runs that left no result, in the harness's words


def run_soak(
    request: SoakRequest,
    progress: Callable[[str], None],
    after_each: Callable[[SoakOutcome], None] = lambda outcome: None,
) -> SoakOutcome:
    """Every run; `after_each` sees the outcome so far after each run (the command
    rewrites the table then, so a soak stopped after 60 of 100 runs still has one)."""
    outcome = SoakOutcome([], [])
    children = Children()
    try:
        if request.kept:
            labels = [f"{KEPT}-{i:03d}" for i in range(1, request.kept + 1)]
            _on_one_cluster(
                request, children, KEPT, labels, "kept-cluster", outcome, progress, after_each
            )
        for i in range(1, request.fresh + 1):
            label = f"{FRESH}-{i:03d}"
            _on_one_cluster(
                request, children, FRESH, [label], f"{label}-cluster", outcome, progress, after_each
            )
    finally:
        children.stop()
    return outcome


def _on_one_cluster(
    request: SoakRequest,
    children: Children,
    mode: str,
    labels: list[str],
    cluster_dir: str,
    outcome: SoakOutcome,
    progress: Callable[[str], None],
    after_each: Callable[[SoakOutcome], None],
) -> None:
    cluster = make_provider(
        ClusterRequest(
            request.provider,
            load_profile(request.profile),
            request.out / cluster_dir,
            request.options,
        )
    )
    try:
        try:
            handle = cluster.up()
        except ConformanceError as error:
            outcome.problems += [f"{label}: the cluster did not start: {error}" for label in labels]
            progress(f"{', '.join(labels)}: the cluster did not start: {error}")
            after_each(outcome)
            return
        settings = ChildSettings(request.profile, handle.kubeconfig, request.out, request.packs)
        for label in labels:
            try:
                report = run_policies(
                    children, settings, [], label, request.workers, labelled=False
                )
            except ConformanceError as error:
                outcome.problems.append(f"{label}: {error}")
                progress(f"{label}: {error}")
                after_each(outcome)
                continue
            outcome.runs.append(SoakRun(label, mode, request.provider, report, request.out / label))
            counts = ", ".join(f"{n} {w}" for w, n in sorted(report.counts().items()))
            progress(f"{label}: {counts} in {report.wall_seconds:.0f} s")
            after_each(outcome)
    finally:
        cluster.down()
