"""`images push --registry URL`: a profile's binaries (and a provider's images) to a registry.

The embedded cluster's binaries go as one artifact per component, with an
index per profile (the layout: stack/registry/artifacts.py); `build
--registry URL` fetches them back instead of compiling (`fetch_for_build`),
each file checked against the index and the index against the digest this
push records on the machine. With `--cluster kind`, the binaries kind runs on
the host go too, and every image of a kind cluster, under its upstream name
(the provider's push_images), so `run --cluster kind --registry-mirror URL`
pulls them. Credentials come from the Docker config only
($DOCKER_CONFIG/config.json, else ~/.docker/config.json).

`images serve` runs a registry on 127.0.0.1 until stopped; `--cluster kind`
runs it where kind's nodes reach it as well (the provider's registry_server).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from trainjob_conformance.cli.checks import check_build_cache, check_writable
from trainjob_conformance.cli.profile_args import add_profile, add_with, profile_arg
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.progress import format_seconds
from trainjob_conformance.report.files import write_whole
from trainjob_conformance.stack.profiles import Profile, load_profile

if TYPE_CHECKING:  # the registry client (oras, jsonschema) loads only for these commands
    from trainjob_conformance.stack.registry.fetch import FetchResult

_REGISTRY_HELP = (
    "the registry: http(s)://HOST[:PORT][/PATH] or HOST:PORT (plain HTTP for localhost "
    "and 127.0.0.1, TLS elsewhere); credentials are read from the Docker config "
    "($DOCKER_CONFIG/config.json or ~/.docker/config.json), never from the command line"
)


def _image_providers() -> list[str]:
    from trainjob_conformance.cluster.registry import provider_kinds

    return [kind.name for kind in provider_kinds() if kind.pushes_images]


def add_registry(p: argparse.ArgumentParser, required: bool, what: str) -> None:
    """--registry URL, for `images push` and `build`."""
    p.add_argument("--registry", metavar="URL", required=required, help=f"{what}; {_REGISTRY_HELP}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    images = sub.add_parser(
        "images", help="push the profile's binaries to a registry (OCI artifacts), or serve one"
    )
    actions = images.add_subparsers(dest="images_command", required=True)
    push = actions.add_parser(
        "push",
        help="push the embedded cluster's binaries of a profile to a registry",
        description="Pushes each component's binaries (built first with `build`) as one OCI "
        "artifact, <registry>/trainjob-conformance/bin/<component>:<version>, and an index, "
        "<registry>/trainjob-conformance/bin-index:<profile>, recording each component's "
        "manifest digest and each file's sha256. The index's digest, the time and the bytes "
        "are recorded on this machine, for `build --registry` to check against. Exit codes: "
        "0; 2 for a malformed URL, an unreachable registry, missing credentials, or a "
        "binary not built yet.",
    )
    add_registry(push, True, "where to push")
    add_profile(push)
    add_with(push, "the push")
    push.add_argument(
        "--cluster",
        choices=_image_providers(),
        help="also push what this provider's clusters run: for kind, kind itself beside the "
        "binaries, and every image (node, control plane, controllers, test image) under its "
        "upstream name, URL/<upstream host>/<path>:<tag>, built here first where missing",
    )
    push.set_defaults(func=run_push)

    serve = actions.add_parser(
        "serve",
        help="run a registry on 127.0.0.1 until Ctrl-C or SIGTERM (to seed, or for the tests)",
        description="Runs Debian's docker-registry (installed as root when missing) on a free "
        "port of 127.0.0.1, storing under DIR; nothing listens beyond loopback. Its URL is "
        "printed, and written to --url-file once it answers.",
    )
    serve.add_argument("--storage", required=True, metavar="DIR", help="where the images go")
    serve.add_argument(
        "--url-file", metavar="FILE", help="write the registry's URL here once it answers"
    )
    serve.add_argument(
        "--cluster",
        choices=_image_providers(),
        help="serve it where this provider's nodes reach it too: for kind, in a container "
        "published on 127.0.0.1 that a kind cluster's run joins to the kind network",
    )
    serve.set_defaults(func=run_serve)


def run_push(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.registry import provider_kind, push_images
    from trainjob_conformance.stack.registry.push import check_reachable, push_profile

    args.profile = profile_arg(args)
    profile = load_profile(args.profile)
    extra = provider_kind(args.cluster).host_binaries if args.cluster else {}
    if args.cluster:
        # The images first: building them (where missing) builds the host binaries too.
        check_reachable(args.registry, profile)
        started = time.monotonic()
        pushed = push_images(args.cluster, profile, args.registry)
        for image in pushed:
            print(f"{image.upstream:72} {image.digest}")
        total = sum(image.size for image in pushed)
        print(
            f"profile {profile.name}: {len(pushed)} {args.cluster} images ({total / 1e6:.1f} MB) "
            f"pushed to {args.registry} in {format_seconds(time.monotonic() - started)}"
        )
    record = push_profile(profile, args.registry, extra=extra)
    for component, digest in record.components.items():
        print(f"{component:20} {digest}")
    print(f"{'index':20} {record.index}@{record.index_digest}")
    print(
        f"profile {record.profile}: {record.files} binaries ({record.bytes_total / 1e6:.1f} MB, "
        f"{record.bytes_uploaded / 1e6:.1f} MB uploaded) pushed to {record.registry} "
        f"in {format_seconds(record.seconds)}"
    )
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from trainjob_conformance.cluster.registry import registry_server
    from trainjob_conformance.stack.registry.server import LocalRegistry

    storage = Path(args.storage).resolve()
    check_writable(storage, "the registry's storage")
    server = registry_server(args.cluster, storage / "data", storage) if args.cluster else None
    with server or LocalRegistry(storage / "data", config_dir=storage) as registry:
        print(f"registry {registry.url} serving {storage}; Ctrl-C or SIGTERM stops it", flush=True)
        if args.url_file:
            write_whole(Path(args.url_file), registry.url)
        code = registry.wait()
    raise ConformanceError(
        f"the registry on {registry.url} exited by itself (code {code}); "
        f"log {registry.log_file}:\n{registry.log_tail()}"
    )


def fetch_for_build(profile: Profile | str, registry_url: str) -> FetchResult:
    """For `build --registry URL`: the profile's binaries from the registry into the build
    cache, checked, so that the build that follows finds them built; one line each."""
    from trainjob_conformance.stack.registry.fetch import fetch_profile

    check_build_cache()
    if isinstance(profile, str):
        profile = load_profile(profile)
    result = fetch_profile(profile, registry_url)
    if result.fetched:
        print(
            f"profile {profile.name}: {result.files} binaries ({result.bytes_fetched / 1e6:.1f} MB) "
            f"fetched from {registry_url} in {format_seconds(result.seconds)}, each checked "
            "against the pushed index"
        )
    return result
