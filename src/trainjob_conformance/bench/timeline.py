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
renewTime) carry microseconds. The estimate therefore uses every stamp at the
resolution all share, whole seconds: intrinsic = second of the last stamp -
second of the first creation. For one test that is off by less than 1 s either
way (a 0.3 s test reads 0 or 1), but it is unbiased: a test starts at a random
point within its second, so over many tests the errors cancel in a sum (the
standard deviation of a sum of N tests is at most 0.5 * sqrt(N) s). Hard
bounds are kept too, narrowed by the harness's own clock (the first object
cannot predate the test's view, and nothing counted follows the test's end; on
the embedded cluster the harness and the API server share one clock). Objects
deleted during the test are seen only through their Events.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError
from trainjob_conformance.kube.kinds import LOCAL_QUEUE, TRAINJOB_CHAIN, Kind
from trainjob_conformance.kube.timestamps import parse_time

# What a test's namespace holds besides the TrainJob chain: a Kueue
# LocalQueue, and the Events of all of them. Not listed: the ServiceAccount and
# ConfigMap every new namespace gets (the namespace's, not the test's), and the
# Service JobSet creates along with its Jobs (nothing of its own to add).
NAMESPACE_KINDS: tuple[Kind, ...] = (*TRAINJOB_CHAIN, LOCAL_QUEUE, Kind("v1", "Event"))
EVENT = "Event"
# Timestamps that are not something the cluster did for the test.
_IGNORED_KEYS = {"lastHeartbeatTime", "lastProbeTime"}


@dataclass(frozen=True)
class Stamp:
    """One instant the cluster recorded, as the interval [lo, hi] it lies in."""

    lo: float  # seconds since the epoch
    hi: float  # == lo for a MicroTime; lo + 1 for a whole-second metav1.Time
    what: str  # e.g. "Pod p status.conditions[Ready].lastTransitionTime"

    @property
    def second(self) -> int:
        return math.floor(self.lo)

    def to_json(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "what": self.what}


@dataclass(frozen=True)
class Timeline:
    """The cluster's span for one test that ran from `began` to `ended` (harness clock)."""

    first: Stamp | None  # the earliest creation of an object of the test
    last: Stamp | None  # the latest recorded instant, not after the test's end
    began: float
    ended: float
    stamps: int  # how many timestamps were read
    collect_seconds: float  # what reading them cost (not part of the test's wall time)

    @property
    def intrinsic(self) -> float:
        """The estimate, in whole seconds (see the module's note on resolution)."""
        if self.first is None or self.last is None:
            return 0.0
        return float(max(0, self.last.second - self.first.second))

    @property
    def bounds(self) -> tuple[float, float]:
        """The least and the most the span can be, given every stamp's interval."""
        if self.first is None or self.last is None:
            return (0.0, 0.0)
        first_lo = max(self.first.lo, self.began)
        first_hi = min(self.first.hi, self.ended)
        last_hi = min(self.last.hi, self.ended)
        return (max(0.0, self.last.lo - first_hi), max(0.0, last_hi - first_lo))

    def to_json(self) -> dict[str, Any]:
        low, high = self.bounds
        return {
            "first": self.first.to_json() if self.first else None,
            "last": self.last.to_json() if self.last else None,
            "began": round(self.began, 3),
            "ended": round(self.ended, 3),
            "stamps": self.stamps,
            "collect_seconds": round(self.collect_seconds, 3),
            "intrinsic": self.intrinsic,
            "bounds": [round(low, 3), round(high, 3)],
        }


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


def _list(kube: Kube, kind: Kind, namespace: str) -> list[dict[str, Any]]:
    try:
        items = kube.list(*kind, namespace=namespace)
    except ApiError:
        return []  # a kind this cluster does not serve
    for item in items:
        item.setdefault("kind", kind.kind)
    return items


def namespace_objects(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    # Side by side: the reading happens in the test's teardown, and the bench
    # should disturb the wall time it measures as little as it can. Kinds are
    # looked up first, one by one, so discovery is never filled from two threads.
    for kind in NAMESPACE_KINDS:
        with contextlib.suppress(ApiError):
            kube.resource(*kind)
    with ThreadPoolExecutor(max_workers=len(NAMESPACE_KINDS)) as pool:
        lists = list(pool.map(lambda kind: _list(kube, kind, namespace), NAMESPACE_KINDS))
    return [item for items in lists for item in items]


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

    creations = [c for obj in objects if obj["kind"] != EVENT and (c := _creation(obj))]
    first = min(creations, key=lambda s: s.lo) if creations else None
    count = 0
    last: Stamp | None = None
    for obj in objects:
        for stamp in object_stamps(obj):
            count += 1
            if stamp.lo > ended:
                continue  # after the test had finished: not something it waited for
            if last is None or (stamp.second, stamp.lo) > (last.second, last.lo):
                last = stamp
    return Timeline(first, last, began, ended, count, time.monotonic() - reading)
