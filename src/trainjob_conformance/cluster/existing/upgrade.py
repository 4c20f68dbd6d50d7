"""What an in-place upgrade of a user's cluster needs to hold before it starts.

The harness upgrades an existing cluster only where it can do so as the
releases' own manifests would: each controller it moves runs as those manifests
install it (the Deployment in the namespace they name), at the release the
`--from` profile pins, and its nodes can pull the new release's image. Anything
else is one line before a TrainJob is created: a Helm install under other
names would get a second Deployment beside its own (unless the user gives the
new release as that installer renders it, `--manifests`), and a cluster at
other releases would be judged against a path it is not on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainjob_conformance.cluster.handle import IMAGES_PRELOADED
from trainjob_conformance.cluster.introspect import DetectedStack
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS
from trainjob_conformance.cluster.releases.user_manifests import (
    ComponentManifests,
    running_mismatch,
)
from trainjob_conformance.stack.profiles import Profile


def refusals(
    stack: DetectedStack,
    profile: Profile,
    moved: Iterable[str],
    image_supply: str,
    user_manifests: Mapping[str, ComponentManifests] | None = None,
) -> list[str]:
    """Why this cluster cannot take the upgrade of the components in `moved`, from
    `profile`, in one line each; none where it can. A component the user gave
    manifests for must run as the Deployment those name; the others as the
    releases' own manifests install them."""
    user_manifests = user_manifests or {}
    found = []
    for component in moved:
        if component not in CONTROLLERS:
            found.append(f"{component} is not a controller the releases' manifests install")
            continue
        running = stack.versions.get(component)
        if running is None:
            found.append(f"{component} does not run on this cluster")
            continue
        pinned = profile.version(component)
        if running != pinned:
            found.append(
                f"{component} runs {running} here ({stack.sources.get(component, '')}), "
                f"not {pinned} as {profile.name} pins it: name the profile the cluster runs "
                "with --from (compose one with +component=version)"
            )
        deployment = stack.deployments.get(component)
        given = user_manifests.get(component)
        if given is not None:
            mismatch = running_mismatch(given, deployment)
            if mismatch:
                found.append(mismatch)
            continue
        namespace, name, _ = CONTROLLERS[component]
        if deployment is not None and deployment != (namespace, name):
            found.append(
                f"{component} runs as Deployment {deployment[0]}/{deployment[1]}, not "
                f"{namespace}/{name} as its release manifests install it: the harness would "
                "add a second one; give the new release as that installer renders it "
                f"(--manifests DIR, with DIR/{component}/)"
            )
    if image_supply == IMAGES_PRELOADED:
        found.append(
            "the nodes run only the images they hold (no registry is reachable from them): "
            "an upgrade's new image could not be pulled"
        )
    return found


def pulled_from(host: str) -> str:
    """How the nodes of a user's cluster get a new release's image, in a few words."""
    return f"pulled by the nodes from {host} (or wherever their runtime sends it)"
