"""Which validating webhooks judge a request in a namespace, read from their configurations."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.cluster.introspect import validators_naming

OPT_OUT = {"key": "example.com/managed", "operator": "NotIn", "values": ["false"]}


class _Cluster:
    def __init__(self, labels: dict[str, str], webhooks: list[dict[str, Any]]) -> None:
        self.labels = labels
        self.webhooks = webhooks

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": self.labels}}

    def list(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        return [{"webhooks": self.webhooks}]


def _webhook(name: str, resources: list[str], **selectors: Any) -> dict[str, Any]:
    rule = {"apiGroups": ["trainer.kubeflow.org"], "resources": resources}
    return {"name": name, "rules": [{**rule, "operations": ["CREATE"]}], **selectors}


def test_only_webhooks_naming_the_resource_and_selecting_the_namespace_judge() -> None:
    webhooks = [
        _webhook("trainer", ["trainjobs"]),
        _webhook("kueue", ["trainjobs"], namespaceSelector={"matchExpressions": [OPT_OUT]}),
        _webhook("everything", ["*"]),
        _webhook("runtimes", ["clustertrainingruntimes"]),
        _webhook("labelled-only", ["trainjobs"], objectSelector={"matchLabels": {"a": "b"}}),
    ]

    def judging(labels: dict[str, str]) -> list[str]:
        cluster = _Cluster(labels, webhooks)
        return validators_naming(cluster, "trainer.kubeflow.org", "trainjobs", "CREATE", "ns")  # type: ignore[arg-type]

    assert judging({"example.com/managed": "false"}) == ["trainer"]
    assert judging({}) == ["kueue", "trainer"]
    assert (
        validators_naming(
            _Cluster({}, webhooks),  # type: ignore[arg-type]
            "trainer.kubeflow.org",
            "trainjobs",
            "UPDATE",
            "ns",
        )
        == []
    )
