"""apt_install's turns: the harness's own apt-get runs never overlap (a fake apt-get
on PATH stands in for Debian's, which fails at once on a lock another holds)."""

from __future__ import annotations

import threading

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack import apt

FAKE_APT = """#!/bin/sh
# Fails, as apt-get does, when another run holds the lock; else holds it a moment.
if ! mkdir "{lock}" 2>/dev/null; then
  echo "E: Could not get lock {lock}. It is held by another apt-get" >&2
  exit 100
fi
echo "$@" >> "{calls}"
sleep 0.2
rmdir "{lock}"
"""


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "apt-get"
    script.write_text(FAKE_APT.format(lock=tmp_path / "held", calls=calls))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(apt, "_LOCK", tmp_path / "turns.lock")
    return calls


def test_installs_started_together_take_turns(fake_apt):
    errors: list[Exception] = []

    def install(package: str) -> None:
        try:
            apt.apt_install([package])
        except ConformanceError as error:
            errors.append(error)

    threads = [threading.Thread(target=install, args=(p,)) for p in ("docker.io", "debootstrap")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    calls = fake_apt.read_text().splitlines()
    assert len(calls) == 4
    # Each update is followed by its own install, and each waits on dpkg's lock too.
    assert [c.split()[2] for c in calls] == ["update", "install", "update", "install"]
    assert all("DPkg::Lock::Timeout=600" in c for c in calls)


def test_a_failure_is_one_line_in_apts_words(fake_apt, tmp_path):
    (tmp_path / "held").mkdir()
    with pytest.raises(ConformanceError, match="update -q failed: E: Could not get lock"):
        apt.apt_install(["docker.io"])
