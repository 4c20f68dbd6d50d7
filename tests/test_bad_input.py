"""Bad input gets one line naming what is wrong and what to do, and a non-zero exit.

Each case runs the real command line (or the loader the plugin uses) and checks
the one line it prints; no traceback, nothing started.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainjob_conformance.cli import main
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.policies.catalog import load_catalog

REPO = Path(__file__).resolve().parents[1]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def kubeconfig(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_bytes(content)
    return path


NO_CONTEXT = b"""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
"""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"clusters: [", "is not YAML at line 1"),
        (b"\x00\xff\xfe\x01binary", "is not a text file"),
        (NO_CONTEXT, "has no current-context; set one"),
        (NO_CONTEXT + b"current-context: nope\n", "has no context 'nope' (it has: x)"),
        (b"just: a mapping\n", "has no clusters: it is not a kubeconfig"),
    ],
)
def test_a_bad_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    path = kubeconfig(tmp_path, content)
    code = main(
        ["run", "--cluster", "existing", "--kubeconfig", str(path), "--report", str(tmp_path)]
    )
    assert code == 2
    assert expected in one_line(capsys)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["render", "trainjob", "--values", "{name: a}"], "--values is not JSON"),
        (["render", "nosuch", "--templates", str(REPO / "templates")], "no template 'nosuch'"),
        (
            [
                "render",
                "trainjob",
                "--templates",
                str(REPO / "templates"),
                "--values",
                '{"name": "a", "namespace": "b", "pod_overrides": [1]}',
            ],
            "each pod override must be a mapping",
        ),
        (
            [
                "render",
                "trainjob",
                "--templates",
                str(REPO / "templates"),
                "--values",
                '{"name": "a", "namespace": "b", "pod_overrides": ["node"]}',
            ],
            "each pod override must be a mapping",
        ),
        (["matrix", "--profiles", ""], "--profiles '' names no profile"),
        (["matrix", "--profiles", "latest,latest"], "names latest more than once"),
        (["matrix", "--profiles", "latest,bogus"], "unknown profile 'bogus'"),
        (
            ["matrix", "--jobs", "0"],
            "--jobs 0: give 1 (one profile at a time, the default) or more",
        ),
        (["matrix", "--jobs", "-2"], "--jobs -2: give 1 (one profile at a time"),
        (["matrix", "--jobs", "two"], "--jobs 'two' is not a number"),
        (["matrix", "-j", "1.5"], "--jobs '1.5' is not a number"),
    ],
)
def test_bad_arguments_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(argv) == 2
    assert expected in one_line(capsys)


def test_render_nosuch_lists_the_templates(capsys: pytest.CaptureFixture[str]) -> None:
    main(["render", "nosuch", "--templates", str(REPO / "templates")])
    assert "there are: clusterqueue, clustertrainingruntime" in one_line(capsys)


def test_negative_workers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "-n", "-3"])
    assert exited.value.code == 2
    assert "-3 workers: give 0 (serial) or more" in capsys.readouterr().err


def test_an_unknown_profile_in_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRAINJOB_PROFILE", "bogus")
    assert main(["run"]) == 2
    assert one_line(capsys).startswith(
        "trainjob-conformance: error: TRAINJOB_PROFILE: unknown profile 'bogus'"
    )


def test_an_unwritable_report_directory_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.chdir(REPO)
    assert main(["run", "--report", str(blocker / "reports")]) == 2
    assert "the report directory" in one_line(capsys)


def test_an_unwritable_cache_is_refused_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TRAINJOB_CONFORMANCE_CACHE", str(blocker / "cache"))
    assert main(["build"]) == 2
    assert "the build cache ($TRAINJOB_CONFORMANCE_CACHE)" in one_line(capsys)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('"just a string"', "it holds a JSON str, not an object"),
        ('{"format": 99, "results": []}', "format 99"),
        ("not json", "is not a trainjob-conformance result file"),
    ],
)
def test_a_bad_result_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    (tmp_path / "latest.json").write_text(content)
    assert main(["report", str(tmp_path)]) == 2
    assert expected in one_line(capsys)


def test_an_unknown_result_word_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"policy": "P", "title": "t", "result": "maybe", "seconds": 1, "test": "t"}
    report = {
        "profile": "latest",
        "provider": "embedded",
        "versions": {},
        "started": "",
        "wall_seconds": 1,
        "cluster_start_seconds": 1,
        "results": [row],
        "format": 2,
    }
    (tmp_path / "latest.json").write_text(json.dumps(report))
    assert main(["diff", str(tmp_path), str(tmp_path)]) == 2
    assert "unknown result word(s) 'maybe'" in one_line(capsys)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("TJ-A-001: [\n", "is not valid YAML at line 2"),
        ("- a\n- b\n", "must map policy IDs to policies, not be a list"),
        ("TJ-A-001:\n", "policy TJ-A-001 has no body"),
        (
            "TJ-A-001: {title: t, statement: s, source: x, trainer: '>=2.0.0'}\n"
            "TJ-A-001: {title: u, statement: s, source: x, trainer: '>=2.0.0'}\n",
            "'TJ-A-001' is given twice (lines 1 and 2); keep one",
        ),
        (
            "TJ-A-001: {title: t, statement: s, source: x, trainer: '>=2.x'}\n",
            "policy TJ-A-001: bad version range clause '>=2.x'",
        ),
    ],
)
def test_a_bad_catalog_is_one_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(content)
    with pytest.raises(ConformanceError) as refused:
        load_catalog(path)
    assert "\n" not in str(refused.value)
    assert expected in str(refused.value)


@pytest.mark.parametrize("content", [b"\x00garbage", b"{}"])
def test_down_with_a_damaged_state_and_no_ledger_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    (tmp_path / "state.json").write_bytes(content)
    assert main(["down", "--run-dir", str(tmp_path)]) == 2
    assert "holds no cluster of trainjob-conformance" in one_line(capsys)


def _a_report_directory(path: Path) -> Path:
    from trainjob_conformance.report.model import RunReport

    RunReport("latest", "embedded", {}, "2026-11-20T02:00:00Z", 1.0, 1.0).write(path)
    return path


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "report directory {bad} does not exist; pass directories written by"),
        ({}, "no trainjob-conformance results at {bad} (expected DIR/<profile>.json or a "),
        ({"latest.json": "{not json"}, "{bad}/latest.json is not a trainjob-conformance result"),
        ({"latest.json": '{"format": 99, "results": []}'}, "format 99"),
        ({"latest.json": '{"format": 2}'}, "unexpected content"),
    ],
)
def test_history_of_a_bad_report_directory_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: dict[str, str] | None,
    expected: str,
) -> None:
    good = _a_report_directory(tmp_path / "good")
    bad = tmp_path / "bad"
    if content is not None:
        bad.mkdir()
        for name, text in content.items():
            (bad / name).write_text(text)
    output = tmp_path / "history.html"
    assert main(["history", str(good), str(bad), "--output", str(output)]) == 2
    assert expected.format(bad=bad) in one_line(capsys)
    assert not output.exists()


def test_history_of_the_same_directory_twice_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _a_report_directory(tmp_path / "night")
    monkeypatch.chdir(tmp_path)
    assert main(["history", "night", str(tmp_path / "night")]) == 2
    assert f"{tmp_path / 'night'} is given twice (also as night)" in one_line(capsys)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("adir", "--output {tmp}/adir is a directory; give a file"),
        (
            "afile/history.html",
            "--output {tmp}/afile/history.html cannot be written: {tmp}/afile is a file",
        ),
        ("h" * 300 + ".html", "cannot be written (File name too long); choose another path"),
    ],
)
def test_history_to_a_bad_output_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str, expected: str
) -> None:
    night = _a_report_directory(tmp_path / "night")
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    assert main(["history", str(night), "--output", str(tmp_path / output)]) == 2
    assert expected.format(tmp=tmp_path) in one_line(capsys)


def test_history_of_a_name_too_long_to_look_up_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", str(tmp_path / ("n" * 300))]) == 2
    assert "cannot be read (File name too long)" in one_line(capsys)


GOOD_POLICY = """
ADM-001:
  title: t
  statement: s
  source: src
  trainer: ">=2.0.0"
"""


def _pack(root: Path, catalog: str | None = GOOD_POLICY, meta: str | None = None) -> Path:
    root.mkdir(parents=True)
    if catalog is not None:
        (root / "policies.yaml").write_text(catalog)
    if meta is not None:
        (root / "pack.yaml").write_text(meta)
    return root


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p / "absent", "is not a directory"),
        (lambda p: _pack(p / "empty", catalog=None), "has no policies.yaml"),
        (lambda p: _pack(p / "broken", catalog="ADM-001: ["), "is not valid YAML at line 1"),
        (lambda p: _pack(p / "dup", catalog=GOOD_POLICY * 2), "'ADM-001' is given twice"),
        (
            lambda p: _pack(p / "range", catalog=GOOD_POLICY.replace(">=2.0.0", "two")),
            "bad version range clause 'two'",
        ),
        (lambda p: _pack(p / "Bad_Name"), "name 'Bad_Name' must be lower-case"),
        (
            lambda p: _pack(p / "slash", catalog=GOOD_POLICY.replace("ADM-001", "a/ADM-001")),
            "must not contain '/'",
        ),
    ],
)
def test_a_bad_policy_pack_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, expected: str
) -> None:
    pack = make(tmp_path)
    code = main(["run", "--pack", str(pack), "--report", str(tmp_path / "r")])
    assert code == 2
    assert expected in one_line(capsys)


def test_two_packs_of_one_name_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _pack(tmp_path / "a", meta="name: same")
    second = _pack(tmp_path / "b", meta="name: same")
    code = main(["run", "--pack", str(first), "--pack", str(second), "--report", str(tmp_path)])
    assert code == 2
    assert "two policy packs are named 'same'" in one_line(capsys)


def test_upgrade_manifests_are_for_an_existing_cluster_only(tmp_path, capsys):
    (tmp_path / "kueue").mkdir()
    code = main(
        ["upgrade", "--from", "trainer-2.2", "--to", "latest", "--manifests", str(tmp_path)]
    )
    assert code == 2
    assert one_line(capsys).endswith(
        "--manifests is for --cluster existing: a cluster of embedded runs the releases' own "
        "manifests, and its upgrade applies those"
    )


def test_upgrade_manifests_for_a_component_the_upgrade_keeps_are_named(tmp_path, capsys):
    (tmp_path / "cluster.yaml").write_text("")
    folder = tmp_path / "dir" / "training-operator"
    folder.mkdir(parents=True)
    (folder / "operator.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: op, namespace: kubeflow}\n"
        "spec: {selector: {matchLabels: {a: b}}, template: {spec: {containers: "
        "[{name: m, image: 'kubeflow/training-operator:v1-855e096'}]}}}\n"
    )
    config = kubeconfig(tmp_path, NO_CONTEXT + b"current-context: x\n")
    code = main(
        ["upgrade", "--from", "trainer-2.2", "--to", "latest", "--cluster", "existing",
         "--kubeconfig", str(config), "--manifests", str(tmp_path / "dir")]
    )  # fmt: skip
    assert code == 2
    assert "the upgrade does not move training-operator" in one_line(capsys)
