"""What a failed wait prints: the objects involved, recent events, controller logs."""

from __future__ import annotations

from typing import Any

import yaml

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import TRAINJOB_CHAIN


def _trim(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("managedFields", None)
    return {**obj, "metadata": metadata}


def objects_yaml(kube: Kube, namespace: str) -> str:
    sections = []
    for api_version, kind in TRAINJOB_CHAIN:
        try:
            items = kube.list(api_version, kind, namespace=namespace)
        except ApiError as error:  # a missing CRD is worth a line, not a crash
            sections.append(f"# {kind}: could not list ({error.message})")
            continue
        if not items:
            sections.append(f"# {kind}: none")
            continue
        for item in items:
            sections.append(f"# {kind} {item['metadata']['name']}\n" + yaml.safe_dump(_trim(item)))
    return "\n".join(sections)


def events_text(kube: Kube, namespace: str, limit: int = 40) -> str:
    events = kube.core.list_namespaced_event(namespace).items
    events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    lines = [
        f"{e.type:7} {e.reason:24} {e.involved_object.kind}/{e.involved_object.name}: {e.message}"
        for e in events[-limit:]
    ]
    return "\n".join(lines) or "(no events)"


def namespace_report(
    kube: Kube,
    namespace: str,
    controller_logs: dict[str, str] | None = None,
) -> str:
    parts = [
        f"===== objects in namespace {namespace} =====",
        objects_yaml(kube, namespace),
        f"===== events in namespace {namespace} =====",
        events_text(kube, namespace),
    ]
    for component, tail in (controller_logs or {}).items():
        parts += [f"===== {component} log (tail) =====", tail]
    return "\n".join(parts)
