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
        self, key: str, version: str, cancelled: threading.Event | None = None
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


def test_a_component_is_usable_while_another_still_builds(fake: FakeBuilds) -> None:
    started = builds.Builds(load_profile("latest")).start()
    fake.release["etcd"].set()
    fake.release["kwok"].set()
    fake.release["kueue"].set()
    # Kubernetes still builds: the control plane waits for it, the rest does not.
    assert started.wait(["kueue"]) == {"kueue": Path("/bin/kueue")}
    assert not started.done_with("kubernetes")
    fake.release["kubernetes"].set()
    assert set(started.wait(CONTROL_PLANE)) == set(CONTROL_PLANE)
    for event in fake.release.values():
        event.set()
    assert len(started.wait_all()) == len(started.components)


def test_two_at_a_time_longest_first(fake: FakeBuilds) -> None:
    started = builds.Builds(load_profile("latest")).start()
    deadline = time.monotonic() + 5
    while len(fake.started) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(fake.started) == ["kubernetes", "kueue"]
    for event in fake.release.values():
        event.set()
    started.wait_all()
    assert sorted(fake.started) == sorted(started.components)


def test_a_failed_build_is_raised_and_no_further_build_starts(fake: FakeBuilds) -> None:
    fake.failing.add("kueue")
    fake.release["kueue"].set()
    started = builds.Builds(load_profile("latest")).start()
    with pytest.raises(ConformanceError, match="building kueue failed"):
        started.wait(["kueue"])
    # The build that was running stops; the queued ones never start.
    with pytest.raises(gobuild.BuildCancelled, match="kubernetes was stopped"):
        started.wait(["kubernetes"])
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
