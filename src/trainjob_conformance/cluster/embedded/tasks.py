"""Steps of a cluster start that run side by side, and stop together when one fails.

Each task is a daemon thread: an interrupted harness never waits for one at
exit (its cleanup stops what the tasks started). A task's bounded waits take
`TaskGroup.check` as their `abort`, so once any task has failed, or the start
was stopped, the others give up within one poll instead of at their bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_SLICE = 0.05  # how often a waiting thread looks at the group


class Aborted(Exception):
    """Another step failed, or the start was stopped: this one gives up."""


class Task:
    def __init__(self, group: TaskGroup, name: str, work: Callable[[], Any]) -> None:
        self.name = name
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self._group = group
        self._work = work
        self.thread = threading.Thread(target=self._run, name=f"start-{name}", daemon=True)

    def _run(self) -> None:
        try:
            self.value = self._work()
        except BaseException as error:
            self.error = error
            self._group.failed(error)
        finally:
            self.done.set()


class TaskGroup:
    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._first_error: BaseException | None = None
        self._tasks: list[Task] = []

    def start(self, name: str, work: Callable[[], Any]) -> Task:
        task = Task(self, name, work)
        self._tasks.append(task)
        task.thread.start()
        return task

    def failed(self, error: BaseException) -> None:
        with self._lock:
            if self._first_error is None and not isinstance(error, Aborted):
                self._first_error = error
        self._stopped.set()

    def stop(self) -> None:
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def check(self) -> None:
        """Raise Aborted once the group is stopped: the `abort` of every wait in a task."""
        if self._stopped.is_set():
            raise Aborted("the start was stopped")

    def wait_event(self, event: threading.Event) -> None:
        """Wait for another task's signal, giving up if the group stops."""
        while not event.wait(_SLICE):
            self.check()

    def join(self) -> None:
        """Wait for every task; raise the first failure (the others are stopped by then)."""
        try:
            for task in self._tasks:
                while not task.done.wait(_SLICE):
                    if self._first_error is not None:
                        break
                if self._first_error is not None:
                    break
        except BaseException:
            self.stop()  # Ctrl-C: the tasks give up at their next look
            raise
        if self._first_error is not None:
            self.stop()
            raise self._first_error
        for task in self._tasks:
            if task.error is not None:  # an Aborted with no other cause: stopped from outside
                raise task.error
