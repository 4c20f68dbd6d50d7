"""How each upstream component is built: its module, main packages and link flags.

This is the recipe the project carries instead of binaries. Versions come from
a profile; everything else about a build lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def _same_version(version: str) -> str:
    return version


def _kubernetes_staging_version(version: str) -> str:
    # k8s.io/kubernetes v1.X.Y publishes its staging modules as v0.X.Y.
    return "v0" + version[2:]


def _kubernetes_ldflags(version: str, commit: str, build_date: str) -> list[str]:
    major, minor = version.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitCommit": commit,
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    flags = []
    # client-go carries its own copy so that kubectl's client version is right too.
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return flags


def _no_ldflags(version: str, commit: str, build_date: str) -> list[str]:
    return []


@dataclass(frozen=True)
class Component:
    """One upstream Go module and the binaries the harness builds from it."""

    key: str
    module: str
    binaries: dict[str, str]  # binary name -> main package path
    # Maps the component version to the version of modules it replaces with
    # relative paths (staging or sibling modules), which a wrapper module
    # must pin to published versions instead.
    replace_version: Callable[[str], str] = _same_version
    ldflags: Callable[[str, str, str], list[str]] = _no_ldflags
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Linked against C libraries (containerd, runc with seccomp); off otherwise.
    cgo: bool = False


def _kubernetes(key: str, *commands: str) -> Component:
    """Binaries of k8s.io/kubernetes, built as upstream builds them (one wrapper
    module and Go build cache for the embedded cluster's and the kind node's)."""
    return Component(
        key=key,
        module="k8s.io/kubernetes",
        binaries={command: f"k8s.io/kubernetes/cmd/{command}" for command in commands},
        replace_version=_kubernetes_staging_version,
        ldflags=_kubernetes_ldflags,
        tags=("selinux", "notest"),
    )


COMPONENTS: dict[str, Component] = {
    component.key: component
    for component in (
        _kubernetes(
            "kubernetes", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"
        ),
        Component(
            key="etcd",
            module="go.etcd.io/etcd/server/v3",
            binaries={"etcd": "go.etcd.io/etcd/server/v3"},
        ),
        Component(
            key="kwok",
            module="sigs.k8s.io/kwok",
            binaries={
                "kwok": "sigs.k8s.io/kwok/cmd/kwok",
                "kwokctl": "sigs.k8s.io/kwok/cmd/kwokctl",
            },
        ),
        Component(
            key="jobset",
            module="sigs.k8s.io/jobset",
            binaries={"jobset-controller-manager": "sigs.k8s.io/jobset"},
        ),
        Component(
            key="kueue",
            module="sigs.k8s.io/kueue",
            binaries={"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
        ),
        Component(
            key="trainer",
            module="github.com/kubeflow/trainer/v2",
            binaries={
                "trainer-controller-manager": (
                    "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
                )
            },
        ),
        # The previous generation (PyTorchJob and friends), run beside the stack
        # by profiles that name it.
        Component(
            key="training-operator",
            module="github.com/kubeflow/training-operator",
            binaries={
                "training-operator": "github.com/kubeflow/training-operator/cmd/training-operator.v1"
            },
        ),
    )
}

# What only the kind provider builds: the node's runtime, kind itself, and the
# Kubernetes node binaries. Kept apart so the embedded cluster's build never
# waits for them; the Go build cache is shared, so the node binaries reuse the
# packages the control plane compiled.
KIND_COMPONENTS: dict[str, Component] = {
    component.key: component
    for component in (
        Component(key="kind", module="sigs.k8s.io/kind", binaries={"kind": "sigs.k8s.io/kind"}),
        _kubernetes("kubernetes-node", "kubelet", "kubeadm", "kube-proxy"),
        Component(
            key="containerd",
            module="github.com/containerd/containerd/v2",
            binaries={
                "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
                "containerd-shim-runc-v2": (
                    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
                ),
                "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
            },
            tags=("no_aufs", "no_zfs", "no_btrfs", "no_devmapper"),
            cgo=True,
        ),
        Component(
            key="runc",
            module="github.com/opencontainers/runc",
            binaries={"runc": "github.com/opencontainers/runc"},
            tags=("seccomp",),
            cgo=True,
        ),
        Component(
            key="crictl",
            module="sigs.k8s.io/cri-tools",
            binaries={"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
        ),
        Component(
            key="cni-plugins",
            module="github.com/containernetworking/plugins",
            binaries={
                name: f"github.com/containernetworking/plugins/plugins/{kind}/{name}"
                for kind, name in (
                    ("main", "ptp"),
                    ("main", "loopback"),
                    ("ipam", "host-local"),
                    ("meta", "portmap"),
                )
            },
        ),
        Component(
            key="coredns",
            module="github.com/coredns/coredns",
            binaries={"coredns": "github.com/coredns/coredns"},
        ),
    )
}


def component(key: str) -> Component:
    """A component of either table, by key."""
    return COMPONENTS.get(key) or KIND_COMPONENTS[key]


# Build order: the cluster first, so a debugging user gets it soonest.
BUILD_ORDER = ("etcd", "kubernetes", "kwok", "jobset", "kueue", "trainer", "training-operator")
