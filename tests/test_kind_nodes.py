"""Several kind nodes without kindnetd: the pure parts of cluster/kind/nodes.py (the rest
runs against real kind clusters, docs/kind.md)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from trainjob_conformance.cluster.capabilities import (
    ZONE_LABEL,
    Node,
    discover_topology,
    splitting_label,
)
from trainjob_conformance.cluster.kind import config, nodes
from trainjob_conformance.cluster.kind.images.node import CNI_CONFLIST
from trainjob_conformance.errors import ConformanceError

CP = nodes.KindNode("c-control-plane", "172.18.0.2", "10.244.0.0/24", True)
W1 = nodes.KindNode("c-worker", "172.18.0.3", "10.244.1.0/24", False)
W2 = nodes.KindNode("c-worker2", "172.18.0.4", "10.244.2.0/24", False)


def pod(name, node, ip, host_network=False, owner="ReplicaSet"):
    return {
        "metadata": {"namespace": "kube-system", "name": name,
                     "ownerReferences": [{"kind": owner}] if owner else []},
        "spec": {"nodeName": node, "hostNetwork": host_network},
        "status": {"podIP": ip},
    }  # fmt: skip


def test_each_node_gets_its_own_subnet_and_the_image_conflist_is_untouched() -> None:
    mine = nodes.conflist(W1.pod_cidr)
    assert mine["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24"}]]
    assert CNI_CONFLIST["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24"}]]
    assert mine["plugins"][1] == CNI_CONFLIST["plugins"][1]


def test_routes_reach_every_other_nodes_subnet_through_its_address() -> None:
    assert nodes.routes(W1, [CP, W1, W2]) == [
        ["ip", "route", "replace", "10.244.0.0/24", "via", "172.18.0.2"],
        ["ip", "route", "replace", "10.244.2.0/24", "via", "172.18.0.4"],
    ]


def test_one_script_writes_a_nodes_conflist_then_its_routes_then_probes_the_others() -> None:
    script = nodes.wiring_script(W1, [CP, W1, W2])
    probe = "(curl -sk -m 3 -o /dev/null https://{}:10250/healthz; test $? -ne 28 || echo {} {}) &"
    assert script == (
        f"cat > {nodes.CONFLIST_PATH}.new && mv {nodes.CONFLIST_PATH}.new {nodes.CONFLIST_PATH}"
        " && ip route replace 10.244.0.0/24 via 172.18.0.2"
        " && ip route replace 10.244.2.0/24 via 172.18.0.4"
        f" && {{ {probe.format('172.18.0.2', CP.name, '172.18.0.2')}"
        f" {probe.format('172.18.0.4', W2.name, '172.18.0.4')} wait; }}"
        " && readlink -f /usr/sbin/iptables"
    )


def test_a_lone_node_writes_its_conflist_and_probes_nothing() -> None:
    assert nodes.wiring_script(CP, [CP]) == (
        f"cat > {nodes.CONFLIST_PATH}.new && mv {nodes.CONFLIST_PATH}.new {nodes.CONFLIST_PATH}"
        " && readlink -f /usr/sbin/iptables"
    )


def test_each_nodes_iptables_mode_is_read_from_what_its_script_printed(monkeypatch) -> None:
    printed = {
        CP.name: "/usr/sbin/xtables-nft-multi\n",
        W1.name: f"{W2.name} 172.18.0.4\n/usr/sbin/xtables-legacy-multi\n",
        W2.name: "",
    }
    monkeypatch.setattr(nodes, "_exec", lambda node, args, stdin=None: printed[node])
    with pytest.raises(ConformanceError, match=r"^1 of 6 probes"):
        nodes.wire_pod_network([CP, W1, W2])
    printed[W1.name] = "/usr/sbin/xtables-legacy-multi\n"
    assert nodes.wire_pod_network([CP, W1, W2]) == {
        CP.name: "nft",
        W1.name: "legacy",
        W2.name: None,
    }


def test_nodes_in_kube_proxys_mode_say_nothing_and_others_one_line() -> None:
    assert nodes.mode_mismatch({CP.name: "nft", W1.name: "nft", W2.name: None}, "nft") is None
    line = nodes.mode_mismatch({CP.name: "legacy", W1.name: "legacy", W2.name: "nft"}, "nft")
    assert line is not None and "\n" not in line
    assert line.startswith(f"kind set 2 of 3 nodes' iptables to legacy (first: {CP.name}), ")
    assert "kube-proxy's image was built for nft" in line


def test_nodes_whose_packets_are_dropped_stop_the_start_in_one_line(monkeypatch) -> None:
    # The probes' output as each node prints it: the control plane's packets to
    # both workers time out, the workers reach each other and the control plane.
    printed = {CP.name: f"{W1.name} 172.18.0.3\n{W2.name} 172.18.0.4\n"}
    monkeypatch.setattr(nodes, "_exec", lambda node, args, stdin=None: printed.get(node, ""))
    with pytest.raises(ConformanceError) as error:
        nodes.wire_pod_network([CP, W1, W2])
    line = str(error.value)
    assert "\n" not in line
    assert line.startswith("2 of 6 probes between the kind nodes' IPv4 addresses timed out ")
    assert f"(first: {CP.name} -> {W1.name} (172.18.0.3))" in line
    assert "iptables-nft -S FORWARD" in line


def test_nodes_whose_probes_print_nothing_start(monkeypatch) -> None:
    printed = "/usr/sbin/xtables-nft-multi\n"  # only the mode read: every probe answered
    monkeypatch.setattr(nodes, "_exec", lambda node, args, stdin=None: printed)
    modes = nodes.wire_pod_network([CP, W1, W2])
    assert modes == {CP.name: "nft", W1.name: "nft", W2.name: "nft"}


@pytest.mark.parametrize(("curl_exit", "printed"), [(0, ""), (7, ""), (28, "c-worker2 172.18.0.4")])
def test_only_a_timed_out_probe_names_its_node(tmp_path, curl_exit, printed) -> None:
    # A stand-in curl on PATH: an answer (0) and a refusal (7) mean the packets
    # arrived; only a timeout (28) means they were dropped on the way.
    fake = tmp_path / "curl"
    fake.write_text(f"#!/bin/sh\nexit {curl_exit}\n")
    fake.chmod(0o755)
    script = f"{nodes.reach_probes(W1, [W1, W2])} wait"
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    result = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert result.stdout.strip() == printed


def test_pods_on_the_images_fixed_subnet_or_on_a_worker_are_restarted() -> None:
    pods = [
        pod("coredns-a", CP.name, "10.244.0.3"),  # right subnet, control plane: stays
        pod("coredns-b", W1.name, "10.244.0.2"),  # wrong subnet, on a worker
        pod("kube-proxy-x", W1.name, "172.18.0.3", host_network=True, owner="DaemonSet"),
        pod("pending", None, None),
    ]
    assert nodes.misplaced_pods(pods, [CP, W1, W2]) == [("kube-system", "coredns-b")]
    assert nodes.off_control_plane(pods, CP.name) == [("kube-system", "coredns-b")]


def test_the_workers_labels_give_a_splitting_label_and_a_two_level_topology() -> None:
    labelled = [
        Node(f"w{i}", {**labels, "kubernetes.io/hostname": f"w{i}"})
        for i, labels in enumerate(nodes.worker_labels(3))
    ]
    assert splitting_label(labelled, at_least=2) == (ZONE_LABEL, "zone-a")
    topology = discover_topology(labelled)
    assert topology is not None
    assert topology.levels == (ZONE_LABEL, "kubernetes.io/hostname")
    assert topology.level_for(pods=2) == ZONE_LABEL


def test_workers_are_kind_nodes_with_the_run_label_and_their_own_labels() -> None:
    cfg = config.cluster_config("cp", "w", "run1", False, False, None, nodes.worker_labels(3))
    roles = [n["role"] for n in cfg["nodes"]]
    assert roles == ["control-plane", "worker", "worker", "worker"]
    # Each role starts from the image that holds what it runs.
    assert [n["image"] for n in cfg["nodes"]] == ["cp", "w", "w", "w"]
    assert cfg["nodes"][3]["labels"] == {config.HARNESS_LABEL: "run1", ZONE_LABEL: "zone-b"}
    assert len(config.cluster_config("cp", "w", "run1", False, False, None)["nodes"]) == 1


def test_controllers_install_on_the_control_plane_and_the_workers_are_given_back() -> None:
    calls: list[tuple[str, ...]] = []
    nodes.open_control_plane(lambda *a: calls.append(a), CP.name)
    # The workers joined tainted (the kind config); only the control plane opens.
    assert calls == [("taint", "nodes", CP.name, f"{nodes.CONTROL_PLANE_TAINT}-")]
    nodes.give_workers_back(lambda *a: calls.append(a), CP.name)
    assert calls[1:] == [
        ("taint", "nodes", CP.name, nodes.CONTROL_PLANE_TAINT, "--overwrite"),
        ("taint", "nodes", "-l", "!node-role.kubernetes.io/control-plane",
         f"{config.INSTALLING_TAINT}-"),
    ]  # fmt: skip


def test_workers_join_with_the_installing_taint() -> None:
    cfg = config.cluster_config("cp", "w", "run1", False, False, None, nodes.worker_labels(1))
    control_plane, worker = cfg["nodes"]
    assert "kubeadmConfigPatches" not in control_plane
    (patch,) = [yaml.safe_load(text) for text in worker["kubeadmConfigPatches"]]
    assert patch["kind"] == "JoinConfiguration"
    key, effect = config.INSTALLING_TAINT.split(":")
    assert patch["nodeRegistration"]["taints"] == [{"key": key, "effect": effect}]


def test_a_low_inotify_instance_limit_is_named_with_the_fix() -> None:
    assert nodes.inotify_shortfall("512\n") is None
    line = nodes.inotify_shortfall("128\n")
    assert line is not None and "is 128" in line and "max_user_instances=512" in line


def test_a_low_inotify_limit_is_raised_where_writable(tmp_path) -> None:
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    line = nodes.ensure_inotify_instances(path=str(limit))
    assert line is not None and "from 128 to 512" in line
    assert limit.read_text() == "512\n"
    assert nodes.ensure_inotify_instances(path=str(limit)) is None


def test_a_limit_that_cannot_be_raised_is_named_with_the_fix(tmp_path) -> None:
    missing = tmp_path / "absent" / "max_user_instances"
    line = nodes.ensure_inotify_instances("128\n", path=str(missing))
    assert line is not None and "sysctl -w fs.inotify.max_user_instances=512" in line


def test_service_routing_waits_for_kube_proxy_on_that_node() -> None:
    def proxy(node: str, ready: str) -> dict:
        return {
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
        }

    class Listing:
        def __init__(self, *answers: list[dict]) -> None:
            self.answers = list(answers)

        def list(self, *kind, namespace=None, label_selector=None):
            assert label_selector == "k8s-app=kube-proxy"
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    # Another node's Ready kube-proxy does not count; this node's, once Ready, does.
    kube = Listing([proxy(W1.name, "True")], [proxy(CP.name, "False")], [proxy(CP.name, "True")])
    nodes.wait_service_routing(kube, CP.name, timeout=5)
    assert kube.answers == [[proxy(CP.name, "True")]]
