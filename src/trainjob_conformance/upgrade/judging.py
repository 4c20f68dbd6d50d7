"""What the UP policies read off the upgrade's window and stored objects: pure
functions of the recorded events, so each can be tested on its own."""

from __future__ import annotations

from typing import Any

from trainjob_conformance.policies.pods import gate_names

DROPPED, ADDED, CHANGED = "dropped", "added", "changed"


def _walk(old: Any, new: Any, path: str) -> list[tuple[str, str, Any, Any]]:
    """Where `new` differs from `old`: (path, how, old value, new value) each, how one
    of DROPPED, ADDED, CHANGED. Lists of the same length are compared item by item,
    so a container's env names its place."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[tuple[str, str, Any, Any]] = []
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}"
            if key not in new:
                found.append((where, DROPPED, old[key], None))
            elif key not in old:
                found.append((where, ADDED, None, new[key]))
            else:
                found += _walk(old[key], new[key], where)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            difference
            for index, (was, now) in enumerate(zip(old, new, strict=True))
            for difference in _walk(was, now, f"{path}[{index}]")
        ]
    return [] if old == new else [(path, CHANGED, old, new)]


def fields_lost(before: Any, after: Any, path: str = "spec") -> list[str]:
    """Paths set in `before` that `after` lacks or holds another value at. A field the
    new release adds (a default) is not a loss."""
    return [
        where if how == DROPPED else f"{where} (was {was!r}, now {now!r})"
        for where, how, was, now in _walk(before, after, path)
        if how != ADDED
    ]


def differences(old: Any, new: Any, path: str) -> list[str]:
    """Where `new` differs from `old`, a path each: dropped, added or changed."""
    return [f"{where} {how}" for where, how, _, _ in _walk(old, new, path)]


# A recreated Workload's PodSet differences named in a verdict, at most.
_DIFFERENCES_SHOWN = 6


def _podsets_differ(first: dict[str, Any], later: dict[str, Any]) -> str:
    """Why Kueue may have found no match: how the later Workload's PodSets differ."""
    found = differences(
        (first.get("spec") or {}).get("podSets"),
        (later.get("spec") or {}).get("podSets"),
        "spec.podSets",
    )
    if not found:
        return "the later one's PodSets are the same as the first one's"
    shown = ", ".join(found[:_DIFFERENCES_SHOWN])
    more = f" and {len(found) - _DIFFERENCES_SHOWN} more" if len(found) > _DIFFERENCES_SHOWN else ""
    return f"the later one's PodSets differ from the first one's: {shown}{more}"


def _when(event: dict[str, Any], began: float) -> str:
    return f"+{event['t'] - began:.1f}s {event['type']} rv {event['object']['metadata'].get('resourceVersion')}"


def pod_changes(events: list[dict[str, Any]], pods: dict[str, str], began: float) -> list[str]:
    """For the Pods that existed before the upgrade (name -> uid): each gate one gained,
    each deletion and each Pod of the same name with another uid, in the window."""
    first_gates: dict[str, set[str]] = {}
    found: list[str] = []
    for event in events:
        pod = event["object"]
        name = pod["metadata"]["name"]
        if name not in pods:
            continue
        if pod["metadata"].get("uid") != pods[name]:
            found.append(f"Pod {name} was recreated ({_when(event, began)})")
            continue
        if event["type"] == "DELETED":
            found.append(f"Pod {name} was deleted ({_when(event, began)})")
            continue
        gates = set(gate_names(pod.get("spec") or {}))
        first = first_gates.setdefault(name, gates)
        gained = sorted(gates - first)
        if gained:
            found.append(f"Pod {name} gained {gained} ({_when(event, began)})")
    unseen = sorted(set(pods) - set(first_gates))
    found += [f"Pod {name} is not in the window at all" for name in unseen]
    return found


def owner_of(workload: dict[str, Any]) -> str | None:
    for reference in workload["metadata"].get("ownerReferences") or []:
        if reference.get("kind") == "TrainJob":
            return str(reference.get("name"))
    return None


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def workload_changes(
    events: list[dict[str, Any]], admitted: str, queued: str, began: float
) -> list[str]:
    """Admission lost or duplicated in the window: a TrainJob with more than one
    Workload, a Workload deleted, the admitted one's Admitted condition anything but
    True, the queued one reserving quota while the admitted one holds it all."""
    uids: dict[str, set[str]] = {}
    # Each TrainJob's Workloads as first seen, in the order they were: the first and
    # a later one are compared when there are two.
    first_seen: dict[str, dict[str, dict[str, Any]]] = {}
    found: list[str] = []
    for event in events:
        workload = event["object"]
        owner = owner_of(workload)
        if owner not in (admitted, queued):
            continue
        name = workload["metadata"]["name"]
        uid = str(workload["metadata"].get("uid"))
        uids.setdefault(owner, set()).add(uid)
        first_seen.setdefault(owner, {}).setdefault(uid, workload)
        if event["type"] == "DELETED":
            found.append(f"Workload {name} of TrainJob {owner} was deleted ({_when(event, began)})")
        elif owner == admitted and _condition(workload, "Admitted") != "True":
            found.append(
                f"Workload {name} of TrainJob {owner} stored with Admitted="
                f"{_condition(workload, 'Admitted')} ({_when(event, began)})"
            )
        elif owner == queued and _condition(workload, "QuotaReserved") == "True":
            found.append(
                f"Workload {name} of TrainJob {owner} reserved quota the admitted one holds "
                f"({_when(event, began)})"
            )
    for owner in (admitted, queued):
        if len(uids.get(owner, ())) > 1:
            first, later, *_ = first_seen[owner].values()
            found.append(
                f"TrainJob {owner} had {len(uids[owner])} Workloads: {sorted(uids[owner])}; "
                + _podsets_differ(first, later)
            )
        if owner not in uids:
            found.append(f"TrainJob {owner} has no Workload in the window")
    return found


def first_workload(events: list[dict[str, Any]], trainjob: str) -> dict[str, Any] | None:
    """The first stored version of a TrainJob's Workload the window saw."""
    for event in events:
        if owner_of(event["object"]) == trainjob:
            return event["object"]
    return None


def runtime_settings(workload: dict[str, Any]) -> list[str]:
    """The env names and ports each container of a Workload's PodSets carries, a line
    each: what the runtime put there, which a Kueue built with another Trainer may
    work out differently (and then no longer find the Workload its own)."""
    found = []
    for podset in (workload.get("spec") or {}).get("podSets") or []:
        spec = (podset.get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            env = [str(item.get("name")) for item in container.get("env") or []]
            ports = [str(item.get("containerPort")) for item in container.get("ports") or []]
            if env or ports:
                found.append(
                    f"PodSet {podset.get('name')} container {container.get('name')}: "
                    f"env {', '.join(env) or 'none'}; ports {', '.join(ports) or 'none'}"
                )
    return found
