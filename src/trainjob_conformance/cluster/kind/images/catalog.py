"""Which images a kind cluster needs, under which names, and how each is built locally.

Names: the images kubeadm pulls keep the names it asks for (the node's
containerd already holds them, so nothing is pulled); the harness's own images
(controllers, node) live under `tjc.local/`, a name no registry serves, and
the manifests are pointed at them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.cluster.hold import HOLD_IMAGE
from trainjob_conformance.cluster.kind.images import node, simple, store
from trainjob_conformance.cluster.kind.versions import DEBIAN_SUITE, NODE_TOOLS
from trainjob_conformance.stack.gobuild import cache_version

LOCAL = node.LOCAL
# kubeadm's tags for the images it does not build from its own version (v1.36).
PAUSE_TAGS = ("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10")
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The binary inside each controller image; the Deployments run /manager (or the
# image's entrypoint, which is the same path).
CONTROLLER_BINARIES = {
    "jobset": "jobset-controller-manager",
    "kueue": "kueue",
    "trainer": "trainer-controller-manager",
    "training-operator": "training-operator",
}
RUNTIME_FILES = (
    "containerd", "ctr", "containerd-shim-runc-v2", "runc", "crictl",
    "host-local", "loopback", "ptp", "portmap",
)  # fmt: skip


# The releases' repository paths, kept under the local host: `existing`
# (cluster/introspect.py) recognises a controller and its version by that path
# and tag, so a kind cluster with local images reads like one with releases.
RELEASE_PATHS = {
    "jobset": "jobset/jobset",
    "kueue": "kueue/kueue",
    "trainer": "kubeflow/trainer/trainer-controller-manager",
    "training-operator": "kubeflow/training-operator",
}


def controller_image(component: str, version: str) -> str:
    return f"{LOCAL}/{RELEASE_PATHS[component]}:{version}"


def etcd_image_tag(version: str) -> str:
    return version


@dataclass
class BuiltImages:
    """What ran: image name -> the image ID (a content digest) in the local daemon."""

    node: str = ""
    # The images the nodes start from (`node` plus what each role runs), by role.
    control_plane: str = ""
    worker: str = ""
    digests: dict[str, str] = field(default_factory=dict)
    # The iptables mode kube-proxy's image was built for ("nft" or "legacy").
    kube_proxy_mode: str = ""


def kubeadm_images(
    versions: dict[str, str], binaries: dict[str, Path]
) -> dict[str, tuple[str, object]]:
    """Image name -> (cache key, builder) for every image kubeadm and the node run."""
    k8s = versions["kubernetes"]
    plan: dict[str, tuple[str, object]] = {}
    for binary in CONTROL_PLANE:
        plan[f"registry.k8s.io/{binary}:{k8s}"] = (
            f"{binary}-{k8s}",
            lambda b=binary, n=f"registry.k8s.io/{binary}:{k8s}": simple.build_binary_image(
                n, binaries[b], f"/usr/local/bin/{b}"
            ),
        )
    etcd = f"registry.k8s.io/etcd:{etcd_image_tag(versions['etcd'])}"
    plan[etcd] = (
        f"etcd-{versions['etcd']}",
        lambda: simple.build_binary_image(etcd, binaries["etcd"], "/usr/local/bin/etcd"),
    )
    coredns = f"registry.k8s.io/coredns/coredns:{NODE_TOOLS['coredns']}"
    plan[coredns] = (
        # With the binary's plugin selection (stack/components.py), so that an image of
        # an older selection is not taken for this one.
        f"coredns-{cache_version('coredns', NODE_TOOLS['coredns'])}",
        lambda: simple.build_binary_image(coredns, binaries["coredns"], "/coredns"),
    )
    return plan


def ensure_kubeadm_images(
    versions: dict[str, str], binaries: dict[str, Path], base: str
) -> BuiltImages:
    built = BuiltImages()
    for name, (key, build) in kubeadm_images(versions, binaries).items():
        built.digests[name] = store.ensure(name, build, key=key)  # type: ignore[arg-type]
    pause = PAUSE_TAGS[0]
    built.digests[pause] = store.ensure(pause, lambda: simple.build_pause(pause), key="pause-tjc-1")
    for alias in PAUSE_TAGS[1:]:
        store.docker("tag", pause, alias, what="tag pause")
        built.digests[alias] = built.digests[pause]
    proxy = f"registry.k8s.io/kube-proxy:{versions['kubernetes']}"
    mode = built.kube_proxy_mode = host_iptables_mode()
    built.digests[proxy] = store.ensure(
        proxy, lambda: build_kube_proxy(proxy, base, binaries["kube-proxy"], mode),
        key=f"kube-proxy-{versions['kubernetes']}-{mode}-{base.replace('/', '_')}",
    )  # fmt: skip
    return built


# What kube-proxy's iptables mode runs besides its binary: iptables and ip6tables
# with their save and restore commands, in one mode. Only these commands, their
# shared libraries and iptables' extension modules go into the image, the way the
# releases' distroless-iptables image is made: a node unpacks every image it
# runs at boot, and the whole Debian base (513 MB) cost each node about 6
# CPU-seconds of containerd before its kube-proxy started (docs/measurements.md).
_IPTABLES_COMMANDS = " ".join(
    f"/usr/sbin/{family}{suffix}"
    for family in ("iptables", "ip6tables")
    for suffix in ("", "-save", "-restore")
)


def _slim_iptables(mode: str) -> str:
    """The build step that copies iptables in `mode` out of the node's base into /slim."""
    return f"""\
set -e
update-alternatives --set iptables /usr/sbin/iptables-{mode}
update-alternatives --set ip6tables /usr/sbin/ip6tables-{mode}
mkdir -p /slim/run /slim/tmp
for link in {_IPTABLES_COMMANDS}; do
  path=$link
  while [ -L "$path" ]; do
    cp -a --parents "$path" /slim
    target=$(readlink "$path")
    case $target in /*) path=$target ;; *) path=$(dirname "$path")/$target ;; esac
  done
  cp -a --parents "$path" /slim
done
modules=$(ls -d /usr/lib/*/xtables)
cp -a --parents $modules /slim
for elf in /usr/sbin/xtables-{mode}-multi $modules/*.so; do ldd "$elf"; done \\
  | awk 'substr($3, 1, 1) == "/" {{print $3}} substr($1, 1, 1) == "/" {{print $1}}' \\
  | sort -u \\
  | while read -r library; do cp -L --parents "$library" /slim; done
"""


def host_iptables_mode() -> str:
    """The iptables mode kind's node entrypoint will pick on this host, so kube-proxy's
    rules sit beside the node's own: it counts the rules in each mode inside a new
    node, where the only ones are those Docker wrote for its DNS with the host's
    `iptables` (nft on this machine class). Legacy where that cannot be read."""
    # /usr/sbin is not on every user's PATH.
    iptables = shutil.which("iptables", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if iptables is None:
        return "legacy"
    found = subprocess.run([iptables, "--version"], capture_output=True, text=True, check=False)
    return "nft" if "nf_tables" in found.stdout else "legacy"


def build_kube_proxy(image: str, base: str, binary: Path, mode: str) -> None:
    """kube-proxy and the iptables it runs, copied out of the node's own Debian base."""
    context = store.fresh_context(image)
    store.add_file(context, binary, "kube-proxy")
    (context / "slim-iptables.sh").write_text(_slim_iptables(mode))
    dockerfile = (
        f"FROM {base} AS iptables\n"
        "COPY slim-iptables.sh /slim-iptables.sh\n"
        "RUN sh /slim-iptables.sh\n"
        "FROM scratch\n"
        "COPY --from=iptables /slim/ /\n"
        "COPY kube-proxy /usr/local/bin/kube-proxy\n"
        "STOPSIGNAL SIGTERM\n"
        'ENTRYPOINT ["/usr/local/bin/kube-proxy"]\n'
    )
    store.build_from_context(image, context, dockerfile)


def ensure_controller_images(versions: dict[str, str], binaries: dict[str, Path]) -> dict[str, str]:
    """Component -> image name, each built FROM scratch around the harness's binary."""
    images = {}
    for component, binary in CONTROLLER_BINARIES.items():
        if component not in versions or binary not in binaries:
            continue
        name = controller_image(component, versions[component])
        store.ensure(
            name,
            lambda n=name, b=binaries[binary]: simple.build_binary_image(
                n, b, "/manager", simple.NONROOT
            ),
            key=f"{component}-{versions[component]}-{RELEASE_PATHS[component].replace('/', '_')}",
        )
        images[component] = name
    return images


def ensure_hold_image() -> str:
    version = simple.busybox_version()
    return store.ensure(
        HOLD_IMAGE, lambda: simple.build_busybox(HOLD_IMAGE), key=f"busybox-{version}"
    )


def _held(digests: dict[str, str], images: list[str]) -> str:
    """One digest of the images a node image holds, by their IDs."""
    held = ",".join(f"{image}@{digests[image]}" for image in images)
    return hashlib.sha256(held.encode()).hexdigest()


def ensure_node(
    versions: dict[str, str], binaries: dict[str, Path], kind_source: Path
) -> BuiltImages:
    """The base, the kubeadm images and the node image, each cached by its versions."""
    runtime = {name: binaries[name] for name in RUNTIME_FILES}
    tools = "-".join(f"{k}{v}" for k, v in sorted(NODE_TOOLS.items()) if k not in ("coredns",))
    base = node.base_image(kind_source, DEBIAN_SUITE, runtime, f"{DEBIAN_SUITE}-{tools}")
    built = ensure_kubeadm_images(versions, binaries, base)
    preload = sorted(built.digests)
    k8s = versions["kubernetes"]
    # The versions do not say how the images it holds were made (kube-proxy's
    # recipe changed once): their IDs do, so a rebuilt one makes a new node image.
    tag = f"{k8s}-etcd{versions['etcd']}-{tools}-p{_held(built.digests, preload)[:8]}"
    built.node = node.node_image(base, k8s, binaries, preload, tag)
    built.digests[built.node] = store.image_id(built.node)
    return built


def ensure_role_images(
    built: BuiltImages, controllers: list[str], with_workers: bool = True
) -> BuiltImages:
    """The node image with the images each role runs already in its containerd, as
    `kind load` would put them there after `kind create`: the controllers on the
    control plane (where they run, cluster/kind/nodes.py), the test image on the
    workers (where the policies' Pods run; on the control plane too where it is
    the only node). Each is tagged by the IDs of what it holds, so a rebuilt
    controller makes a new one."""
    hold_id = ensure_hold_image()
    built.digests[HOLD_IMAGE] = hold_id
    for image in controllers:
        built.digests[image] = store.image_id(image)
    base_tag = built.node.rsplit(":", 1)[1]
    on_control_plane = sorted(controllers) + ([] if with_workers else [HOLD_IMAGE])
    for role, preload in (("control_plane", on_control_plane), ("worker", [HOLD_IMAGE])):
        digest = _held(built.digests, preload)[:12]
        # Docker tags stop at 128 characters: the role's initial and the digest.
        image = node.preloaded_image(built.node, preload, f"{base_tag}-{role[0]}{digest}")
        built.digests[image] = store.image_id(image)
        setattr(built, role, image)
    return built
