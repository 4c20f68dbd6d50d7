"""What every cluster provider is: the interface, the request, and how a start fails.

The providers live in their own folders (embedded/, kind/, existing/): each
folder's __init__ declares its ProviderKind and its provider module implements
ProviderModule; registry.py names them. Nothing here imports a provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from trainjob_conformance.cluster.handle import ClusterHandle
from trainjob_conformance.cluster.health.host_load import saturation_note
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout
from trainjob_conformance.stack.profiles import Profile

# How a provider's option is given: one of its choices, a file, a kubeconfig
# (a file the harness checks is one: kube/kubeconfig.py), or text the provider
# checks itself (a URL, a directory of manifests).
CHOICE = "choice"
PATH = "path"
KUBECONFIG = "kubeconfig"
TEXT = "text"
# The option of a provider that takes a cluster by its kubeconfig (existing).
KUBECONFIG_OPTION = "kubeconfig"
# The option of a provider that upgrades with the user's own manifests (existing):
# set by `upgrade --manifests DIR`.
MANIFESTS_OPTION = "manifests"
# The option of a provider whose API server can keep an audit log of writes
# (embedded): where the log is copied at `down`, for the bench.
AUDIT_LOG_OPTION = "audit-log"
# The option of a provider whose API server can keep an audit log of the custom
# resources' writes while it runs (embedded): set by `upgrade`, to cover its
# window's watch where the watch has a gap (any value turns it on).
WINDOW_AUDIT_OPTION = "window-audit"


@dataclass(frozen=True)
class ProviderOption:
    """An option that only some providers read, declared by each that does.

    It is `--NAME` on the command line and `--trainjob-NAME` for pytest; a
    provider that does not declare an option never sees it.
    """

    name: str
    help: str
    kind: str = CHOICE
    choices: tuple[str, ...] = ()
    default: str | None = None
    # The one line said when the provider is chosen without it; None: optional.
    required: str | None = None
    # Options the harness sets itself (the bench's audit log) are on no command line.
    on_command_line: bool = True
    # Where `run` offers it too (as --NAME); pytest offers every option on a command line.
    on_run: bool = True

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


class ClusterProvider(Protocol):
    """One cluster of one provider, from `up` to `down` or `detach`.

    What a provider adds to the report travels in the handle `up` returns
    (`images`, `image_supply`, `built_by`, `versions`).
    """

    def up(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        """A ready cluster. `on_created`, where the provider can tell, is called once
        the nodes are up and before the stack is ready, so a second cluster's start
        can go beside the rest of this one's."""
        ...

    def down(self) -> None:
        """Stop everything `up` started (also a half-finished start); idempotent."""
        ...

    def detach(self) -> str | None:
        """Leave the cluster running past this process and return the command that
        stops it later; None where the cluster is not the harness's to keep or stop."""
        ...


@dataclass(frozen=True)
class ComponentUpgrade:
    """One component of a running cluster moved to another release, in place, and
    how long each phase took (seconds)."""

    component: str
    from_version: str
    to_version: str
    crds_seconds: float  # the new release's CRDs stored and Established, in discovery
    manager_seconds: float  # the old manager stopped, the new one ready
    webhooks_seconds: float  # the new webhook configurations stored, every probe answered
    notes: tuple[str, ...] = ()  # what the provider did beyond the plain steps


class UpgradesInPlace(Protocol):
    """A cluster whose components the harness can upgrade one at a time while it runs
    (`upgrade`; where `ProviderKind.upgrades`)."""

    def upgrade_refused(self) -> str | None:
        """Why this cluster, as asked for (its options), cannot be upgraded in place;
        None when it can. Asked before it starts, so bad input costs no cluster."""
        ...

    def upgrade_component(self, component: str, version: str) -> ComponentUpgrade:
        """CRDs first, then the manager, then its webhooks; returns once every
        admission probe of the stack is answered again (the new serving CA included).
        The cluster's state (versions, processes) then names the new release."""
        ...

    def window_audit_log(self) -> Path | None:
        """The API server's audit log of the custom resources' writes, as it is being
        written, where the cluster keeps one (asked for with WINDOW_AUDIT_OPTION);
        None where it does not."""
        ...


class ProviderModule(Protocol):
    """What the module a `ProviderKind` names offers, beside its clusters."""

    def from_request(self, request: ClusterRequest) -> ClusterProvider: ...

    def peer_beside(self, profile: Profile, run_dir: Path) -> ClusterProvider:
        """A second cluster of the same stack beside one of this provider's (the
        MultiKueue worker), its state under `run_dir`."""
        ...

    def bare_start(self, profile: Profile, run_dir: Path) -> float:
        """Seconds to start and stop the provider's nodes alone, with nothing of the
        stack: what the bench holds a start to."""
        ...

    def leftovers(self, run_dir: Path) -> list[str]:
        """What a run directory's dead run left running of this provider's that its
        process ledger does not name (a kind cluster's nodes), for the interruption's
        message."""
        ...

    def prebuild(self, profile: Profile) -> dict[str, Path]:
        """What the provider needs built beyond the profile's binaries (`build --kind`)."""
        ...

    def push_images(self, profile: Profile, registry_url: str) -> list[PushedImage]:
        """Push the images its clusters run, under their upstream names, to a registry
        laid out as a mirror (`images push --cluster`; where `pushes_images`)."""
        ...

    def registry_server(self, storage: Path, config_dir: Path) -> RegistryServer | None:
        """A registry its clusters' nodes can pull from (`images serve --cluster`);
        None where a registry on the host's loopback serves them."""
        ...


@dataclass(frozen=True)
class PushedImage:
    """One image a provider pushed: its upstream name, where it went, its digest there."""

    upstream: str
    reference: str
    digest: str
    size: int  # bytes, as the local image store counts them


class RegistryServer(Protocol):
    """A registry a command runs until it is stopped (`images serve`)."""

    url: str
    log_file: Path

    def __enter__(self) -> RegistryServer: ...
    def __exit__(self, *exc: object) -> None: ...
    def wait(self) -> int: ...
    def log_tail(self, lines: int = 20) -> str: ...


@dataclass(frozen=True)
class ProviderKind:
    """A provider as the registry knows it, without importing its code."""

    name: str
    summary: str
    module: str  # a ProviderModule
    options: tuple[ProviderOption, ...] = ()
    # The provider whose cluster goes beside one of this provider's as a MultiKueue
    # worker; None where no worker can start beside it.
    peer: str | None = None
    # `prove` can start a cluster of it and break it.
    proves: bool = False
    # Its clusters run the profile's binaries from the build cache on this host.
    needs_build_cache: bool = False
    # It runs images it can push to a registry and pull back through a mirror.
    pushes_images: bool = False
    # What it runs on the host beyond the profile's binaries (component -> version),
    # pushed to a registry and fetched back with them.
    host_binaries: Mapping[str, str] = field(default_factory=dict)
    # Its clusters implement UpgradesInPlace (`upgrade --cluster`).
    upgrades: bool = False


@dataclass
class ClusterRequest:
    """What every provider is asked: which, for which profile, where its state goes,
    and the values of the options it declared (by ProviderOption name)."""

    provider: str
    profile: Profile
    run_dir: Path
    options: Mapping[str, str] = field(default_factory=dict)

    def option(self, name: str, default: str | None = None) -> str | None:
        return self.options.get(name, default)


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
        saturated = "" if error.stretched else saturation_note()
        if saturated:
            first = f"{first} ({saturated})"
        if details and run_dir is not None:
            path = run_dir / "startup-error.txt"
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(str(error))
                first = f"{first} (details: {path})"
        raise ConformanceError(f"the cluster did not become ready: {first}") from None
