"""What the `local` image source builds, in one place for the provider and the push.

The binaries first (the node's, and every controller of the profile: the
built manifests are keyed by the controllers' images, so a MultiKueue worker
that leaves one out still reuses the run's cluster's), then the node image
and the controllers' images from them.
"""

from __future__ import annotations

from pathlib import Path

from trainjob_conformance.cluster.kind import host_packages
from trainjob_conformance.cluster.kind.binaries import build_node_binaries, node_versions
from trainjob_conformance.cluster.kind.images import catalog
from trainjob_conformance.cluster.releases.install_plan import CONTROLLERS
from trainjob_conformance.stack.gobuild import build_component, module_source
from trainjob_conformance.stack.profiles import Profile


def controller_keys(profile: Profile) -> list[str]:
    """The stack's controllers, and the training-operator where the profile pins it."""
    return [key for key in CONTROLLERS if key in profile.versions]


def build_binaries(profile: Profile) -> dict[str, Path]:
    """The node's binaries and every controller's (as root, the build packages first)."""
    host_packages.ensure_build_packages()
    binaries = build_node_binaries(profile)
    for key in controller_keys(profile):
        binaries.update(build_component(key, profile.version(key)))
    return binaries


def build_images(
    profile: Profile, binaries: dict[str, Path]
) -> tuple[catalog.BuiltImages, dict[str, str]]:
    """The node image (with kubeadm's images) and each controller's (component -> name)."""
    versions = dict(profile.versions)
    kind_source = module_source("kind", node_versions(profile)["kind"])
    built = catalog.ensure_node(versions, binaries, kind_source)
    return built, catalog.ensure_controller_images(versions, binaries)


def build_controller_image(component: str, version: str) -> str:
    """One controller's image at another release (an upgrade's), built as the install's
    are: its binary from the pinned module, then the image around it."""
    binaries = build_component(component, version)
    return catalog.ensure_controller_images({component: version}, binaries)[component]
