"""Any cluster with the stack installed, named explicitly by its kubeconfig."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.cluster.capabilities import holds_local_images
from trainjob_conformance.cluster.existing import KUBECONFIG_OPTION, MANIFESTS_OPTION
from trainjob_conformance.cluster.existing import upgrade as existing_upgrade
from trainjob_conformance.cluster.handle import IMAGES_PRELOADED, ClusterHandle
from trainjob_conformance.cluster.health.controller_watch import controller_pod_probe, ledger_probes
from trainjob_conformance.cluster.health.readiness import (
    TORCH_RUNTIME,
    standard_probes,
    training_operator_probes,
    wait_for_admission,
)
from trainjob_conformance.cluster.health.stack_watch import HEALTH_FILE, StackWatch
from trainjob_conformance.cluster.introspect import (
    CONTROLLER_IMAGES,
    detect_stack,
    missing_components,
    running_images,
)
from trainjob_conformance.cluster.labels import LOCAL_IMAGE_HOST
from trainjob_conformance.cluster.provider import (
    ClusterRequest,
    ComponentUpgrade,
    PushedImage,
    RegistryServer,
    startup_errors,
)
from trainjob_conformance.cluster.releases import in_place
from trainjob_conformance.cluster.releases import upgrade as releases_upgrade
from trainjob_conformance.cluster.releases.applier import ManifestApplier
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS
from trainjob_conformance.cluster.releases.manifests import release_install_steps
from trainjob_conformance.cluster.releases.user_manifests import read_user_manifests
from trainjob_conformance.cluster.run_state import (
    embedded_run_dir,
    kind_run_dir,
    read_image_supply,
    read_state,
)
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube, api_client_for
from trainjob_conformance.kube.errors import ApiError, NotFound
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.gobuild import build_component
from trainjob_conformance.stack.profiles import Profile
from trainjob_conformance.stack.registry.mirror_names import ImageName


def _embedded_state(kubeconfig: Path) -> dict[str, object] | None:
    """The state an embedded `up` wrote, if this kubeconfig is one of its clusters."""
    run_dir = embedded_run_dir(kubeconfig)
    return read_state(run_dir) if run_dir is not None else None


class ExistingCluster:
    """Uses a cluster the harness did not start; `down` leaves it as it was."""

    def __init__(
        self,
        kubeconfig: Path | None,
        profile: Profile,
        run_dir: Path | None = None,
        manifests: Path | None = None,
    ) -> None:
        if kubeconfig is None:
            raise ConformanceError(
                "--trainjob-cluster=existing needs --trainjob-kubeconfig PATH: the harness never "
                "uses the current kubectl context by accident"
            )
        self.kubeconfig = kubeconfig.expanduser().resolve()
        self.profile = profile
        self.run_dir = run_dir
        self.watch: StackWatch | None = None
        # Component -> the new release as the user's installer renders it (upgrade
        # --manifests); the others get the releases' own manifests.
        self.user_manifests = read_user_manifests(manifests) if manifests is not None else {}
        # What an upgrade (upgrade_component) moves: set by `up`.
        self.handle: ClusterHandle | None = None
        self._kube: Kube | None = None

    def up(self, on_created: Callable[[], None] | None = None) -> ClusterHandle:
        """`on_created` is not called: the cluster was up before the run."""
        with startup_errors(self.run_dir):
            return self._up()

    def _up(self) -> ClusterHandle:
        if not self.kubeconfig.is_file():
            raise ConformanceError(f"kubeconfig {self.kubeconfig} does not exist")
        try:
            kube = Kube(api_client_for(self.kubeconfig))
            missing = missing_components(kube)
        except ApiError as error:
            raise ConformanceError(
                f"cannot reach the API server of {self.kubeconfig}: {error}"
            ) from None
        if missing:
            raise ConformanceError(
                f"the cluster of {self.kubeconfig} lacks {', '.join(missing)}: install JobSet, "
                "Kueue and Kubeflow Trainer first, or use --trainjob-cluster=embedded"
            )
        state = _embedded_state(self.kubeconfig)
        if state is not None:
            handle = ClusterHandle.from_json(state["handle"])  # type: ignore[arg-type]
            handle.provider = "existing"
            # The one version the cluster states itself, whoever wrote the state.
            handle.versions["kubernetes"] = kube.raw("GET", "/version")["gitVersion"].split("+")[0]
            detected_from = "state of the embedded run that started it"
        else:
            stack = detect_stack(kube)
            handle = ClusterHandle(
                provider="existing",
                kubeconfig=self.kubeconfig,
                versions=stack.versions,
                profile=self.profile.name,
            )
            handle.controller_pods = dict(stack.controller_pods)
            handle.images = {
                "source": "as the cluster runs them",
                **running_images(kube, handle.controller_pods),
            }
            detected_from = "; ".join(
                f"{k} {v} ({stack.sources[k]})" for k, v in stack.versions.items()
            )
            kind_run = kind_run_dir(self.kubeconfig)
            supply = read_image_supply(kind_run) if kind_run is not None else None
            if kind_run is not None:
                # A cluster of a kept kind run: a MultiKueue worker starts beside it as
                # beside the kind provider's own (its run directory holds both).
                handle.run_dir, handle.built_by = kind_run, "kind"
                detected_from += f"; a kind cluster of the harness's run {kind_run}"
            if supply is not None:
                # As that run recorded it: through a mirror, only what the mirror serves.
                handle.image_supply, handle.mirrored_images = supply
                detected_from += f"; its nodes' images: {supply[0]}"
            elif holds_local_images(kube):
                # Nodes loaded by hand (a kind cluster the harness built): what they
                # hold is all they get, as on the kind provider's own handle.
                handle.image_supply = IMAGES_PRELOADED
                detected_from += (
                    f"; the nodes hold images of {LOCAL_IMAGE_HOST}, which no registry "
                    "serves: they run only the images they hold"
                )
        say(f"existing cluster {self.kubeconfig}: {detected_from}")
        try:
            kube.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", TORCH_RUNTIME)
        except NotFound:
            raise ConformanceError(
                f"the cluster has no ClusterTrainingRuntime {TORCH_RUNTIME}: install Trainer's "
                "upstream runtimes (manifests/overlays/runtimes)"
            ) from None
        wait_for_admission(kube, standard_probes(), timeout=30, log_tails=lambda: "")
        handle.health_file = self._start_watch(kube, handle, state)
        self.handle, self._kube = handle, kube
        return handle

    def _start_watch(
        self, kube: Kube, handle: ClusterHandle, state: dict[str, object] | None
    ) -> Path | None:
        if self.run_dir is None:
            return None
        # Host processes are cheap to look at; Pods cost an API round trip each.
        if state is not None and handle.run_dir is not None:
            probes, interval = ledger_probes(handle.run_dir), 0.5
        else:
            probes = [
                controller_pod_probe(kube, component, namespace, selector)
                for component, (namespace, selector) in handle.controller_pods.items()
            ]
            interval = 2.0
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.watch = StackWatch(self.run_dir / HEALTH_FILE, probes, interval=interval).start()
        return self.watch.path

    def upgrade_refused(self) -> str | None:
        """Why the cluster cannot be upgraded as the releases' manifests would do it (read
        from the cluster, before anything is created on it); None where it can."""
        if not self.kubeconfig.is_file():
            return f"kubeconfig {self.kubeconfig} does not exist"
        if _embedded_state(self.kubeconfig) is not None:
            return (
                f"{self.kubeconfig} is a cluster of an embedded run, whose managers are host "
                "processes: upgrade it with --cluster embedded"
            )
        try:
            kube = Kube(api_client_for(self.kubeconfig))
            stack = detect_stack(kube)
        except (ApiError, ConformanceError) as error:
            return f"cannot read the stack of {self.kubeconfig}: {error}"
        kind_run = kind_run_dir(self.kubeconfig)
        supply = read_image_supply(kind_run) if kind_run is not None else None
        preloaded = supply is None and holds_local_images(kube)
        moved = [
            c
            for c in CONTROLLERS
            if self.profile.has(c) and (c in CONTROLLER_IMAGES or c in stack.versions)
        ]
        found = existing_upgrade.refusals(
            stack,
            self.profile,
            moved,
            IMAGES_PRELOADED if preloaded else (supply or ("",))[0],
            self.user_manifests,
        )
        return "; ".join(found) if found else None

    def upgrade_component(self, component: str, version: str) -> ComponentUpgrade:
        """Move one controller to another release as its own manifests install it: the new
        release's CRDs, its Deployment's rolling update (the nodes pull the release's
        image), its webhooks, and the wait until every admission probe of the stack is
        answered (cluster/releases/upgrade.py says what each phase runs)."""
        if self.handle is None or self._kube is None:
            raise ConformanceError("the cluster is not up: nothing to upgrade")
        handle, kube = self.handle, self._kube
        releases_upgrade.check_request(component, version, handle.controller_pods)
        kubectl = build_component("kubernetes", self.profile.version("kubernetes"))["kubectl"]
        run_dir = self.run_dir or self.kubeconfig.parent

        def steps(profile: Profile, local: dict[str, str] | None, only: list[str]):
            return release_install_steps(profile, kubectl, local, only)

        def served(image: str) -> str:
            return existing_upgrade.pulled_from(ImageName.parse(image).host)

        with step(f"{component} {self.profile.version(component)} -> {version}: preparing"):
            given = self.user_manifests.get(component)
            if given is not None:
                prepared = releases_upgrade.prepare_user(
                    self.profile, given, version, run_dir / "user-manifests", served
                )
            else:
                prepared = releases_upgrade.prepare_pulled(
                    self.profile, component, version, steps, served
                )
        applier = ManifestApplier(
            kubectl, self.kubeconfig, lambda: kube, run_dir / "upgrade-kubectl-seen.txt"
        )
        probes = standard_probes()
        if "training-operator" in handle.controller_pods:
            probes += training_operator_probes()
        seconds = in_place.apply_upgrade(
            applier,
            prepared,
            self.down,
            lambda: in_place.wait_admission(
                kube, probes, handle.controller_pods, component, run_dir
            ),
        )
        pod = in_place.new_controller_pod(kube, prepared)
        done = ComponentUpgrade(
            component, prepared.from_version, version, *seconds, notes=prepared.notes(pod.node)
        )
        self.profile = prepared.target
        handle.versions[component] = version
        # What the node pulled; how it got there is in the step's notes.
        handle.images[prepared.image] = pod.image_id or prepared.supply
        handle.health_file = self._start_watch(kube, handle, None)
        return done

    def window_audit_log(self) -> Path | None:
        """None: a user's API server keeps its audit log where its operator put it."""
        return None

    def down(self) -> None:
        """Nothing to stop but the watch: the harness did not start this cluster."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None

    def detach(self) -> None:
        """Nothing to keep: the harness did not start this cluster and never stops it."""
        self.down()
        return None


def from_request(request: ClusterRequest) -> ExistingCluster:
    """The registry's way in (cluster/registry.py)."""
    kubeconfig = request.option(KUBECONFIG_OPTION)
    manifests = request.option(MANIFESTS_OPTION)
    return ExistingCluster(
        Path(kubeconfig) if kubeconfig else None,
        request.profile,
        request.run_dir,
        Path(manifests) if manifests else None,
    )


def peer_beside(profile: Profile, run_dir: Path) -> ExistingCluster:
    raise ConformanceError(
        "the harness cannot start a cluster of the existing provider; a worker beside "
        "an existing cluster is one of the provider that built it"
    )


def bare_start(profile: Profile, run_dir: Path) -> float:
    raise ConformanceError("an existing cluster has no start of its own to measure")


def leftovers(run_dir: Path) -> list[str]:
    """Nothing: the harness starts nothing of an existing cluster."""
    return []


def prebuild(profile: Profile) -> dict[str, Path]:
    return {}


def push_images(profile: Profile, registry_url: str) -> list[PushedImage]:
    raise ConformanceError("an existing cluster's images are its installer's, not the harness's")


def registry_server(storage: Path, config_dir: Path) -> RegistryServer | None:
    return None
