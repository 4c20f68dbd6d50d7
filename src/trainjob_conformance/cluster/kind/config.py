"""The kind cluster configuration: host quirks the provider read, as kind config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from trainjob_conformance.cluster.kind.mirror import CERTS_DIR_IN_NODE, CONTAINERD_PATCH

HARNESS_LABEL = "trainjob-conformance.kubeflow.org/run"
KUBELET_SYNC = "1s"
# Workers join with this taint and keep it while the stack installs, so the
# controllers, applied while the workers are still joining, start on the
# control-plane node (cluster/kind/nodes.py says why there); the provider
# removes it once the stack is up.
INSTALLING_TAINT = "trainjob-conformance.kubeflow.org/installing:NoSchedule"
_JOIN_TAINTED = (
    "kind: JoinConfiguration\n"
    "nodeRegistration:\n"
    f"  taints:\n  - key: {INSTALLING_TAINT.split(':')[0]}\n    effect: NoSchedule\n"
)


def label_value(run_id: str) -> str:
    """The run id as a Kubernetes label value (at most 63 of letters, digits, `-_.`,
    alphanumeric at both ends): a composed profile's run directory holds `+` and `=`
    (`...-latest+kueue=v0.16.6-123`), which the kubelet refuses as a node label,
    and kubeadm then waits out its bound for a control plane that never registers."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id)
    if len(value) > 63:
        value = f"{value[:30]}-{value[-32:]}"  # the time it started and its pid, kept
    return value.strip("-_.")


def cgroup_v1(mounts: str | None = None) -> bool:
    """Whether the host's cgroup hierarchy is v1 (no unified cgroup2 at /sys/fs/cgroup)."""
    text = mounts if mounts is not None else Path("/proc/self/mounts").read_text()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == "/sys/fs/cgroup":
            return fields[2] != "cgroup2"
    return False


def cluster_config(
    node_image: str,
    worker_image: str,
    run_id: str,
    on_cgroup_v1: bool,
    restrict_oom_score_adj: bool,
    etcd_tag: str | None,
    workers: list[dict[str, str]] | None = None,
    mirror_certs: Path | None = None,
    audit_dir: Path | None = None,
) -> dict[str, Any]:
    """kind's Cluster object: one control-plane node of `node_image`, and a worker of
    `worker_image` per entry of `workers` (its node labels).

    - kubelets >= 1.35 refuse cgroup v1 unless failCgroupV1 is false;
    - where the host withholds CAP_SYS_RESOURCE, runc cannot raise a sandbox's
      oom_score_adj, so the node's containerd must not ask it to (kind sets
      restrict_oom_score_adj only for rootless nodes);
    - kubeadm is pointed at the etcd the node image holds (the profile's);
    - with `mirror_certs` (a certs.d directory, cluster/kind/mirror.py), every
      node's containerd reads its registry hosts from there, mounted read-only;
    - with `audit_dir` (holding AUDIT_POLICY_FILE), the API server keeps an audit
      log by that policy in the same directory, mounted into the control plane,
      where the harness reads it while the cluster runs (AUDIT_LOG_FILE).
    Workers join with INSTALLING_TAINT. The node carries the run's id as a Kubernetes label (kind cannot label the
    container itself; the container is identified by kind's cluster label and
    the cluster's name, which holds the run id).
    """
    patches: list[str] = []
    if etcd_tag:
        patches.append(
            "kind: ClusterConfiguration\n"
            "etcd:\n  local:\n    imageRepository: registry.k8s.io\n"
            f"    imageTag: {etcd_tag}\n"
        )
    # The kubelet refreshes secret and downward-API volumes once per sync
    # period (1 min by default): a controller's webhook certificate, written
    # into a Secret after its Pod started, and a held Pod's annotations file
    # (cluster/hold.py) would each lag by up to that long. At 5 s the Trainer
    # often missed its first readiness probe (10 s after start; the next is 15 s
    # later) and a released Pod took seconds to notice; 1 s costs the few nodes'
    # kubelets little (docs/measurements.md).
    kubelet = f"kind: KubeletConfiguration\nsyncFrequency: {KUBELET_SYNC}\n"
    if on_cgroup_v1:
        kubelet += "failCgroupV1: false\n"
    patches.append(kubelet)
    mounts: dict[str, Any] = {}
    if mirror_certs is not None:
        mounts["extraMounts"] = [
            {"hostPath": str(mirror_certs), "containerPath": CERTS_DIR_IN_NODE, "readOnly": True}
        ]
    control_plane_mounts = list(mounts.get("extraMounts") or [])
    if audit_dir is not None:
        control_plane_mounts.append(
            {"hostPath": str(audit_dir), "containerPath": AUDIT_DIR_IN_NODE}
        )
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"apiServerAddress": "127.0.0.1"},
        "nodes": [
            {
                "role": "control-plane",
                "image": node_image,
                "labels": {HARNESS_LABEL: label_value(run_id)},
                **({"extraMounts": control_plane_mounts} if control_plane_mounts else {}),
            },
            *(
                {
                    "role": "worker",
                    "image": worker_image,
                    "labels": {HARNESS_LABEL: label_value(run_id), **labels},
                    "kubeadmConfigPatches": [_JOIN_TAINTED],
                    **mounts,
                }
                for labels in workers or []
            ),
        ],
    }
    if patches:
        config["kubeadmConfigPatches"] = patches
    if audit_dir is not None:
        config["kubeadmConfigPatchesJSON6902"] = [_audited_api_server()]
    containerd: list[str] = []
    if restrict_oom_score_adj:
        containerd.append(
            '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n'
        )
    if mirror_certs is not None:
        containerd.append(CONTAINERD_PATCH)
    if containerd:
        config["containerdConfigPatches"] = containerd
    return config


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def kubeconfig_at(text: str, address: str, port: int = 6443) -> str:
    """A kind kubeconfig with every cluster's server at `address`:`port` (the control-plane
    container on the kind network) instead of the host's 127.0.0.1 port mapping."""
    config = yaml.safe_load(text)
    for cluster in config.get("clusters") or []:
        cluster["cluster"]["server"] = f"https://{address}:{port}"
    return yaml.safe_dump(config, sort_keys=False)


# The API server's audit policy and log, in one directory of the host mounted into
# the control-plane node, and from there into the API server's static Pod.
AUDIT_DIR_IN_NODE = "/var/log/kubernetes/trainjob-conformance"
AUDIT_POLICY_FILE = "audit-policy.yaml"
AUDIT_LOG_FILE = "audit.log"


def _audited_api_server() -> dict[str, Any]:
    """kubeadm's ClusterConfiguration (v1beta4, which kind writes for Kubernetes 1.36)
    with the audit flags and the directory's volume added to the API server. A JSON
    patch: kind's merge patches would replace kind's own extraArgs list."""
    flags = {
        "audit-policy-file": f"{AUDIT_DIR_IN_NODE}/{AUDIT_POLICY_FILE}",
        "audit-log-path": f"{AUDIT_DIR_IN_NODE}/{AUDIT_LOG_FILE}",
    }
    operations: list[dict[str, Any]] = [
        {"op": "add", "path": "/apiServer/extraArgs/-", "value": {"name": k, "value": v}}
        for k, v in flags.items()
    ]
    volume = {
        "name": "trainjob-conformance-audit",
        "hostPath": AUDIT_DIR_IN_NODE,
        "mountPath": AUDIT_DIR_IN_NODE,
        "pathType": "DirectoryOrCreate",
    }
    operations.append({"op": "add", "path": "/apiServer/extraVolumes", "value": [volume]})
    return {
        "group": "kubeadm.k8s.io",
        "version": "v1beta4",
        "kind": "ClusterConfiguration",
        "patch": yaml.safe_dump(operations, sort_keys=False),
    }
