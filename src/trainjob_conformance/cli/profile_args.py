"""--profile, --profiles and --with: which pinned version set a command works on."""

from __future__ import annotations

import argparse
import os

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.profiles import (
    DEFAULT_PROFILE,
    PROFILE_ENV,
    Profile,
    compose_profile,
    load_profile,
    profile_names,
)


def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        default=None,
        help=f"pinned version set: {', '.join(profile_names())} "
        f"(default: ${PROFILE_ENV} or {DEFAULT_PROFILE})",
    )


def add_with(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--with",
        dest="with_",
        action="append",
        default=[],
        metavar="COMPONENT=VERSION",
        help=f"run {what} with this component at another release, e.g. kueue=v0.16.6 "
        "(repeatable; the profile is then named e.g. latest+kueue=v0.16.6)",
    )


def add_profiles(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profiles", help=f"comma-separated (default: all of {', '.join(profile_names())})"
    )


def profile_arg(args: argparse.Namespace) -> str:
    """--profile, else $TRAINJOB_PROFILE, else the default; checked, in one line."""
    name = args.profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    source = "--profile" if args.profile else PROFILE_ENV
    try:
        profile = load_profile(name)
    except ConformanceError as error:
        raise ConformanceError(f"{source}: {error}") from None
    return composed(args, profile, source)


def composed(args: argparse.Namespace, profile: Profile, source: str) -> str:
    """The profile with --with applied; every release it asks for checked on the proxy."""
    from trainjob_conformance.stack.goproxy import require_overrides

    overrides = getattr(args, "with_", None) or []
    if overrides and getattr(args, "cluster", "embedded") == "existing":
        raise ConformanceError(
            "--with composes a profile to build; an existing cluster runs what is installed "
            "on it: drop --with"
        )
    try:
        profile = compose_profile(profile, overrides)
    except ConformanceError as error:
        raise ConformanceError(f"{'--with' if overrides else source}: {error}") from None
    require_overrides(profile)
    return profile.name


def profile_list(text: str | None, args: argparse.Namespace | None = None) -> list[str]:
    names = profile_names() if text is None else [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise ConformanceError(
            f"--profiles {text!r} names no profile; give a comma-separated list of: "
            f"{', '.join(profile_names())}"
        )
    profiles = [load_profile(name) for name in names]
    if args is not None:
        names = [composed(args, profile, "--profiles") for profile in profiles]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConformanceError(f"--profiles names {', '.join(duplicates)} more than once")
    return names


def name_skews(profile: str) -> None:
    """Say, before anything starts, each field a manager of the profile reads that its
    peer's CRD lacks at the profile's release (stack/skew.py): a composed profile's
    skew is named in a second, not found by a wait that times out."""
    from trainjob_conformance.progress import say
    from trainjob_conformance.stack.profiles import load_profile
    from trainjob_conformance.stack.skew import skews

    try:
        found = skews(load_profile(profile).versions)
    except ConformanceError as error:
        # A hint before the run, never a reason not to run: the run says the rest.
        say(f"schema skew in {profile} not checked: {error}")
        return
    for skew in found:
        say(f"schema skew in {profile}: {skew.line()}")
