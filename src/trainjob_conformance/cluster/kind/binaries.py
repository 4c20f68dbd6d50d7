"""The host-side binaries a kind node image is assembled from, built and cached by version."""

from __future__ import annotations

from pathlib import Path

from trainjob_conformance.cluster.kind.versions import BUILD_ORDER, NODE_TOOLS
from trainjob_conformance.stack.gobuild import build_component
from trainjob_conformance.stack.profiles import Profile


def node_versions(profile: Profile) -> dict[str, str]:
    """Component key -> version of everything a node needs, the profile's Kubernetes included."""
    versions = dict(NODE_TOOLS)
    versions["kubernetes-node"] = profile.version("kubernetes")
    return versions


def build_node_binaries(profile: Profile) -> dict[str, Path]:
    """Build (or reuse) kind, the node runtime and the Kubernetes node binaries, one at a time."""
    versions = node_versions(profile)
    binaries: dict[str, Path] = {}
    for key in BUILD_ORDER:
        binaries.update(build_component(key, versions[key]))
    # The control plane and kubectl come from the embedded cluster's build.
    binaries.update(build_component("kubernetes", profile.version("kubernetes")))
    binaries.update(build_component("etcd", profile.version("etcd")))
    return binaries


def build_kind_and_kubectl(profile: Profile) -> dict[str, Path]:
    """What a kind cluster of released node images needs from here: kind and kubectl."""
    binaries = build_component("kind", node_versions(profile)["kind"])
    binaries.update(build_component("kubernetes", profile.version("kubernetes")))
    return binaries
