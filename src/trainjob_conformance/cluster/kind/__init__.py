"""The kind provider: kind clusters with every image built here from pinned sources.

This module declares the provider for the registry and imports nothing heavy;
its code is in provider.py, imported only when a cluster is asked for.
"""

from trainjob_conformance.cluster.kind.versions import NODE_TOOLS
from trainjob_conformance.cluster.provider import (
    PATH,
    TEXT,
    WINDOW_AUDIT_OPTION,
    ProviderKind,
    ProviderOption,
)

IMAGE_SOURCE = "image-source"
IMAGE_SOURCES = ("local", "upstream")
REGISTRY_MIRROR = "registry-mirror"
REGISTRY_CA = "registry-ca"
WORKER_MIRROR = "worker-registry-mirror"

PROVIDER = ProviderKind(
    name="kind",
    summary="kind clusters, real kubelets, images built here",
    module="trainjob_conformance.cluster.kind.provider",
    options=(
        ProviderOption(
            IMAGE_SOURCE,
            choices=IMAGE_SOURCES,
            default="local",
            help="--cluster kind: images built here from pinned sources (local) or the images "
            "the release manifests and kubeadm name, pulled by the nodes from their registries "
            "or from --registry-mirror (upstream) (default: %(default)s)",
        ),
        ProviderOption(
            REGISTRY_MIRROR,
            kind=TEXT,
            help="--cluster kind --image-source upstream: pull every image through this "
            "mirror, which keeps each under its upstream host (URL/registry.k8s.io/..., "
            "URL/ghcr.io/..., URL/docker.io/...; `images push --cluster kind` fills one); "
            "kind and kubectl are fetched from it, nothing is built",
        ),
        ProviderOption(
            WORKER_MIRROR,
            kind=TEXT,
            help="--cluster kind: the MultiKueue worker cluster (started for KQ-MK-002) pulls "
            "every image through this mirror, as --registry-mirror would, whatever the run's "
            "own cluster uses: one run covers both image supplies",
        ),
        ProviderOption(
            REGISTRY_CA,
            kind=PATH,
            help="--registry-mirror (or --worker-registry-mirror) over TLS with a certificate "
            "of a private CA: that CA's PEM file, for the harness and the nodes' containerd",
        ),
        ProviderOption(
            WINDOW_AUDIT_OPTION,
            kind=TEXT,
            help="the API server keeps an audit log of the custom resources' writes",
            on_command_line=False,
        ),
    ),
    peer="kind",
    pushes_images=True,
    host_binaries={"kind": NODE_TOOLS["kind"]},
    # In-place upgrades of one component (cluster/kind/upgrade.py), either image supply.
    upgrades=True,
)
