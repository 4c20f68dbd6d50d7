"""Stack-watch probes for controllers the harness did not start.

In-cluster controllers (existing, kind) are watched through their Pods: no
ready Pod, or a container that restarted since the run began, is a
breakage. Host processes of an embedded cluster kept up by another process
(`trainjob-conformance up`) are watched through that run's process ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.health.stack_watch import Breakage, Probe
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.lifecycle.ledger import LEDGER_FILE, ProcessLedger


def _restarts(pods: list[Any]) -> dict[str, int]:
    counts = {}
    for pod in pods:
        for status in pod.status.container_statuses or []:
            counts[f"{pod.metadata.name}/{status.name}"] = int(status.restart_count or 0)
    return counts


def _last_termination(pods: list[Any]) -> str:
    for pod in pods:
        for status in pod.status.container_statuses or []:
            terminated = status.last_state.terminated if status.last_state else None
            if terminated is not None:
                return (
                    f"last exit: {terminated.reason or 'terminated'}, code {terminated.exit_code}"
                )
    return "no exit recorded"


def controller_pod_probe(
    kube: Kube, component: str, namespace: str, selector: str, lines: int = 15
) -> Probe:
    """Broken when the controller has no ready Pod or one of its containers restarted."""
    baseline = _restarts(kube.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def log_tail(pods: list[Any]) -> str:
        if not pods:
            return ""
        try:
            return str(
                kube.core.read_namespaced_pod_log(
                    pods[0].metadata.name, namespace, tail_lines=lines, previous=True
                )
            )
        except ApiError as error:
            return f"(no previous log: {error.message})"

    def probe() -> Breakage | None:
        pods = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
        name = f"{component} controller ({namespace}, {selector})"
        ready = [
            p
            for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        if not ready:
            return Breakage(name, "has no ready Pod", log_tail(pods))
        restarted = {
            key: count
            for key, count in _restarts(pods).items()
            if count > baseline.get(key, 0) and key in baseline
        }
        if restarted:
            detail = ", ".join(f"{k} restarted ({n} restarts)" for k, n in restarted.items())
            return Breakage(name, f"{detail}; {_last_termination(pods)}", log_tail(pods))
        return None

    return probe


def ledger_probes(run_dir: Path) -> list[Probe]:
    """One probe per process an embedded `up` recorded, alive when the watch began."""
    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    if not ledger.path.is_file():
        return []

    def probe_for(process: Any) -> Probe:
        def probe() -> Breakage | None:
            if not process.is_alive():
                return Breakage(f"{process.name} (pid {process.pid})", "is no longer running")
            if process.is_stopped():
                # Alive but frozen (SIGSTOP): it answers no webhook and reconciles nothing.
                return Breakage(f"{process.name} (pid {process.pid})", "is stopped")
            return None

        return probe

    return [probe_for(process) for process in ledger.living()]
