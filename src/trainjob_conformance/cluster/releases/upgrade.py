"""What an in-place upgrade of one component runs, on any cluster the release manifests
installed (`upgrade --cluster kind`, `upgrade --cluster existing`).

The install's own phases (install_plan.py), for that one component, built from
the new release's manifests: its namespaces and CRDs, the wait for them, its
manifests (the Deployment's new image is a rolling update; Kueue's webhook
configurations with them, as at the install), its rollout, then what its
webhooks judge (the Trainer's runtimes). Every apply takes over the fields
another field manager holds (`--force-conflicts`), under the install's own
field manager, so a field the new release dropped goes too.

Plain logic: the providers run the phases (applier.py). Where the nodes pull
the releases' images (kind through a mirror, or any cluster whose nodes reach
the releases' registries), `prepare_pulled` builds nothing: the new manifests
name the release's own image, which the rolling update's Pod pulls. kind can
also build the image here and load it into its nodes (cluster/kind/upgrade.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.releases.install_plan import (
    CONTROLLERS,
    CRDS_ESTABLISHED,
    ROLLOUT_SECONDS,
    Command,
    Phase,
    install_plan,
)
from trainjob_conformance.cluster.releases.manifests import (
    InstallStep,
    StackApplies,
    release_images,
    stack_applies,
)
from trainjob_conformance.cluster.releases.user_manifests import ComponentManifests
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import Profile, with_version

# A release tag, as the profiles pin them: an upgrade moves to a release.
_RELEASE_TAG = re.compile(r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class UpgradePhases:
    """One component's install phases, cut where ComponentUpgrade times them."""

    crds: list[Phase]  # its namespaces and CRDs applied, then the wait for Established
    manager: list[Phase]  # its manifests (and Kueue's webhooks), then its rollout
    after: list[Phase]  # what its webhooks judge: the Trainer's runtimes
    # What the phases delete before applying it anew, since an update cannot change it:
    # `deployment/<name>` (its Pod selector), `clustertrainingruntime/<name>` (dependsOn).
    recreated: tuple[str, ...] = ()


def _is_rollout(phase: Phase) -> bool:
    return any(command.words.startswith("rollout ") for command in phase.commands)


def upgrade_phases(
    steps: list[InstallStep],
    regroup: Callable[[list[InstallStep]], StackApplies] = stack_applies,
    managers: Mapping[str, tuple[str, str, str]] = CONTROLLERS,
    old_steps: list[InstallStep] | None = None,
) -> UpgradePhases:
    """The phases that move a running component to the release `steps` were built from
    (its manager where `managers` says it runs). With the running release's
    `old_steps`, a controller Deployment whose Pod selector the new release changed is
    deleted before the new manifests are applied (recreated_deployments)."""
    plan = install_plan(steps, regroup, force_conflicts=True, managers=managers)
    if CRDS_ESTABLISHED not in plan or not any(_is_rollout(phase) for phase in plan):
        raise ConformanceError(
            f"the manifests of {', '.join(s.name for s in steps)} hold no controller to upgrade"
        )
    established = plan.index(CRDS_ESTABLISHED) + 1
    rolled = next(i for i, phase in enumerate(plan) if _is_rollout(phase)) + 1
    manager, after = plan[established:rolled], plan[rolled:]
    if not old_steps:
        return UpgradePhases(plan[:established], manager, after)
    deployments = recreated_deployments(old_steps, steps, managers)
    runtimes = recreated_runtimes(old_steps, steps)
    if deployments:
        manager = [
            Phase(
                tuple(
                    Command(
                        ("-n", namespace, "delete", f"deployment/{name}", *_DELETE_BOUND),
                        f"delete {name} (its Pod selector changed)",
                    )
                    for namespace, name in deployments
                )
            ),
            *manager,
        ]
    if runtimes:  # the runtimes are what `after` applies
        after = [
            Phase(
                tuple(
                    Command(
                        ("delete", f"clustertrainingruntime/{name}", *_DELETE_BOUND),
                        f"delete {name} (its jobs' dependsOn changed)",
                    )
                    for name in runtimes
                )
            ),
            *after,
        ]
    recreated = [f"deployment/{name}" for _, name in deployments]
    recreated += [f"clustertrainingruntime/{name}" for name in runtimes]
    return UpgradePhases(plan[:established], manager, after, tuple(recreated))


# A delete waits for the object to go (a runtime in use keeps the Trainer's finalizer).
_DELETE_BOUND = (f"--timeout={ROLLOUT_SECONDS}s",)


def _controller_selectors(
    steps: list[InstallStep], managers: Mapping[str, tuple[str, str, str]]
) -> dict[tuple[str, str], Any]:
    """(namespace, name) -> spec.selector of each controller Deployment the manifests hold."""
    names = {deployment for _, deployment, _ in managers.values()}
    return {
        (document["metadata"].get("namespace", ""), document["metadata"]["name"]): (
            document.get("spec") or {}
        ).get("selector")
        for install in steps
        for document in install.documents()
        if document["kind"] == "Deployment" and document["metadata"]["name"] in names
    }


def recreated_deployments(
    old: list[InstallStep],
    new: list[InstallStep],
    managers: Mapping[str, tuple[str, str, str]] = CONTROLLERS,
) -> list[tuple[str, str]]:
    """(namespace, name) of each controller Deployment whose Pod selector differs between
    the running release's manifests and the new one's. A Deployment's spec.selector
    is immutable, so the API server refuses such an apply ("field is immutable"): the
    old Deployment must go first. JobSet's own manifests change it between v0.10.1 and
    v0.11.1 (v0.11's kustomization sets commonLabels, which reach the selector)."""
    before = _controller_selectors(old, managers)
    after = _controller_selectors(new, managers)
    return sorted(
        key for key, selector in after.items() if key in before and before[key] != selector
    )


def _runtime_dependencies(steps: list[InstallStep]) -> dict[str, dict[str, Any]]:
    """ClusterTrainingRuntime name -> its replicated jobs' dependsOn, by job name."""
    return {
        document["metadata"]["name"]: {
            job.get("name"): job.get("dependsOn")
            for job in (((document.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "replicatedJobs"
            )
            or []
        }
        for install in steps
        for document in install.documents()
        if document["kind"] == "ClusterTrainingRuntime"
    }


def recreated_runtimes(old: list[InstallStep], new: list[InstallStep]) -> list[str]:
    """The ClusterTrainingRuntimes where the new release changes a job's dependsOn that the
    old one set. The runtime CRD embeds JobSet's schema, whose transition rule keeps
    dependsOn as it was (`self == oldSelf`, "Value is immutable"), so the API server
    refuses such an apply and the old runtime must go first: Trainer v2.1.0's torchtune
    runtimes wait for both initializers where v2.0.1's waited for one
    (kubeflow/trainer#2823). A dependsOn added where there was none is no change to
    the rule, which judges only a value present before and after (Trainer v2.3.0's
    launchers, applied over v2.2.1's runtimes as they are)."""
    before = _runtime_dependencies(old)
    changed = []
    for name, jobs in _runtime_dependencies(new).items():
        was = before.get(name, {})
        if any(was.get(job) and depends and was[job] != depends for job, depends in jobs.items()):
            changed.append(name)
    return sorted(changed)


def check_request(component: str, version: str, running: Iterable[str]) -> None:
    """One line for an upgrade this cluster cannot make."""
    if component not in CONTROLLERS:
        raise ConformanceError(
            f"cannot upgrade {component!r}: a kind cluster upgrades one of {', '.join(CONTROLLERS)}"
        )
    if not _RELEASE_TAG.fullmatch(version):
        raise ConformanceError(
            f"cannot upgrade {component} to {version!r}: name a release tag such as v0.12.0"
        )
    if component not in running:
        raise ConformanceError(
            f"{component} does not run on this cluster: an upgrade moves a running "
            "component to another release"
        )


def webhook_configurations(steps: list[InstallStep]) -> set[tuple[str, str]]:
    """(kind, name) of every webhook configuration the manifests hold."""
    return {
        (document["kind"], document["metadata"]["name"])
        for install in steps
        for document in install.documents()
        if document["kind"] in _WEBHOOK_KINDS
    }


def dropped_webhooks(old: list[InstallStep], new: list[InstallStep]) -> list[tuple[str, str]]:
    """The old release's webhook configurations the new one no longer has: an apply keeps
    them, and one left pointing at a path the new manager does not serve refuses
    every request it matches (failurePolicy Fail)."""
    return sorted(webhook_configurations(old) - webhook_configurations(new))


@dataclass(frozen=True)
class NewPod:
    """Where the controller's new Pod runs, and the image its runtime ran for it."""

    node: str | None
    # The container status's imageID: the digest the node pulled, where it pulled one.
    image_id: str | None


def new_pod(pods: list[dict[str, Any]], image: str) -> NewPod:
    """The controller's Pod that runs `image` and is not going away (nothing known of
    it where there is none)."""
    for pod in pods:
        containers = (pod.get("spec") or {}).get("containers") or []
        if pod["metadata"].get("deletionTimestamp") or not containers:
            continue
        if containers[0].get("image") == image:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            ran = next((s for s in statuses if s.get("name") == containers[0].get("name")), {})
            return NewPod((pod.get("spec") or {}).get("nodeName"), ran.get("imageID") or None)
    return NewPod(None, None)


@dataclass(frozen=True)
class PreparedUpgrade:
    """What a step needs before the cluster changes: the new release's image in the
    nodes, and its manifests (with the old release's, for what it dropped)."""

    component: str
    from_version: str
    to_version: str
    image: str
    # How the nodes get the image, in a few words: loaded into each node, or pulled.
    supply: str
    target: Profile  # the cluster's profile with the component at its new release
    # Component -> local image, as the manifests name them; None where the manifests
    # keep the releases' own image names (the nodes pull them).
    local: dict[str, str] | None
    old_steps: list[InstallStep]
    new_steps: list[InstallStep]
    # Where the manager runs (namespace, Deployment, Pod selector), and the folder of
    # the user's manifests, where those are applied instead of the release's own.
    user_controller: tuple[str, str, str] | None = None
    user_folder: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.component} {self.from_version} -> {self.to_version}"

    @property
    def controller(self) -> tuple[str, str, str]:
        """Where the manager runs: (namespace, Deployment, Pod selector)."""
        return self.user_controller or CONTROLLERS[self.component]

    @cached_property
    def phases(self) -> UpgradePhases:
        # Once: each computation parses both releases' manifests.
        return upgrade_phases(
            self.new_steps, managers={self.component: self.controller}, old_steps=self.old_steps
        )

    @property
    def dropped_webhooks(self) -> list[tuple[str, str]]:
        return dropped_webhooks(self.old_steps, self.new_steps)

    def notes(self, node: str | None) -> tuple[str, ...]:
        """What the step did beyond the plain phases, in a few words; `node`: where the
        new Pod runs."""
        where = f", its new Pod on {node}" if node else ""
        deployment = f"deployment/{self.controller[1]}"
        # Without the old release's manifests (a user's installer) nothing is recreated.
        recreated = self.phases.recreated if self.old_steps else ()
        how = f"rolling update of {deployment}"
        if deployment in recreated:
            how = (
                f"{deployment} deleted and created anew (the new release changed its Pod "
                "selector, which an update cannot)"
            )
        notes = (f"{how}{where}", f"image {self.image} {self.supply}")
        if runtimes := [r.split("/", 1)[1] for r in recreated if r.startswith("cluster")]:
            notes += (
                f"ClusterTrainingRuntimes {', '.join(runtimes)} deleted and created anew (the new "
                "release changed their jobs' dependsOn, which an update cannot)",
            )
        if self.user_folder is not None:
            notes += (
                f"the user's manifests from {self.user_folder}; webhook configurations "
                "they no longer hold are left as their installer made them",
            )
        return notes


# One component's manifests of a profile's release, pointed at these local images, or
# naming the releases' own where None (the provider's install_steps, with its kubectl).
StepsBuilder = Callable[[Profile, dict[str, str] | None, list[str]], list[InstallStep]]


def prepare_pulled(
    profile: Profile,
    component: str,
    version: str,
    build_steps: StepsBuilder,
    served: Callable[[str], str],
) -> PreparedUpgrade:
    """The new release's manifests as upstream writes them, for nodes that pull its
    image (from its registry, or a mirror of it): nothing is built or loaded.
    `served(image)` says where the nodes get it, or refuses in one line where they
    cannot (a mirror without it)."""
    target = with_version(profile, component, version)
    new_steps = build_steps(target, None, [component])
    image = release_images(new_steps).get(component)
    if image is None:
        raise ConformanceError(f"the manifests of {component} {version} name no manager image")
    return PreparedUpgrade(
        component=component,
        from_version=profile.version(component),
        to_version=version,
        image=image,
        supply=served(image),
        target=target,
        local=None,
        old_steps=build_steps(profile, None, [component]),
        new_steps=new_steps,
    )


def prepare_user(
    profile: Profile,
    given: ComponentManifests,
    version: str,
    workdir: Path,
    served: Callable[[str], str],
) -> PreparedUpgrade:
    """The new release as the user's installer renders it (user_manifests.py): applied
    as they are, their Deployment followed; nothing of the old release is deleted,
    since the harness does not know what that installer made."""
    return PreparedUpgrade(
        component=given.component,
        from_version=profile.version(given.component),
        to_version=version,
        image=given.image,
        supply=served(given.image),
        target=with_version(profile, given.component, version),
        local=None,
        old_steps=[],
        new_steps=given.steps(workdir),
        user_controller=given.controller,
        user_folder=given.folder,
    )
