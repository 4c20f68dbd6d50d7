"""Which other tests' Workloads a topology-aware test waits for: those that hold the
cluster's nodes, not those placed on a test's own nodes (policies/nodes.py)."""

from __future__ import annotations

from types import SimpleNamespace

from trainjob_conformance.cluster.labels import TEST_NODE_LABEL
from trainjob_conformance.policies.view import TrainJobView
from trainjob_conformance.policies.workloads import topology_holders_elsewhere


def _workload(namespace: str, name: str, flavor: str, placed: bool = True) -> dict:
    assignment = {"name": "node", "flavors": {"cpu": flavor, "memory": flavor}}
    if placed:
        assignment["topologyAssignment"] = {"levels": ["kubernetes.io/hostname"]}
    return {
        "metadata": {"namespace": namespace, "name": name},
        "status": {"admission": {"podSetAssignments": [assignment]}},
    }


class _Kube:
    def __init__(self) -> None:
        self.objects = {
            "Namespace": [{"metadata": {"name": n}} for n in ("mine", "other", "own")],
            "ResourceFlavor": [
                {"metadata": {"name": "shared"}, "spec": {"nodeLabels": {"zone": "a"}}},
                {"metadata": {"name": "own"}, "spec": {"nodeLabels": {TEST_NODE_LABEL: "own"}}},
            ],
            "Workload": [
                _workload("mine", "w-mine", "shared"),
                _workload("other", "w-shared", "shared"),
                _workload("other", "w-quota-only", "shared", placed=False),
                _workload("own", "w-own", "own"),
                _workload("elsewhere", "w-not-a-test", "shared"),
            ],
        }

    def list(self, api_version, kind, namespace=None, label_selector=None):
        return self.objects.get(kind, [])


def test_a_workload_on_a_tests_own_nodes_holds_none_of_the_clusters():
    view = TrainJobView(SimpleNamespace(kube=_Kube()), "mine")
    assert topology_holders_elsewhere(view) == ["other/w-shared"]
