"""The MultiKueue worker cluster under pytest-xdist: started early by the controller,
beside the run's own cluster and the suite, and handed to whichever worker runs
the test that needs it.

A kind worker cluster takes a minute or more to create and install; started by
the test that needs it, that minute was spent inside the suite, with the test's
xdist worker doing nothing else. So the xdist workers say, once they have
collected, whether a selected test asks for `trainjob_worker_cluster`; the
controller, which starts the run's cluster only then (plugin/session.py),
starts the worker cluster in a thread as soon as the run's kind nodes are up
(or, for a provider that cannot tell, once its cluster is ready), writes its
handle (or why it could not start) into a directory of the run, and stops it
at the end of the session. The controller outlives every xdist worker, so the
cluster is never stopped under a test still using it. Run serially, the
fixture starts the cluster itself, as before.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.host_load import while_saturated
from trainjob_conformance.cluster.provider import ClusterProvider
from trainjob_conformance.cluster.registry import PeerSite, peer_cluster, peer_unavailable
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for
from trainjob_conformance.progress import say
from trainjob_conformance.report.files import write_whole

PEER_DIR_KEY = "trainjob_peer_dir"
PEER_FIXTURE = "trainjob_worker_cluster"
WANTED_FILE = "wanted"
HANDLE_FILE = "handle.json"
ERROR_FILE = "error.txt"
# A kind worker cluster on a loaded 2-core host has taken up to 3 minutes; a
# test waiting longer than this for it reports what the directory holds.
READY_BOUND = 600.0
# How long the end of the session waits for a start still under way before
# stopping what it has made so far (its subprocesses got the same Ctrl-C).
STOP_BOUND = 120.0


class PeerNotStarted(ConformanceError):
    """The controller's start of the worker cluster failed; the message is its reason."""


def mark_wanted(directory: Path, test_ids: list[str]) -> None:
    """An xdist worker's word that a selected test needs the worker cluster."""
    directory.mkdir(parents=True, exist_ok=True)
    write_whole(directory / WANTED_FILE, "\n".join(test_ids) + "\n")


class PeerStart:
    """The controller's side: the worker cluster, started at most once in a thread."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.cluster: ClusterProvider | None = None
        self.thread: threading.Thread | None = None

    @classmethod
    def fresh(cls, directory: Path) -> PeerStart:
        """With nothing in `directory` from an earlier session of the same run directory."""
        for name in (WANTED_FILE, HANDLE_FILE, ERROR_FILE):
            (directory / name).unlink(missing_ok=True)
        return cls(directory)

    @property
    def wanted(self) -> bool:
        return (self.directory / WANTED_FILE).is_file()

    def start(self, beside: PeerSite) -> None:
        """Start it beside `beside` unless it is started already or nobody wants it."""
        # Where no worker can start, the test skips with the reason itself.
        if self.thread is not None or not self.wanted or peer_unavailable(beside):
            return
        self.cluster = peer_cluster(beside)
        say("starting the MultiKueue worker cluster in the background")
        self.thread = threading.Thread(target=self._up, name="peer-cluster", daemon=True)
        self.thread.start()

    def _up(self) -> None:
        assert self.cluster is not None
        started = time.monotonic()
        try:
            handle = self.cluster.up()
        except (ConformanceError, WaitTimeout) as error:
            write_whole(self.directory / ERROR_FILE, str(error).splitlines()[0])
            return
        except Exception as error:  # a bug of the harness: the traceback goes to a file
            details = self.directory / "error-details.txt"
            details.write_text("".join(traceback.format_exception(error)))
            write_whole(
                self.directory / ERROR_FILE,
                f"could not start the worker cluster: {error} (details: {details})",
            )
            return
        write_whole(self.directory / HANDLE_FILE, json.dumps(handle.to_json()))
        say(f"the MultiKueue worker cluster is ready ({time.monotonic() - started:.1f}s)")

    def stop(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            say("waiting for the MultiKueue worker cluster's start to end, to stop it")
            self.thread.join(STOP_BOUND)
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.down()


def wait_for_peer(directory: Path, bound: float = READY_BOUND) -> ClusterHandle:
    """An xdist worker's side: the handle the controller wrote, once it is there."""

    def ready() -> ClusterHandle | NotYet:
        error = directory / ERROR_FILE
        if error.is_file():
            raise PeerNotStarted(error.read_text().strip())
        handle = directory / HANDLE_FILE
        if handle.is_file():
            data: dict[str, Any] = json.loads(handle.read_text())
            return ClusterHandle.from_json(data)
        seen = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
        return NotYet(f"the controller's worker cluster directory {directory} holds {seen}")

    # Its start stretches its own bounds while the machine is saturated: so does this.
    return wait_for(
        "the MultiKueue worker cluster the controller starts",
        ready,
        bound,
        interval=0.5,
        stretch=while_saturated(bound),
    )
