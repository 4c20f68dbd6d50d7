import os

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack import gobuild
from trainjob_conformance.stack.components import COMPONENTS
from trainjob_conformance.stack.profiles import load_profile, profile_names

KUBERNETES_GOMOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""

ETCD_GOMOD = """module go.etcd.io/etcd/server/v3

go 1.24

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
)

replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
"""


def test_kubernetes_staging_replaces_are_pinned_to_published_versions():
    text = gobuild.wrapper_gomod(COMPONENTS["kubernetes"], "v1.36.2", KUBERNETES_GOMOD)
    assert "require k8s.io/kubernetes v1.36.2" in text
    assert "k8s.io/api => k8s.io/api v0.36.2" in text
    assert "k8s.io/client-go => k8s.io/client-go v0.36.2" in text
    assert "go 1.26.0" in text
    assert "./staging" not in text


def test_etcd_sibling_replaces_use_the_same_version_and_skip_forbidden_guards():
    text = gobuild.wrapper_gomod(COMPONENTS["etcd"], "v3.6.5", ETCD_GOMOD)
    assert "go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.5" in text
    assert "FORBIDDEN" not in text
    assert "go.etcd.io/etcd =>" not in text


def test_kubernetes_ldflags_set_a_semver_git_version():
    flags = COMPONENTS["kubernetes"].ldflags("v1.36.2", "abc", "2026-06-11T00:00:00Z")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.2" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    assert "-X k8s.io/client-go/pkg/version.gitCommit=abc" in flags


def test_missing_go_toolchain_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(gobuild.shutil, "which", lambda name: None)
    with pytest.raises(ConformanceError, match="no Go toolchain on PATH: install Go"):
        gobuild.go_binary()


def test_cached_binaries_are_not_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path))
    out = gobuild.binary_path("etcd", "v3.6.5", "etcd")
    out.parent.mkdir(parents=True)
    out.write_text("built")

    def no_download(*args, **kwargs):
        raise AssertionError("a cached component must not touch the network")

    monkeypatch.setattr(gobuild, "download_module", no_download)
    assert gobuild.build_component("etcd", "v3.6.5") == {"etcd": out}


def test_unreachable_proxy_names_the_module(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path))
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("GOFLAGS", "")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    with pytest.raises(
        ConformanceError, match=r"could not download example.invalid/nothing@v0.0.1"
    ):
        gobuild.download_module("example.invalid/nothing", "v0.0.1")


def test_profiles_pin_every_component_to_a_patch_version():
    for name in profile_names():
        profile = load_profile(name)
        for component, version in profile.versions.items():
            assert version.count(".") == 2 and version.startswith("v"), (name, component)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ConformanceError, match="unknown profile 'nope'; choose one of: latest"):
        load_profile("nope")


FAKE_GO = """#!/bin/sh
# Stands in for go: notes each command, and for `build -o OUT PKG...` writes
# OUT (one package) or OUT/<last element of each package> (several).
echo "$*" >> "$GO_CALLS"
[ "$1" = build ] || exit 0
while [ "$1" != -o ]; do shift; done
out=$2; shift 2
case "$out" in
  */) for pkg in "$@"; do echo built > "$out/${pkg##*/}"; done ;;
  *) echo built > "$out" ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path, monkeypatch):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    calls = tmp_path / "go-calls"
    monkeypatch.setenv("GO_CALLS", str(calls))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "source"
    source.mkdir()
    (source / "go.mod").write_text("module example\n\ngo 1.26\n")

    def downloaded(module, version):
        return gobuild.ModuleInfo(module, version, source, source / "go.mod", "abc", "")

    monkeypatch.setattr(gobuild, "download_module", downloaded)
    return calls


def test_a_components_binaries_are_built_by_one_go_command(fake_go):
    built = gobuild.build_component("kwok", "v0.8.0")
    assert sorted(built) == ["kwok", "kwokctl"]
    assert all(path.read_text() == "built\n" for path in built.values())
    builds = [line for line in fake_go.read_text().splitlines() if line.startswith("build")]
    assert len(builds) == 1
    assert builds[0].endswith("sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl")
    # Nothing half-built is left beside the binaries.
    assert sorted(p.name for p in next(iter(built.values())).parent.iterdir()) == [
        "kwok",
        "kwokctl",
    ]


def test_a_binary_not_named_after_its_package_is_built_under_its_own_name(fake_go):
    built = gobuild.build_component("etcd", "v3.6.16")
    assert built["etcd"].name == "etcd" and built["etcd"].is_file()


def test_what_a_killed_build_left_is_removed_by_the_next(fake_go):
    bin_dir = gobuild.bin_dir("kwok", "v0.8.0")
    dead = bin_dir / ".partial-999999999"
    dead.mkdir(parents=True)
    (dead / "kwok").write_text("half")
    old_style = bin_dir / ".kwok.partial-999999999"
    old_style.write_text("half")
    gobuild.build_component("kwok", "v0.8.0")
    assert not dead.exists() and not old_style.exists()
