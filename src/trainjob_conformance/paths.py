"""Where the harness keeps what it builds and what each run writes."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "TRAINJOB_CONFORMANCE_CACHE"


def cache_root() -> Path:
    """The per-user build cache; outside the repo so a clone never carries binaries."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "trainjob-conformance"
