"""The cluster providers by name: the only module outside a provider's folder that
knows them.

Each provider folder declares a `ProviderKind` in its __init__ (name, options,
what it can do) and implements `ProviderModule` in the module that kind names,
imported only when a cluster, a peer, a bare start or a leftover check of that
provider is asked for. Everything else (the CLI's choices, pytest's options,
`up`, `prove`, the bench, the peers) goes through the functions here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from trainjob_conformance.cluster.provider import (
    ClusterProvider,
    ClusterRequest,
    ProviderKind,
    ProviderModule,
    ProviderOption,
    PushedImage,
    RegistryServer,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import Profile

# The provider folders under cluster/, in the order the CLI lists them.
_FOLDERS = ("embedded", "existing", "kind")


def provider_kinds() -> tuple[ProviderKind, ...]:
    return tuple(
        importlib.import_module(f"trainjob_conformance.cluster.{folder}").PROVIDER
        for folder in _FOLDERS
    )


PROVIDERS = tuple(kind.name for kind in provider_kinds())


def provider_kind(name: str) -> ProviderKind:
    for kind in provider_kinds():
        if kind.name == name:
            return kind
    raise ConformanceError(
        f"unknown cluster provider {name!r}; choose one of: {', '.join(PROVIDERS)}"
    )


def _module(name: str) -> ProviderModule:
    return cast(ProviderModule, importlib.import_module(provider_kind(name).module))


def provider_options() -> list[ProviderOption]:
    """Every provider's options, once each by name (providers may share one)."""
    found: dict[str, ProviderOption] = {}
    for kind in provider_kinds():
        for option in kind.options:
            found.setdefault(option.name, option)
    return list(found.values())


def make_provider(request: ClusterRequest) -> ClusterProvider:
    """A not yet started cluster; options the provider does not declare are refused."""
    kind = provider_kind(request.provider)
    declared = {option.name for option in kind.options}
    unknown = sorted(set(request.options) - declared)
    if unknown:
        raise ConformanceError(
            f"the {kind.name} provider takes no option {', '.join(unknown)} "
            f"(it takes: {', '.join(sorted(declared)) or 'none'})"
        )
    return _module(kind.name).from_request(request)


def bare_start(provider: str, profile: Profile, run_dir: Path) -> float:
    """Seconds for the provider's nodes alone, started and stopped (the bench's baseline)."""
    return _module(provider).bare_start(profile, run_dir)


def prebuild(provider: str, profile: Profile) -> dict[str, Path]:
    """What the provider builds beyond the profile's binaries."""
    return _module(provider).prebuild(profile)


def push_images(provider: str, profile: Profile, registry_url: str) -> list[PushedImage]:
    """The images the provider's clusters run, pushed under their upstream names."""
    return _module(provider).push_images(profile, registry_url)


def registry_server(provider: str, storage: Path, config_dir: Path) -> RegistryServer | None:
    """A registry the provider's nodes pull from; None where one on loopback serves."""
    return _module(provider).registry_server(storage, config_dir)


def leftovers(run_dir: Path) -> list[str]:
    """What any provider's dead run in `run_dir` left running beyond its ledger."""
    return [left for kind in provider_kinds() for left in _module(kind.name).leftovers(run_dir)]


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
    @property
    def versions(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class StartingCluster:
    """A cluster whose nodes are up but whose stack is not ready yet: a worker can
    start beside it already (its network and images exist)."""

    provider: str
    profile: str
    run_dir: Path | None
    built_by: str = ""
    # A cluster starting now runs its profile's releases.
    versions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, request: ClusterRequest) -> StartingCluster:
        profile = request.profile
        return cls(request.provider, profile.name, request.run_dir, versions=dict(profile.versions))


def _peer_provider(beside: PeerSite) -> str | None:
    """Which provider starts a worker beside `beside`: the one that built the cluster
    where the handle says (a kept kind run used as `existing`), else the kind's own.
    A second cluster beside a run's, with the same stack, must be one whose
    kubeconfig works from the first cluster's Pods: embedded beside embedded, kind
    beside kind."""
    if beside.built_by in PROVIDERS and provider_kind(beside.built_by).peer:
        return provider_kind(beside.built_by).peer
    return provider_kind(beside.provider).peer if beside.provider in PROVIDERS else None


def peer_unavailable(beside: PeerSite) -> str | None:
    """Why no worker cluster can start beside this one, or None."""
    if _peer_provider(beside) is None or beside.run_dir is None:
        able = [kind.name for kind in provider_kinds() if kind.peer == kind.name]
        return (
            "a MultiKueue worker needs a second cluster, which only the "
            f"{' and '.join(able)} providers can start (this run uses {beside.provider!r})"
        )
    return None


def peer_cluster(beside: PeerSite) -> ClusterProvider:
    """A not yet started cluster of the stack `beside` runs (its profile, with any
    controller it upgraded in place at its new release) beside it; its state goes in a
    directory of `beside`'s run directory named after this process."""
    from trainjob_conformance.stack.profiles import as_running, load_profile

    why = peer_unavailable(beside)
    peer = _peer_provider(beside)
    if why is not None or beside.run_dir is None or peer is None:
        raise ConformanceError(why or "no run directory")
    profile = as_running(load_profile(beside.profile), beside.versions)
    return _module(peer).peer_beside(profile, beside.run_dir)
