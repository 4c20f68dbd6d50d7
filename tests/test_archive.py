"""The results archive: what it holds, and report/diff/history reading it."""

import io
import json
import tarfile

import pytest

from tests.test_reports import run
from trainjob_conformance.cli import main
from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.report.archive import TOP, write_archive
from trainjob_conformance.report.model import read_reports
from trainjob_conformance.report.render import write_reports


def archived_run(directory, *results, started="2026-11-22T00:00:00Z"):
    report = run("latest", *results)
    report.started = started
    report.write(directory)
    write_reports(read_reports(directory), directory)
    (directory / "latest-junit.xml").write_text("<testsuites/>")
    diagnostics = directory / "diagnostics" / "latest" / "e2e_t.py_TJ-B.txt"
    diagnostics.parent.mkdir(parents=True)
    diagnostics.write_text("what was seen")
    catalog = directory / "catalog.yaml"
    catalog.write_text("TJ-A: {}\n")
    return write_archive(
        directory,
        "latest",
        {"trainer": "v2.3.0"},
        "trainjob-conformance run --profile latest",
        {"policies.yaml": catalog},
        images={"source": "local", "tjc.local/kueue/kueue:v0.19.2": "sha256:ab"},
    )


def test_the_archive_holds_results_reports_diagnostics_versions_command_and_catalog(tmp_path):
    path = archived_run(tmp_path, ("TJ-A", "pass", ""), ("TJ-B", "FAIL", "why"))
    assert path == tmp_path / "latest-results.tar.gz"
    with tarfile.open(path) as archive:
        names = sorted(name.removeprefix(f"{TOP}/") for name in archive.getnames())
        versions = json.loads(archive.extractfile(f"{TOP}/meta/versions.json").read())
        command = archive.extractfile(f"{TOP}/meta/command.txt").read().decode()
    assert names == [
        "catalog/policies.yaml",
        "conformance.html",
        "conformance.md",
        "diagnostics/latest/e2e_t.py_TJ-B.txt",
        "latest-junit.xml",
        "latest.json",
        "meta/command.txt",
        "meta/versions.json",
    ]
    assert versions["cluster"] == {"trainer": "v2.3.0"}
    assert versions["profile"] == "latest"
    assert versions["images"] == {"source": "local", "tjc.local/kueue/kueue:v0.19.2": "sha256:ab"}
    assert command == "trainjob-conformance run --profile latest\n"


def test_report_diff_and_history_read_archives(tmp_path, capsys):
    old = archived_run(tmp_path / "old", ("TJ-A", "pass", ""), ("TJ-B", "pass", ""))
    new = archived_run(
        tmp_path / "new",
        ("TJ-A", "pass", ""),
        ("TJ-B", "FAIL", "refused"),
        started="2026-11-23T00:00:00Z",
    )
    assert [r.result for r in read_reports(new)[0].results] == ["pass", "FAIL"]
    assert main(["diff", str(old), str(new)]) == 1
    assert "TJ-B" in capsys.readouterr().out
    assert main(["report", str(new)]) == 0
    assert (tmp_path / "new" / "latest-results" / "conformance.html").is_file()
    page = tmp_path / "history.html"
    assert main(["history", str(old), str(new), "--output", str(page)]) == 0
    assert "2 runs" in capsys.readouterr().out


def test_an_archive_that_would_write_outside_its_directory_is_refused(tmp_path, capsys):
    bad = tmp_path / "evil-results.tar.gz"
    with tarfile.open(bad, "w:gz") as archive:
        data = b"{}"
        info = tarfile.TarInfo("../../escaped.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(ConformanceError, match="is not a readable results archive"):
        read_reports(bad)
    assert main(["report", str(bad)]) == 2
    assert "not a readable results archive" in capsys.readouterr().err


def test_a_tarball_of_something_else_is_named(tmp_path):
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz") as archive:
        info = tarfile.TarInfo("notes.txt")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(ConformanceError, match="not a trainjob-conformance results archive"):
        read_reports(other)
