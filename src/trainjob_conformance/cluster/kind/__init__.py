"""The kind provider: kind clusters with every image built here from pinned sources.

This module declares the provider for the registry and imports nothing heavy;
its code is in provider.py, imported only when a cluster is asked for.
"""

from trainjob_conformance.cluster.provider import ProviderKind, ProviderOption

IMAGE_SOURCE = "image-source"
IMAGE_SOURCES = ("local", "upstream")

PROVIDER = ProviderKind(
    name="kind",
    summary="kind clusters, real kubelets, images built here",
    module="trainjob_conformance.cluster.kind.provider",
    options=(
        ProviderOption(
            IMAGE_SOURCE,
            choices=IMAGE_SOURCES,
            default="local",
            help="--cluster kind: images built here from pinned sources (local) or the release "
            "images the manifests name, pulled from their registries (upstream) "
            "(default: %(default)s)",
        ),
    ),
    peer="kind",
)
