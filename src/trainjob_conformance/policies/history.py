"""Everything that happened to some objects during a test, as the API server replays it.

A policy that says something never happens ("waits suspended", "without Pods")
is judged on every version the API server stored since a point taken before
the test acted, not on the end state alone: an object that was unsuspended and
suspended again, or a Pod created and deleted, shows up here.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from trainjob_conformance.kube.errors import watch_error
from trainjob_conformance.kube.kinds import Kind
from trainjob_conformance.policies.view import TrainJobView

# How long the replay's watch stays open: the stored versions since `since`
# arrive at once; this only bounds the wait for the server to close it.
_REPLAY_SECONDS = 2


def resource_version(view: TrainJobView, kind: Kind) -> str:
    """A point in the namespace's history to replay `kind` from, taken before acting."""
    listed = view.kube.list_object(*kind, namespace=view.namespace)
    return str(listed["metadata"]["resourceVersion"])


def replay(
    view: TrainJobView,
    kind: Kind,
    since: str,
    label_selector: str = "",
    field_selector: str = "",
    seconds: int = _REPLAY_SECONDS,
) -> list[dict[str, Any]]:
    """Every stored version of the matching objects since `since`, oldest first,
    each as a watch event {"type": ADDED|MODIFIED|DELETED, "object": {...}}; with
    `seconds`, also every version stored in the next `seconds` (a window watched
    live)."""
    query = {"resourceVersion": since}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    path = view.kube.resource(*kind).path(namespace=view.namespace)
    events = []
    for event in view.kube.raw_watch(f"{path}?{urllib.parse.urlencode(query)}", seconds):
        error = watch_error(event)
        if error is not None:
            raise error
        if event.get("type") != "BOOKMARK":
            events.append(event)
    return events


def versions_where(events: list[dict[str, Any]], description: str, matches: Any) -> list[str]:
    """One line per stored version for which `matches(object)` holds, naming it."""
    found = []
    for event in events:
        metadata = event["object"]["metadata"]
        if matches(event["object"]):
            found.append(
                f"{event['type']} {metadata['name']} at resourceVersion "
                f"{metadata['resourceVersion']}: {description}"
            )
    return found


def stored_while(
    view: TrainJobView,
    kind: Kind,
    since: str,
    description: str,
    matches: Any,
    label_selector: str = "",
    field_selector: str = "",
) -> list[str]:
    """The stored versions of `kind` since `since` for which `matches` holds: what a
    policy says must never happen, found anywhere in the window, not only at its end."""
    events = replay(view, kind, since, label_selector, field_selector)
    return versions_where(events, description, matches)


def named(name: str) -> str:
    """The field selector of one object by name."""
    return f"metadata.name={name}"
