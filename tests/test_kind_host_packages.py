"""The Debian packages the local kind images need: installed as root, else named in one line."""

from __future__ import annotations

import pytest

from trainjob_conformance.cluster.kind import host_packages
from trainjob_conformance.cluster.kind.host_packages import HostPackage, ensure_build_packages
from trainjob_conformance.errors import ConformanceError


def _packages(present: set[str]) -> list[HostPackage]:
    return [
        HostPackage(name, f"the {name} step", lambda name=name: name in present)
        for name in ("debootstrap", "libseccomp-dev", "busybox-static")
    ]


def test_nothing_is_installed_when_everything_is_there() -> None:
    def install(names: object) -> None:
        raise AssertionError("nothing to install")

    present = {"debootstrap", "libseccomp-dev", "busybox-static"}
    assert ensure_build_packages(_packages(present), install, may_install=True) == []


def test_as_root_the_missing_packages_are_installed_in_one_go() -> None:
    present = {"debootstrap"}
    calls: list[list[str]] = []

    def install(names: list[str]) -> None:
        calls.append(list(names))
        present.update(names)

    packages = _packages(present)
    assert ensure_build_packages(packages, install, may_install=True) == [
        "libseccomp-dev",
        "busybox-static",
    ]
    assert calls == [["libseccomp-dev", "busybox-static"]]


def test_without_root_one_line_names_each_package_what_it_is_for_and_the_command() -> None:
    with pytest.raises(ConformanceError) as raised:
        ensure_build_packages(_packages({"debootstrap"}), lambda names: None, may_install=False)
    line = str(raised.value)
    assert "\n" not in line
    assert "libseccomp-dev for the libseccomp-dev step" in line
    assert "apt-get install libseccomp-dev busybox-static" in line
    assert "--image-source upstream" in line


def test_a_package_still_unusable_after_the_install_is_named() -> None:
    with pytest.raises(ConformanceError, match="busybox-static is still not usable"):
        ensure_build_packages(_packages(set()), lambda names: None, may_install=True)


def test_the_catalog_covers_every_host_tool_the_image_build_calls() -> None:
    names = {package.package for package in host_packages.BUILD_PACKAGES}
    assert {"debootstrap", "libseccomp-dev", "pkg-config", "gcc", "libc6-dev"} <= names
    assert "busybox-static" in names


def test_a_builder_reached_without_its_package_says_the_same_line(monkeypatch) -> None:
    """The pause image's builder, on a host without a C compiler: the run's own check's
    line (what for, the command, the other image source), not a builder's own wording."""
    packages = [
        *_packages({"debootstrap"}),
        HostPackage("gcc", "the pause program", lambda: False),
        HostPackage("libc6-dev", "the pause program's static libc", lambda: False),
    ]
    monkeypatch.setattr(host_packages, "BUILD_PACKAGES", tuple(packages))
    host_packages.require("debootstrap")
    with pytest.raises(ConformanceError) as raised:
        host_packages.require("gcc", "libc6-dev")
    line = str(raised.value)
    assert "\n" not in line
    assert "gcc for the pause program; libc6-dev for the pause program's static libc" in line
    assert "apt-get install gcc libc6-dev" in line and "--image-source upstream" in line
    with pytest.raises(AssertionError):
        host_packages.require("no-such-package")
