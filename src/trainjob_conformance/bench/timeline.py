"""How long the cluster itself took for what a test asked of it, from the objects' own timestamps.

A test's wall time includes the harness (fixtures, namespace, polling, client
round trips, cleanup). The cluster records when it did things: every object's
creationTimestamp, each condition's lastTransitionTime, the time of each
managedFields entry, container start and finish times, and Events. The span
from the first object the test created to the last of those timestamps (not
later than the end of the test) is the cluster-intrinsic latency of the test;
the rest of the wall time is the harness's overhead.

Resolution: Kubernetes writes metav1.Time (creationTimestamp,
lastTransitionTime, managedFields time, startedAt, ...) in whole seconds; only
MicroTime fields (an Event's eventTime and series.lastObservedTime, a Lease's
renewTime) carry microseconds. A whole-second stamp T stands for an instant in
[T, T+1); the harness narrows that with its own clock where it can (the first
object cannot predate the test's view, the last instant counted cannot follow
the test's end: on the embedded cluster, harness and API server share one
clock) and counts the middle of what is left. So the span of one test is off
by at most `uncertainty` seconds (half of each interval, <= 1 s); over many
tests those errors are independent and mostly cancel in a sum. Objects
deleted during the test are seen only through their Events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import LOCAL_QUEUE, TRAINJOB_CHAIN, Kind

# What a test's namespace holds besides the TrainJob chain: the Service JobSet
# creates, a Kueue LocalQueue, and the Events of all of them. Not listed: the
# ServiceAccount and ConfigMap every new namespace gets (the namespace's, not the test's).
NAMESPACE_KINDS: tuple[Kind, ...] = (
    *TRAINJOB_CHAIN,
    LOCAL_QUEUE,
    Kind("v1", "Service"),
    Kind("v1", "Event"),
)
EVENT = "Event"
# Timestamps that are not something the cluster did for the test.
_IGNORED_KEYS = {"lastHeartbeatTime", "lastProbeTime"}


@dataclass(frozen=True)
class Stamp:
    """One instant the cluster recorded, as the interval it must lie in."""

    lo: float  # seconds since the epoch
    hi: float  # == lo for a MicroTime; up to lo + 1 for a whole-second metav1.Time
    what: str  # e.g. "Pod p status.conditions[Ready].lastTransitionTime"

    @property
    def at(self) -> float:
        return (self.lo + self.hi) / 2

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def within(self, lo: float, hi: float) -> Stamp:
        """Narrowed to [lo, hi] where that leaves something; else unchanged."""
        new_lo, new_hi = max(self.lo, lo), min(self.hi, hi)
        return Stamp(new_lo, new_hi, self.what) if new_lo <= new_hi else self

    def to_json(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "what": self.what}


@dataclass(frozen=True)
class Timeline:
    """The cluster's span for one test."""

    first: Stamp | None  # the earliest creation of an object of the test
    last: Stamp | None  # the latest recorded instant, not after the test's end
    stamps: int  # how many timestamps were read
    collect_seconds: float  # what reading them cost (not part of the test's wall time)

    @property
    def intrinsic(self) -> float:
        if self.first is None or self.last is None:
            return 0.0
        return max(0.0, self.last.at - self.first.at)

    @property
    def uncertainty(self) -> float:
        """How far `intrinsic` can be off, in seconds, from whole-second stamps."""
        if self.first is None or self.last is None:
            return 0.0
        return round(self.first.half_width + self.last.half_width, 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first.to_json() if self.first else None,
            "last": self.last.to_json() if self.last else None,
            "stamps": self.stamps,
            "collect_seconds": round(self.collect_seconds, 3),
            "intrinsic": round(self.intrinsic, 3),
            "uncertainty": self.uncertainty,
        }


def parse_time(text: str) -> tuple[float, bool] | None:
    """(epoch seconds, has sub-second digits) of an RFC 3339 timestamp, else None."""
    if len(text) < 20 or text[4] != "-" or text[10] != "T":
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp(), "." in text[19:]


def _is_time_key(key: str) -> bool:
    if key in _IGNORED_KEYS:
        return False
    return key == "time" or key.endswith(("Time", "Timestamp", "At"))


def object_stamps(obj: dict[str, Any]) -> Iterator[Stamp]:
    """Every timestamp anywhere in the object, named by where it was found."""
    metadata = obj.get("metadata") or {}
    label = f"{obj.get('kind', '?')} {metadata.get('name', '?')}"

    def walk(node: Any, path: str) -> Iterator[Stamp]:
        if isinstance(node, dict):
            for key, value in node.items():
                where = f"{path}.{key}" if path else key
                if isinstance(value, str) and _is_time_key(key):
                    parsed = parse_time(value)
                    if parsed is not None:
                        yield _stamp(parsed, f"{label} {where}")
                else:
                    yield from walk(value, where)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                tag = item.get("type") or item.get("manager") if isinstance(item, dict) else None
                yield from walk(item, f"{path}[{tag or index}]")

    yield from walk(obj, "")


def _stamp(parsed: tuple[float, bool], what: str) -> Stamp:
    at, exact = parsed
    return Stamp(at, at if exact else at + 1.0, what)


def _creation(obj: dict[str, Any]) -> Stamp | None:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    parsed = parse_time(created) if isinstance(created, str) else None
    if parsed is None:
        return None
    name = obj["metadata"].get("name", "?")
    return _stamp(parsed, f"{obj.get('kind')} {name} creationTimestamp")


def _fetch(kube: Kube, manifest: dict[str, Any]) -> dict[str, Any] | None:
    metadata = manifest["metadata"]
    try:
        return kube.get(
            manifest["apiVersion"], manifest["kind"], metadata["name"], metadata.get("namespace")
        )
    except ApiError:
        return None  # already gone: its Events, if any, still count


def namespace_objects(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    objects = []
    for kind in NAMESPACE_KINDS:
        try:
            items = kube.list(*kind, namespace=namespace)
        except ApiError:
            continue  # a kind this cluster does not serve
        for item in items:
            item.setdefault("kind", kind.kind)
            objects.append(item)
    return objects


def timeline_of(
    kube: Kube,
    namespace: str,
    created_elsewhere: list[tuple[Kube, dict[str, Any]]],
    began: float,
    ended: float,
) -> Timeline:
    """The span of what the cluster did for a test that ran from `began` to `ended`.

    Both are epoch seconds of the harness's clock: `began` no later than the
    test's first object, `ended` when its body was over. `created_elsewhere`
    lists objects the test made outside its namespace (cluster-scoped, or on
    another cluster); their namespaces there are read too.
    """
    reading = time.monotonic()
    objects = namespace_objects(kube, namespace)
    seen_clusters = {id(kube)}
    for other, manifest in created_elsewhere:
        fetched = _fetch(other, manifest)
        if fetched is not None:
            fetched.setdefault("kind", manifest["kind"])
            objects.append(fetched)
        if id(other) not in seen_clusters:
            seen_clusters.add(id(other))
            objects.extend(namespace_objects(other, namespace))

    creations = [
        c.within(began, ended) for obj in objects if obj["kind"] != EVENT and (c := _creation(obj))
    ]
    first = min(creations, key=lambda s: s.at) if creations else None
    count = 0
    last: Stamp | None = None
    for obj in objects:
        for stamp in object_stamps(obj):
            count += 1
            if stamp.lo > ended:
                continue  # after the test had finished: not something it waited for
            narrowed = stamp.within(began, ended)
            if last is None or narrowed.at > last.at:
                last = narrowed
    return Timeline(first, last, count, time.monotonic() - reading)
