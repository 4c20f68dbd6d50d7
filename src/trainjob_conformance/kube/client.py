"""A small façade over the official client: apply, create, get, list, patch, delete."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import NotFound, api_errors
from trainjob_conformance.kube.kinds import KNOWN_VERSIONS, SERVED
from trainjob_conformance.kube.kubeconfig import check_kubeconfig

FIELD_MANAGER = "trainjob-conformance"


def api_client_for(kubeconfig: Path, context: str | None = None) -> client.ApiClient:
    """A client for exactly this kubeconfig; the default ~/.kube/config is never read."""
    check_kubeconfig(kubeconfig, context)
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig), context=context, client_configuration=configuration
    )
    configuration.retries = urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=())
    return client.ApiClient(configuration)


class _Translated:
    """A typed client API (CoreV1Api, AppsV1Api, ...) whose calls raise `kube.errors` types."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._api, name)
        if not callable(attribute):
            return attribute

        # wraps: kubernetes.watch reads the return type from the docstring.
        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            with api_errors():
                return attribute(*args, **kwargs)

        return call


class Kube:
    """Operations on arbitrary kinds by apiVersion and kind.

    Every method, and every call through `core`, `apps` and `version`, raises
    the typed errors of `kube.errors`, never the client library's own.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core: Any = _Translated(client.CoreV1Api(api_client))
        self.apps: Any = _Translated(client.AppsV1Api(api_client))
        self.version: Any = _Translated(client.VersionApi(api_client))
        with api_errors():
            self._dynamic = DynamicClient(api_client)
        self._served: dict[str, str] = {}

    def served_version(self, group: str) -> str:
        """The newest version of `group` the harness knows and the cluster serves."""
        if group not in self._served:
            answer = self._call(lambda: self._dynamic.request("GET", f"/apis/{group}")).to_dict()
            served = {v.get("version") for v in (answer or {}).get("versions") or []}
            known = KNOWN_VERSIONS.get(group, ())
            found = next((v for v in known if v in served), None)
            if found is None:
                raise ConformanceError(
                    f"the cluster serves {group} in {', '.join(sorted(map(str, served)))}; "
                    f"this harness reads {', '.join(known)}: use a matching harness version"
                )
            self._served[group] = found
        return self._served[group]

    def concrete(self, api_version: str) -> str:
        """`api_version`, with a `GROUP/served` reference resolved on this cluster."""
        group, _, version = api_version.rpartition("/")
        return f"{group}/{self.served_version(group)}" if version == SERVED else api_version

    def resource(self, api_version: str, kind: str) -> Resource:
        api_version = self.concrete(api_version)
        with api_errors():
            try:
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                # Discovery is cached; a CRD installed since then needs a fresh look.
                self._dynamic.resources.invalidate_cache()
            try:
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                raise NotFound(
                    404, "NotFound", f"the cluster serves no {kind} in {api_version}"
                ) from None

    def _call(self, request: Callable[[], Any]) -> Any:
        with api_errors():
            return request()

    def _for(self, obj: dict[str, Any]) -> Resource:
        return self.resource(obj["apiVersion"], obj["kind"])

    def _body(self, obj: dict[str, Any]) -> dict[str, Any]:
        concrete = self.concrete(obj["apiVersion"])
        return obj if concrete == obj["apiVersion"] else {**obj, "apiVersion": concrete}

    def apply(
        self, obj: dict[str, Any], field_manager: str = FIELD_MANAGER, dry_run: bool = False
    ) -> dict[str, Any]:
        """Server-side apply: idempotent, and large CRDs need no annotation.

        With `dry_run`, the API server validates and admits it (webhooks
        included) but stores nothing.
        """
        return self._write(
            "server_side_apply",
            obj,
            dry_run,
            field_manager=field_manager,
            force_conflicts=True,
        )

    def replace(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """PUT the whole object over the stored one (its resourceVersion must be current)."""
        return self._write("replace", obj, dry_run)

    def _write(
        self, verb: str, obj: dict[str, Any], dry_run: bool, **options: Any
    ) -> dict[str, Any]:
        obj = self._body(obj)
        resource = self._for(obj)
        metadata = obj["metadata"]
        if dry_run:
            options["dry_run"] = "All"
        result = self._call(
            lambda: getattr(resource, verb)(
                body=obj,
                name=metadata["name"],
                namespace=metadata.get("namespace") if resource.namespaced else None,
                **options,
            )
        )
        return dict(result.to_dict())

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        obj = self._body(obj)
        kwargs: dict[str, Any] = {"body": obj, "namespace": obj["metadata"].get("namespace")}
        if dry_run:
            kwargs["query_params"] = [("dryRun", "All")]
        resource = self._for(obj)
        return dict(self._call(lambda: resource.create(**kwargs)).to_dict())

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        resource = self.resource(api_version, kind)
        # A cluster-scoped kind ignores the namespace a namespaced view passes along.
        scope = namespace if resource.namespaced else None
        return dict(self._call(lambda: resource.get(name=name, namespace=scope)).to_dict())

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
        resource = self.resource(api_version, kind)
        return list(self._call(lambda: resource.get(**kwargs)).to_dict().get("items", []))

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        namespace: str | None = None,
        content_type: str = "application/merge-patch+json",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        resource = self.resource(api_version, kind)
        extra = {"dry_run": "All"} if dry_run else {}
        result = self._call(
            lambda: resource.patch(
                body=body, name=name, namespace=namespace, content_type=content_type, **extra
            )
        )
        return dict(result.to_dict())

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        resource = self.resource(api_version, kind)
        self._call(lambda: resource.delete(name=name, namespace=namespace))

    def delete_if_present(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Delete unless already gone; True if this call deleted it."""
        try:
            self.delete(api_version, kind, name, namespace)
        except NotFound:
            return False
        return True
