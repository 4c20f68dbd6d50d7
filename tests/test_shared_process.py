"""The harness's dockerd is stopped by the last run using it, never under another run."""

from __future__ import annotations

import subprocess

import pytest

from trainjob_conformance.lifecycle.identity import ProcessIdentity
from trainjob_conformance.lifecycle.ledger import ProcessLedger
from trainjob_conformance.lifecycle.shared import SharedProcess, user_name


@pytest.fixture
def sleeper():
    started = []

    def start() -> subprocess.Popen:
        process = subprocess.Popen(["sleep", "60"], start_new_session=True)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def shared_with_daemon(tmp_path, sleeper) -> tuple[SharedProcess, ProcessIdentity]:
    shared = SharedProcess(tmp_path / "dockerd")
    daemon = ProcessIdentity.of(sleeper().pid, "dockerd")
    with shared.locked():
        shared.adopt(daemon)
    return shared, daemon


def test_the_daemon_stays_while_another_run_uses_it_and_stops_with_the_last(tmp_path, sleeper):
    shared, daemon = shared_with_daemon(tmp_path, sleeper)
    mine = shared.join()
    other_run = sleeper()
    (shared.users / user_name(other_run.pid)).touch()

    process, others = shared.leave(mine)
    assert process == daemon and others == [user_name(other_run.pid)]
    assert daemon.is_alive()

    other_run.kill()
    other_run.wait()
    # A user that died without leaving (SIGKILL) no longer counts.
    again = shared.join()
    process, others = shared.leave(again)
    assert others == [] and not daemon.is_alive()
    assert shared.process() is None


def test_a_killed_runs_watchdog_leaves_the_daemon_through_its_ledger(tmp_path, sleeper):
    shared, daemon = shared_with_daemon(tmp_path, sleeper)
    ledger = ProcessLedger.create(tmp_path / "run")
    ledger.record_shared(shared, shared.join())

    stopped = ledger.reap(grace=2)

    assert daemon in stopped and not daemon.is_alive()


def test_a_recorded_pid_that_is_another_process_now_is_not_the_daemon(tmp_path, sleeper):
    shared = SharedProcess(tmp_path / "dockerd")
    stranger = sleeper()
    with shared.locked():
        shared.adopt(ProcessIdentity(stranger.pid, 1.0, "dockerd"))  # another start time
    assert shared.process() is None
    shared.leave(shared.join())
    assert stranger.poll() is None  # never signalled


def test_a_kept_cluster_holds_the_daemon_until_it_is_gone(tmp_path, sleeper):
    shared, daemon = shared_with_daemon(tmp_path, sleeper)
    shared.keep_for("tjc-kept")
    existing = {"tjc-kept"}

    # A watchdog cannot look: a kept cluster always counts.
    assert shared.leave(shared.join())[1] == ["kept-tjc-kept"] and daemon.is_alive()
    assert shared.leave(shared.join(), in_use=existing.__contains__)[1] == ["kept-tjc-kept"]
    existing.clear()  # the user deleted it
    assert shared.leave(shared.join(), in_use=existing.__contains__)[1] == []
    assert not daemon.is_alive()


def test_a_recorded_command_runs_when_the_run_is_reaped(tmp_path):
    ledger = ProcessLedger.create(tmp_path / "run")
    marker = tmp_path / "undone"
    ledger.record_command(["touch", str(marker)])
    ledger.reap(grace=1)
    assert marker.is_file()


def test_a_kind_record_is_deleted_only_while_running(tmp_path, monkeypatch):
    from trainjob_conformance.cluster.kind import reclaim

    deleted = []
    monkeypatch.setattr(reclaim, "delete", lambda record, run_dir: deleted.append(record.name))
    for state in ("running", "deleted", "detached"):
        run_dir = tmp_path / state
        run_dir.mkdir()
        record = reclaim.ClusterRecord("tjc-" + state, "k", "kind", 1, 1.0, state=state)
        record.write(run_dir)
        reclaim.delete_if_running(run_dir)
    reclaim.delete_if_running(tmp_path / "no-record")
    assert deleted == ["tjc-running"]  # a kept cluster stays


def test_two_joins_of_one_process_are_two_users(tmp_path, sleeper):
    """A run and its MultiKueue worker in one process: the first to leave keeps the
    daemon for the other."""
    shared, daemon = shared_with_daemon(tmp_path, sleeper)
    run, worker = shared.join(), shared.join()
    assert run != worker
    assert shared.leave(worker)[1] == [run] and daemon.is_alive()
    assert shared.leave(run)[1] == [] and not daemon.is_alive()


def test_a_cluster_docker_cannot_list_stays_recorded_running(tmp_path, monkeypatch):
    from trainjob_conformance.cluster.kind import reclaim

    ran = []
    monkeypatch.setattr(
        reclaim, "listed_nodes", lambda name, harness_only=True: "Cannot connect to the daemon"
    )
    monkeypatch.setattr(reclaim.subprocess, "run", lambda *a, **k: ran.append(a))
    record = reclaim.ClusterRecord("tjc-x", str(tmp_path / "kubeconfig"), "kind", 1, 1.0)
    record.write(tmp_path)
    reclaim.delete(record, tmp_path)
    assert ran == []  # no `kind delete`, no network removal
    assert reclaim.ClusterRecord.read(tmp_path / reclaim.RECORD_FILE).state == "running"


def test_a_join_is_known_as_its_processes(tmp_path):
    import os

    from trainjob_conformance.lifecycle.shared import joined_by

    name = SharedProcess(tmp_path / "dockerd").join()
    assert joined_by(name, os.getpid()) and not joined_by(name, 1)
