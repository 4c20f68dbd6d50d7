"""`trainjob-conformance outdated` against a stand-in module proxy on 127.0.0.1."""

from __future__ import annotations

import re

import pytest

from tests.fake_goproxy import FakeProxy, fake_goproxy_fixture  # noqa: F401 (fixture)
from trainjob_conformance.cli import main
from trainjob_conformance.stack import goproxy, outdated
from trainjob_conformance.stack.components import COMPONENTS
from trainjob_conformance.stack.profiles import Profile, load_profile, profile_names

PINS = {
    "kubernetes": "v1.36.2",
    "etcd": "v3.6.5",
    "kwok": "v0.8.0",
    "jobset": "v0.12.0",
    "kueue": "v0.16.6",
    "trainer": "v2.3.0",
}


def answers(proxy: FakeProxy) -> None:
    # Pre-releases, pseudo-versions and +incompatible are never releases.
    proxy.lists("k8s.io/kubernetes", "v1.35.4", "v1.36.2", "v1.37.0-rc.1", "v1.36.3", "v1.37.2")
    proxy.lists("go.etcd.io/etcd/server/v3", "v3.6.5", "v3.7.0-alpha.0", "v3.6.4")
    proxy.lists(
        "sigs.k8s.io/kwok", "v0.8.0", "v0.9.0-0.20260101000000-abcdefabcdef", "v2.0.0+incompatible"
    )
    proxy.answers["/sigs.k8s.io/jobset/@v/list"] = (403, "This module version is not available.")
    proxy.lists("sigs.k8s.io/kueue", "v0.16.6", "v0.19.2", "v0.19.10", "v0.16.7-rc.0")
    proxy.lists("github.com/kubeflow/trainer/v2", "v2.0.0", "v2.4.0-rc.1")


def rows_of(lines: list[str]) -> dict[str, list[str]]:
    return {line.split()[1]: line.split() for line in lines[1:] if line.startswith("p ")}


def test_newest_patch_of_the_pinned_minor_and_newest_release(fake_goproxy: FakeProxy) -> None:
    answers(fake_goproxy)
    rows = outdated.drift([Profile("p", "", dict(PINS))])
    lines = outdated.table(rows)
    assert lines[0].split() == [
        "profile",
        "component",
        "pinned",
        "newest",
        "patch",
        "newest",
        "release",
    ]
    table = rows_of(lines)
    assert table["kubernetes"] == ["p", "kubernetes", "v1.36.2", "v1.36.3", "v1.37.2"]
    assert table["etcd"] == ["p", "etcd", "v3.6.5", "-", "-"]
    assert table["kwok"] == ["p", "kwok", "v0.8.0", "-", "-"]
    assert table["jobset"] == ["p", "jobset", "v0.12.0", "?", "?"]
    # v0.19.10 sorts after v0.19.2: versions compare as numbers, not text.
    assert table["kueue"] == ["p", "kueue", "v0.16.6", "-", "v0.19.10"]
    assert table["trainer"] == ["p", "trainer", "v2.3.0", "?", "?"]
    assert lines[-3:] == [
        "-: nothing newer than the pin",
        "?: not known for sigs.k8s.io/jobset: the proxy would not list its releases "
        "(403: This module version is not available.)",
        "?: not known for github.com/kubeflow/trainer/v2: the proxy's list of its releases "
        "lacks a pinned one, so it is incomplete",
    ]
    assert outdated.summary(rows, "P") == (
        "2 of 6 pins have newer releases on P; 2 could not be checked"
    )


def test_every_module_is_the_builds_own_and_asked_once(fake_goproxy: FakeProxy) -> None:
    answers(fake_goproxy)
    profiles = [load_profile(name) for name in profile_names()]
    rows = outdated.drift(profiles)
    assert len(rows) == sum(len(profile.versions) for profile in profiles)
    assert sorted(fake_goproxy.requests) == sorted(
        f"/{component.module}/@v/list" for component in COMPONENTS.values()
    )
    assert "/github.com/kubeflow/trainer/v2/@v/list" in fake_goproxy.requests


def test_the_command_prints_the_table_and_exits_0(
    fake_goproxy: FakeProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    answers(fake_goproxy)
    assert main(["outdated", "--profiles", "latest"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["profile", "component", "pinned"]
    pinned = list(load_profile("latest").versions)
    assert [line.split()[1] for line in out[1 : 1 + len(pinned)]] == pinned
    assert re.match(
        rf"\d of {len(pinned)} pins have newer releases on http://127\.0\.0\.1:\d+", out[-1]
    )


def test_exit_code_1_when_asked_and_something_is_newer(
    fake_goproxy: FakeProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    answers(fake_goproxy)
    assert main(["outdated", "--profiles", "trainer-2.1", "--exit-code"]) == 1
    for key, version in load_profile("latest").versions.items():
        fake_goproxy.lists(COMPONENTS[key].module, version)
    assert main(["outdated", "--profiles", "latest", "--exit-code"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"0 of {len(load_profile('latest').versions)} pins have newer releases on {fake_goproxy.url}"
    )


def test_a_proxy_that_cannot_be_reached_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9,direct")
    assert main(["outdated"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(
        "trainjob-conformance: error: cannot reach the Go module proxy http://127.0.0.1:9 ("
    )
    assert err[0].endswith("); check the network or GOPROXY")


@pytest.mark.parametrize("value", ["off", "direct", "direct|off"])
def test_goproxy_naming_no_proxy_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv("GOPROXY", value)
    assert main(["outdated"]) == 2
    assert f"GOPROXY={value} names no module proxy to ask" in capsys.readouterr().err


def test_an_unknown_profile_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["outdated", "--profiles", "latest,nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err


def test_the_first_http_proxy_of_goproxy_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOPROXY", "direct|https://mirror.example/go/,https://proxy.golang.org")
    # `direct` is no proxy to ask; the mirror is the first that is.
    assert goproxy.proxy_url() == "https://mirror.example/go"
    monkeypatch.delenv("GOPROXY")
    monkeypatch.setenv("PATH", "")  # no `go env` to ask either
    assert goproxy.proxy_url() == goproxy.DEFAULT_PROXY


def test_module_paths_use_the_proxys_case_encoding() -> None:
    assert goproxy.escape("github.com/Azure/azure-sdk") == "github.com/!azure/azure-sdk"


def test_a_newer_release_names_the_listed_upstream_fixes_it_would_bring(
    fake_goproxy: FakeProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    answers(fake_goproxy)
    assert main(["outdated", "--profiles", "trainer-2.1"]) == 0
    out = capsys.readouterr().out.splitlines()

    header = out.index("upstream fixes a newer release would bring (docs/upstream-fixes.md):")
    brings = [line for line in out[header:] if line.startswith("kueue v0.16.6 -> v0.19.10 brings")]
    assert brings, out[header:]
    # Kueue's support of Trainer v2.2's runtime patches came in v0.17.0.
    assert any(line.startswith("  kubernetes-sigs/kueue#10127: ") for line in out[header:])
