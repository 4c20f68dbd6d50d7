"""The kind cluster configuration the provider writes for what it read of the host."""

from __future__ import annotations

import yaml

from trainjob_conformance.cluster.kind import config

V1 = "cgroup /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n"
V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"


def test_cgroup_version_from_mounts() -> None:
    assert config.cgroup_v1(V1)
    assert not config.cgroup_v1(V2)


def test_cgroup_v1_and_missing_capability_become_patches() -> None:
    cfg = config.cluster_config(
        "tjc.local/kind-node:x", "tjc.local/kind-node:x", "run1", True, True, "v3.6.16"
    )
    assert cfg["networking"]["apiServerAddress"] == "127.0.0.1"
    assert cfg["nodes"][0]["labels"] == {config.HARNESS_LABEL: "run1"}
    patches = "\n".join(cfg["kubeadmConfigPatches"])
    assert "failCgroupV1: false" in patches
    assert "imageTag: v3.6.16" in patches
    assert "restrict_oom_score_adj = true" in cfg["containerdConfigPatches"][0]


def test_an_ordinary_host_gets_only_the_short_kubelet_sync() -> None:
    cfg = config.cluster_config(
        "kindest/node:v1.36.3", "kindest/node:v1.36.3", "run1", False, False, None
    )
    assert cfg["kubeadmConfigPatches"] == ["kind: KubeletConfiguration\nsyncFrequency: 1s\n"]
    assert "containerdConfigPatches" not in cfg


def test_the_peer_kubeconfig_names_the_control_plane_on_the_kind_network() -> None:
    text = (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kind-x\n  cluster:\n"
        "    certificate-authority-data: Q0E=\n    server: https://127.0.0.1:40123\n"
    )
    peer = yaml.safe_load(config.kubeconfig_at(text, "172.18.0.3"))
    assert peer["clusters"][0]["cluster"] == {
        "certificate-authority-data": "Q0E=",
        "server": "https://172.18.0.3:6443",
    }


def test_an_audited_api_server_keeps_its_log_in_a_directory_mounted_from_the_host(tmp_path):
    cfg = config.cluster_config(
        "kindest/node:v1.36.3", "kindest/node:v1.36.3", "run1", False, False, None,
        workers=[{"zone": "a"}], mirror_certs=tmp_path / "certs", audit_dir=tmp_path / "audit",
    )  # fmt: skip
    control_plane, worker = cfg["nodes"]
    # The mirror's configuration on every node, the audit directory on the control plane only.
    assert [m["containerPath"] for m in control_plane["extraMounts"]] == [
        "/etc/containerd/certs.d",
        config.AUDIT_DIR_IN_NODE,
    ]
    assert [m["containerPath"] for m in worker["extraMounts"]] == ["/etc/containerd/certs.d"]
    (patch,) = cfg["kubeadmConfigPatchesJSON6902"]
    assert (patch["group"], patch["version"], patch["kind"]) == (
        "kubeadm.k8s.io", "v1beta4", "ClusterConfiguration",
    )  # fmt: skip
    operations = yaml.safe_load(patch["patch"])
    # Appended to kind's own flags (runtime-config), never replacing them.
    added = {op["value"]["name"]: op["value"]["value"] for op in operations[:2]}
    assert {op["path"] for op in operations[:2]} == {"/apiServer/extraArgs/-"}
    assert added == {
        "audit-policy-file": f"{config.AUDIT_DIR_IN_NODE}/audit-policy.yaml",
        "audit-log-path": f"{config.AUDIT_DIR_IN_NODE}/audit.log",
    }
    assert operations[2]["value"][0]["mountPath"] == config.AUDIT_DIR_IN_NODE
    plain = config.cluster_config(
        "kindest/node:v1.36.3", "kindest/node:v1.36.3", "run1", False, False, None
    )
    assert "kubeadmConfigPatchesJSON6902" not in plain
    assert "extraMounts" not in plain["nodes"][0]


def test_a_composed_profiles_run_id_is_a_label_value_the_kubelet_takes():
    # The kubelet refused '20261207-155531-trainer-2.2+jobset=v0.12.0+kueue=v0.16.6-20235'
    # (compat on kind, 2026-12-07): kubeadm then timed out on a control plane never registered.
    run_id = "20261207-155531-trainer-2.2+jobset=v0.12.0+kueue=v0.16.6-20235"
    value = config.label_value(run_id)
    assert value == "20261207-155531-trainer-2.2-jobset-v0.12.0-kueue-v0.16.6-20235"
    long = config.label_value("20261207-155531-" + "latest+kueue=v0.16.6+" * 4 + "20235")
    assert len(long) <= 63 and long.startswith("20261207-155531") and long.endswith("20235")
    assert config.label_value("20261207-142200-prove-latest-26952") == (
        "20261207-142200-prove-latest-26952"
    )
    cfg = config.cluster_config("node:img", "node:img", run_id, False, False, None, workers=[{}])
    assert {n["labels"][config.HARNESS_LABEL] for n in cfg["nodes"]} == {value}
