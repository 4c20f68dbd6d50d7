"""Run several child commands, at most N at once, and stop them all on Ctrl-C or SIGTERM.

`matrix --jobs N` runs one `pytest` per profile through this. Each child owns
its cluster and cleans it up itself when interrupted, so stopping the fan-out
means: start nothing more, tell the running children (SIGTERM reaches only
this process, so it is passed on; a terminal's Ctrl-C already reached the
whole process group), and wait until every one of them has finished its
cleanup before raising the interruption.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from trainjob_conformance.lifecycle.interrupts import Terminated

# The exit code of a child whose wait failed: the harness's own "internal error".
WAIT_FAILED = 70


class Child(Protocol):
    """What the fan-out needs of a started child (a `subprocess.Popen` has it)."""

    def wait(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...


@dataclass(frozen=True)
class Task:
    name: str
    start: Callable[[], Child]


@dataclass(frozen=True)
class Outcome:
    name: str
    exit_code: int
    seconds: float


class FanOut:
    """At most `jobs` tasks run at once; outcomes in the order they finished."""

    def __init__(
        self,
        tasks: Sequence[Task],
        jobs: int,
        progress: TextIO | None = None,
        exit_code: Callable[[int], int] = lambda code: code,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, not {jobs}")
        self.tasks = list(tasks)
        self.jobs = jobs
        self.progress = progress if progress is not None else sys.stderr
        self.exit_code = exit_code
        self.clock = clock
        self.running: dict[str, tuple[Child, float]] = {}
        self.outcomes: list[Outcome] = []
        # Each child is waited for on a thread of its own, which posts here:
        # the main thread blocks on one queue instead of polling every child.
        self._finished: queue.Queue[tuple[str, int]] = queue.Queue()

    def _say(self, line: str) -> None:
        print(f"[trainjob-conformance] {line}", file=self.progress, flush=True)

    def _start(self, task: Task) -> None:
        child = task.start()
        self.running[task.name] = (child, self.clock())
        self._say(f"profile {task.name}: started")
        threading.Thread(
            target=self._wait_for, args=(task.name, child), name=f"wait-{task.name}", daemon=True
        ).start()

    def _wait_for(self, name: str, child: Child) -> None:
        # Always post, even if waiting failed: a child the main thread never
        # hears of would keep it waiting for ever.
        code = WAIT_FAILED
        try:
            code = child.wait()
        finally:
            self._finished.put((name, code))

    def _finish(self, name: str, raw_code: int) -> Outcome:
        _, started = self.running.pop(name)
        outcome = Outcome(name, self.exit_code(raw_code), self.clock() - started)
        self.outcomes.append(outcome)
        self._say(f"profile {name}: finished, exit {outcome.exit_code} in {outcome.seconds:.0f}s")
        return outcome

    def run(self) -> list[Outcome]:
        pending = deque(self.tasks)
        try:
            while pending or self.running:
                while pending and len(self.running) < self.jobs:
                    self._start(pending.popleft())
                self._finish(*self._next_finished())
        except KeyboardInterrupt as interruption:
            if pending:
                self._say(f"interrupted: not starting {', '.join(t.name for t in pending)}")
            self._stop_running(interruption)
            raise
        return self.outcomes

    def _next_finished(self) -> tuple[str, int]:
        # A bounded get, so a signal's KeyboardInterrupt is raised promptly
        # on every platform, not only where a blocked lock is interruptible.
        while True:
            try:
                return self._finished.get(timeout=0.5)
            except queue.Empty:
                continue

    def _stop_running(self, interruption: KeyboardInterrupt) -> None:
        """Pass a SIGTERM on, then wait for every child's own cleanup to end."""
        if isinstance(interruption, Terminated):
            for child, _ in self.running.values():
                child.send_signal(signal.SIGTERM)
        if self.running:
            self._say(f"waiting for {', '.join(sorted(self.running))} to stop their clusters")
        while self.running:
            try:
                self._finish(*self._next_finished())
            except KeyboardInterrupt:
                # A second Ctrl-C is passed on, not obeyed: leaving now would
                # leave clusters behind.
                for child, _ in self.running.values():
                    child.send_signal(signal.SIGINT)


def worst(outcomes: Sequence[Outcome]) -> int:
    """The command's exit code: the worst child's (0 when there was none)."""
    return max((o.exit_code for o in outcomes), default=0)
