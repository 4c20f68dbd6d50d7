"""A registry mirror for kind's nodes: what their containerd is told, and how they reach it.

kind documents a local registry for its nodes the same way
(`containerdConfigPatches` setting containerd's `config_path`, and a
`hosts.toml` per registry under /etc/containerd/certs.d). Here the directory
is written on the host before `kind create` and mounted read-only into every
node (kind's `extraMounts`), so it is in place before the first pull, and one
`hosts.toml` per upstream registry sends that registry's pulls to the mirror,
where the image is kept below the upstream host (stack/registry/mirror_names.py):

    server = "https://registry.k8s.io"
    [host."http://tjc-registry-123:5000/v2/registry.k8s.io"]
      capabilities = ["pull", "resolve"]
      override_path = true

A mirror on this host's loopback (127.0.0.1:PORT) is out of the nodes' reach:
they are containers on Docker's `kind` network. As in kind's recipe, such a
mirror must be a container publishing that port (`images serve --cluster
kind` starts one); the provider connects it to the `kind` network and the
nodes ask it by its container name. Anything else on loopback is refused in
one line before any node starts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainjob_conformance.cluster.kind.reclaim import KIND_NETWORK
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.registry.address import RegistryAddress, parse_registry_url
from trainjob_conformance.stack.registry.mirror_names import ImageName, upstream_server

if TYPE_CHECKING:
    from trainjob_conformance.stack.registry.client import RegistryClient

CERTS_DIR_IN_NODE = "/etc/containerd/certs.d"
CA_FILE_NAME = "mirror-ca.crt"
# kind's documented patch: containerd reads a registry's hosts.toml from here.
CONTAINERD_PATCH = (
    f'[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "{CERTS_DIR_IN_NODE}"\n'
)
_SERVE_HINT = (
    "run the mirror as a container publishing that port (`trainjob-conformance images serve "
    "--cluster kind` starts one), or give an address the nodes reach"
)


@dataclass
class NodeMirror:
    """The mirror as the host reaches it (`address`) and as the nodes do (`for_nodes`)."""

    address: RegistryAddress
    for_nodes: RegistryAddress
    ca_file: Path | None = None
    # The loopback mirror's container, connected to the kind network by this run.
    container: str = ""
    connected: bool = field(default=False)

    @property
    def url(self) -> str:
        return self.address.url


def parse_mirror(url: str, ca_file: str | None) -> NodeMirror:
    """The mirror a user named: its address checked, its CA file read where given."""
    address = parse_registry_url(url)
    ca = Path(ca_file) if ca_file else None
    if ca is not None:
        if not ca.is_file():
            raise ConformanceError(f"registry CA {ca} does not exist")
        if address.insecure:
            raise ConformanceError(
                f"a CA file was given for {address.url}, which is plain HTTP: give "
                f"https://{address.host} to check its certificate against {ca}, or drop --registry-ca"
            )
        if "BEGIN CERTIFICATE" not in ca.read_text(errors="replace"):
            raise ConformanceError(f"registry CA {ca} holds no PEM certificate")
    return NodeMirror(address, address, ca)


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=False, timeout=30
    )


def publishing_container(port: int) -> tuple[str, int] | None:
    """The container publishing `port` on the host, and the port inside it it maps to."""
    listed = _docker("ps", "--filter", f"publish={port}", "--format", "{{.Names}}")
    names = listed.stdout.split()
    if listed.returncode != 0 or not names:
        return None
    ports = _docker("port", names[0]).stdout
    for line in ports.splitlines():
        inside, _, outside = line.partition(" -> ")
        if outside.rsplit(":", 1)[-1] == str(port):
            return names[0], int(inside.split("/", 1)[0])
    return None


def reach_from_nodes(mirror: NodeMirror) -> NodeMirror:
    """Where the nodes find the mirror. A loopback mirror must be a container: it is
    connected to the kind network (once the network exists: `connect`)."""
    if not mirror.address.loopback:
        return mirror
    port_text = mirror.address.host.rsplit(":", 1)[-1]
    found = publishing_container(int(port_text)) if port_text.isdigit() else None
    if found is None:
        raise ConformanceError(
            f"the mirror {mirror.url} is on this host's loopback, which kind's nodes cannot "
            f"reach (they run on Docker's {KIND_NETWORK} network), and no container publishes "
            f"that port: {_SERVE_HINT}"
        )
    name, inside = found
    for_nodes = RegistryAddress(mirror.address.scheme, f"{name}:{inside}", mirror.address.prefix)
    return NodeMirror(mirror.address, for_nodes, mirror.ca_file, container=name)


def connect(mirror: NodeMirror) -> None:
    """Put a loopback mirror's container on the kind network (it may be there already,
    from another run: then it stays when this run ends)."""
    if not mirror.container or mirror.connected:
        return
    networks = _docker(
        "inspect", "--format", "{{json .NetworkSettings.Networks}}", mirror.container
    ).stdout
    try:
        attached = KIND_NETWORK in json.loads(networks or "{}")
    except ValueError:
        attached = False
    if attached:
        return
    done = _docker("network", "connect", KIND_NETWORK, mirror.container)
    if done.returncode != 0:
        raise ConformanceError(
            f"could not connect the mirror's container {mirror.container} to the "
            f"{KIND_NETWORK} network: {done.stderr.strip()}"
        )
    mirror.connected = True


def disconnect(mirror: NodeMirror) -> None:
    """Take the mirror's container off the kind network, if this run put it there."""
    if mirror.connected:
        _docker("network", "disconnect", KIND_NETWORK, mirror.container)
        mirror.connected = False


def hosts_toml(upstream_host: str, mirror: NodeMirror) -> str:
    """containerd's configuration for one upstream registry: pull it from the mirror."""
    nodes = mirror.for_nodes
    path = "/".join(part for part in ("v2", nodes.prefix, upstream_host) if part)
    lines = [
        f'server = "{upstream_server(upstream_host)}"',
        "",
        f'[host."{nodes.scheme}://{nodes.host}/{path}"]',
        '  capabilities = ["pull", "resolve"]',
        "  override_path = true",
    ]
    if mirror.ca_file is not None:
        lines.append(f'  ca = "{CERTS_DIR_IN_NODE}/{upstream_host}/{CA_FILE_NAME}"')
    return "\n".join(lines) + "\n"


def write_certs_dir(directory: Path, images: list[str], mirror: NodeMirror) -> Path:
    """The certs.d directory for the nodes: a hosts.toml (and the CA) per upstream
    registry that `images` come from; mounted at CERTS_DIR_IN_NODE."""
    shutil.rmtree(directory, ignore_errors=True)
    for host in sorted({ImageName.parse(image).host for image in images}):
        target = directory / host
        target.mkdir(parents=True)
        (target / "hosts.toml").write_text(hosts_toml(host, mirror))
        if mirror.ca_file is not None:
            shutil.copyfile(mirror.ca_file, target / CA_FILE_NAME)
    return directory


def mirror_digests(mirror: NodeMirror, images: list[str], profile: str) -> dict[str, str]:
    """Image -> the digest the mirror serves for it. An image the mirror lacks is one
    line naming the image and the mirror, before any node starts."""
    from trainjob_conformance.stack.registry.client import RegistryClient
    from trainjob_conformance.stack.registry.errors import translated
    from trainjob_conformance.stack.registry.records import image_record_path, read_image_record

    client = RegistryClient(mirror.address, mirror.ca_file)
    with translated(mirror.address, profile):
        client.ping()
    # Pushed from this machine: each image must still be what was pushed.
    record = image_record_path(mirror.address, profile)
    pushed = read_image_record(record)
    found: dict[str, str] = {}
    for image in images:
        name = ImageName.parse(image)
        digest = served_digest(client, mirror, image, profile)
        if digest is None:
            raise ConformanceError(
                f"the mirror {mirror.url} has no {name.upstream} (looked for "
                f"{name.in_mirror(mirror.address)}): push the profile's images with "
                f"`trainjob-conformance images push --registry {mirror.url} --profile {profile} "
                "--cluster kind`, or mirror it from its registry"
            )
        if pushed.get(image) and pushed[image] != digest:
            raise ConformanceError(
                f"the mirror {mirror.url} serves {name.upstream} as {digest}, but it was pushed "
                f"as {pushed[image]} (recorded in {record}): its content changed since the push; "
                "push it again, or find out what rewrote it"
            )
        found[image] = digest
    return found


def served_digest(
    client: RegistryClient, mirror: NodeMirror, image: str, profile: str
) -> str | None:
    """The digest the mirror serves for `image` (its upstream name); None where it has
    none. A mirror that does not answer is one line (`profile`: for its advice)."""
    from trainjob_conformance.stack.registry.errors import translated

    name = ImageName.parse(image)
    with translated(mirror.address, profile, name.in_mirror(mirror.address)):
        return client.image_digest(client.container(f"{name.host}/{name.path}", name.tag))
