"""Several kind nodes without kindnetd: each node's pod subnet, routes between them, a
topology the policies can find, and controllers kept off the workers.

kindnetd (kind's own CNI daemon) is not on the Go module proxy, so the node
image carries a ptp conflist on one fixed subnet (cluster/kind/images/node.py).
With several nodes each node needs the pod subnet kube-controller-manager gave
it (spec.podCIDR) in its conflist, and a route to every other node's subnet
through that node's address on the kind network: what kindnetd writes.

The workers carry a zone label (two in one zone, one in another), the labels a
cloud node has, so a label splits the nodes and Kueue's topology-aware
scheduling finds a zone with two nodes. The policies size their Pods for a
whole node of the embedded cluster (2 CPU); a kind node has the host's CPUs
(2 here), so the stack's controllers and CoreDNS run on the control-plane
node, as system components, and the workers are left whole.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainjob_conformance.cluster.capabilities import ZONE_LABEL
from trainjob_conformance.cluster.kind.config import INSTALLING_TAINT
from trainjob_conformance.cluster.kind.images.node import CNI_CONFLIST
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.client import Kube
from trainjob_conformance.kube.kinds import NODE, POD
from trainjob_conformance.kube.waits import NotYet, WaitTimeout, wait_for

CONFLIST_PATH = "/etc/cni/net.d/10-tjc-ptp.conflist"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
CONTROL_PLANE_TAINT = f"{CONTROL_PLANE_LABEL}:NoSchedule"
# Zone of each worker, in kind's worker order: two zones, one with two nodes.
WORKER_ZONES = ("zone-a", "zone-a", "zone-b")
# kube-controller-manager allocates a subnet as a node registers; a worker joined last
# under load (2 cores shared by two clusters) took over 60 s to have one.
_CIDR_TIMEOUT = 180.0
# How long a node waits for another node's kubelet port when it checks the
# addresses its pod routes go through (an answer or a refusal takes
# milliseconds; only dropped packets wait this long).
REACH_SECONDS = 3
# kind's entrypoint points /usr/sbin/iptables at one mode's xtables binary as the
# node starts (it counts each mode's rules Docker wrote into the new node).
IPTABLES_MODE_READ = "readlink -f /usr/sbin/iptables"
# kind's known-issues page: each node's systemd, containerd and kubelet take
# inotify instances; at the kernel's default of 128, seven nodes on one host ran
# out (a kubelet: "Failed to start cAdvisor: inotify_init: too many open files").
KIND_INOTIFY_INSTANCES = 512
_INOTIFY_PATH = "/proc/sys/fs/inotify/max_user_instances"


def inotify_shortfall(text: str | None = None) -> str | None:
    """One line when the host's inotify instance limit is below what kind asks for
    several nodes, else None."""
    try:
        limit = int(text if text is not None else Path(_INOTIFY_PATH).read_text())
    except (OSError, ValueError):
        return None
    if limit >= KIND_INOTIFY_INSTANCES:
        return None
    return (
        f"fs.inotify.max_user_instances is {limit} on this host; kind asks for "
        f"{KIND_INOTIFY_INSTANCES} for several nodes, and a kubelet that finds none left "
        f"exits (sysctl -w fs.inotify.max_user_instances={KIND_INOTIFY_INSTANCES}, as root)"
    )


def ensure_inotify_instances(text: str | None = None, path: str = _INOTIFY_PATH) -> str | None:
    """Raise the host's inotify instance limit to what kind asks for, where it is lower
    and the harness may (root, as for installing Docker); one line saying what was done,
    or why it could not be. None when nothing was needed.

    The raised limit is left in place: other kind clusters' nodes on this host may
    rely on it by the time this run ends, and lowering it under them would stop
    their kubelets.
    """
    try:
        before = (text if text is not None else Path(path).read_text()).strip()
    except OSError:
        return None
    shortfall = inotify_shortfall(before)
    if shortfall is None:
        return None
    try:
        Path(path).write_text(f"{KIND_INOTIFY_INSTANCES}\n")
    except OSError:
        return shortfall
    return (
        f"raised fs.inotify.max_user_instances from {before} to {KIND_INOTIFY_INSTANCES}, "
        "kind's figure for several nodes on one host (left so when the run ends)"
    )


def worker_labels(count: int) -> list[dict[str, str]]:
    """The labels of `count` workers: zones cycle through WORKER_ZONES."""
    return [{ZONE_LABEL: WORKER_ZONES[i % len(WORKER_ZONES)]} for i in range(count)]


@dataclass(frozen=True)
class KindNode:
    name: str  # kind names the node after its container
    address: str  # InternalIP, on the kind Docker network
    pod_cidr: str
    control_plane: bool


def conflist(pod_cidr: str) -> dict[str, Any]:
    """The node image's conflist on this node's own pod subnet."""
    config = json.loads(json.dumps(CNI_CONFLIST))
    config["plugins"][0]["ipam"]["ranges"] = [[{"subnet": pod_cidr}]]
    return config


def routes(node: KindNode, nodes: list[KindNode]) -> list[list[str]]:
    """`ip route replace` arguments: every other node's pod subnet through its address."""
    return [
        ["ip", "route", "replace", other.pod_cidr, "via", other.address]
        for other in nodes
        if other.name != node.name
    ]


def misplaced_pods(pods: list[dict[str, Any]], nodes: list[KindNode]) -> list[tuple[str, str]]:
    """(namespace, name) of Pods whose address lies outside their node's pod subnet: they
    started on the image's fixed subnet before their node's conflist was written."""
    cidrs = {n.name: ipaddress.ip_network(n.pod_cidr) for n in nodes}
    found = []
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("hostNetwork") or spec.get("nodeName") not in cidrs or not status.get("podIP"):
            continue
        if ipaddress.ip_address(status["podIP"]) not in cidrs[spec["nodeName"]]:
            found.append((pod["metadata"]["namespace"], pod["metadata"]["name"]))
    return found


def off_control_plane(pods: list[dict[str, Any]], control_plane: str) -> list[tuple[str, str]]:
    """(namespace, name) of controller-owned, non-host-network Pods on a worker."""
    return [
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in pods
        if (p.get("spec") or {}).get("nodeName") not in (None, control_plane)
        and not (p.get("spec") or {}).get("hostNetwork")
        and p["metadata"].get("ownerReferences")
        and all(r.get("kind") != "DaemonSet" for r in p["metadata"]["ownerReferences"])
    ]


def read_nodes(
    kube: Kube, expected: int, cluster: str, control_plane_only: bool = False
) -> list[KindNode]:
    """The cluster's nodes once all `expected` have a pod subnet (bounded wait); with
    `control_plane_only`, the control-plane node alone, while the workers may still join."""

    def look() -> list[KindNode] | NotYet:
        nodes = []
        for item in kube.list(*NODE):
            addresses = {a["type"]: a["address"] for a in item["status"].get("addresses") or []}
            cidr = (item.get("spec") or {}).get("podCIDR")
            if not cidr or "InternalIP" not in addresses:
                continue
            labels = item["metadata"].get("labels") or {}
            nodes.append(
                KindNode(
                    item["metadata"]["name"],
                    addresses["InternalIP"],
                    cidr,
                    CONTROL_PLANE_LABEL in labels,
                )
            )
        if control_plane_only:
            nodes = [n for n in nodes if n.control_plane]
            return nodes or NotYet("the control-plane node has no podCIDR and InternalIP yet")
        if len(nodes) < expected:
            return NotYet(f"{len(nodes)} of {expected} nodes have a podCIDR and an InternalIP")
        return nodes

    try:
        return wait_for("every kind node's pod subnet", look, timeout=_CIDR_TIMEOUT)
    except WaitTimeout as error:
        seen = {n["metadata"]["name"] for n in kube.list(*NODE)}
        raise ConformanceError(f"{error}{_unregistered(cluster, seen)}") from None


def wait_service_routing(kube: Kube, node: str, timeout: float = 120.0) -> None:
    """Until kube-proxy on `node` is Ready: before that the kubernetes Service's address
    does not reach the API server from a Pod there (the stack's managers, started
    before it, failed on it: "x509: cannot validate certificate for 10.96.0.1")."""

    def look() -> bool | NotYet:
        pods = kube.list(*POD, namespace="kube-system", label_selector="k8s-app=kube-proxy")
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") != node:
                continue
            status = pod.get("status") or {}
            ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
            if ready.get("Ready") == "True":
                return True
            return NotYet(f"kube-proxy on {node} is {status.get('phase')}, not Ready")
        return NotYet(f"no kube-proxy Pod on {node} yet")

    try:
        wait_for(f"kube-proxy on {node}", look, timeout, interval=0.5)
    except WaitTimeout as error:
        raise ConformanceError(str(error)) from None


def _unregistered(cluster: str, seen: set[str]) -> str:
    """The last kubelet error of each node container that has no Node: why it is missing."""
    listed = subprocess.run(
        ["docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={cluster}",
         "--format", "{{.Names}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = []
    for name in sorted(set(listed.stdout.split()) - seen):
        journal = subprocess.run(
            ["docker", "exec", name, "sh", "-c",
             "journalctl -u kubelet --no-pager -n 300 | grep -E ' E[0-9]{4} ' | tail -1"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines.append(f"\n{name} is not a node; its kubelet's last error: {journal.stdout.strip()}")
    shortfall = inotify_shortfall()
    return "".join(lines) + (f"\n{shortfall}" if lines and shortfall else "")


def _exec(node: str, args: list[str], stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["docker", "exec", "-i", node, *args], input=stdin, capture_output=True, check=False
    )
    if result.returncode != 0:
        raise ConformanceError(
            f"on node {node}, {' '.join(args)} failed: {result.stderr.decode().strip()}"
        )
    return result.stdout.decode()


def reach_probes(node: KindNode, nodes: list[KindNode]) -> str:
    """Shell: every other node's kubelet port, reached over IPv4 at once; prints the
    name and address of each whose connection timed out (curl's exit 28): an answer
    or a refusal both mean the packets got there."""
    return " ".join(
        f"(curl -sk -m {REACH_SECONDS} -o /dev/null https://{other.address}:10250/healthz;"
        f" test $? -ne 28 || echo {other.name} {other.address}) &"
        for other in nodes
        if other.name != node.name
    )


def wiring_script(node: KindNode, nodes: list[KindNode]) -> str:
    """One shell script for a node: its conflist (from stdin), its routes, the probes
    of the addresses those routes go through, then where its `iptables` points."""
    # Written whole, then renamed: containerd reloads the directory on change.
    lines = [f"cat > {CONFLIST_PATH}.new", f"mv {CONFLIST_PATH}.new {CONFLIST_PATH}"]
    lines += [" ".join(route) for route in routes(node, nodes)]
    reach = reach_probes(node, nodes)
    script = " && ".join(lines) + (f" && {{ {reach} wait; }}" if reach else "")
    return f"{script} && {IPTABLES_MODE_READ}"


def iptables_mode(printed: str) -> str | None:
    """The mode kind's entrypoint set the node's `iptables` to, from the path
    IPTABLES_MODE_READ printed ("nft", "legacy"), or None if it printed none."""
    for line in printed.splitlines():
        for mode in ("nft", "legacy"):
            if line.strip().endswith(f"/xtables-{mode}-multi"):
                return mode
    return None


def mode_mismatch(modes: dict[str, str | None], kube_proxy_mode: str) -> str | None:
    """One line when kind set some node's iptables to a mode other than the one
    kube-proxy's image was built for, else None."""
    other = sorted(node for node, mode in modes.items() if mode and mode != kube_proxy_mode)
    if not other:
        return None
    mode = modes[other[0]]
    return (
        f"kind set {len(other)} of {len(modes)} nodes' iptables to {mode} (first: {other[0]}), "
        f"but kube-proxy's image was built for {kube_proxy_mode}, the mode the host's "
        "`iptables --version` reports: Services work only where the kernel runs both; "
        "if they fail, make the host's iptables mode match the Docker daemon's"
    )


def unreachable(node: KindNode, probed: str) -> list[str]:
    """`node -> other (address)` for each line the probes printed (name, address)."""
    printed = [line.split() for line in probed.splitlines()]
    return [f"{node.name} -> {words[0]} ({words[1]})" for words in printed if len(words) == 2]


def wire_pod_network(nodes: list[KindNode]) -> dict[str, str | None]:
    """Each node's conflist on its own subnet, routes to the others' subnets, and a
    check that the others' addresses answer; one `docker exec` per node, the nodes at
    once (each exec costs a few hundred ms). Returns each node's iptables mode."""

    def wire(node: KindNode) -> str:
        text = json.dumps(conflist(node.pod_cidr), indent=2).encode()
        return _exec(node.name, ["sh", "-c", wiring_script(node, nodes)], stdin=text)

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        # dict() re-raises the first node's error here.
        printed = dict(zip([n.name for n in nodes], pool.map(wire, nodes), strict=True))
    silent = [pair for node in nodes for pair in unreachable(node, printed[node.name])]
    if silent:
        tried = len(nodes) * (len(nodes) - 1)
        raise ConformanceError(
            f"{len(silent)} of {tried} probes between the kind nodes' IPv4 addresses timed out "
            f"(first: {silent[0]}), so Pods "
            "on different nodes cannot talk: the Docker host drops IPv4 traffic forwarded "
            "on the kind network; a FORWARD chain with policy DROP and no rule for the kind "
            "bridge does this, e.g. an nftables one left beside Docker's legacy iptables "
            "(`iptables-nft -S FORWARD` shows it); accept that bridge's traffic or set the "
            "policy to ACCEPT, then run again"
        )
    return {name: iptables_mode(text) for name, text in printed.items()}


def open_control_plane(kubectl: Callable[..., None], control_plane: str) -> None:
    """While the stack installs, only the control-plane node takes Pods: its own taint is
    lifted here, and the workers joined with the installing taint (cluster/kind/config.py)."""
    kubectl("taint", "nodes", control_plane, f"{CONTROL_PLANE_TAINT}-")


def give_workers_back(kubectl: Callable[..., None], control_plane: str) -> None:
    """Once the stack is installed: the control plane's taint back, the workers' gone;
    running Pods stay where they are."""
    kubectl("taint", "nodes", control_plane, CONTROL_PLANE_TAINT, "--overwrite")
    kubectl("taint", "nodes", "-l", f"!{CONTROL_PLANE_LABEL}", f"{INSTALLING_TAINT}-")


def settle_system_pods(kube: Kube, nodes: list[KindNode]) -> list[tuple[str, str]]:
    """Delete the Pods (CoreDNS) that started on the wrong subnet or on a worker; their
    Deployments start them again where the cluster now puts them. Returns those deleted."""
    pods = kube.list(*POD, namespace="kube-system")
    control_plane = next(n.name for n in nodes if n.control_plane)
    doomed = sorted(set(misplaced_pods(pods, nodes)) | set(off_control_plane(pods, control_plane)))
    for namespace, name in doomed:
        kube.delete(*POD, name, namespace=namespace)
    return doomed
