"""The pinned releases a kind node is built from, beside the profile's Kubernetes.

Each is a Go module tag served by the module proxy; a bump is a one-line change
here and a cold build of that component only (the cache is keyed by version).
"""

from __future__ import annotations

NODE_TOOLS = {
    "kind": "v0.33.0",
    "containerd": "v2.3.4",
    "runc": "v1.4.3",
    "crictl": "v1.36.0",
    "cni-plugins": "v1.9.1",
    "coredns": "v1.14.2",
}
# The Debian release the node rootfs is bootstrapped from (kind's base image
# uses Debian too).
DEBIAN_SUITE = "trixie"
# Cheap and IO-bound first, the long compiles last: a user sees kind built soonest.
BUILD_ORDER = ("kind", "cni-plugins", "runc", "crictl", "containerd", "kubernetes-node", "coredns")
