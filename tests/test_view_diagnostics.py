"""What a failed wait prints when the test drives a second cluster (a MultiKueue worker)."""

from __future__ import annotations

from types import SimpleNamespace

from trainjob_conformance.policies.view import TrainJobView


class _Kube:
    """Lists nothing but one TrainJob named after the cluster; no events."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self.core = SimpleNamespace(
            list_namespaced_event=lambda namespace: SimpleNamespace(items=[])
        )

    def list(self, api_version, kind, namespace=None, label_selector=None):
        if kind != "TrainJob":
            return []
        return [{"kind": kind, "metadata": {"name": f"on-{self.cluster_name}"}}]


def _cluster(name: str) -> SimpleNamespace:
    return SimpleNamespace(
        kube=_Kube(name),
        versions={},
        controller_log_tail=lambda component, lines: f"{component} log of {name}",
    )


def test_a_timeout_prints_the_companion_clusters_namespace_under_its_role():
    view = TrainJobView(_cluster("manager"), "ns")
    view.on(_cluster("worker"), "MultiKueue worker cluster")

    report = view.diagnostics()

    manager, worker = report.split("===== on the MultiKueue worker cluster =====")
    assert "# TrainJob on-manager" in manager and "on-worker" not in manager
    assert "# TrainJob on-worker" in worker and "kueue log of worker" in worker


def test_a_view_without_companions_prints_only_its_own_cluster():
    report = TrainJobView(_cluster("manager"), "ns").diagnostics()

    assert "===== on the" not in report
    assert "# TrainJob on-manager" in report
