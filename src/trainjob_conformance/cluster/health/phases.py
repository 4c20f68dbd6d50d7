"""Named phases of a cluster start, each with when it began and how long it took.

The start code marks its own steps (control plane, CRDs, each manager, the
admission probes); `trainjob-conformance bench` reads them, and `up` leaves
them in the run directory. Phases may overlap when steps run concurrently, so
each keeps its offset from the start as well as its duration.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

PHASES_FILE = "start-phases.json"


@dataclass(frozen=True)
class Phase:
    name: str
    offset: float  # seconds after the clock's origin
    seconds: float

    @property
    def end(self) -> float:
        return self.offset + self.seconds


class PhaseClock:
    """Records phases; safe to use from several threads at once."""

    def __init__(self) -> None:
        self._origin = time.monotonic()
        self._lock = threading.Lock()
        self._phases: list[Phase] = []

    def now(self) -> float:
        return time.monotonic() - self._origin

    def record(self, name: str, started: float, ended: float | None = None) -> None:
        """A phase that ran from `started` (a `now()` value) until `ended` (default: now)."""
        end = self.now() if ended is None else ended
        with self._lock:
            self._phases.append(Phase(name, round(started, 3), round(end - started, 3)))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block; a block that raises is not recorded (it did not complete)."""
        started = self.now()
        yield
        self.record(name, started)

    @property
    def phases(self) -> list[Phase]:
        with self._lock:
            return sorted(self._phases, key=lambda p: (p.offset, p.name))

    def seconds(self, name: str) -> float | None:
        for phase in self.phases:
            if phase.name == name:
                return phase.seconds
        return None

    def to_json(self) -> list[dict[str, object]]:
        return [asdict(phase) for phase in self.phases]

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2))


def read_phases(path: Path) -> list[Phase]:
    rows = json.loads(path.read_text())
    return [Phase(str(r["name"]), float(r["offset"]), float(r["seconds"])) for r in rows]


# A provider's timings of its start by step (`kind_create`, `install`, `ready`, ...),
# in seconds: the kind provider writes them in its run directory, and the bench
# reads a `run --cluster kind`'s start from there.
TIMINGS_FILE = "kind-timings.json"
