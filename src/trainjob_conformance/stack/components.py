"""How each upstream component is built: its module, main packages and link flags.

This is the recipe the project carries instead of binaries. Versions come from
a profile; everything else about a build lives here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError

# The package a component builds when it brings its own main (`generated_main`):
# the wrapper module itself.
WRAPPER_MAIN = "."


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
    # A main package of the harness's own instead of upstream's: its main.go, made
    # from upstream's source tree (the argument) and written into the wrapper
    # module at build time. The component's one binary is then `WRAPPER_MAIN`.
    generated_main: Callable[[Path], str] | None = None
    # Names what the generated main selects. It follows the version in the cache's
    # directory names (`v1.14.2+<variant>`), so that a binary built from upstream's
    # own main, or from another selection, is never taken for this one.
    variant: str = ""


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

# CoreDNS is built with the plugins a kind cluster's Corefile uses only, the way
# CoreDNS documents choosing plugins at compile time (a main package that sets
# `dnsserver.Directives` and imports the plugins, upstream's source untouched).
# Upstream's own main imports all of them: the cloud DNS providers with the AWS,
# Azure and Google SDKs, tracing with dd-trace-go and zipkin, etcd's client,
# geoip, nomad: this main needs 774 packages, upstream's 1,330 (the DNS-over-
# gRPC, -QUIC and -HTTPS servers stay: core/dnsserver imports them). From an
# empty Go build cache at nice 10 on 2 cores (2026-11-28), upstream's main took
# 248-250 CPU-seconds, this one 151-165: 2 min 31 s against 1 min 19 s of wall
# time at load 3-7, 6 min 54 s against 3 min 18 s at load 9-15.
#
# The Corefile is kubeadm's (cmd/kubeadm/app/phases/addons/dns/manifests.go):
# errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload,
# loadbalance. Neither kind nor the harness edits it; `kubeadm upgrade` migrates
# it to the new release's default, the same plugins. `log` and `debug` are there
# for whoever debugs a cluster's DNS. dnstap, metadata and transfer come along
# anyway (forward, cache, log and kubernetes import their packages, which
# register them): they are directives too, so `coredns -plugins` is the list.
COREDNS_PLUGINS = (
    "errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache",
    "loop", "reload", "loadbalance", "log", "debug", "dnstap", "metadata", "transfer",
)  # fmt: skip

_COREDNS_MAIN = """\
// Written by trainjob-conformance: CoreDNS {plugins}.
package main

import (
\t"github.com/coredns/coredns/core/dnsserver"
\t"github.com/coredns/coredns/coremain"

{imports}
)

func init() {{
\tdnsserver.Directives = []string{{
{directives}
\t}}
}}

func main() {{
\tcoremain.Run()
}}
"""


def coredns_plugin_table(plugin_cfg: str) -> list[tuple[str, str]]:
    """(directive, import path) in the order of upstream's plugin.cfg, which is the
    order a request goes through them; the rules of its directives_generate.go."""
    table = []
    for line in plugin_cfg.splitlines():
        if line.startswith("#") or line.count(":") != 1:
            continue
        name, package = (part.strip() for part in line.split(":"))
        if "/" not in package:
            package = f"github.com/coredns/coredns/plugin/{package}"
        table.append((name, package))
    return table


def coredns_main(plugin_cfg: str, plugins: tuple[str, ...] = COREDNS_PLUGINS) -> str:
    """The main.go of a CoreDNS with `plugins` only, in upstream's order."""
    table = coredns_plugin_table(plugin_cfg)
    missing = sorted(set(plugins) - {name for name, _ in table})
    if missing:
        raise ConformanceError(
            f"CoreDNS's plugin.cfg has no plugin {', '.join(missing)}: the release "
            "renamed or dropped it; update COREDNS_PLUGINS in stack/components.py"
        )
    chosen = [(name, package) for name, package in table if name in plugins]
    # Two directives may share a package; each is imported once.
    imports = sorted({f'\t_ "{package}"' for _, package in chosen})
    return _COREDNS_MAIN.format(
        plugins=", ".join(name for name, _ in chosen),
        imports="\n".join(imports),
        directives="\n".join(f'\t\t"{name}",' for name, _ in chosen),
    )


def _coredns_selection_digest() -> str:
    """Changes with the plugins chosen or the main's template."""
    recipe = _COREDNS_MAIN + ",".join(COREDNS_PLUGINS)
    return hashlib.sha256(recipe.encode()).hexdigest()[:8]


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
            binaries={"coredns": WRAPPER_MAIN},
            generated_main=lambda source: coredns_main((source / "plugin.cfg").read_text()),
            variant=f"plugins-{_coredns_selection_digest()}",
        ),
    )
}


def component(key: str) -> Component:
    """A component of either table, by key."""
    return COMPONENTS.get(key) or KIND_COMPONENTS[key]


# Build order: the cluster first, so a debugging user gets it soonest.
BUILD_ORDER = ("etcd", "kubernetes", "kwok", "jobset", "kueue", "trainer", "training-operator")
