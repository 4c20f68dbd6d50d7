"""`build`: build (or reuse) the binaries of a profile, and with --kind the kind node's."""

from __future__ import annotations

import argparse
import time

from trainjob_conformance.cli.checks import check_build_cache
from trainjob_conformance.cli.images import add_registry, fetch_for_build
from trainjob_conformance.cli.profile_args import add_profile, add_with, profile_arg
from trainjob_conformance.stack.profiles import load_profile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = sub.add_parser("build", help="build (or reuse) the binaries of a profile")
    add_profile(build)
    add_with(build, "the build")
    add_registry(
        build, False, "fetch the binaries `images push` put there instead of compiling them"
    )
    build.add_argument(
        "--kind",
        action="store_true",
        help="also the binaries the kind node image is built from (kind, containerd, runc, "
        "crictl, CNI plugins, kubelet, kubeadm, kube-proxy, CoreDNS); as root, installs "
        "the Debian packages that build needs",
    )
    build.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    from trainjob_conformance.stack.gobuild import build_profile

    args.profile = profile_arg(args)
    check_build_cache()
    started = time.monotonic()
    profile = load_profile(args.profile)
    if args.registry:
        fetch_for_build(profile, args.registry)
    binaries = build_profile(profile)
    if args.kind:
        from trainjob_conformance.cluster.registry import prebuild

        binaries.update(prebuild("kind", profile))
    for name, path in sorted(binaries.items()):
        print(f"{name:28} {path}")
    print(
        f"profile {args.profile}: {len(binaries)} binaries ready in {time.monotonic() - started:.1f}s"
    )
    return 0
