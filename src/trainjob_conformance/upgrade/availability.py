"""How long the webhooks refused requests while a component rolled: the same
small requests (server-side dry-runs of the stack's admission probes) sent over
and over during the step, each answer timed.

A refusal here is a finding about the upgrade, reported with the API server's
words; it is never a failure of the harness.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from trainjob_conformance.cluster.health.readiness import AdmissionProbe, answered
from trainjob_conformance.kube.client import Kube

# Between two rounds of probes: often enough to time a window of a second.
_INTERVAL = 0.1


@dataclass
class ProbeFigures:
    probe: str
    requests: int = 0
    refused: int = 0
    first_refused: float | None = None  # seconds since the step began
    last_refused: float | None = None
    longest_outage: float = 0.0  # the longest run of refusals, to the first answer after it, s
    words: list[str] = field(default_factory=list)  # distinct answers, first few

    @property
    def window_seconds(self) -> float:
        if self.first_refused is None or self.last_refused is None:
            return 0.0
        return round(self.last_refused - self.first_refused, 2)


@dataclass
class Availability:
    """Probes on a thread of their own from `start` to `stop`."""

    kube: Kube
    probes: list[AdmissionProbe]
    figures: dict[str, ProbeFigures] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _began: float = 0.0

    def start(self) -> Availability:
        self._began = time.monotonic()
        self.figures = {p.description: ProbeFigures(p.description) for p in self.probes}
        self._thread = threading.Thread(target=self._run, name="availability", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, ProbeFigures]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return self.figures

    def _run(self) -> None:
        outage_from: dict[str, float | None] = {p.description: None for p in self.probes}
        while not self._stop.is_set():
            for probe in self.probes:
                ok, answer = answered(self.kube, probe)
                now = round(time.monotonic() - self._began, 2)
                figures = self.figures[probe.description]
                figures.requests += 1
                if ok:
                    # An outage lasts until the first answer after it.
                    began = outage_from[probe.description]
                    if began is not None:
                        figures.longest_outage = max(figures.longest_outage, round(now - began, 2))
                    outage_from[probe.description] = None
                    continue
                figures.refused += 1
                if figures.first_refused is None:
                    figures.first_refused = now
                figures.last_refused = now
                began = outage_from[probe.description]
                if began is None:
                    outage_from[probe.description] = began = now
                figures.longest_outage = max(figures.longest_outage, round(now - began, 2))
                if answer not in figures.words and len(figures.words) < 3:
                    figures.words.append(answer)
            self._stop.wait(_INTERVAL)
