"""What the cluster did for each test, to the microsecond, from the API server's audit log.

The objects' own timestamps (`bench.timeline`) are whole seconds, so one
test's cluster time read from them is off by up to a second either way. The
API server's audit log (the bench starts its cluster with one, of writes only)
stamps every request it answered, received and answered, in microseconds, with
the user agent that sent it; the harness's requests carry its own.

A test alternates between asking and waiting: a write of the harness (create,
patch, delete, a dry run, a request a webhook refuses), then the cluster's
writes in answer (controllers, scheduler, kwok, the managers), while the
harness polls with reads, which the log leaves out. The cluster's reaction to
one harness write runs from its receipt to the last answer, to anyone, before
the harness's next write (or the test's end; a write still being answered then
counts up to it); a test's reaction is the sum over its writes. The intervals never overlap, so the sum is at most the
test's span. What is left of the wall time is the harness's: fixtures, its own
round trips, the lag of its polls, and waits where a policy needs the cluster
to do nothing for a while (a request refused again and again, a Job that must
stay suspended).

A test's writes are those in its namespace and those on cluster-scoped objects
named after it (its ClusterQueue, ResourceFlavor, runtimes, the namespace
itself). Writes on another cluster (a MultiKueue worker) are not in this log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.kube.timestamps import parse_time

# How a cluster-scoped object's writes are filed: by its name, after this mark.
CLUSTER_SCOPED = "/"


@dataclass(frozen=True)
class Write:
    """One write the API server answered."""

    received: float  # epoch seconds, microsecond resolution
    answered: float
    by_harness: bool
    what: str  # e.g. "create trainjobs/job 201"


@dataclass(frozen=True)
class Reaction:
    """The cluster's time for one test, and how many writes of the harness it answered."""

    seconds: float
    requests: int


def _write(event: dict, harness_agent: str) -> tuple[str, Write] | None:
    """The file key ("namespace" or "/name") and the write of one audit event, if one."""
    if event.get("stage") != "ResponseComplete":
        return None
    received = parse_time(event.get("requestReceivedTimestamp") or "")
    answered = parse_time(event.get("stageTimestamp") or "")
    ref = event.get("objectRef") or {}
    if received is None or answered is None or not ref:
        return None
    namespace = ref.get("namespace") or ""
    name = ref.get("name") or ""
    key = namespace or f"{CLUSTER_SCOPED}{name}"
    resource = "/".join(part for part in (ref.get("resource"), ref.get("subresource")) if part)
    code = (event.get("responseStatus") or {}).get("code", "?")
    return key, Write(
        received=received[0],
        answered=answered[0],
        by_harness=str(event.get("userAgent", "")).startswith(harness_agent),
        what=f"{event.get('verb')} {resource}/{name} {code}",
    )


def writes_by_namespace(lines: Iterable[str], harness_agent: str) -> dict[str, list[Write]]:
    """The log's writes, filed by namespace (cluster-scoped ones by "/name")."""
    found: dict[str, list[Write]] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short as the API server stopped
        parsed = _write(event, harness_agent)
        if parsed is not None:
            found.setdefault(parsed[0], []).append(parsed[1])
    return found


def read_audit_log(path: Path, harness_agent: str) -> dict[str, list[Write]]:
    with path.open(encoding="utf-8", errors="replace") as lines:
        return writes_by_namespace(lines, harness_agent)


def writes_of(found: dict[str, list[Write]], namespace: str) -> list[Write]:
    """A test's writes: in its namespace, and on cluster-scoped objects named after it."""
    writes = list(found.get(namespace, []))
    for key, more in found.items():
        name = key.removeprefix(CLUSTER_SCOPED)
        if key.startswith(CLUSTER_SCOPED) and (
            name == namespace or name.startswith(f"{namespace}-")
        ):
            writes.extend(more)
    return sorted(writes, key=lambda write: write.received)


def reaction(writes: list[Write], began: float, ended: float) -> Reaction:
    """The cluster's time for a test that ran from `began` to `ended` (see the module's note)."""
    inside = [w for w in writes if began <= w.received <= ended]
    asked = [w.received for w in inside if w.by_harness]
    total = 0.0
    for index, start in enumerate(asked):
        until = asked[index + 1] if index + 1 < len(asked) else ended
        last = max(
            (min(w.answered, until) for w in inside if w.received < until and w.answered >= start),
            default=start,
        )
        total += max(0.0, last - start)
    return Reaction(seconds=total, requests=len(asked))
