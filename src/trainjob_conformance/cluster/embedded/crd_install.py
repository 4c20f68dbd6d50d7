"""CRDs and other cluster-wide objects of a release, stored and waited for: the
install's and the upgrade's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trainjob_conformance.cluster.health.readiness import established_condition
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.conflicts import until_no_conflict
from trainjob_conformance.kube.errors import ApiError, Conflict, NotFound
from trainjob_conformance.kube.waits import NotYet, wait_for

# How often the install looks at things on loopback (a CRD's conditions).
LOCAL_POLL = 0.05


_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def create_crd(kube: Kube, crd: dict[str, Any]) -> None:
    """POST the CRD (a new cluster has none); an existing one is applied over."""
    try:
        kube.raw("POST", _CRD_PATH, crd)
    except Conflict:
        kube.apply(crd)


def wait_established(
    kube: Kube, names: list[str], abort: Callable[[], None], timeout: float = 60
) -> None:
    """Watch each CRD until the API server reports it Established.

    A watch on one name starts with the CRD's current state, then each change:
    no polling, and the answer comes the moment the condition is set. Watches
    last a second, so that `abort` (a failure elsewhere) is heard within one.
    """
    deadline = time.monotonic() + timeout
    for name in names:
        path = f"{_CRD_PATH}?fieldSelector=metadata.name%3D{name}"
        seen: dict[str, Any] = {}

        def established(path: str = path, seen: dict[str, Any] = seen) -> bool | NotYet:
            for event in kube.raw_watch(path, seconds=1):
                if event.get("type") in ("ADDED", "MODIFIED"):
                    seen.update(event["object"])
                    if established_condition(seen) is not None:
                        return True
            conditions = (seen.get("status") or {}).get("conditions") or "no status"
            return NotYet(f"last conditions: {conditions}")

        wait_for(
            f"CRD {name} to be Established",
            established,
            timeout=max(0.0, deadline - time.monotonic()),
            interval=LOCAL_POLL,
            # A busy API server may drop a watch: another, shortly, within the bound.
            retry_on=(ApiError,),
            abort=abort,
        )


# Aggregated discovery, as client-go (and so each manager's REST mapper) reads it.
_DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _served(crds: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(group, version, plural) of every served version of the CRDs."""
    return {
        (crd["spec"]["group"], version["name"], crd["spec"]["names"]["plural"])
        for crd in crds
        for version in crd["spec"]["versions"]
        if version.get("served")
    }


def _discovered(kube: Kube) -> set[tuple[str, str, str]]:
    listing = kube.raw("GET", "/apis", accept=_DISCOVERY_V2)
    return {
        (group["metadata"]["name"], version["version"], resource["resource"])
        for group in listing.get("items") or []
        for version in group.get("versions") or []
        for resource in version.get("resources") or []
    }


def wait_discoverable(
    kube: Kube, crds: list[dict[str, Any]], abort: Callable[[], None], timeout: float = 60
) -> None:
    wanted = _served(crds)

    def probe() -> bool | NotYet:
        missing = sorted(wanted - _discovered(kube))
        return not missing or NotYet(
            "not in discovery yet: " + ", ".join("/".join(entry) for entry in missing)
        )

    wait_for(
        f"{len(wanted)} resources to be in the API server's discovery",
        probe,
        timeout=timeout,
        interval=LOCAL_POLL,
        retry_on=(ApiError,),
        abort=abort,
    )


def replace_stored(kube: Kube, obj: dict[str, Any]) -> None:
    """Store `obj` as it is, over whatever is stored under its name (created where
    nothing is): an upgrade's release must not keep fields the old one set and the
    new one dropped, which a server-side apply by another field manager would."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    metadata = obj["metadata"]

    def write() -> None:
        try:
            stored = kube.get(api_version, kind, metadata["name"], metadata.get("namespace"))
        except NotFound:
            kube.create(obj)
            return
        version = stored["metadata"]["resourceVersion"]
        kube.replace({**obj, "metadata": {**metadata, "resourceVersion": version}})

    until_no_conflict(write, f"{kind} {metadata['name']}")
