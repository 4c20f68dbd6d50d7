import os
import subprocess

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.ledger import ProcessIdentity
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


def test_two_builds_of_one_release_take_turns_and_the_second_reuses_the_first(
    tmp_path, monkeypatch
):
    import threading

    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(tmp_path))
    started = threading.Event()
    finish = threading.Event()
    builds: list[str] = []

    def build(component_key, version, outputs):
        builds.append(threading.current_thread().name)
        started.set()
        assert finish.wait(10)
        for path in outputs.values():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("built")
        return outputs

    monkeypatch.setattr(gobuild, "_build_missing", build)
    results: dict[str, dict] = {}

    def call(name: str) -> None:
        results[name] = gobuild.build_component("etcd", "v3.6.5")

    first = threading.Thread(target=call, args=("first",), name="first")
    first.start()
    assert started.wait(10)
    # flock is per open file description: a second thread waits as a process would.
    second = threading.Thread(target=call, args=("second",), name="second")
    second.start()
    second.join(0.5)
    assert second.is_alive(), "the second build did not wait for the first"
    finish.set()
    first.join(10)
    second.join(10)
    assert builds == ["first"]
    assert results["first"] == results["second"]


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


def test_an_interrupted_build_stops_go_and_what_it_started(tmp_path, monkeypatch):
    """The whole process group goes: go's compilers would otherwise build on unseen."""
    child_pid = tmp_path / "child.pid"
    real_wait = subprocess.Popen.wait

    def interrupted_once_the_child_runs(self, timeout=None):
        wait_for("the build's child to start", child_pid.exists, timeout=5)
        monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_once_the_child_runs)
    script = f"sleep 60 & echo $! > {child_pid}.tmp; mv {child_pid}.tmp {child_pid}; wait"
    with pytest.raises(KeyboardInterrupt):
        gobuild._run_logged(["sh", "-c", script], tmp_path, tmp_path / "log", "building x")
    child = ProcessIdentity.of(int(child_pid.read_text()), "sleep")
    if child is not None:  # None: gone already
        wait_for("the interrupted build's child to be stopped", lambda: not child.is_alive(), 5)


def test_builds_run_niced(tmp_path):
    out = tmp_path / "stat"
    gobuild._run_logged(
        ["sh", "-c", f"cat /proc/self/stat > {out}"], tmp_path, tmp_path / "log", "x"
    )
    niceness = int(out.read_text().rsplit(")", 1)[1].split()[16])
    assert niceness == min(19, os.nice(0) + gobuild._BUILD_NICENESS)


def test_a_failed_build_names_gos_first_error_in_the_terminal(tmp_path):
    from trainjob_conformance.stack.gobuild import _first_error

    log = tmp_path / "kueue-v0.19.2.log"
    log.write_text(
        "building sigs.k8s.io/kueue/cmd/kueue\n\n$ go get x\n\n$ go build -o out x\n"
        "# github.com/coreos/go-oidc/v3/oidc\n"
        "compile: writing output: write $WORK/b857/_pkg_.a: no space left on device\n"
        "volcano.sh/apis: mkdir /tmp/go-build/b864/: no space left on device\n"
    )

    assert _first_error(log) == (
        "compile: writing output: write $WORK/b857/_pkg_.a: no space left on device"
    )
    log.write_text("$ go build x\n")
    assert _first_error(log) == "go said nothing"
