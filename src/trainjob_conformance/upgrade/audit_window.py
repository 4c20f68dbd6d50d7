"""The upgrade's window from the API server's audit log: every version of a custom
resource the API server stored, and every delete it answered.

A watch of a custom resource ends when the resource's CRD is replaced, and the
window lists it again (upgrade/window.py); a version stored and replaced in
between is missed. The embedded and kind clusters of an upgrade keep an audit
log of the writes of those resources with the object stored (WINDOW_AUDIT_POLICY
of cluster/audit_policies.py), so the window's events for them are the watch's
and the log's together, and a judge reads no gap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainjob_conformance.kube.timestamps import parse_time

# What a window event that came from the log says (the watch's are ADDED, MODIFIED,
# DELETED, or LISTED after a gap).
AUDITED = "AUDITED"
_WRITES = ("create", "update", "patch", "delete")


def _stored(event: dict[str, Any], group: str, resource: str, namespace: str) -> bool:
    ref = event.get("objectRef") or {}
    code = int((event.get("responseStatus") or {}).get("code") or 0)
    return (
        event.get("stage") == "ResponseComplete"
        and event.get("verb") in _WRITES
        # A dry run (Kueue tries its Workloads so) stores nothing.
        and "dryRun=" not in str(event.get("requestURI") or "")
        and ref.get("apiGroup") == group
        and ref.get("resource") == resource
        and ref.get("namespace") == namespace
        and 200 <= code < 300
    )


def _object(event: dict[str, Any]) -> dict[str, Any]:
    """The object as stored; for a delete answered with a Status (the object gone at
    once), its name and uid from the request."""
    answered = event.get("responseObject") or {}
    if answered.get("metadata") and answered.get("kind") != "Status":
        return dict(answered)
    ref = event.get("objectRef") or {}
    return {
        "metadata": {
            "name": ref.get("name"),
            "namespace": ref.get("namespace"),
            "uid": ref.get("uid"),
        }
    }


def audited_events(
    audit_log: Path, group: str, resource: str, namespace: str, since: float
) -> list[dict[str, Any]]:
    """The writes of `resource` (of API group `group`) in `namespace` the API server
    answered from `since` (epoch seconds) on, as window events, oldest first: a
    delete as DELETED, any other write as AUDITED with the object it stored."""
    found: list[dict[str, Any]] = []
    if not audit_log.is_file():
        return found
    with audit_log.open() as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:  # the line the API server is writing now
                continue
            if not _stored(event, group, resource, namespace):
                continue
            when = parse_time(str(event.get("stageTimestamp") or ""))
            if when is None or when[0] < since:
                continue
            kind = "DELETED" if event["verb"] == "delete" else AUDITED
            found.append({"t": when[0], "type": kind, "object": _object(event)})
    return found


def merged(watched: list[dict[str, Any]], audited: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The watch's events and the log's, by time; a version the watch saw already
    (same uid and resourceVersion) is kept once, and so is a deletion (an object is
    deleted once: the log has the request, the watch the removal, whose versions
    differ where a finalizer held the object)."""

    def key(event: dict[str, Any]) -> tuple[str, ...]:
        metadata = event["object"].get("metadata") or {}
        if event["type"] == "DELETED":
            return ("deleted", str(metadata.get("namespace")), str(metadata.get("name")))
        return (str(metadata.get("uid")), str(metadata.get("resourceVersion")))

    seen = {key(event) for event in watched}
    extra = [event for event in audited if key(event) not in seen]
    return sorted([*watched, *extra], key=lambda event: event["t"])
