"""The kind node image: Debian from Debian's repositories, kind's base recipe, the runtime
and Kubernetes from the harness's builds, and the images kubeadm asks for preloaded.

What kind's own node-image builder does (`pkg/build/nodeimage/` in the kind
module) is done here with the Docker CLI: run the base image with `sleep
infinity`, put kubeadm, kubelet and kubectl in /usr/bin (kind's kubelet unit
expects them there), write /kind/version, start containerd and import each
image pinned into its `k8s.io` namespace, stop it and commit with the base
image's entrypoint. Files are piped through `docker exec -i`, since a node's
/tmp is a tmpfs that a `docker cp` would land under and lose.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.cluster.kind.host_packages import require
from trainjob_conformance.cluster.kind.images import base_recipe
from trainjob_conformance.cluster.kind.images.store import (
    add_file,
    build_from_context,
    docker,
    ensure,
    fresh_context,
)
from trainjob_conformance.cluster.labels import LOCAL_IMAGE_HOST
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import WaitTimeout, wait_for
from trainjob_conformance.lifecycle.identity import start_time
from trainjob_conformance.paths import cache_root
from trainjob_conformance.progress import step

LOCAL = LOCAL_IMAGE_HOST
# The container the node image is assembled in, and the process that runs it (pid and
# start time): a build container whose owner is gone is removed by the next run
# (cluster/kind/reclaim.py), since a SIGKILL leaves it behind.
BUILD_LABEL = "trainjob-conformance.kubeflow.org/build"
BUILD_OWNER_LABEL = "trainjob-conformance.kubeflow.org/build-owner"
BUILD_CONTAINER_PREFIX = "tjc-node-build-"
NODE_IMAGE_LABEL = "trainjob-conformance.kubeflow.org/node-image"
# Pod networking without kindnetd (which the module proxy does not serve): the
# plugins kindnetd itself configures, on the pod subnet kube-controller-manager
# gives the first node of kind's default 10.244.0.0/16. One node only: more
# would need routes between the nodes' pod subnets.
POD_SUBNET = "10.244.0.0/24"
CNI_CONFLIST = {
    "cniVersion": "1.0.0",
    "name": "tjc-ptp",
    "plugins": [
        {
            "type": "ptp",
            "ipMasq": True,
            "mtu": 1500,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_SUBNET}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        },
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}
# kind applies /kind/manifests/default-cni.yaml unless told not to; the network
# is the baked conflist, so the manifest only records that.
DEFAULT_CNI_MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata:
  name: trainjob-conformance-cni
  namespace: kube-system
data:
  note: pod networking is the ptp conflist baked into the node image
"""


def _run(args: list[str], what: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise ConformanceError(f"{what} failed: {tail}")


def debian_image(suite: str, packages: list[str]) -> str:
    """A minimal Debian `suite` rootfs from debootstrap, imported as an image."""
    image = f"{LOCAL}/debian-minbase:{suite}"

    def build() -> None:
        require("debootstrap")
        rootfs = cache_root() / "work" / f"debootstrap-{suite}"
        shutil.rmtree(rootfs, ignore_errors=True)
        try:
            _run(
                [
                    "nice",
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(packages)}",
                    suite,
                    str(rootfs),
                    "http://deb.debian.org/debian",
                ],
                f"debootstrap {suite}",
            )
            tar = subprocess.Popen(
                ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
            )
            imported = subprocess.run(
                ["docker", "import", "-", image], stdin=tar.stdout, capture_output=True, text=True
            )
            tar.wait()
            if imported.returncode != 0 or tar.returncode != 0:
                raise ConformanceError(f"docker import of {rootfs} failed: {imported.stderr}")
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)

    # The package list is part of the key: kind changing it means a new rootfs.
    digest = hashlib.sha256(",".join(packages).encode()).hexdigest()[:12]
    ensure(image, build, key=f"{image}-{digest}")
    return image


def _apply_modes(context: Path, modes: list[tuple[str, int]]) -> None:
    files = [p for p in context.rglob("*") if p.is_file()]
    for pattern, mode in modes:
        pattern = pattern.rstrip("/")
        for path in files:
            relative = str(path.relative_to(context))
            if fnmatch.fnmatch(relative, pattern) or relative.startswith(pattern + "/"):
                path.chmod(mode)


def base_image(kind_source: Path, suite: str, runtime: dict[str, Path], tag: str) -> str:
    """kind's base image, built locally (cluster/kind/images/base_recipe.py)."""
    recipe = (kind_source / "images/base/Dockerfile").read_text()
    image = f"{LOCAL}/kind-base:{tag}"

    def build() -> None:
        debian = debian_image(suite, base_recipe.packages(recipe))
        context = fresh_context(image)
        shutil.copytree(kind_source / "images/base/files", context / "files")
        for path in (context / "files").rglob("*"):
            if path.is_dir():
                path.chmod(0o755)
        _apply_modes(context, base_recipe.copy_modes(base_recipe.stages(recipe)["base"]))
        names = {}
        for name, source in runtime.items():
            add_file(context, source, f"bin/{name}")
            names[name] = f"bin/{name}"
        build_from_context(
            image, context, base_recipe.local_dockerfile(recipe, debian, names), network=True
        )

    ensure(image, build)
    return image


def _exec(container: str, *args: str, stdin: bytes | None = None) -> str:
    return docker("exec", "-i", container, *args, input_bytes=stdin, what=f"exec {args[0]}")


def node_image(
    base: str,
    kubernetes_version: str,
    node_binaries: dict[str, Path],
    preload: list[str],
    tag: str,
) -> str:
    """The node image: `base` plus kubeadm/kubelet/kubectl and `preload` imported into containerd."""
    image = f"{LOCAL}/kind-node:{tag}"

    def prepare(name: str) -> None:
        for binary in ("kubeadm", "kubelet", "kubectl"):
            _exec(name, "sh", "-c", f"cat > /usr/bin/{binary} && chmod 755 /usr/bin/{binary}",
                  stdin=node_binaries[binary].read_bytes())  # fmt: skip
        _exec(name, "sh", "-c", "mkdir -p /kind/manifests /etc/cni/net.d")
        _exec(name, "sh", "-c", "cat > /kind/version", stdin=kubernetes_version.encode())
        _exec(name, "sh", "-c", "cat > /kind/manifests/default-cni.yaml",
              stdin=DEFAULT_CNI_MANIFEST.encode())  # fmt: skip
        _exec(name, "sh", "-c", "cat > /etc/cni/net.d/10-tjc-ptp.conflist",
              stdin=json.dumps(CNI_CONFLIST, indent=2).encode())  # fmt: skip

    ensure(image, lambda: _assemble(base, image, tag, preload, prepare))
    return image


def preloaded_image(node: str, preload: list[str], tag: str) -> str:
    """`node` with `preload` imported into its containerd as well: what `kind load` would
    put into every node made from it, there from the node's first second.

    Kept in the daemon only (not saved): built again from cached images in
    seconds, where saving the whole node image again would take longer.
    """
    image = f"{LOCAL}/kind-node:{tag}"
    ensure(image, lambda: _assemble(node, image, tag, preload), save=False)
    return image


def _assemble(
    source: str,
    image: str,
    tag: str,
    preload: list[str],
    prepare: Callable[[str], None] | None = None,
) -> None:
    """Run `source` as a build container, `prepare` it, import `preload` into its
    containerd (pinned), and commit it as `image` with `source`'s entrypoint."""
    name = f"{BUILD_CONTAINER_PREFIX}{os.getpid()}"
    docker(
        "run", "-d", "--privileged", "--name", name, "--entrypoint=sleep",
        "--label", f"{BUILD_LABEL}=node-image",
        "--label", f"{BUILD_OWNER_LABEL}={os.getpid()}-{start_time(os.getpid())}",
        source, "infinity", what="run the node build container",
    )  # fmt: skip
    try:
        if prepare is not None:
            prepare(name)
        _import_images(name, preload)
        entrypoint = docker("image", "inspect", "--format", "{{json .Config.Entrypoint}}",
                            source, what="inspect the source image").strip()  # fmt: skip
        # The label marks every node container made from this image as the
        # harness's (cluster/kind/reclaim.py).
        docker("commit", "--change", f"ENTRYPOINT {entrypoint}", "--change", "CMD []",
               "--change", f"LABEL {NODE_IMAGE_LABEL}={tag}",
               # A commit keeps the container's labels: the nodes made from the
               # image must not look like a build container (reclaim.py).
               "--change", f"LABEL {BUILD_LABEL}= {BUILD_OWNER_LABEL}=",
               name, image, what="commit the node image")  # fmt: skip
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def _import_images(name: str, preload: list[str]) -> None:
    """Each image into the build container's containerd, which runs only meanwhile."""
    _exec(
        name,
        "sh",
        "-c",
        "nohup containerd > /var/log/containerd-build.log 2>&1 & echo $! > /run/tjc-containerd.pid",
    )

    def ready() -> bool:
        return subprocess.run(
            ["docker", "exec", name, "ctr", "--namespace=k8s.io", "version"],
            capture_output=True, check=False,
        ).returncode == 0  # fmt: skip

    try:
        wait_for("containerd in the node build container", ready, timeout=60)
    except WaitTimeout:
        log = _exec(name, "sh", "-c", "tail -20 /var/log/containerd-build.log || true")
        raise ConformanceError(f"containerd did not start in {name}:\n{log}") from None
    for preloaded in preload:
        with step(f"importing {preloaded} into the node image"):
            saved = subprocess.Popen(["docker", "save", preloaded], stdout=subprocess.PIPE)
            imported = subprocess.run(
                ["docker", "exec", "-i", name, "ctr", "--namespace=k8s.io", "images",
                 "import", "--label=io.cri-containerd.pinned=pinned", "--all-platforms",
                 "--no-unpack", "--digests", "-"],
                stdin=saved.stdout, capture_output=True, text=True, check=False,
            )  # fmt: skip
            saved.wait()
            if imported.returncode != 0 or saved.returncode != 0:
                raise ConformanceError(f"importing {preloaded} failed: {imported.stderr}")
    _exec(
        name,
        "sh",
        "-c",
        "kill $(cat /run/tjc-containerd.pid); rm -f /var/log/containerd-build.log /run/tjc-containerd.pid",
    )
