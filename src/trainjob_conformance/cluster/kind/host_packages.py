"""The host's Debian packages the local kind images are built with, installed where missing.

The node image and the test image are built here from pinned sources, and a few
steps need the host's tools: debootstrap for the node's Debian root filesystem,
libseccomp's headers for runc (built with seccomp, as kind builds it: the
controllers' Deployments ask for the RuntimeDefault profile), a static C
toolchain for the pause program, Debian's busybox-static for the test image.
A fresh Debian machine has none of the first and last; as root, the harness
installs them as it installs docker.io, and says so in one line. Otherwise one
line names the packages to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.progress import step
from trainjob_conformance.stack.apt import apt_install


def _dpkg_installed(package: str) -> bool:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0 and result.stdout.endswith("installed")


def _pkg_config(library: str) -> bool:
    if shutil.which("pkg-config") is None:
        return False
    return subprocess.run(["pkg-config", "--exists", library], check=False).returncode == 0


def _static_libc() -> bool:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return False
    found = subprocess.run(
        [cc, "-print-file-name=libc.a"], capture_output=True, text=True, check=False
    ).stdout.strip()
    # The compiler echoes the bare name back when it has no such file.
    return os.path.isabs(found) and os.path.isfile(found)


@dataclass(frozen=True)
class HostPackage:
    package: str  # Debian's name
    used_for: str
    present: Callable[[], bool]


BUILD_PACKAGES: tuple[HostPackage, ...] = (
    HostPackage(
        "debootstrap",
        "the node's Debian root filesystem",
        lambda: shutil.which("debootstrap") is not None,
    ),
    HostPackage("pkg-config", "runc's build", lambda: shutil.which("pkg-config") is not None),
    HostPackage("libseccomp-dev", "runc's seccomp support", lambda: _pkg_config("libseccomp")),
    HostPackage(
        "gcc", "the pause program", lambda: bool(shutil.which("gcc") or shutil.which("cc"))
    ),
    HostPackage("libc6-dev", "the pause program's static libc", _static_libc),
    HostPackage("busybox-static", "the test image", lambda: _dpkg_installed("busybox-static")),
)


def _lacks(lacking: Sequence[HostPackage]) -> str:
    """What the host lacks, what for, and the way out, in one line."""
    uses = "; ".join(f"{p.package} for {p.used_for}" for p in lacking)
    return (
        f"the kind images are built on this host and it lacks {uses}: "
        f"apt-get install {' '.join(p.package for p in lacking)} (as root; the harness does "
        "it when run as root), or use --image-source upstream where the registries are reachable"
    )


def require(*names: str) -> None:
    """The builder of one image checks its own packages here, with the same presence
    tests and the same line as the run's check before any build (ensure_build_packages):
    a builder can be reached without that check (a cache wiped between runs)."""
    wanted = [package for package in BUILD_PACKAGES if package.package in names]
    assert len(wanted) == len(names), f"not a build package: {names}"
    lacking = missing(wanted)
    if lacking:
        raise ConformanceError(_lacks(lacking))


def missing(packages: Sequence[HostPackage] = BUILD_PACKAGES) -> list[HostPackage]:
    return [package for package in packages if not package.present()]


def ensure_build_packages(
    packages: Sequence[HostPackage] = BUILD_PACKAGES,
    install: Callable[[Sequence[str]], None] = apt_install,
    may_install: bool | None = None,
) -> list[str]:
    """Install what the local image build lacks (root with apt-get), else one line naming
    it. Returns the names installed."""
    lacking = missing(packages)
    if not lacking:
        return []
    names = [package.package for package in lacking]
    if may_install is None:
        may_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
    if not may_install:
        raise ConformanceError(_lacks(lacking))
    with step(f"installing {' '.join(names)} from Debian's repositories (for the kind images)"):
        install(names)
    still = [package.package for package in missing(lacking)]
    if still:
        raise ConformanceError(
            f"installed {' '.join(names)}, yet {' '.join(still)} is still not usable: "
            "check the package installation on this host"
        )
    return names
