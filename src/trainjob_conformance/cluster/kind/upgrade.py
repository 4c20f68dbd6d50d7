"""What kind adds to an in-place upgrade (cluster/releases/upgrade.py): the new
release's image built here and put into every node's containerd before the
Deployment changes. The nodes got the old one baked into their image at start,
and the new Pod may be scheduled on any of them.

`prepare` builds the image (Docker) and `load_image` needs the nodes; the
provider (cluster/kind/provider.py) runs the phases.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainjob_conformance.cluster.kind.images import local_build
from trainjob_conformance.cluster.releases.upgrade import PreparedUpgrade, StepsBuilder
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import Profile, with_version


def import_command(node: str) -> list[str]:
    """Import a `docker save` archive from stdin into a node's containerd, as the node
    image holds its images (cluster/kind/images/node.py): in the kubelet's namespace,
    pinned, so its image garbage collection never removes it. Through stdin: a file
    copied into a node's /tmp lands on a tmpfs of the node and is lost."""
    return [
        "docker", "exec", "-i", node, "ctr", "--namespace=k8s.io", "images", "import",
        "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack",
        "--digests", "-",
    ]  # fmt: skip


def load_image(image: str, nodes: list[str], scratch: Path) -> float:
    """Put a local image into every node's containerd (saved once, imported on every
    node at once); seconds it took."""
    if not nodes:
        raise ConformanceError(f"no node container to load {image} into")
    started = time.monotonic()
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=scratch, suffix=".tar") as archive:
        saved = subprocess.run(
            ["docker", "save", "-o", archive.name, image],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if saved.returncode != 0:
            raise ConformanceError(f"docker save {image} failed: {saved.stderr.strip()}")

        def load(node: str) -> str:
            with open(archive.name, "rb") as stdin:
                done = subprocess.run(
                    import_command(node), stdin=stdin, capture_output=True, check=False
                )
            return "" if done.returncode == 0 else f"{node}: {done.stderr.decode().strip()}"

        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            failed = [line for line in pool.map(load, nodes) if line]
    if failed:
        raise ConformanceError(f"importing {image} into the kind nodes failed on {failed[0]}")
    return time.monotonic() - started


def prepare(
    profile: Profile,
    local: dict[str, str],
    component: str,
    version: str,
    build_steps: StepsBuilder,
    load: Callable[[str], tuple[int, float]],
) -> PreparedUpgrade:
    """Build the new release's image and `load` it into the nodes (giving how many and
    the seconds it took), then both releases' manifests of the component."""
    image = local_build.build_controller_image(component, version)
    nodes, seconds = load(image)
    target = with_version(profile, component, version)
    moved = {**local, component: image}
    return PreparedUpgrade(
        component=component,
        from_version=profile.version(component),
        to_version=version,
        image=image,
        supply=f"loaded into {nodes} nodes ({seconds:.1f}s)",
        target=target,
        local=moved,
        old_steps=build_steps(profile, local, [component]),
        new_steps=build_steps(target, moved, [component]),
    )
