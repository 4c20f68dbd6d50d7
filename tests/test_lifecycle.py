"""Process ownership: the ledger, the watchdog, and `down` never touching a stranger.

These start real (harmless) `sleep` processes: what is tested is the
harness's own bookkeeping, not cluster behaviour.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainjob_conformance.cli import main
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.ledger import (
    CLOSED,
    DETACHED,
    LEDGER_FILE,
    ProcessIdentity,
    ProcessLedger,
    abandoned_ledgers,
)
from trainjob_conformance.lifecycle.watchdog import start_watchdog


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _ignores_sigterm(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = next(line for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def sleeper(started: list[subprocess.Popen[bytes]], inside: str = "") -> subprocess.Popen[bytes]:
    """`sleep 300`; with `inside`, run from a copy in that directory's bin/, as kwokctl
    runs a cluster's components."""
    executable = "sleep"
    if inside:
        executable = str(Path(inside) / "bin" / "sleep")
        Path(executable).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shutil.which("sleep") or "/bin/sleep", executable)
    process = subprocess.Popen([executable, "300"], start_new_session=True)
    started.append(process)
    return process


def exited(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is not None


def test_identity_refuses_a_reused_pid(sleepers: list[subprocess.Popen[bytes]]) -> None:
    process = sleeper(sleepers)
    identity = ProcessIdentity.of(process.pid, "sleep")
    assert identity is not None and identity.is_alive()

    stranger = ProcessIdentity(process.pid, identity.start + 1, "sleep")

    assert not stranger.is_alive()
    assert stranger.signal(15) is False
    assert process.poll() is None


def test_watchdog_reaps_when_the_owner_pipe_closes(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    ledger = ProcessLedger.create(tmp_path)
    recorded = sleeper(sleepers)
    identity = ProcessIdentity.of(recorded.pid, "recorded")
    assert identity is not None
    ledger.record(identity)
    cluster_dir = tmp_path / "kwok" / "clusters" / "c1"
    ledger.record_directory(cluster_dir)
    named = sleeper(sleepers, inside=str(cluster_dir))
    watchdog = start_watchdog(ledger)

    assert watchdog.stdin is not None
    watchdog.stdin.close()  # what the kernel does when the owner is SIGKILLed

    wait_for("the watchdog to reap", lambda: exited(recorded) and exited(named), timeout=15)
    assert watchdog.wait(timeout=15) == 0


@pytest.mark.parametrize("word", [DETACHED, CLOSED])
def test_watchdog_leaves_a_kept_or_closed_run_alone(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]], word: str
) -> None:
    ledger = ProcessLedger.create(tmp_path)
    process = sleeper(sleepers)
    identity = ProcessIdentity.of(process.pid, "kept")
    assert identity is not None
    ledger.record(identity)
    watchdog = start_watchdog(ledger)
    assert watchdog.stdin is not None

    watchdog.stdin.write(word.encode() + b"\n")
    watchdog.stdin.close()

    assert watchdog.wait(timeout=15) == 0
    assert process.poll() is None


def test_a_ledger_whose_owner_died_is_abandoned(tmp_path: Path) -> None:
    run = tmp_path / "run-1"
    run.mkdir()
    owner = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    (run / LEDGER_FILE).write_text(
        json.dumps({"owner": int(owner.stdout), "owner_start": 1, "since": 0}) + "\n"
    )
    kept = tmp_path / "run-2"
    kept.mkdir()
    ProcessLedger.create(kept).mark(DETACHED)
    mine = tmp_path / "run-3"
    ProcessLedger.create(mine)

    found = [ledger.path.parent.name for ledger in abandoned_ledgers(tmp_path)]

    assert found == ["run-1"]


def test_down_never_signals_a_pid_that_is_now_another_process(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    stranger = sleeper(sleepers)
    identity = ProcessIdentity.of(stranger.pid, "trainer")
    assert identity is not None
    ledger = ProcessLedger.create(tmp_path)
    # The pid the run recorded, with the start time of the process it started then.
    ledger.record(ProcessIdentity(stranger.pid, identity.start - 100, "trainer"))
    (tmp_path / "state.json").write_text(json.dumps({"pids": {"trainer": stranger.pid}}))

    assert main(["down", "--run-dir", str(tmp_path)]) == 0

    with pytest.raises(subprocess.TimeoutExpired):  # still running half a second later
        stranger.wait(timeout=0.5)
    assert "nothing" in capsys.readouterr().out


def test_down_with_a_garbage_state_file_still_stops_the_run(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    process = sleeper(sleepers)
    ledger = ProcessLedger.create(tmp_path)
    identity = ProcessIdentity.of(process.pid, "jobset")
    assert identity is not None
    ledger.record(identity)
    (tmp_path / "state.json").write_bytes(b"\x00\xffnot json")

    assert main(["down", "--run-dir", str(tmp_path)]) == 0

    assert process.wait(timeout=15) is not None
    assert "stopped jobset" in capsys.readouterr().out


def test_reap_returns_as_soon_as_every_process_has_exited(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    import time

    ledger = ProcessLedger.create(tmp_path)
    processes = [sleeper(sleepers), sleeper(sleepers)]
    for process in processes:
        identity = ProcessIdentity.of(process.pid, "sleep")
        assert identity is not None
        ledger.record(identity)

    started = time.monotonic()
    reaped = ledger.reap(grace=10)

    assert {p.pid for p in reaped} == {p.pid for p in processes}
    assert time.monotonic() - started < 2, "reap waited for its grace, not for the exits"
    for process in processes:
        assert process.wait(timeout=5) == -15  # SIGTERM sufficed


def test_reap_kills_what_ignores_sigterm_once_the_grace_is_over(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    import time

    ledger = ProcessLedger.create(tmp_path)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"], start_new_session=True)
    sleepers.append(stubborn)
    # A SIGTERM sent before sh has run its trap would end it at once.
    wait_for("sh to ignore SIGTERM", lambda: _ignores_sigterm(stubborn.pid), timeout=5)
    identity = ProcessIdentity.of(stubborn.pid, "sh")
    assert identity is not None
    ledger.record(identity)

    started = time.monotonic()
    ledger.reap(grace=0.5)

    assert time.monotonic() - started >= 0.5
    assert stubborn.wait(timeout=5) == -9


def test_run_stops_the_cluster_of_a_pytest_killed_by_sigkill(
    tmp_path: Path,
    sleepers: list[subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from trainjob_conformance.cli import children
    from trainjob_conformance.cli import run as cli

    # The run directory pytest would have recorded its cluster in, and a stand-in
    # pytest that dies at once by SIGKILL, before any cleanup of its own.
    run_dir = tmp_path / "runs" / "run"
    # The ledger's owner is pytest, dead by now.
    owner = (
        "import pathlib; from trainjob_conformance.lifecycle.ledger import ProcessLedger; "
        f"ProcessLedger.create(pathlib.Path({str(run_dir)!r}))"
    )
    subprocess.run([sys.executable, "-c", owner], check=True)
    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    manager = sleeper(sleepers)
    identity = ProcessIdentity.of(manager.pid, "kueue")
    assert identity is not None
    ledger.record(identity)
    monkeypatch.setattr(children, "RUN_DIRS", [run_dir])
    monkeypatch.setattr(cli, "profile_arg", lambda args: "latest")
    monkeypatch.setattr(cli, "check_run_args", lambda args: None)
    # It leaves a worker behind, as xdist's would be (the same process group).
    worker_pid = tmp_path / "worker.pid"
    killed = [
        sys.executable,
        "-c",
        "import os, signal, subprocess; "
        "worker = subprocess.Popen(['sleep', '300']); "
        f"open({str(worker_pid)!r}, 'w').write(str(worker.pid)); "
        "os.kill(os.getpid(), signal.SIGKILL)",
    ]
    monkeypatch.setattr(cli, "pytest_command", lambda args, profile: killed)

    code = cli.run_run(argparse.Namespace(workers=2))

    assert code == 137
    assert manager.wait(timeout=5) == -15
    worker = ProcessIdentity.of(int(worker_pid.read_text()), "sleep")
    assert worker is None or not worker.is_alive(), "the dead pytest's worker still runs"
    err = capsys.readouterr().err
    assert "pytest was killed by SIGKILL; no verdicts for what it had not reported" in err
    assert f"stopped what a dead run left in {run_dir}: kueue (pid {manager.pid})" in err
    assert "nothing it started is still running" in err
    assert ledger.state == CLOSED


def _running(pid: int) -> str:
    """A shell test that `pid` runs and has not exited (a zombie answers kill -0 too)."""
    return f'grep -q "^State:[[:space:]]*[^Z[:space:]]" /proc/{pid}/status'


def _stopping_after(
    sleepers: list[subprocess.Popen[bytes]], tmp_path: Path, name: str, other: int
) -> subprocess.Popen[bytes]:
    """A process that, on SIGTERM, notes in tmp_path/name whether `other` still ran."""
    script = (
        f"trap '{_running(other)} && touch {tmp_path}/{name}; exit 0' TERM; "
        f"touch {tmp_path}/{name}.ready; sleep 300 & wait"
    )
    process = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    sleepers.append(process)
    wait_for(f"{name} to set its trap", (tmp_path / f"{name}.ready").exists, timeout=10)
    return process


def test_reap_stops_the_managers_before_the_control_plane_and_etcd_last(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    ledger = ProcessLedger.create(tmp_path / "run")
    etcd = sleeper(sleepers)
    apiserver = _stopping_after(sleepers, tmp_path, "apiserver", etcd.pid)
    manager = _stopping_after(sleepers, tmp_path, "manager", apiserver.pid)
    # Recorded in the wrong order, as the ledger may list them.
    for process, name in ((etcd, "etcd"), (apiserver, "kube-apiserver"), (manager, "kueue")):
        identity = ProcessIdentity.of(process.pid, name)
        assert identity is not None
        ledger.record(identity)

    ledger.reap(grace=10)

    assert (tmp_path / "manager").exists(), "the manager was stopped after the API server"
    assert (tmp_path / "apiserver").exists(), "the API server was stopped after etcd"
    assert etcd.wait(timeout=5) == -15


def test_processes_naming_takes_only_executables_inside_the_directory(tmp_path):
    """A process run from the cluster's bin/ is the cluster's; one that only names a
    file there (a pytest given its kubeconfig) is someone else's."""
    import sys

    from trainjob_conformance.lifecycle.ledger import processes_naming

    binary = tmp_path / "bin" / "sleep"
    binary.parent.mkdir()
    shutil.copy(shutil.which("sleep"), binary)
    inside = subprocess.Popen([str(binary), "30"])
    naming = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", f"--kubeconfig={tmp_path}/k.yaml"]
    )
    try:
        found = {p.pid for p in processes_naming(str(tmp_path), 0, set())}
        assert inside.pid in found
        assert naming.pid not in found
    finally:
        for child in (inside, naming):
            child.kill()
            child.wait()


def test_reap_looks_again_for_what_a_stopping_launcher_started(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    # kwokctl, killed while it starts the control plane, may start one more
    # component after the first look: it must not outlive the reap.
    cluster = tmp_path / "cluster"
    sleeper(sleepers, inside=str(cluster)).kill()  # puts a sleep in the cluster's bin/
    late = tmp_path / "late.pid"
    script = (
        f"trap '{cluster}/bin/sleep 300 & echo $! > {late}; exit 0' TERM; "
        f"touch {tmp_path}/ready; sleep 300 & wait"
    )
    launcher = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    sleepers.append(launcher)
    wait_for("the launcher to set its trap", (tmp_path / "ready").exists, timeout=10)
    ledger = ProcessLedger.create(tmp_path / "run")
    ledger.record_directory(cluster)
    identity = ProcessIdentity.of(launcher.pid, "kwokctl")
    assert identity is not None
    ledger.record(identity)

    reaped = ledger.reap(grace=5)

    started_late = ProcessIdentity.of(int(late.read_text()), "sleep")
    assert started_late is None or not started_late.is_alive(), "the late component still runs"
    assert int(late.read_text()) in {p.pid for p in reaped}


def _child_output(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )


def test_a_process_whose_parent_has_gone_leaves_at_once_and_quietly() -> None:
    from trainjob_conformance.lifecycle import interrupts

    orphaned = _child_output(
        "import os, subprocess, sys; from trainjob_conformance.lifecycle.interrupts import "
        "leave_if_orphaned\n"
        "gone = subprocess.Popen(['true']); gone.wait()\n"
        "leave_if_orphaned(gone.pid); print('went on')"
    )
    assert (orphaned.returncode, orphaned.stdout, orphaned.stderr) == (128 + signal.SIGTERM, "", "")

    with_parent = _child_output(
        "import os; from trainjob_conformance.lifecycle.interrupts import leave_if_orphaned\n"
        "leave_if_orphaned(os.getppid()); print('went on')"
    )
    assert with_parent.stdout == "went on\n", with_parent.stderr

    # A parent that has begun to exit counts as gone, before the kernel reparents.
    assert not interrupts.process_exiting(os.getpid())
    zombie = subprocess.Popen(["true"])
    wait_for("the child to exit", lambda: interrupts.process_exiting(zombie.pid), timeout=10)
    zombie.wait()
