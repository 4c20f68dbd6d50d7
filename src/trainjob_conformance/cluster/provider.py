"""What every cluster provider is: the interface, the request, and how a start fails.

The providers live in their own folders (embedded/, kind/, existing/) and import
this module; registry.py names them. Nothing here imports a provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.stack.profiles import Profile


class ClusterProvider(Protocol):
    """Brings a ready cluster up and takes it down; `detach()`, where a provider
    has it, leaves the cluster running past this process."""

    def up(self) -> ClusterHandle: ...

    def down(self) -> None: ...


@dataclass
class ClusterRequest:
    provider: str
    profile: Profile
    run_dir: Path
    kubeconfig: Path | None = None
    # Embedded only: which labels the fake nodes carry (cluster/embedded/nodes.py).
    node_labels: str = "cloud"
    # kind only: images built here from pinned sources (local) or the releases'
    # images from their registries (upstream).
    image_source: str = "local"
    # kind only: called once the nodes are up, before the stack is ready, so a
    # MultiKueue worker's start can go beside the rest of the install, whose
    # rollouts mostly wait on readiness probes rather than use the CPU.
    on_created: Callable[[], None] | None = None


@contextmanager
def startup_errors(run_dir: Path | None) -> Iterator[None]:
    """A bounded wait that runs out while a cluster starts is a ConformanceError.

    Its first line says what did not happen; the rest (objects, log tails)
    goes to a file, so the CLI and pytest print one line, not a traceback.
    """
    try:
        yield
    except WaitTimeout as error:
        first, _, details = str(error).partition("\n")
        if details and run_dir is not None:
            path = run_dir / "startup-error.txt"
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(str(error))
                first = f"{first} (details: {path})"
        raise ConformanceError(f"the cluster did not become ready: {first}") from None
