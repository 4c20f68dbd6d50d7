"""Background builds: each usable when done, a failure stops the rest, a cancel stops go."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack import builds, gobuild
from trainjob_conformance.stack.components import BUILD_ORDER, CONTROL_PLANE
from trainjob_conformance.stack.profiles import load_profile


class FakeBuilds:
    """Stands in for `gobuild.build_component`: each component finishes when the test says."""

    def __init__(self) -> None:
        self.release = {key: threading.Event() for key in BUILD_ORDER}
        self.started: list[str] = []
        self.failing: set[str] = set()

    def __call__(
        self,
        key: str,
        version: str,
        cancelled: threading.Event | None = None,
        heartbeat: float | None = None,
    ) -> dict[str, Path]:
        self.started.append(key)
        while not self.release[key].wait(0.01):
            if cancelled is not None and cancelled.is_set():
                raise gobuild.BuildCancelled(f"the build of {key}")
        if key in self.failing:
            raise ConformanceError(f"building {key} failed (exit 1)")
        return {key: Path("/bin") / key}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeBuilds:
    fake = FakeBuilds()
    monkeypatch.setattr(gobuild, "build_component", fake)
    return fake


def test_the_control_plane_is_usable_while_the_managers_still_build(fake: FakeBuilds) -> None:
    started = builds.Builds(load_profile("latest")).start()
    for key in CONTROL_PLANE:
        fake.release[key].set()
    assert set(started.wait(CONTROL_PLANE)) == set(CONTROL_PLANE)
    assert not started.done_with("jobset")
    for event in fake.release.values():
        event.set()
    assert len(started.wait_all()) == len(started.components)


def test_one_at_a_time_in_build_order(fake: FakeBuilds) -> None:
    started = builds.Builds(load_profile("latest")).start()
    for key in BUILD_ORDER[:2]:
        fake.release[key].set()
    started.wait(BUILD_ORDER[:2])
    deadline = time.monotonic() + 5
    while len(fake.started) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    # The third has begun; the fourth waits for it.
    assert fake.started == list(BUILD_ORDER[:3])
    for event in fake.release.values():
        event.set()
    started.wait_all()
    assert fake.started == [key for key in BUILD_ORDER if key in started.components]


def test_a_failed_build_is_raised_and_no_further_build_starts(fake: FakeBuilds) -> None:
    fake.failing.add("kwok")
    for key in ("etcd", "kubernetes", "kwok"):
        fake.release[key].set()
    started = builds.Builds(load_profile("latest"), parallel=2).start()
    with pytest.raises(ConformanceError, match="building kwok failed"):
        started.wait(["kwok"])
    # The build that was running beside it stops; the queued ones never start.
    with pytest.raises(gobuild.BuildCancelled, match="jobset was stopped"):
        started.wait(["jobset"])
    with pytest.raises(gobuild.BuildCancelled, match="trainer was stopped"):
        started.wait(["trainer"])
    assert "trainer" not in fake.started


def test_a_wait_gives_up_when_its_abort_says_so(fake: FakeBuilds) -> None:
    started = builds.Builds(load_profile("latest")).start()

    class Stopped(Exception):
        pass

    def abort() -> None:
        raise Stopped

    with pytest.raises(Stopped):
        started.wait(["kubernetes"], abort=abort)
    started.cancel(wait=True)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_cancel_stops_go_and_what_it_started(tmp_path: Path) -> None:
    """The whole process group goes: go's compilers would otherwise build on unseen."""
    child_pid = tmp_path / "child.pid"
    cancelled = threading.Event()
    script = f"sleep 60 & echo $! > {child_pid}; wait"
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(gobuild.BuildCancelled, match="building x was stopped"):
        gobuild._run_logged(
            ["sh", "-c", script], tmp_path, tmp_path / "log", "building x", cancelled
        )
    assert time.monotonic() - started < 5
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(pid), f"pid {pid} (started by the cancelled build) still runs"


def test_builds_run_niced(tmp_path: Path) -> None:
    out = tmp_path / "nice"
    gobuild._run_logged(
        ["sh", "-c", f"cat /proc/self/stat > {out}"], tmp_path, tmp_path / "log", "nice"
    )
    niceness = int(out.read_text().split(")")[-1].split()[16])
    assert niceness == min(19, os.nice(0) + gobuild._BUILD_NICENESS)


def test_one_heartbeat_line_names_every_running_build(
    fake: FakeBuilds, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(builds, "HEARTBEAT", 0.05)
    profile = load_profile("latest")
    # Two at a time, so that one line must name both.
    started = builds.Builds(profile, parallel=2).start()
    wanted = (
        f"still building etcd {profile.version('etcd')} (",
        f", kubernetes {profile.version('kubernetes')} (",
    )
    seen = ""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        seen += capsys.readouterr().err
        if any(all(part in line for part in wanted) for line in seen.splitlines()):
            break
        time.sleep(0.02)
    for event in fake.release.values():
        event.set()
    started.wait_all()
    assert any(all(part in line for part in wanted) for line in seen.splitlines()), seen
