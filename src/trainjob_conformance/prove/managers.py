"""Stopping a component's manager for a break, and starting it again.

On an embedded cluster a manager is a host process in the run's ledger: it is
frozen with SIGSTOP (alive, answering nothing) and thawed with SIGCONT, so the
same process, with its caches and certificates, carries on afterwards. Only a
process the ledger names, with the start time it recorded, is signalled.
"""

from __future__ import annotations

import signal
from pathlib import Path

from trainjob_conformance.cluster.health.readiness import standard_probes, wait_for_admission
from trainjob_conformance.cluster.run_state import embedded_run_dir
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.ledger import LEDGER_FILE, ProcessIdentity, ProcessLedger

RECOVERY_SECONDS = 60


def _not_embedded(component: str) -> str:
    return (
        f"stopping the {component} manager is done only on an embedded cluster, whose "
        "managers are processes of the harness; this cluster's are not"
    )


def not_here(kubeconfig: Path, component: str) -> str | None:
    """Why this cluster cannot have its `component` manager stopped, or None."""
    return None if embedded_run_dir(kubeconfig) is not None else _not_embedded(component)


def manager_process(kubeconfig: Path, component: str) -> ProcessIdentity:
    run_dir = embedded_run_dir(kubeconfig)
    if run_dir is None:
        raise ConformanceError(_not_embedded(component))
    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    found = [p for p in ledger.living() if p.name == component]
    if not found:
        raise ConformanceError(f"the embedded run {run_dir} has no running {component} manager")
    return found[0]


def thaw_stopped(kubeconfig: Path) -> list[str]:
    """SIGCONT to every manager of the embedded run that an earlier, killed prove froze."""
    run_dir = embedded_run_dir(kubeconfig)
    if run_dir is None:
        return []
    thawed = []
    for process in ProcessLedger(run_dir / LEDGER_FILE).living():
        if process.is_stopped():
            process.signal(signal.SIGCONT)
            thawed.append(f"{process.name} (pid {process.pid}) was stopped")
    return thawed


def stop(process: ProcessIdentity) -> None:
    process.signal(signal.SIGSTOP)
    wait_for(f"{process.name} (pid {process.pid}) to stop", process.is_stopped, timeout=10)


def resume(kube: Kube, process: ProcessIdentity) -> list[str]:
    """Thaw it and wait until every webhook answers again; what is still wrong, if anything."""
    process.signal(signal.SIGCONT)
    if process.is_stopped() or not process.is_alive():
        return [f"{process.name} (pid {process.pid}) did not resume"]
    try:
        wait_for_admission(kube, standard_probes(), RECOVERY_SECONDS, log_tails=lambda: "")
    except ConformanceError as error:
        return [f"the stack did not answer again after {process.name} resumed: {error}"]
    return []
