"""One cluster per test run: started once, handed to xdist workers, stopped at the end.

Under pytest-xdist the controller process owns the cluster. It starts it once
the first worker has collected (so it knows whether a selected test needs the
MultiKueue worker cluster, whose start can then go beside the cluster's own)
and writes its coordinates, or why it could not start, to a file named in
`workerinput`. xdist sends no test before that hook returns, so the file is
there when a test first asks. Run serially, the session fixture starts the
cluster on first use.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.provider import ClusterProvider
from trainjob_conformance.cluster.registry import make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.lifecycle.processes import still_running
from trainjob_conformance.plugin.options import Settings
from trainjob_conformance.report.files import write_whole

HANDOVER_KEY = "trainjob_cluster_file"
# The controller's pid: a worker outliving it (lifecycle/interrupts.py) leaves quietly.
CONTROLLER_KEY = "trainjob_controller_pid"
HANDOVER_FILE = "cluster-handover.json"
STARTUP_ERROR_FILE = "startup-error.txt"


class ClusterSession:
    """Starts the cluster at most once per run and stops it at the end.

    A cluster that fails to start is remembered as `start_error`: every test
    that needs it is then reported as ERROR with that reason, rather than the
    run stopping with nothing in its report.
    """

    def __init__(self, settings: Settings, worker_input: dict[str, Any] | None) -> None:
        self.settings = settings
        self.is_worker = worker_input is not None
        self.handle: ClusterHandle | None = None
        self.provider: ClusterProvider | None = None
        self.startup_seconds: float | None = None
        self.start_error: str | None = None
        # An xdist worker's: where the controller writes the cluster's coordinates.
        self.handover: Path | None = None
        # And the process that started it, which it reports to.
        self.controller: int | None = None
        if worker_input is not None and HANDOVER_KEY in worker_input:
            self.handover = Path(worker_input[HANDOVER_KEY])
        if worker_input is not None and CONTROLLER_KEY in worker_input:
            self.controller = int(worker_input[CONTROLLER_KEY])

    @property
    def run_dir(self) -> Path:
        return self.settings.request.run_dir

    @property
    def handover_file(self) -> Path:
        return self.run_dir / HANDOVER_FILE

    def worker_input(self) -> dict[str, str]:
        """The controller's word to each xdist worker (a replaced one too)."""
        return {HANDOVER_KEY: str(self.handover_file), CONTROLLER_KEY: str(os.getpid())}

    def forget_handover(self) -> None:
        """The controller's, before any worker exists: an earlier session's hand-over in
        the same run directory must not reach this one's workers."""
        self.handover_file.unlink(missing_ok=True)

    def hand_over(self) -> None:
        """The controller's side, once `ensure` has ended either way."""
        if self.handle is not None:
            data: dict[str, Any] = {"handle": self.handle.to_json()}
        else:
            data = {"error": self.start_error or "the controller did not start the cluster"}
        self.handover_file.parent.mkdir(parents=True, exist_ok=True)
        write_whole(self.handover_file, json.dumps(data))

    def _take_over(self) -> None:
        """An xdist worker's side: what the controller wrote before sending any test."""
        if self.handover is None or not self.handover.is_file():
            raise ConformanceError(
                "this xdist worker got no cluster from the controller; "
                "run the e2e directory (or a path inside it) so the controller starts one"
            )
        data = json.loads(self.handover.read_text())
        if "handle" in data:
            self.handle = ClusterHandle.from_json(data["handle"])
        else:
            self.start_error = str(data["error"])

    def ensure(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        """The cluster, started on first call; ConformanceError (one line) if it cannot be.

        `on_created` is called once the nodes are up, where the provider can tell
        (ClusterProvider.up), before the stack is ready.
        """
        if self.is_worker and self.handle is None and self.start_error is None:
            self._take_over()
        if self.handle is not None:
            return self.handle
        if self.start_error is not None:
            raise ConformanceError(self.start_error)
        started = time.monotonic()
        try:
            self.provider = make_provider(self.settings.request)
            self.handle = self.provider.up(on_created)
        except ConformanceError as error:
            self.start_error = self._one_line(str(error))
        except WaitTimeout as error:
            self.start_error = self._one_line(str(error))
        except Exception as error:  # a bug of the harness: keep the traceback, say one line
            details = "".join(traceback.format_exception(error))
            self.start_error = self._one_line(f"could not start the cluster: {error}", details)
        if self.start_error is not None:
            self.stop()
            raise ConformanceError(self.start_error)
        self.startup_seconds = time.monotonic() - started
        assert self.handle is not None
        return self.handle

    def _one_line(self, message: str, details: str | None = None) -> str:
        """The first line of `message`; the rest (diagnostics, a traceback) goes to a file."""
        first, _, rest = message.partition("\n")
        extra = "\n".join(part for part in (rest, details) if part)
        if not extra:
            return first
        path = self.run_dir / STARTUP_ERROR_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{message}\n{details or ''}")
        except OSError:
            return first
        return f"{first} (details: {path})"

    def stop(self) -> None:
        provider, self.provider = self.provider, None
        if provider is not None:
            provider.down()

    def finish(self) -> list[str]:
        """Stop or keep the cluster as the options say; returns what is still running."""
        if self.provider is None:
            return []
        if self.settings.keep_cluster and self.handle is not None:
            provider, self.provider = self.provider, None
            hint = provider.detach()
            if hint is None:
                print(
                    f"trainjob-conformance: the {self.handle.provider} cluster is not the "
                    "harness's to keep or stop",
                    file=sys.stderr,
                )
                return []
            print_kept(self.handle, hint)
            return []
        self.stop()
        return still_running(self.run_dir)


def print_kept(handle: ClusterHandle, hint: str) -> None:
    lines = [
        "",
        "trainjob-conformance: the cluster is still running.",
        f"  export KUBECONFIG={handle.kubeconfig}",
        "  kubectl get trainjobs,jobsets,pods -A",
        f"  stop it with: {hint}",
    ]
    print("\n".join(lines), file=sys.stderr)


def run_includes_e2e(args: list[str]) -> bool:
    for arg in args:
        path = Path(arg.split("::")[0]).resolve()
        if "e2e" in path.parts or (path.is_dir() and (path / "e2e").is_dir()):
            return True
    return False
