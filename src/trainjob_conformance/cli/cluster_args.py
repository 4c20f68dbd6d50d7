"""The cluster a command runs on: `--cluster` and the chosen provider's own options,
as the providers declare them (cluster/registry.py), for `run`, `matrix` and `prove`."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainjob_conformance.cluster.provider import CHOICE, KUBECONFIG, TEXT, ProviderKind
from trainjob_conformance.cluster.registry import provider_kind, provider_kinds, provider_options
from trainjob_conformance.errors import ConformanceError


def add_cluster_args(
    p: argparse.ArgumentParser, kinds: tuple[ProviderKind, ...] | None = None, help_text: str = ""
) -> None:
    """`--cluster` among `kinds` (default: every provider), and their options."""
    kinds = kinds or provider_kinds()
    p.add_argument(
        "--cluster",
        choices=[kind.name for kind in kinds],
        default="embedded",
        help=help_text or "where to run (default: %(default)s)",
    )
    offered = {option.name for kind in kinds for option in kind.options}
    for option in provider_options():
        if option.name not in offered or not (option.on_command_line and option.on_run):
            continue
        if option.kind == CHOICE:
            p.add_argument(
                f"--{option.name}", choices=option.choices, default=option.default, help=option.help
            )
        else:
            p.add_argument(f"--{option.name}", help=option.help)


def check_cluster_args(args: argparse.Namespace) -> None:
    """The chosen provider's required options are there; every file given exists."""
    kind = provider_kind(args.cluster)
    for option in kind.options:
        if option.required and getattr(args, option.dest, None) in (None, ""):
            raise ConformanceError(option.required)
    for option in provider_options():
        given = getattr(args, option.dest, None)
        if given is None or option.kind in (CHOICE, TEXT):
            continue
        if not Path(given).is_file():
            raise ConformanceError(f"{option.name.replace('-', ' ')} {given} does not exist")
        if option.kind == KUBECONFIG:
            from trainjob_conformance.kube.kubeconfig import check_kubeconfig

            check_kubeconfig(Path(given))


def provider_options_of(args: argparse.Namespace) -> dict[str, str]:
    """The chosen provider's options as given, files as absolute paths."""
    found = {}
    for option in provider_kind(args.cluster).options:
        given = getattr(args, option.dest, None)
        if given is None:
            continue
        as_given = option.kind in (CHOICE, TEXT)
        found[option.name] = str(given) if as_given else str(Path(given).resolve())
    return found
