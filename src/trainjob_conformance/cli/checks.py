"""Argument checks more than one command shares; each says in one line what to do."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import CACHE_ENV, cache_root, require_suite


def check_writable(directory: Path, what: str) -> None:
    """Refuse before building or starting anything, not after."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-check-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise ConformanceError(
            f"{what} {directory} cannot be written ({error.strerror or error}); "
            "choose another directory"
        ) from None


def check_build_cache() -> None:
    check_writable(cache_root(), f"the build cache (${CACHE_ENV})")


def check_suite_present() -> None:
    require_suite()


def count_of(what: str, minimum: int, hint: str) -> Callable[[str], int]:
    """An argparse type: a whole number of `what`, at least `minimum`."""

    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what}") from None
        if count < minimum:
            raise argparse.ArgumentTypeError(f"{count} {what}: give {hint}")
        return count

    return parse


def whole_number(option: str, text: str, minimum: int, hint: str) -> int:
    """A count given on the command line (--jobs, --runs), checked by the command
    rather than by argparse, whose refusal adds a usage block."""
    try:
        value = int(text)
    except ValueError:
        raise ConformanceError(f"{option} {text!r} is not a number; give {hint}") from None
    if value < minimum:
        raise ConformanceError(f"{option} {value}: give {hint}")
    return value


worker_count = count_of("workers", 0, "0 (serial) or more")


def add_workers(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("-n", "--workers", type=worker_count, default=2, help=help_text)
