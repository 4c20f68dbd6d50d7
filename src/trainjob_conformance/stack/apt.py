"""Debian packages the harness installs on the host as root: the kind provider's
build tools and Docker, the registry it serves binaries from."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from trainjob_conformance.errors import ConformanceError


def apt_install(packages: Sequence[str]) -> None:
    """`apt-get update` then `apt-get install` of `packages`, non-interactive; a
    failure is one line with the tail of apt's own words."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
    ):
        result = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            tail = " ".join(" ".join(result.stderr.splitlines()[-3:]).split())
            raise ConformanceError(f"{' '.join(args)} failed: {tail}")
