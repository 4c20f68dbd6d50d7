"""The registry program: Debian's `docker-registry` (distribution 2.8), installed where missing.

As root with apt-get, the harness installs the package itself (stack/apt.py)
and says so in one line, as it installs the kind images' build packages.
Otherwise one line says what to install.

The package also installs a system service listening on every interface
(`:5000`), which its postinst starts where services may start. The harness
starts its own registry on 127.0.0.1 only, so it stops and disables that
service right after installing the package: a port open beyond loopback is
what the harness never leaves behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.progress import say, step
from trainjob_conformance.stack.apt import apt_install

DEBIAN_PACKAGE = "docker-registry"
PROGRAM = "docker-registry"
_SERVICE = "docker-registry"


def _quiet(args: list[str]) -> bool:
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


def _stop_packaged_service() -> None:
    """Stop and disable the system service the package's postinst may have started."""
    if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
        stopped = _quiet(["systemctl", "disable", "--now", f"{_SERVICE}.service"])
    elif Path(f"/etc/init.d/{_SERVICE}").exists() and shutil.which("update-rc.d"):
        _quiet(["invoke-rc.d", _SERVICE, "stop"])
        stopped = _quiet(["update-rc.d", _SERVICE, "disable"])
    else:
        return
    if stopped:
        say(
            f"disabled the {_SERVICE} system service the package installs (it would listen "
            "on every interface); the harness starts its own registry on 127.0.0.1"
        )


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    with (Path(tempfile.gettempdir()) / "trainjob-conformance-registry-install.lock").open(
        "a"
    ) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def registry_program(
    install: Callable[[Sequence[str]], None] = apt_install,
    may_install: bool | None = None,
) -> Path:
    """Where the registry program is; installed first when missing, if this process may."""
    found = shutil.which(PROGRAM)
    if found:
        return Path(found)
    if may_install is None:
        may_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
    if not may_install:
        raise ConformanceError(
            f"the local registry runs Debian's {PROGRAM} (distribution 2.8), which is not "
            f"installed: apt-get install {DEBIAN_PACKAGE} (as root; the harness does it when "
            "run as root)"
        )
    # One install at a time (pytest-xdist workers, parallel runs): apt-get fails on
    # the lock another holds, and the second finds the program once the first is done.
    with _install_lock():
        if not shutil.which(PROGRAM):
            with step(
                f"installing {DEBIAN_PACKAGE} from Debian's repositories (for the local registry)"
            ):
                install([DEBIAN_PACKAGE])
            _stop_packaged_service()
    found = shutil.which(PROGRAM)
    if not found:
        raise ConformanceError(
            f"installed {DEBIAN_PACKAGE}, yet {PROGRAM} is not on PATH: check the package "
            "installation on this host"
        )
    return Path(found)
