"""Where a mirror keeps an upstream image: its registry's host as the first path part.

An image is named as the release manifests and kubeadm name it
(`registry.k8s.io/kueue/kueue:v0.15.1`, `ghcr.io/kubeflow/...`,
`kindest/node:v1.36.3`, which is Docker Hub's `docker.io/kindest/node`). A mirror
keeps it under the upstream host, below the mirror's own path:

    <mirror host>[/<mirror path>]/<upstream host>/<path>:<tag>

so that images of the same path from two registries stay apart, and a node's
containerd can be told, per upstream registry, to ask the mirror at
`/v2/[<mirror path>/]<upstream host>/` instead (its `override_path`). Pull-through
caches laid out this way (a project per upstream) are what air-gapped sites
run; `images push --cluster kind` fills a plain registry the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainjob_conformance.stack.registry.address import RegistryAddress

DOCKER_HUB = "docker.io"
# Where Docker Hub's API answers (the `server` a containerd hosts.toml names for it).
DOCKER_HUB_SERVER = "https://registry-1.docker.io"


@dataclass(frozen=True)
class ImageName:
    """An image reference split as a registry sees it."""

    host: str  # registry.k8s.io, ghcr.io, docker.io
    path: str  # kueue/kueue, library/busybox
    tag: str

    @classmethod
    def parse(cls, reference: str) -> ImageName:
        """`name[:tag]` as Docker reads it: the first part is a host only if it has a dot
        or a port or is localhost; Docker Hub's single names are under library/."""
        if "@" in reference:
            raise ValueError(f"{reference!r}: a digest reference has no tag to mirror under")
        name, tag = reference, "latest"
        last = reference.rsplit("/", 1)[-1]
        if ":" in last:
            name, tag = reference.rsplit(":", 1)
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            host, path = first, rest
        else:
            host, path = DOCKER_HUB, name
        if host == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        return cls(host, path, tag)

    @property
    def upstream(self) -> str:
        return f"{self.host}/{self.path}:{self.tag}"

    def repository_in(self, mirror: RegistryAddress) -> str:
        """The repository in the mirror (below its host), prefix included."""
        return mirror.repository(f"{self.host}/{self.path}")

    def in_mirror(self, mirror: RegistryAddress) -> str:
        """The reference a client of the mirror pulls (`docker pull` form)."""
        return f"{mirror.host}/{self.repository_in(mirror)}:{self.tag}"


def upstream_server(host: str) -> str:
    """The URL an upstream registry's API answers at, as containerd's hosts.toml names it."""
    return DOCKER_HUB_SERVER if host == DOCKER_HUB else f"https://{host}"
