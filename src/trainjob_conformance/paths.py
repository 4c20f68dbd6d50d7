"""Where the harness keeps what it builds, and where its suite is.

The suite (the policy catalog, the templates, the policy tests and the example
pack) sits at the top of a checkout; an installed wheel carries the same files
inside the package, under `suite/` (pyproject.toml maps them in). Every command
finds them here, so a checkout and an installed harness run the same tests from
any directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainjob_conformance.errors import ConformanceError

CACHE_ENV = "TRAINJOB_CONFORMANCE_CACHE"
_PACKAGE = Path(__file__).resolve().parent


def cache_root() -> Path:
    """The per-user build cache; outside the repo so a clone never carries binaries."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "trainjob-conformance"


@dataclass(frozen=True)
class Suite:
    """The files a conformance run reads, wherever they were installed."""

    root: Path
    catalog: Path
    breaks: Path
    templates: Path
    tests: Path
    example_pack: Path

    def missing(self) -> list[Path]:
        wanted = (self.catalog, self.breaks, self.templates, self.tests)
        return [path for path in wanted if not path.exists()]


def _installed() -> Suite:
    root = _PACKAGE / "suite"
    return Suite(
        root,
        root / "policies.yaml",
        root / "breaks.yaml",
        root / "templates",
        root / "e2e",
        root / "examples" / "queue-required",
    )


def _checkout() -> Suite:
    root = _PACKAGE.parents[1]  # src/trainjob_conformance -> the repository
    return Suite(
        root,
        root / "fixtures" / "policies.yaml",
        root / "fixtures" / "breaks.yaml",
        root / "templates",
        root / "e2e",
        root / "examples" / "queue-required",
    )


def suite() -> Suite:
    """The installed suite if the package carries one, else the checkout's."""
    installed = _installed()
    return installed if installed.catalog.is_file() else _checkout()


def require_suite() -> Suite:
    found = suite()
    missing = found.missing()
    if missing:
        raise ConformanceError(
            f"the conformance suite is incomplete ({', '.join(map(str, missing))} missing): "
            "reinstall trainjob-conformance from its wheel or sdist, or run from its checkout"
        )
    return found
