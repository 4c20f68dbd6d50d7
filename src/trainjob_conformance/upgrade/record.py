"""The upgrade's record: what was in flight, where the window's events are, and
which step the stack is at. The session writes it after each step; the policy
tests of the UP family read it (`--trainjob-upgrade-record`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.upgrade.audit_window import audited_events, merged

# The objects in flight, by role (their names in their namespace).
SUSPENDED = "suspended"  # suspended, with overrides and a scheduling gate
GATED = "gated"  # running: its Pods exist, held by a gate of the harness's own
ADMITTED = "admitted"  # admitted by Kueue, holding the queue's whole quota
QUEUED = "queued"  # waiting for that quota
MANAGED = "managed"  # managedBy Kueue's MultiKueue: the Trainer must leave it alone
MANAGED_PYTORCHJOB = (
    "pytorchjob"  # runPolicy.managedBy MultiKueue (where the training-operator runs)
)

# The judge that runs once, after the last step: the queued TrainJob gets the
# quota the admitted one frees.
FINAL = "final"
# The judge, after the last step's, of what must never happen over the whole window:
# a manager acts on its restart a moment after its step is done (Kueue v0.16.6 deleted
# the admitted TrainJob's Workload after the judge of its own step had read the window).
SETTLED = "settled"
BEFORE = "before"


@dataclass
class InFlightObject:
    role: str
    kind: str
    name: str
    namespace: str
    spec: dict[str, Any]  # as stored once the object reached its state on the old release
    uid: str
    pods: dict[str, str] = field(default_factory=dict)  # Pod name -> uid, where Pods exist
    gates: list[str] = field(default_factory=list)  # the gates the harness set


@dataclass
class UpgradeRecord:
    column: str  # `trainer-2.2 -> latest`
    source: str
    target: str
    source_versions: dict[str, str]  # what ran before the first step
    phase: str  # BEFORE, a step's component, or FINAL
    steps_done: list[str]  # labels of the steps taken so far
    override_field: str  # the Trainer's override field when the objects were created
    gate: str  # the gate on the suspended TrainJob
    hold_gate: str  # the gate holding the running TrainJob's Pods
    objects: dict[str, InFlightObject]
    cluster_queue: str
    # Each watched kind's events since the objects were created, one JSON per line.
    window: dict[str, str]
    window_started: float  # time.time() when the watches began
    # The API server's audit log of the custom resources' writes, where the cluster
    # keeps one, and the watches it covers: name -> [API group, resource, namespace].
    audit_log: str = ""
    audited: dict[str, list[str]] = field(default_factory=dict)

    def write(self, path: Path) -> None:
        write_whole(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> UpgradeRecord:
        try:
            data = json.loads(path.read_text())
            data["objects"] = {
                role: InFlightObject(**entry) for role, entry in data["objects"].items()
            }
            return cls(**data)
        except (OSError, ValueError, TypeError, KeyError) as error:
            raise ConformanceError(f"{path} is not an upgrade record: {error}") from None

    def window_events_watched(self, kind: str) -> list[dict[str, Any]]:
        """The events the window's watch of `kind` recorded so far, oldest first."""
        path = Path(self.window[kind])
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def window_events(self, kind: str) -> list[dict[str, Any]]:
        """Every event of `kind` in the window so far, oldest first: the watch's, with
        the audit log's writes where the log covers that watch (its gaps included)."""
        watched = self.window_events_watched(kind)
        if not self.audit_log or kind not in self.audited:
            return watched
        group, resource, namespace = self.audited[kind]
        log = audited_events(Path(self.audit_log), group, resource, namespace, self.window_started)
        return merged(watched, log)
