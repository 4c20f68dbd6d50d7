"""One component of a running cluster moved to another release by its manifests:
the phases of upgrade.py run by an applier, and the waits between them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.cluster.health.readiness import AdmissionProbe, wait_for_admission
from trainjob_conformance.cluster.introspect import pod_log_tailer
from trainjob_conformance.cluster.releases.applier import ManifestApplier
from trainjob_conformance.cluster.releases.upgrade import NewPod, PreparedUpgrade, new_pod
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import POD
from trainjob_conformance.progress import step

# Every admission probe of the stack answers again within this after a step.
ADMISSION_SECONDS = 120


def apply_upgrade(
    applier: ManifestApplier,
    prepared: PreparedUpgrade,
    stop_watch: Callable[[], None],
    wait_admission: Callable[[], None],
) -> tuple[float, float, float]:
    """The step's phases; seconds of each (CRDs, manager, webhooks)."""
    phases = prepared.phases
    started = time.monotonic()
    with step(f"{prepared.label}: CRDs"):
        applier.run_each(phases.crds)
    crds_done = time.monotonic()
    stop_watch()  # the old Pod's end is the rolling update, not a breakage
    with step(f"{prepared.label}: manager"):
        applier.run_each(phases.manager)
    manager_done = time.monotonic()
    with step(f"{prepared.label}: webhooks"):
        # A rollout is done when the new Pod is Ready, which is before every
        # node routes the Service to it: a request the API server sends in
        # between goes nowhere (measured on kind, docs/upgrades.md). What the
        # new webhooks judge (the Trainer's runtimes) is applied once every
        # admission probe is answered.
        wait_admission()
        applier.run_each(phases.after)
        for kind, name in prepared.dropped_webhooks:
            applier.run("delete", "--ignore-not-found", f"{kind.lower()}/{name}")
        wait_admission()
    return (
        round(crds_done - started, 1),
        round(manager_done - crds_done, 1),
        round(time.monotonic() - manager_done, 1),
    )


def wait_admission(
    kube: Kube,
    probes: list[AdmissionProbe],
    controller_pods: dict[str, tuple[str, str]],
    component: str,
    run_dir: Path,
) -> None:
    """Every admission probe answered; on a timeout one line, with the controller's
    log tail in a file of the run directory."""
    tail = pod_log_tailer(kube, controller_pods)

    def log_tail() -> str:
        try:
            return tail(component, 30)
        except ApiError as error:
            return f"(no log of {component}: {error})"

    try:
        wait_for_admission(kube, probes, ADMISSION_SECONDS, log_tails=log_tail)
    except ConformanceError as error:
        first, _, details = str(error).partition("\n")
        path = run_dir / f"upgrade-{component}-log-tail.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(details)
        raise ConformanceError(f"{first} ({component}'s log tail: {path})") from None


def new_controller_pod(kube: Kube, prepared: PreparedUpgrade) -> NewPod:
    """Where the controller's new Pod (the one running the new image) landed, and what
    image its runtime ran."""
    namespace, _, selector = prepared.controller
    image = prepared.image
    pods = kube.list(*POD, namespace=namespace, label_selector=selector)
    return new_pod(pods, image)
