"""Composed profiles (--with component=version): names, bad input, the way to the pytest child.

The module proxy is a stand-in on 127.0.0.1 (tests/fake_goproxy.py); nothing is
built and no cluster is started.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fake_goproxy import FakeProxy, fake_goproxy_fixture  # noqa: F401 (fixture)
from trainjob_conformance.cli import main
from trainjob_conformance.cli import run as cli
from trainjob_conformance.cluster.registry import StartingCluster
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.model import RunReport
from trainjob_conformance.report.render import html_page, markdown
from trainjob_conformance.stack import goproxy
from trainjob_conformance.stack.compose import describe
from trainjob_conformance.stack.gobuild import binary_path
from trainjob_conformance.stack.profiles import as_running, compose_profile, load_profile

REPO = Path(__file__).resolve().parents[1]
KUEUE = "sigs.k8s.io/kueue"


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.fixture(autouse=True)
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing is cached, so every override is asked of the proxy."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(cache))
    monkeypatch.delenv("TRAINJOB_PROFILE", raising=False)
    return cache


def test_the_name_lists_overrides_in_build_order_whatever_order_they_came_in() -> None:
    latest = load_profile("latest")
    composed = compose_profile(latest, ["trainer=v2.2.1", "kueue=v0.16.6"])
    assert composed.name == "latest+kueue=v0.16.6+trainer=v2.2.1"
    assert composed.base == "latest"
    assert composed.overrides == {"kueue": "v0.16.6", "trainer": "v2.2.1"}
    assert composed.versions == {**latest.versions, "kueue": "v0.16.6", "trainer": "v2.2.1"}
    assert list(composed.versions) == list(latest.versions)


def test_the_name_alone_gives_the_same_profile_back() -> None:
    composed = compose_profile(load_profile("trainer-2.2"), ["jobset=v0.12.0"])
    assert load_profile(composed.name) == composed


def test_composing_a_composed_profile_keeps_one_base() -> None:
    composed = compose_profile(load_profile("latest+kueue=v0.16.6"), ["jobset=v0.11.1"])
    assert composed.name == "latest+jobset=v0.11.1+kueue=v0.16.6"
    assert composed.base == "latest"


def test_the_name_is_safe_for_files_junit_and_links() -> None:
    name = compose_profile(load_profile("latest"), ["kueue=v0.16.6", "kubernetes=v1.36.2"]).name
    assert re.fullmatch(r"[A-Za-z0-9._+=-]+", name), name


def test_a_kind_cluster_name_from_a_composed_profile_is_valid_for_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainjob_conformance.cluster.kind.provider import KindStackCluster

    # The name comes from the run directory (one cluster per run), whatever the profile.
    cluster = KindStackCluster(
        load_profile("latest+kueue=v0.16.6"), Path("/runs/20261125-060000-ab12cd")
    )
    assert cluster.name == "tjc-60000-ab12cd"
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", cluster.name)


def test_the_report_header_says_what_it_is_composed_from() -> None:
    profile = load_profile("latest+kueue=v0.16.6")
    report = RunReport(profile.name, "embedded", profile.versions, "2026-11-22T00:00:00Z", 1, 1)
    assert describe(profile.name) == "composed from latest: kueue v0.16.6"
    header = markdown([report]).splitlines()[2]
    assert header.startswith("- **latest+kueue=v0.16.6** (embedded")
    assert (
        "kueue v0.16.6, trainer v2.3.0, training-operator v1.9.3; composed from latest: kueue v0.16.6."
        in header
    )
    assert "composed from latest: kueue v0.16.6" in html_page([report])
    assert describe("latest") == ""


BAD_OVERRIDES = [
    (["--with", "kueue"], "--with: 'kueue' is not component=version; e.g. kueue=v0.16.6"),
    (
        ["--with", "kuee=v0.16.6"],
        "--with: 'kuee=v0.16.6': unknown component 'kuee'; choose one of: kubernetes, etcd, "
        "kwok, jobset, kueue, trainer",
    ),
    (
        ["--with", "kueue=0.16.6"],
        "--with: 'kueue=0.16.6': the version must be a release tag vX.Y.Z (kueue is pinned at",
    ),
    (["--with", "kueue=v0.17.0-rc.1"], "the version must be a release tag vX.Y.Z"),
    (["--with", "kueue=latest"], "the version must be a release tag vX.Y.Z"),
    (
        ["--with", "trainer=v3.0.0"],
        "--with: 'trainer=v3.0.0': module github.com/kubeflow/trainer/v2 has only v2.x.y releases",
    ),
    (
        ["--with", "kubernetes=v2.0.0"],
        "module k8s.io/kubernetes has only v0.x.y or v1.x.y releases",
    ),
    (
        ["--with", "kueue=v0.16.6", "--with", "kueue=v0.17.0"],
        "--with: the same component is given twice: kueue (kueue=v0.16.6, kueue=v0.17.0); "
        "give each once",
    ),
    (
        ["--profile", "latest+kueue=v0.16.6", "--with", "kueue=v0.17.0"],
        "--with: the same component is given twice: kueue (kueue=v0.16.6, kueue=v0.17.0)",
    ),
    (
        ["--profile", "latest+kueue"],
        "--profile: 'kueue' is not component=version",
    ),
]


@pytest.mark.parametrize("command", ["build", "up", "run"])
@pytest.mark.parametrize(("argv", "expected"), BAD_OVERRIDES)
def test_a_bad_override_is_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    argv: list[str],
    expected: str,
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9")  # never reached: refused before
    assert main([command, *argv]) == 2
    assert expected in one_line(capsys)


def test_matrix_takes_with_for_every_profile_and_refuses_it_the_same_way(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    assert main(["matrix", "--profiles", "latest", "--with", "kuee=v1.0.0"]) == 2
    assert "unknown component 'kuee'" in one_line(capsys)


def test_a_version_the_proxy_does_not_have_is_one_line(
    fake_goproxy: FakeProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_goproxy.answers[f"/{KUEUE}/@v/v0.99.0.info"] = (
        410,
        "not found: sigs.k8s.io/kueue@v0.99.0: invalid version: unknown revision v0.99.0",
    )
    assert main(["build", "--with", "kueue=v0.99.0"]) == 2
    line = one_line(capsys)
    assert f"the Go module proxy {fake_goproxy.url} has no sigs.k8s.io/kueue@v0.99.0 (410: " in line
    assert "unknown revision v0.99.0); check the release tag upstream" in line
    assert fake_goproxy.requests == [f"/{KUEUE}/@v/v0.99.0.info"]


def test_the_proxy_is_asked_with_the_modules_major_version_suffix(
    fake_goproxy: FakeProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", "--with", "trainer=v2.9.0", "--with", "kubernetes=v1.99.0"]
    assert main(argv) == 2
    # In build order, whatever the order of the options.
    assert "has no k8s.io/kubernetes@v1.99.0 (404: not found" in one_line(capsys)
    fake_goproxy.has("k8s.io/kubernetes", "v1.99.0")
    assert main(argv) == 2
    assert "has no github.com/kubeflow/trainer/v2@v2.9.0 (404: " in one_line(capsys)
    assert fake_goproxy.requests == [
        "/k8s.io/kubernetes/@v/v1.99.0.info",
        "/k8s.io/kubernetes/@v/v1.99.0.info",
        "/github.com/kubeflow/trainer/v2/@v/v2.9.0.info",
    ]


def test_an_unreachable_proxy_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9")
    assert main(["build", "--with", "kueue=v0.16.6"]) == 2
    assert one_line(capsys).startswith(
        "trainjob-conformance: error: cannot reach the Go module proxy http://127.0.0.1:9 ("
    )


def test_goproxy_off_names_no_proxy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOPROXY", "off")
    assert main(["build", "--with", "kueue=v0.16.6"]) == 2
    assert "GOPROXY=off names no module proxy to ask" in one_line(capsys)


def test_with_on_an_existing_cluster_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(REPO)
    argv = ["run", "--cluster", "existing", "--kubeconfig", str(tmp_path / "k")]
    assert main([*argv, "--with", "kueue=v0.16.6"]) == 2
    assert "an existing cluster runs what is installed on it: drop --with" in one_line(capsys)


def test_a_cached_release_needs_no_question(fake_goproxy: FakeProxy) -> None:
    binary = binary_path("kueue", "v0.16.6", "kueue")
    binary.parent.mkdir(parents=True)
    binary.write_text("built earlier")
    goproxy.require_overrides(load_profile("latest+kueue=v0.16.6"))
    assert fake_goproxy.requests == []
    with pytest.raises(ConformanceError, match=r"has no github\.com/kubeflow/trainer/v2@v2\.9\.0"):
        goproxy.require_overrides(load_profile("latest+kueue=v0.16.6+trainer=v2.9.0"))
    assert fake_goproxy.requests == ["/github.com/kubeflow/trainer/v2/@v/v2.9.0.info"]


def test_the_composed_profile_reaches_the_pytest_child(
    fake_goproxy: FakeProxy,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    fake_goproxy.has(KUEUE, "v0.16.6")
    monkeypatch.chdir(REPO)
    children: list[list[str]] = []
    monkeypatch.setattr(
        cli.children, "run_child", lambda command, own_group=False: children.append(command) or 0
    )
    report = tmp_path / "reports"
    assert main(["run", "--with", "kueue=v0.16.6", "--report", str(report)]) == 0
    (command,) = children
    assert "--trainjob-profile=latest+kueue=v0.16.6" in command
    assert f"--junitxml={report / 'latest+kueue=v0.16.6-junit.xml'}" in command
    (run_dir,) = [a.split("=", 1)[1] for a in command if a.startswith("--trainjob-run-dir=")]
    assert "-latest+kueue=v0.16.6-" in Path(run_dir).name


def test_matrix_composes_every_profile(
    fake_goproxy: FakeProxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_goproxy.has(KUEUE, "v0.16.6")
    monkeypatch.chdir(REPO)
    report = tmp_path / "reports"
    profiles: list[str] = []

    def child_command(args: object, name: str) -> list[str]:
        # Stands in for the profile's pytest run: its report, then a child that does nothing.
        profiles.append(name)
        versions = load_profile(name).versions
        RunReport(name, "embedded", versions, "2026-11-22T00:00:00Z", 1, 1).write(report)
        return [sys.executable, "-c", "pass"]

    from trainjob_conformance.cli import matrix

    monkeypatch.setattr(matrix, "pytest_command", child_command)
    argv = ["matrix", "--profiles", "latest,trainer-2.2", "--with", "kueue=v0.16.6"]
    assert main([*argv, "--report", str(report)]) == 0
    assert profiles == ["latest+kueue=v0.16.6", "trainer-2.2+kueue=v0.16.6"]
    text = (report / "conformance.md").read_text()
    assert "composed from trainer-2.2: kueue v0.16.6" in text


PLUGIN_TEST = """
from trainjob_conformance.plugin.options import read_settings

def test_it(request):
    profile = read_settings(request.config).request.profile
    assert profile.name == "latest+kueue=v0.16.6"
    assert profile.base == "latest"
    assert profile.versions["kueue"] == "v0.16.6"
"""


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_plugin_reads_a_composed_profile(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    pytester.makepyfile(PLUGIN_TEST)
    args = ["-p", "no:cacheprovider"]
    if how == "option":
        args.append("--trainjob-profile=latest+kueue=v0.16.6")
    else:
        monkeypatch.setenv("TRAINJOB_PROFILE", "latest+kueue=v0.16.6")
    pytester.runpytest(*args).assert_outcomes(passed=1)


def test_run_lets_an_idle_worker_take_queued_tests_unless_told_otherwise() -> None:
    import argparse

    args = argparse.Namespace(
        cluster="embedded", workers=2, kubeconfig=None, pack=[], report=None, pytest_args=[]
    )
    command = cli.pytest_command(args, "latest")
    assert command[command.index("--dist") + 1] == "worksteal"
    # The user's own choice, given after --, comes later and wins.
    args.pytest_args = ["--dist", "load"]
    command = cli.pytest_command(args, "latest")
    assert command[len(command) - 1 - command[::-1].index("--dist") + 1] == "load"


def test_a_run_that_stops_after_its_stack_checks_hands_them_out_first_to_every_worker() -> None:
    import argparse

    args = argparse.Namespace(
        cluster="embedded", workers=2, kubeconfig=None, pack=[], report=None, pytest_args=[],
        stop_after_failure_of=("TJ-STACK-001", "KQ-ADMIT-001"),
    )  # fmt: skip
    command = cli.pytest_command(args, "latest")
    # worksteal would give one worker every check and the other the rest (measured:
    # an incompatible compat cell 133 s, against 72 s with load).
    assert command[command.index("--dist") + 1] == "load"
    assert "--trainjob-stop-after-failure-of=TJ-STACK-001" in command
    assert "--trainjob-stop-after-failure-of=KQ-ADMIT-001" in command


def test_a_worker_beside_an_upgraded_cluster_runs_the_releases_the_cluster_now_runs():
    # The catalog after `upgrade trainer-2.0 -> trainer-2.1` needs a MultiKueue worker of
    # the stack the manager runs then: its Kueue serves the API the tests write.
    start, target = load_profile("trainer-2.0"), load_profile("trainer-2.1")
    now = {c: target.version(c) for c in ("jobset", "trainer", "kueue")}
    running = as_running(start, {**now, "kubernetes": "v9.9.9"})
    for component in ("jobset", "trainer", "kueue"):
        assert running.version(component) == target.version(component)
    # The cluster's own stay as pinned, whatever the cluster reports of itself.
    assert running.version("kubernetes") == start.version("kubernetes")
    assert as_running(start, dict(start.versions)) == start
    # A composed profile keeps its overrides and takes the moved component's release.
    composed = load_profile("latest+kueue=v0.16.6")
    moved = as_running(composed, {"kueue": "v0.19.2"})
    assert moved.version("kueue") == "v0.19.2" and moved.overrides == {"kueue": "v0.19.2"}


def test_a_starting_cluster_offers_its_profiles_releases_to_a_worker():
    profile = load_profile("trainer-2.1")
    request = SimpleNamespace(provider="embedded", profile=profile, run_dir=Path("/run"))
    starting = StartingCluster.of(request)  # type: ignore[arg-type]
    assert starting.versions == profile.versions
