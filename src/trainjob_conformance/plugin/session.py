"""One cluster per test run: started once, handed to xdist workers, stopped at the end.

Under pytest-xdist the controller process owns the cluster and passes its
coordinates (or why it could not start) to the workers through `workerinput`;
run serially, the session fixture starts it on first use.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.provider import ClusterProvider
from trainjob_conformance.cluster.registry import make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.lifecycle.processes import still_running
from trainjob_conformance.plugin.options import Settings

WORKER_INPUT_KEY = "trainjob_cluster"
WORKER_ERROR_KEY = "trainjob_cluster_error"
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
        if worker_input is not None:
            if WORKER_INPUT_KEY in worker_input:
                self.handle = ClusterHandle.from_json(json.loads(worker_input[WORKER_INPUT_KEY]))
            self.start_error = worker_input.get(WORKER_ERROR_KEY)

    @property
    def run_dir(self) -> Path:
        return self.settings.request.run_dir

    def worker_input(self) -> dict[str, str]:
        if self.handle is not None:
            return {WORKER_INPUT_KEY: json.dumps(self.handle.to_json())}
        if self.start_error is not None:
            return {WORKER_ERROR_KEY: self.start_error}
        return {}

    def ensure(self) -> ClusterHandle:
        """The cluster, started on first call; ConformanceError (one line) if it cannot be."""
        if self.handle is not None:
            return self.handle
        if self.start_error is not None:
            raise ConformanceError(self.start_error)
        if self.is_worker:
            raise ConformanceError(
                "this xdist worker got no cluster from the controller; "
                "run the e2e directory (or a path inside it) so the controller starts one"
            )
        started = time.monotonic()
        try:
            self.provider = make_provider(self.settings.request)
            self.handle = self.provider.up()
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
            detach = getattr(self.provider, "detach", None)
            if detach is None:
                print(
                    f"trainjob-conformance: the {self.handle.provider} cluster is not the "
                    "harness's to keep or stop",
                    file=sys.stderr,
                )
                return []
            detach()
            print_kept(self.handle, self.provider)
            self.provider = None
            return []
        self.stop()
        return still_running(self.run_dir)


def print_kept(handle: ClusterHandle, provider: Any) -> None:
    lines = [
        "",
        "trainjob-conformance: the cluster is still running.",
        f"  export KUBECONFIG={handle.kubeconfig}",
        "  kubectl get trainjobs,jobsets,pods -A",
    ]
    hint = getattr(provider, "down_hint", None)
    if hint is not None:
        lines.append(f"  stop it with: {hint()}")
    print("\n".join(lines), file=sys.stderr)


def run_includes_e2e(args: list[str]) -> bool:
    for arg in args:
        path = Path(arg.split("::")[0]).resolve()
        if "e2e" in path.parts or (path.is_dir() and (path / "e2e").is_dir()):
            return True
    return False
