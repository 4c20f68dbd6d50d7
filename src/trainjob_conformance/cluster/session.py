"""One cluster per test run: started once, handed to xdist workers, stopped at the end.

Under pytest-xdist the controller process owns the cluster and passes its
coordinates to the workers through `workerinput`; run serially, the session
fixture starts it on first use.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.provider import ClusterRequest, make_provider
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import load_profile

WORKER_INPUT_KEY = "trainjob_cluster"


class ClusterSession:
    """Starts the cluster at most once per run and stops it at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.handle: ClusterHandle | None = None
        self.provider: Any = None
        self.startup_seconds: float | None = None
        worker_input = getattr(config, "workerinput", None)
        if worker_input and WORKER_INPUT_KEY in worker_input:
            self.handle = ClusterHandle.from_json(json.loads(worker_input[WORKER_INPUT_KEY]))

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def run_dir(self) -> Path:
        explicit = self.config.getoption("--trainjob-run-dir")
        if explicit:
            return Path(explicit).resolve()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return Path(self.config.rootpath, ".runs", f"{stamp}-{uuid.uuid4().hex[:6]}")

    def ensure(self) -> ClusterHandle:
        if self.handle is not None:
            return self.handle
        if self.is_worker:
            raise ConformanceError(
                "this xdist worker got no cluster from the controller; "
                "run the e2e directory (or a path inside it) so the controller starts one"
            )
        profile = load_profile(self.config.getoption("--trainjob-profile"))
        request = ClusterRequest(
            provider=self.config.getoption("--trainjob-cluster"),
            profile=profile,
            run_dir=self.run_dir(),
            kubeconfig=self.config.getoption("--trainjob-kubeconfig"),
        )
        started = time.monotonic()
        self.provider = make_provider(request)
        self.handle = self.provider.up()
        self.startup_seconds = time.monotonic() - started
        return self.handle

    def finish(self) -> None:
        if self.provider is None:
            return
        if self.config.getoption("--trainjob-keep-cluster") and self.handle is not None:
            detach = getattr(self.provider, "detach", None)
            if detach is None:
                print(
                    f"trainjob-conformance: the {self.handle.provider} cluster is not the harness's to keep or stop",
                    file=sys.stderr,
                )
                return
            detach()
            print_kept(self.handle, self.provider)
            return
        self.provider.down()
        self.provider = None


def print_kept(handle: ClusterHandle, provider: Any) -> None:
    run_dir = getattr(provider, "run_dir", None)
    lines = [
        "",
        "trainjob-conformance: the cluster is still running.",
        f"  export KUBECONFIG={handle.kubeconfig}",
        "  kubectl get trainjobs,jobsets,pods -A",
    ]
    if run_dir is not None:
        lines.append(f"  stop it with: trainjob-conformance down --run-dir {run_dir}")
    print("\n".join(lines), file=sys.stderr)


def run_includes_e2e(config: pytest.Config) -> bool:
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if "e2e" in path.parts or (path.is_dir() and (path / "e2e").is_dir()):
            return True
    return False
