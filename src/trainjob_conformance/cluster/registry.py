"""The cluster providers by name, each imported only when it is asked for.

A provider module imports the interface in provider.py; only this module knows
the providers, so the interface and the providers never import each other.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainjob_conformance.cluster.provider import ClusterProvider, ClusterRequest
from trainjob_conformance.errors import ConformanceError

# name -> the module whose `from_request(request)` makes the provider.
_PROVIDER_MODULES = {
    "embedded": "trainjob_conformance.cluster.embedded.provider",
    "kind": "trainjob_conformance.cluster.kind.provider",
    "existing": "trainjob_conformance.cluster.existing.provider",
}
PROVIDERS = tuple(_PROVIDER_MODULES)


def make_provider(request: ClusterRequest) -> ClusterProvider:
    module_name = _PROVIDER_MODULES.get(request.provider)
    if module_name is None:
        raise ConformanceError(
            f"unknown cluster provider {request.provider!r}; choose one of: {', '.join(PROVIDERS)}"
        )
    factory: Callable[[ClusterRequest], ClusterProvider] = importlib.import_module(
        module_name
    ).from_request
    return factory(request)


# A second cluster beside a run's, with the same stack: the MultiKueue worker.
# Embedded beside an embedded cluster, kind beside kind: the worker's kubeconfig
# must work from the manager cluster's Pods, and only a cluster the harness can
# start next to the first gives that. An `existing` cluster with a run
# directory is one an embedded `up` (or `prove`) or a kept kind run started on
# this host, so a worker beside it is as reachable as beside the run's own.
PEER_PROVIDERS = ("embedded", "existing", "kind")


class PeerSite(Protocol):
    """What a worker cluster's start needs of the cluster it goes beside: a ready
    cluster's handle has it, and so has a `StartingCluster`."""

    @property
    def provider(self) -> str: ...
    @property
    def built_by(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def run_dir(self) -> Path | None: ...


@dataclass(frozen=True)
class StartingCluster:
    """A cluster whose nodes are up but whose stack is not ready yet: a worker can
    start beside it already (its network and images exist)."""

    provider: str
    profile: str
    run_dir: Path | None
    built_by: str = ""

    @classmethod
    def of(cls, request: ClusterRequest) -> StartingCluster:
        return cls(request.provider, request.profile.name, request.run_dir)


def peer_unavailable(beside: PeerSite) -> str | None:
    """Why no worker cluster can start beside this one, or None."""
    if beside.provider not in PEER_PROVIDERS or beside.run_dir is None:
        return (
            "a MultiKueue worker needs a second cluster, which only the embedded and kind "
            f"providers can start (this run uses {beside.provider!r})"
        )
    return None


def peer_cluster(beside: PeerSite) -> ClusterProvider:
    """A not yet started cluster of `beside`'s profile and provider; its state goes in
    a directory of `beside`'s run directory named after this process."""
    from trainjob_conformance.stack.profiles import load_profile

    why = peer_unavailable(beside)
    if why is not None or beside.run_dir is None:
        raise ConformanceError(why or "no run directory")
    profile = load_profile(beside.profile)
    if "kind" in (beside.provider, beside.built_by):
        from trainjob_conformance.cluster.kind.provider import multikueue_worker

        return multikueue_worker(profile, beside.run_dir)
    from trainjob_conformance.cluster.embedded.provider import EmbeddedStackCluster

    return EmbeddedStackCluster(profile, beside.run_dir / f"worker-{os.getpid()}")
