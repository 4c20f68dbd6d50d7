"""Debian packages the harness installs on the host as root: the kind provider's
build tools and Docker, the registry it serves binaries from."""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from trainjob_conformance.errors import ConformanceError

# apt-get fails at once on a lock another apt-get holds. On a fresh machine
# ./scripts/test installs Docker (for the registry) while the kind build installs
# debootstrap in the background: the harness's own installs take turns on this
# file, and each waits this long for dpkg's lock held by anyone else.
_LOCK = Path(tempfile.gettempdir()) / "trainjob-conformance-apt.lock"
_DPKG_LOCK_TIMEOUT = 600  # seconds


def apt_install(packages: Sequence[str]) -> None:
    """`apt-get update` then `apt-get install` of `packages`, non-interactive, one
    harness process at a time; a failure is one line with the tail of apt's words."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait = ["-o", f"DPkg::Lock::Timeout={_DPKG_LOCK_TIMEOUT}"]
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for args in (
                ["apt-get", *wait, "update", "-q"],
                ["apt-get", *wait, "install", "-y", "-q", "--no-install-recommends", *packages],
            ):
                result = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
                if result.returncode != 0:
                    tail = " ".join(" ".join(result.stderr.splitlines()[-3:]).split())
                    raise ConformanceError(f"{' '.join(args)} failed: {tail}")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
