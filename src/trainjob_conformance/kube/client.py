"""A small façade over the official client: apply, create, get, list, patch, delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

FIELD_MANAGER = "trainjob-conformance"


def api_client_for(kubeconfig: Path, context: str | None = None) -> client.ApiClient:
    """A client for exactly this kubeconfig; the default ~/.kube/config is never read."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig), context=context, client_configuration=configuration
    )
    configuration.retries = urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=())
    return client.ApiClient(configuration)


class Kube:
    """Operations on arbitrary kinds by apiVersion and kind."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self._dynamic = DynamicClient(api_client)

    def resource(self, api_version: str, kind: str) -> Resource:
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            # Discovery is cached; a CRD installed since then needs a fresh look.
            self._dynamic.resources.invalidate_cache()
            return self._dynamic.resources.get(api_version=api_version, kind=kind)

    def _for(self, obj: dict[str, Any]) -> Resource:
        return self.resource(obj["apiVersion"], obj["kind"])

    def apply(self, obj: dict[str, Any], field_manager: str = FIELD_MANAGER) -> dict[str, Any]:
        """Server-side apply: idempotent, and large CRDs need no annotation."""
        metadata = obj["metadata"]
        result = self._for(obj).server_side_apply(
            body=obj,
            name=metadata["name"],
            namespace=metadata.get("namespace"),
            field_manager=field_manager,
            force_conflicts=True,
        )
        return result.to_dict()

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"body": obj, "namespace": obj["metadata"].get("namespace")}
        if dry_run:
            kwargs["query_params"] = [("dryRun", "All")]
        return self._for(obj).create(**kwargs).to_dict()

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        return self.resource(api_version, kind).get(name=name, namespace=namespace).to_dict()

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"namespace": namespace}
        if label_selector:
            kwargs["label_selector"] = label_selector
        return list(self.resource(api_version, kind).get(**kwargs).to_dict().get("items", []))

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        namespace: str | None = None,
        content_type: str = "application/merge-patch+json",
    ) -> dict[str, Any]:
        resource = self.resource(api_version, kind)
        result = resource.patch(
            body=body, name=name, namespace=namespace, content_type=content_type
        )
        return result.to_dict()

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self.resource(api_version, kind).delete(name=name, namespace=namespace)
