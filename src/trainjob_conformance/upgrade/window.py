"""The upgrade window, watched: every stored version of the objects in flight (and
of what the managers create for them) from before the first step to the last
judge, written as it arrives so that a judge reads the window so far.

A statement that something never happened during the upgrade is judged on these
events, not on the state the stack ended in. Where the API server ends a watch
(a restart, a resourceVersion too old: 410), the watch lists again and goes on;
the list's objects are written as LISTED events and the gap is named in the
record (`problems`), so a judge can say its window had one.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.errors import ApiError, watch_error
from trainjob_conformance.kube.kinds import Kind

LISTED = "LISTED"
# What a gap in a watch costs, and what is said instead where an audit log of the
# writes covers it (upgrade/audit_window.py).
WATCH_GAP = "a version stored and replaced in between is not seen"
AUDIT_COVERS = "the API server's audit log of writes gives every version stored in between"
_ROUND_SECONDS = 2


@dataclass
class KindWatch:
    """One kind in one namespace, watched on a thread of its own."""

    kube: Kube
    kind: Kind
    namespace: str
    out: Path
    stop: threading.Event
    problems: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def start(self) -> KindWatch:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        resource_version = self._list()  # before the thread: the window starts now
        self._thread = threading.Thread(
            target=self._run, args=(resource_version,), name=f"window {self.kind.kind}", daemon=True
        )
        self._thread.start()
        return self

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=_ROUND_SECONDS + 10)

    def _path(self) -> str:
        # Resolved each time: an upgrade may change the version a group serves.
        return self.kube.resource(*self.kind).path(namespace=self.namespace)

    def _write(self, event_type: str, obj: dict[str, Any]) -> None:
        line = json.dumps({"t": time.time(), "type": event_type, "object": obj})
        with self.out.open("a") as sink:
            sink.write(line + "\n")

    def _list(self) -> str:
        listed = self.kube.raw("GET", self._path())
        for item in listed.get("items") or []:
            self._write(LISTED, item)
        return str(listed["metadata"]["resourceVersion"])

    def _run(self, resource_version: str) -> None:
        while not self.stop.is_set():
            try:
                resource_version = self._round(resource_version)
            except ApiError as error:
                # The API server is there but refused the watch (a CRD being
                # replaced, a version no longer served): list again, and say so.
                self.problems.append(
                    f"{time.strftime('%H:%M:%S')} watch of {self.kind.kind} ended ({error}); "
                    f"listed again: {WATCH_GAP}"
                )
                self.stop.wait(0.2)
                try:
                    resource_version = self._list()
                except ApiError:
                    continue
            except OSError as error:  # the connection dropped (the API server is up throughout)
                self.problems.append(f"watch of {self.kind.kind}: {error}")
                self.stop.wait(0.2)

    def _round(self, resource_version: str) -> str:
        path = f"{self._path()}?resourceVersion={resource_version}&allowWatchBookmarks=true"
        for event in self.kube.raw_watch(path, _ROUND_SECONDS):
            error = watch_error(event)
            if error is not None:
                raise error
            obj = event["object"]
            resource_version = obj["metadata"]["resourceVersion"]
            if event.get("type") != "BOOKMARK":
                self._write(str(event.get("type")), obj)
            if self.stop.is_set():
                break
        return resource_version


@dataclass
class Window:
    """Every kind's watch, started together and stopped together."""

    watches: dict[str, KindWatch]
    started: float
    stop: threading.Event

    @classmethod
    def begin(cls, kube: Kube, kinds: dict[str, tuple[Kind, str]], directory: Path) -> Window:
        """`kinds`: a name for each watch -> (the kind, its namespace)."""
        stop = threading.Event()
        started = time.time()
        watches = {
            name: KindWatch(kube, kind, namespace, directory / f"{name}.jsonl", stop).start()
            for name, (kind, namespace) in kinds.items()
        }
        return cls(watches, started, stop)

    def files(self) -> dict[str, str]:
        return {name: str(watch.out) for name, watch in self.watches.items()}

    def problems(self) -> list[str]:
        return [line for watch in self.watches.values() for line in watch.problems]

    def end(self) -> None:
        self.stop.set()
        for watch in self.watches.values():
            watch.join()
