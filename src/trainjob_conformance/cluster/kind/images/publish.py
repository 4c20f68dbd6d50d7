"""The kind provider's images in a registry, under the names upstream gives them.

`images push --cluster kind` puts every image a kind cluster of the profile
runs into a registry laid out as a mirror (stack/registry/mirror_names.py):

- the node image as `docker.io/kindest/node:<kubernetes>`, kind's own name
  for it, with the kubeadm images already in its containerd as in kind's;
- the control plane's, etcd's, CoreDNS's, kube-proxy's and pause's images as
  kubeadm names them (`registry.k8s.io/...`);
- each controller under the name its release manifests give it
  (`registry.k8s.io/jobset/jobset:<v>`, `ghcr.io/kubeflow/trainer/...`, the
  training-operator's `docker.io/kubeflow/training-operator:<commit tag>`);
- the policies' test image (`registry.k8s.io/e2e-test-images/busybox:...`).

Each is built here first where missing (the local image source's recipes). The
node image differs from kind's in two ways a cluster must know before it starts,
so the pushed one says them in labels: it runs no kindnetd (the harness routes
pod subnets itself, cluster/kind/nodes.py), and it holds etcd at the profile's
pin, not kubeadm's default tag (NODE_LABELS).
"""

from __future__ import annotations

import json
import re
import time

from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.cluster.kind.images import catalog, local_build, store
from trainjob_conformance.cluster.kind.images.node import NODE_IMAGE_LABEL
from trainjob_conformance.cluster.provider import PushedImage
from trainjob_conformance.cluster.releases.manifests import release_images, release_install_steps
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.profiles import Profile
from trainjob_conformance.stack.registry.address import RegistryAddress
from trainjob_conformance.stack.registry.mirror_names import ImageName
from trainjob_conformance.stack.registry.records import image_record_path, write_image_record

UPSTREAM_NODE_IMAGE = "kindest/node:{kubernetes}"
# What a pulled node image tells the provider (provider.py reads them back).
ETCD_TAG_LABEL = "trainjob-conformance.kubeflow.org/etcd-tag"
KUBE_PROXY_MODE_LABEL = "trainjob-conformance.kubeflow.org/kube-proxy-mode"
_PUSHED_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def upstream_node_image(profile: Profile) -> str:
    return UPSTREAM_NODE_IMAGE.format(kubernetes=profile.version("kubernetes"))


def local_images(profile: Profile) -> dict[str, str]:
    """Upstream name -> the image built here that stands for it, each built where missing."""
    binaries = local_build.build_binaries(profile)
    built, controllers = local_build.build_images(profile, binaries)
    catalog.ensure_hold_image()
    versions = profile.versions
    with step("reading the controllers' image names from their release manifests"):
        upstream = release_images(
            release_install_steps(
                profile, binaries["kubectl"], None, local_build.controller_keys(profile)
            )
        )
    labels = {ETCD_TAG_LABEL: catalog.etcd_image_tag(versions["etcd"]),
              KUBE_PROXY_MODE_LABEL: built.kube_proxy_mode}  # fmt: skip
    images = {name: name for name in built.digests if name != built.node}
    images[HOLD_IMAGE] = HOLD_IMAGE
    images[upstream_node_image(profile)] = _labelled(built.node, labels)
    images.update({upstream[key]: controllers[key] for key in controllers})
    return images


def _labelled(image: str, labels: dict[str, str]) -> str:
    """`image` with `labels` added (no layer: a new config only), tagged beside it."""
    tag = image.rsplit(":", 1)[1]
    target = f"{catalog.LOCAL}/kind-node-published:{tag}"
    if not store.present(target):
        context = store.fresh_context("kind-node-published")
        lines = " ".join(f"{key}={value}" for key, value in sorted(labels.items()))
        store.build_from_context(target, context, f"FROM {image}\nLABEL {lines}\n")
    return target


def _size(image: str) -> int:
    return int(store.docker("image", "inspect", "--format", "{{.Size}}", image).strip() or 0)


def push_image(local: str, upstream: str, registry: RegistryAddress) -> PushedImage:
    """`local` pushed as `upstream` into `registry` (Docker's credentials and rules)."""
    reference = ImageName.parse(upstream).in_mirror(registry)
    store.docker("tag", local, reference, what=f"tag {local}")
    try:
        output = store.docker("push", reference, what=f"push {reference}")
    finally:
        # Only the tag goes; the image stays under its own names.
        store.docker("rmi", reference, what=f"untag {reference}")
    found = _PUSHED_DIGEST.findall(output)
    return PushedImage(upstream, reference, found[-1] if found else "", _size(local))


def push_images(profile: Profile, registry: RegistryAddress) -> list[PushedImage]:
    """Every image of a kind cluster of `profile`, pushed under its upstream name."""
    images = local_images(profile)
    pushed = []
    for upstream, local in sorted(images.items()):
        began = time.monotonic()
        with step(f"pushing {upstream}"):
            pushed.append(push_image(local, upstream, registry))
        say(f"pushed {pushed[-1].reference} ({pushed[-1].size / 1e6:.1f} MB) "
            f"in {time.monotonic() - began:.1f}s")  # fmt: skip
    # What a run through this registry holds the mirror to (mirror.mirror_digests).
    write_image_record(
        image_record_path(registry, profile.name), {i.upstream: i.digest for i in pushed}
    )
    return pushed


def node_image_facts(image: str) -> dict[str, str]:
    """What a node image says of itself: the harness's labels ({} for kind's own)."""
    text = store.docker("image", "inspect", "--format", "{{json .Config.Labels}}", image)
    labels = json.loads(text or "null") or {}
    return {
        key: str(value)
        for key, value in labels.items()
        if key in (NODE_IMAGE_LABEL, ETCD_TAG_LABEL, KUBE_PROXY_MODE_LABEL)
    }
