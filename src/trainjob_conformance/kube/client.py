"""A small façade over the official client: apply, create, get, list, patch, delete."""

from __future__ import annotations

import functools
import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from trainjob_conformance import __version__
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.errors import NotFound, api_errors
from trainjob_conformance.kube.kinds import KNOWN_VERSIONS, SERVED
from trainjob_conformance.kube.kubeconfig import check_kubeconfig
from trainjob_conformance.kube.record import Recorder

FIELD_MANAGER = "trainjob-conformance"


# How the harness's own requests name themselves: an API server's audit log
# (and `bench`, which reads it) tells them from the managers' requests by it.
HARNESS_USER_AGENT = f"trainjob-conformance/{__version__}"


def api_client_for(
    kubeconfig: Path, context: str | None = None, retries: bool = True
) -> client.ApiClient:
    """A client for exactly this kubeconfig; the default ~/.kube/config is never read.

    Without `retries`, a refused connection fails at once (for a caller that
    polls anyway, such as one waiting for the API server to come up).
    """
    check_kubeconfig(kubeconfig, context)
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig), context=context, client_configuration=configuration
    )
    configuration.retries = (
        urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=()) if retries else False
    )
    api_client = client.ApiClient(configuration)
    api_client.user_agent = HARNESS_USER_AGENT
    return api_client


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


# Discovery is kept in memory, per client. The client library's default is a
# file in /tmp named after the server's URL, shared by every process and left
# behind: kwokctl gives one cluster after another the same loopback port, so a
# new cluster read a dead one's discovery (none of its CRDs: a full
# rediscovery), and every run left files in /tmp. The library writes its cache
# best-effort: a path under /dev/null can never be read or written, so each
# client discovers afresh, lazily, group by group.
_NO_DISCOVERY_FILE = f"{os.devnull}/trainjob-conformance-discovery.json"


class Kube:
    """Operations on arbitrary kinds by apiVersion and kind.

    Every method, and every call through `core`, `apps` and `version`, raises
    the typed errors of `kube.errors`, never the client library's own.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        # Discovery's cache is not safe to fill from several threads at once.
        self._discovery = threading.Lock()
        with api_errors():
            self._dynamic = DynamicClient(api_client, cache_file=_NO_DISCOVERY_FILE)
        self._served: dict[str, str] = {}
        # Set while a test runs: every write it sends is recorded with its answer.
        self.recorder: Recorder | None = None
        # The user this client's requests are made as (Impersonate-User), if not its own.
        self.as_user: str | None = None

    def impersonating(self, user: str) -> Kube:
        """A client for the same cluster whose requests are made as `user` (for a
        ServiceAccount's name, the API server adds its groups), recorded as such.
        The harness's own credentials must be allowed to impersonate."""
        api_client = client.ApiClient(self.api_client.configuration)
        api_client.user_agent = self.api_client.user_agent
        api_client.set_default_header("Impersonate-User", user)
        acting = Kube(api_client)
        acting.recorder = self.recorder
        acting.as_user = user
        return acting

    def _recorded(
        self,
        verb: str,
        target: tuple[str, str, str | None, str | None],
        body: Any,
        send: Callable[[], Any],
        dry_run: bool = False,
        content_type: str = "application/json",
    ) -> Any:
        if self.recorder is None:
            return send()
        api_version, kind, namespace, name = target
        where = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}
        if self.as_user:
            where["asUser"] = self.as_user
        return self.recorder.request(verb, where, body, send, dry_run, content_type)

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

    # The typed APIs are built on first use: importing their generated models
    # costs about a second of CPU, which a process that never calls them
    # (most test workers, the start of a cluster) need not pay.
    @functools.cached_property
    def core(self) -> Any:
        return _Translated(client.CoreV1Api(self.api_client))

    @functools.cached_property
    def apps(self) -> Any:
        return _Translated(client.AppsV1Api(self.api_client))

    @functools.cached_property
    def version(self) -> Any:
        return _Translated(client.VersionApi(self.api_client))

    def resource(self, api_version: str, kind: str) -> Resource:
        api_version = self.concrete(api_version)
        with self._discovery, api_errors():
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
        namespace = metadata.get("namespace") if resource.namespaced else None
        result = self._recorded(
            "apply" if verb == "server_side_apply" else verb,
            (obj["apiVersion"], obj["kind"], namespace, metadata["name"]),
            obj,
            lambda: self._call(
                lambda: getattr(resource, verb)(
                    body=obj, name=metadata["name"], namespace=namespace, **options
                )
            ).to_dict(),
            dry_run,
            "application/apply-patch+yaml" if verb == "server_side_apply" else "application/json",
        )
        return dict(result)

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        obj = self._body(obj)
        kwargs: dict[str, Any] = {"body": obj, "namespace": obj["metadata"].get("namespace")}
        if dry_run:
            kwargs["query_params"] = [("dryRun", "All")]
        resource = self._for(obj)
        metadata = obj["metadata"]
        target = (obj["apiVersion"], obj["kind"], metadata.get("namespace"), metadata.get("name"))
        return dict(
            self._recorded(
                "create",
                target,
                obj,
                lambda: self._call(lambda: resource.create(**kwargs)).to_dict(),
                dry_run,
            )
        )

    # Reads go by path and come back as plain JSON: tests poll them, and the
    # dynamic client's wrapping of every answer costs more CPU than the request.
    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        resource = self.resource(api_version, kind)
        # A cluster-scoped kind ignores the namespace a namespaced view passes along.
        scope = namespace if resource.namespaced else None
        return dict(self.raw("GET", resource.path(name=name, namespace=scope)))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        return list(self.list_object(api_version, kind, namespace, label_selector)["items"] or [])

    def list_object(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> dict[str, Any]:
        """The whole List answer: items and the list's metadata (its resourceVersion)."""
        resource = self.resource(api_version, kind)
        path = resource.path(namespace=namespace)
        if label_selector:
            path += "?" + urllib.parse.urlencode({"labelSelector": label_selector})
        return dict(self.raw("GET", path))

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
        result = self._recorded(
            "patch",
            (api_version, kind, namespace, name),
            body,
            lambda: self._call(
                lambda: resource.patch(
                    body=body, name=name, namespace=namespace, content_type=content_type, **extra
                )
            ).to_dict(),
            dry_run,
            content_type,
        )
        return dict(result)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation_policy: str | None = None,
    ) -> None:
        resource = self.resource(api_version, kind)
        body = {"propagationPolicy": propagation_policy} if propagation_policy else None
        self._recorded(
            "delete",
            (api_version, kind, namespace, name),
            body,
            lambda: self._call(lambda: resource.delete(name=name, namespace=namespace, body=body)),
        )

    @staticmethod
    def api_server_ready(api_client: client.ApiClient) -> bool:
        """Whether the API server's /readyz says ok (every post-start hook done)."""
        try:
            method, url, headers, _, _ = api_client.param_serialize(
                "GET", "/readyz", auth_settings=["BearerToken"]
            )
            response = api_client.call_api(method, url, headers, _request_timeout=2)
            return response.status == 200 and response.read().strip() == b"ok"
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            return False

    def replace_status(self, api_version: str, kind: str, obj: dict[str, Any]) -> Any:
        """Write `obj`'s status as read and changed (its resourceVersion guards it: a
        Conflict when another writer came between), as the object's controller would."""
        metadata = obj["metadata"]
        path = self.resource(api_version, kind).path(
            name=metadata["name"], namespace=metadata.get("namespace")
        )
        return self.raw("PUT", f"{path}/status", obj)

    def raw(self, method: str, path: str, body: Any = None, accept: str | None = None) -> Any:
        """One request by path, its JSON answer parsed as plain data (or None if empty).

        For large objects (CRDs of several hundred KB) where the dynamic
        client's object wrapping costs more than the request itself.
        """
        if method != "GET":
            return self._recorded(
                method.lower(),
                ("", "", None, path),
                body,
                lambda: self._raw(method, path, body, accept),
            )
        return self._raw(method, path, body, accept)

    def _raw(self, method: str, path: str, body: Any, accept: str | None) -> Any:
        headers = {"Accept": accept or "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        with api_errors():
            method, url, headers, payload, _ = self.api_client.param_serialize(
                method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
            )
            response = self.api_client.call_api(method, url, headers, payload)
            data = response.read()
            if response.status >= 400:
                raise ApiException(status=response.status, reason=response.reason, body=data)
        return json.loads(data) if data else None

    def raw_watch(self, path: str, seconds: int) -> Iterator[dict[str, Any]]:
        """The events of a watch by path (`?watch=true&...` is added), as plain data.

        The server ends the watch after `seconds`; a caller that waits longer
        opens another. Each event is {"type": ..., "object": {...}}.
        """
        separator = "&" if "?" in path else "?"
        url_path = f"{path}{separator}watch=true&timeoutSeconds={seconds}"
        with api_errors():
            method, url, headers, _, _ = self.api_client.param_serialize(
                "GET",
                url_path,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(
                method, url, headers, _request_timeout=(5, seconds + 5)
            )
            if response.status >= 400:
                data = response.read()
                raise ApiException(status=response.status, reason=response.reason, body=data)
            stream = response.response
            try:
                pending = b""
                for chunk in stream.stream(64 * 1024, decode_content=True):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
            finally:
                stream.close()  # a watch left early must not go back to the pool half read
                stream.release_conn()

    def delete_if_present(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Delete unless already gone; True if this call deleted it."""
        try:
            self.delete(api_version, kind, name, namespace)
        except NotFound:
            return False
        return True
