"""A test's record as steps a maintainer can replay with kubectl alone.

What changes on the way from the record to the steps, and why:
- The test's random namespace (and the runtime named after it) becomes a
  fixed, readable one, so the steps read the same on every cluster.
- Steps after the last observation are left out: the reproduction ends where
  the policy was judged.
- The same request sent again and again (a probe polling until a webhook's
  cache has caught up) is one step, retried until the answer the run got last.
- Objects a controller named (Pods) are found by their labels, never by the
  recorded name; the same change to each of them is one step over all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from trainjob_conformance.kube.record import OBSERVATION, REQUEST, WAIT
from trainjob_conformance.report.repro.records import Record

# Labels that name the owner of a generated object, best first.
OWNER_LABELS = (
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "batch.kubernetes.io/job-name",
)
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


def repro_namespace(policy: str) -> str:
    return "repro-" + re.sub(r"[^a-z0-9-]+", "-", policy.lower()).strip("-")


def resource_arg(api_version: str, kind: str) -> str:
    """How kubectl names a kind unambiguously: `kind.version.group`, or `kind` in core."""
    group, _, version = api_version.rpartition("/")
    return f"{kind.lower()}.{version}.{group}" if group else kind.lower()


@dataclass
class Step:
    """One thing repro.sh does; `kubectl` is its argument list after `kubectl`."""

    kind: str  # REQUEST, WAIT or OBSERVATION
    title: str
    kubectl: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    # Requests: what the recorded run was answered.
    accepted: bool = True
    message: str = ""
    retried: bool = False  # sent until the cluster gave the run's last answer
    observation: bool = False
    stored: str = ""  # accepted: what the cluster stored of the fields the request set
    # Objects a controller named: the request goes to each object of this selector.
    each_of: tuple[str, str] | None = None  # (resource, label selector)
    # Waits and observations.
    resource: str = ""
    name: str | None = None
    selector: str | None = None
    jsonpath: str | None = None
    condition: str | None = None
    match: dict[str, Any] = field(default_factory=dict)
    expected: str = ""
    observed: str = ""
    # Observations: how long the policy gives the cluster to show the expected value
    # (0: read once, the state the waits before it led to).
    within: float = 0.0
    # Observations: the policy expects the value to contain `expected`, not to be it.
    substring: bool = False


@dataclass
class Replay:
    policy: str
    namespace: str
    steps: list[Step]
    # What the script removes when it ends, besides the namespace: objects it
    # created elsewhere (cluster-scoped, or in another namespace).
    outside: list[tuple[str, str, str | None]]  # (resource, name, namespace)
    finalizers: list[tuple[str, str, str]]  # (resource, selector, finalizer)
    # Objects the steps use but do not create: the stack's own (a runtime it ships).
    needs: list[tuple[str, str]] = field(default_factory=list)  # (resource, name)


def _runtimes_used(
    entries: list[dict[str, Any]], created: set[tuple[Any, Any]]
) -> list[tuple[str, str]]:
    needed = set()
    for entry in entries:
        if entry.get("step") != REQUEST or entry.get("kind") != "TrainJob":
            continue
        ref = ((entry.get("body") or {}).get("spec") or {}).get("runtimeRef") or {}
        if ref.get("name") and (ref.get("kind"), ref["name"]) not in created:
            api_version = f"{ref.get('apiGroup', 'trainer.kubeflow.org')}/v1alpha1"
            needed.add((resource_arg(api_version, str(ref.get("kind"))), str(ref["name"])))
    return sorted(needed)


def _renamed(record: Record, namespace: str) -> list[dict[str, Any]]:
    old = record.get("namespace")
    text = json.dumps(record.get("entries") or [])
    if old:
        text = text.replace(old, namespace)
    return list(json.loads(text))


def _until_last_observation(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max((i for i, e in enumerate(entries) if e.get("observation")), default=None)
    return entries if last is None else entries[: last + 1]


def _same_request(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("step", "verb", "apiVersion", "kind", "namespace", "name", "body", "dryRun")
    return a.get("step") == REQUEST and all(a.get(k) == b.get(k) for k in keys)


def _generated(entry: dict[str, Any], created: set[tuple[str, str | None]]) -> str | None:
    """The owner selector of an object the test did not name itself, else None."""
    if (entry.get("kind"), entry.get("name")) in created or entry.get("kind") == "Namespace":
        return None
    stored = ((entry.get("answer") or {}).get("object") or {}).get("metadata") or {}
    labels = stored.get("labels") or {}
    if not stored.get("generateName") and entry.get("kind") != "Pod":
        return None
    for key in OWNER_LABELS:
        if key in labels:
            return f"{key}={labels[key]}"
    return None


def _manifest(body: dict[str, Any]) -> str:
    body = json.loads(json.dumps(body))
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        (body.get("metadata") or {}).pop(key, None)
    return yaml.safe_dump(body, sort_keys=False)


def _file_name(
    number: int, verb: str, entry: dict[str, Any], suffix: str, selector: str | None
) -> str:
    # A generated name means nothing on another cluster: name the file after the owner.
    name = f"each-{selector.rpartition('=')[2]}" if selector else entry.get("name") or "object"
    slug = re.sub(r"[^a-z0-9.-]+", "-", f"{verb}-{entry.get('kind', 'raw')}-{name}".lower())
    return f"manifests/{number:02d}-{slug.strip('-')}{suffix}"


def _leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict) and value and not path.endswith("]"):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}" if path else k)]
    text = json.dumps(value) if not isinstance(value, str) else value
    return [f"{path}={text if len(text) <= 72 else 'the edit in its file'}"]


def _stored(body: Any, answer: dict[str, Any]) -> str:
    """The fields a patch set, as the cluster's answer stored them."""
    stored = answer.get("object") or {}
    found = []
    for leaf in _leaves(body) if isinstance(body, dict) else []:
        path = leaf.split("=", 1)[0]
        value: Any = stored
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            found.append(f"{path}={value if isinstance(value, str) else json.dumps(value)}")
    return ", ".join(found)


def _summary(body: Any) -> str:
    """What a patch changes, in a few words: `spec.suspend=false`."""
    leaves = _leaves(body) if isinstance(body, dict) else []
    shown = ", ".join(leaves[:3]) + (", ..." if len(leaves) > 3 else "")
    return f" ({shown})" if shown else ""


def _request_step(entry: dict[str, Any], number: int, selector: str | None) -> Step:
    verb = entry["verb"]
    resource = resource_arg(entry["apiVersion"], entry["kind"]) if entry.get("kind") else ""
    namespace = entry.get("namespace")
    where = ["-n", namespace] if namespace else []
    dry = ["--dry-run=server"] if entry.get("dryRun") else []
    body = entry.get("body")
    answer = entry.get("answer") or {}
    shown_name = entry.get("name") if selector is None else f"<each of {selector}>"
    step = Step(
        REQUEST,
        f"{verb} {entry.get('kind') or 'path'} {shown_name}"
        + (_summary(entry.get("body")) if verb == "patch" else "")
        + (" (dry run)" if dry else ""),
        accepted=bool(answer.get("ok")),
        message=str(answer.get("message") or ""),
        observation=bool(entry.get("observation")),
        resource=resource,
        stored=_stored(body, answer) if verb == "patch" and answer.get("ok") else "",
    )
    target = "{}" if selector is not None else entry.get("name")
    if selector is not None:
        step.each_of = (resource, selector)
    if verb in ("create", "apply", "replace"):
        path = _file_name(number, verb, entry, ".yaml", selector)
        step.files[path] = _manifest(body)
        extra = {
            "create": ["create"],
            "apply": ["apply", "--server-side", "--force-conflicts"],
            "replace": ["replace"],
        }[verb]
        step.kubectl = [*extra, *dry, "-f", path]
    elif verb == "patch":
        path = _file_name(number, verb, entry, ".json", selector)
        step.files[path] = json.dumps(body, indent=2) + "\n"
        patch_type = _PATCH_TYPES.get(entry.get("contentType") or "", "merge")
        step.kubectl = ["patch", resource, target, *where, *dry, f"--type={patch_type}"]
        step.kubectl += ["--patch-file", path]
    elif verb == "delete":
        cascade = str((body or {}).get("propagationPolicy") or "background").lower()
        step.kubectl = ["delete", resource, target, *where, f"--cascade={cascade}"]
    else:  # a raw write by path
        path = _file_name(number, verb, entry, ".json", selector)
        raw = {"post": "create", "put": "replace", "delete": "delete"}.get(verb, verb)
        step.kubectl = [raw, "--raw", str(entry.get("name"))]
        if body is not None:
            step.files[path] = json.dumps(body, indent=2) + "\n"
            step.kubectl += ["-f", path]
    if entry.get("asUser"):
        # Sent as that user (kubectl impersonates it as the harness did).
        step.kubectl.append(f"--as={entry['asUser']}")
    return step


def _read_step(entry: dict[str, Any], number: int) -> Step:
    probe = entry.get("dry_run_create")
    files = {}
    if probe:
        # A wait on what the cluster would answer: poll a dry-run create of this manifest.
        files[_file_name(number, "dry-run", entry, ".yaml", None)] = _manifest(probe)
    step = Step(
        str(entry["step"]),
        str(entry.get("what") or ""),
        resource=resource_arg(entry["apiVersion"], entry["kind"]),
        name=entry.get("name"),
        selector=entry.get("selector"),
        jsonpath=entry.get("jsonpath"),
        condition=entry.get("condition"),
        match=dict(entry.get("match") or {}),
        expected=str(entry.get("expected") or ""),
        observed=str(entry.get("observed") or ""),
        within=float(entry.get("within") or 0),
        substring=bool(entry.get("substring")),
        observation=entry["step"] == OBSERVATION,
        files=files,
    )
    return step


def replay_of(record: Record) -> Replay:
    policy = str(record["policy"])
    namespace = repro_namespace(policy)
    entries = _until_last_observation(_renamed(record, namespace))
    created = {
        (e.get("kind"), e.get("name"))
        for e in entries
        if e.get("step") == REQUEST and e.get("verb") == "create" and not e.get("dryRun")
    }
    steps: list[Step] = []
    outside: list[tuple[str, str, str | None]] = []
    finalizers: list[tuple[str, str, str]] = []
    previous: dict[str, Any] | None = None
    for entry in entries:
        if entry.get("step") in (WAIT, OBSERVATION):
            steps.append(_read_step(entry, len(steps) + 1))
            previous = None
            continue
        if previous is not None and _same_request(previous, entry):
            # Sent again: one step, retried until the answer the run got last.
            step = steps[-1]
            step.retried = step.retried or step.accepted != bool(entry["answer"].get("ok"))
            step.accepted = bool(entry["answer"].get("ok"))
            step.message = str(entry["answer"].get("message") or "")
            continue
        selector = _generated(entry, created)
        last = steps[-1] if steps else None
        if (
            selector is not None
            and previous is not None
            and last is not None
            and last.each_of is not None
            and last.each_of[1] == selector
            and previous.get("body") == entry.get("body")
            and previous.get("verb") == entry.get("verb")
        ):
            previous = entry  # the same change to the next object of the selector
            continue
        step = _request_step(entry, len(steps) + 1, selector)
        steps.append(step)
        previous = entry
        if (
            entry.get("verb") == "create"
            and not entry.get("dryRun")
            and entry.get("namespace") != namespace
            and entry.get("kind") != "Namespace"
        ):
            resource = resource_arg(entry["apiVersion"], entry["kind"])
            outside.append((resource, entry["name"], entry.get("namespace")))
        added = ((entry.get("body") or {}).get("metadata") or {}).get("finalizers") or []
        if entry.get("verb") == "patch" and selector is not None:
            finalizers += [(step.each_of[0], selector, f) for f in added if step.each_of]
    return Replay(policy, namespace, steps, outside, finalizers, _runtimes_used(entries, created))
