"""A profile's builds in the background, each usable as soon as it is done.

On a cold machine the builds are nearly all of the time to a first verdict.
The embedded start does not wait for all of them: it starts the control plane
once etcd, Kubernetes and KWOK exist, and each manager once its own binary
does, while the rest still build. With a warm cache every build is found at
once and nothing changes.

One build at a time. Two at once were slower on 2 cores (README, "A first
verdict on a cold machine"): the builds share most of their dependencies
(Kubernetes' libraries), and two builds compile the same packages side by
side, where one after the other the second finds them in Go's build cache.

Builds run at a lower CPU priority (nice): a control plane started meanwhile
must answer its health checks in time (kube-controller-manager gives up on a
slow API server), and a build only needs the cores nothing else wants.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from concurrent.futures import Future
from pathlib import Path

from trainjob_conformance.progress import HEARTBEAT, format_seconds, say
from trainjob_conformance.stack import gobuild
from trainjob_conformance.stack.components import BUILD_ORDER
from trainjob_conformance.stack.profiles import Profile

# How often a wait with `abort` asks it.
_ABORT_CHECK = 0.05
# More than the builds' own look (0.2 s) plus a go process's exit after SIGKILL.
_CANCEL_BOUND = 5.0

# Builds at a time (see above): more compile shared packages twice.
PARALLEL_BUILDS = 1


class Builds:
    """Every component a profile needs, built by `PARALLEL_BUILDS` worker threads."""

    def __init__(self, profile: Profile, parallel: int = PARALLEL_BUILDS) -> None:
        self.profile = profile
        self.components = tuple(key for key in BUILD_ORDER if profile.has(key))
        self._futures: dict[str, Future[dict[str, Path]]] = {
            key: Future() for key in self.components
        }
        self._queue = list(self.components)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._all_done = threading.Event()
        self._parallel = parallel
        self._started = time.monotonic()
        self._threads: list[threading.Thread] = []
        self._running: dict[str, float] = {}  # component -> when its build began
        self.finished_at: dict[str, float] = {}  # seconds after the start, per component

    def start(self) -> Builds:
        for index in range(min(self._parallel, len(self._queue))):
            thread = threading.Thread(target=self._work, name=f"build-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()
        threading.Thread(target=self._heartbeat, name="build-heartbeat", daemon=True).start()
        return self

    def _heartbeat(self) -> None:
        """One line for all the builds that run, instead of one per build."""
        while not self._all_done.wait(HEARTBEAT):
            with self._lock:
                running = dict(self._running)
            if running:
                now = time.monotonic()
                say(
                    "still building "
                    + ", ".join(
                        f"{key} {self.profile.version(key)} ({format_seconds(now - began)})"
                        for key, began in running.items()
                    )
                )

    def _next(self) -> str | None:
        with self._lock:
            if self._cancelled.is_set() or not self._queue:
                return None
            return self._queue.pop(0)

    def _work(self) -> None:
        while (key := self._next()) is not None:
            future = self._futures[key]
            try:
                with self._lock:
                    self._running[key] = time.monotonic()
                future.set_result(
                    gobuild.build_component(
                        key, self.profile.version(key), cancelled=self._cancelled, heartbeat=None
                    )
                )
            except BaseException as error:  # handed to whoever waits for this component
                future.set_exception(error)
                # A failed build fails the start: the builds not begun are not started.
                self.cancel()
            finally:
                self.finished_at[key] = round(time.monotonic() - self._started, 1)
                with self._lock:
                    self._running.pop(key, None)
        # Whatever is still queued was cancelled: its waiters must not wait forever.
        with self._lock:
            left, self._queue = self._queue, []
        for key in left:
            self._futures[key].set_exception(gobuild.BuildCancelled(f"the build of {key}"))
        if self.done():
            self._all_done.set()

    def wait(
        self, components: Iterable[str], abort: Callable[[], None] | None = None
    ) -> dict[str, Path]:
        """The binaries of these components, once built; a build's failure is raised here.

        `abort` is called while waiting and may raise to give up (a start stopped).
        """
        binaries: dict[str, Path] = {}
        for key in components:
            if key not in self._futures:
                continue
            future = self._futures[key]
            while abort is not None and not future.done():
                abort()
                futures.wait([future], timeout=_ABORT_CHECK)
            binaries.update(future.result())
        return binaries

    def done_with(self, component: str) -> bool:
        future = self._futures.get(component)
        return future is None or future.done()

    def wait_all(self) -> dict[str, Path]:
        return self.wait(self.components)

    def done(self) -> bool:
        return all(future.done() for future in self._futures.values())

    def seconds(self) -> float:
        """When the last build finished, in seconds after the start."""
        return max(self.finished_at.values(), default=0.0)

    def cancel(self, wait: bool = False) -> None:
        """Start no more builds and stop the running ones, go processes included.

        With `wait`, return once their threads have stopped them (each looks
        every 0.2 s), so that nothing is left running when the harness exits.
        """
        self._cancelled.set()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join(_CANCEL_BOUND)


def build_profile(profile: Profile) -> dict[str, Path]:
    """Every binary of a profile, built (or found) in parallel; stops the builds on error."""
    builds = Builds(profile).start()
    try:
        return builds.wait_all()
    except BaseException:
        builds.cancel(wait=True)
        raise
