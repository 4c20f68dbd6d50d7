"""The child processes of a command (pytest, one per profile), and what an
interruption left of the clusters they started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainjob_conformance.lifecycle.interrupts import (
    Terminated,
    interruptible_child,
    stop_orphaned_group,
)

# Run directories of the clusters this command started, to check on interruption.
RUN_DIRS: list[Path] = []
# Process groups of pytest workers that outlived their controller and could not be stopped.
GROUPS_LEFT: list[int] = []

# pytest's exit codes as this command's: interrupted is 130 (as for Ctrl-C
# here), a usage error is 2 (as for any bad input here).
PYTEST_EXIT = {2: 130, 4: 2}


def new_run_dir(label: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = (Path(".runs") / f"{stamp}-{label}-{os.getpid()}").resolve()
    RUN_DIRS.append(run_dir)
    return run_dir


def run_child(command: list[str], own_group: bool = False) -> int:
    """Run pytest and wait for it; on Ctrl-C or SIGTERM, let it stop its cluster first.

    With `own_group`, pytest runs in a process group of its own, which its
    xdist workers share: Ctrl-C or SIGTERM here reaches the whole group as
    SIGINT, pytest's own Ctrl-C path (every worker stops its test, the
    controller stops the cluster), and workers that outlive a pytest killed
    by SIGKILL are stopped through the group. Without (no workers), pytest
    stays in the terminal's group, so that --pdb can read the terminal.
    """
    child = subprocess.Popen(
        command, preexec_fn=interruptible_child, process_group=0 if own_group else None
    )
    try:
        code = child.wait()
    except KeyboardInterrupt as interruption:
        if own_group:
            os.killpg(child.pid, signal.SIGINT)  # not yet reaped: the group is still pytest's
        elif isinstance(interruption, Terminated):
            # Ctrl-C in a terminal reaches the whole process group, pytest
            # included; a SIGTERM (CI cancelling the job) reached only this
            # process, so pass it on.
            child.send_signal(signal.SIGTERM)
        _wait_for_child(child, own_group)
        raise
    if code < 0 and own_group and not stop_orphaned_group(child.pid):
        GROUPS_LEFT.append(child.pid)
    return code


def _wait_for_child(child: subprocess.Popen[bytes], own_group: bool) -> None:
    """Give the child the time its cleanup needs; a second Ctrl-C is passed on, not obeyed."""
    while True:
        try:
            child.wait()
            return
        except KeyboardInterrupt:
            if own_group:
                os.killpg(child.pid, signal.SIGINT)
            else:
                child.send_signal(signal.SIGINT)


def after_killed_child(signum: signal.Signals) -> int:
    """pytest died by a signal it could not answer (SIGKILL, say): its session
    never stopped its cluster. Its watchdog will, within seconds; this does it
    now, as the next run would (each process checked to be the one recorded,
    a kept cluster left alone), and says what is left."""
    from trainjob_conformance.lifecycle.processes import reap_abandoned

    print(
        f"trainjob-conformance: pytest was killed by {signum.name}; "
        "no verdicts for what it had not reported",
        file=sys.stderr,
    )
    for run_dir in RUN_DIRS:
        _wait_for_watchdog(run_dir)
    for runs_root in {run_dir.parent for run_dir in RUN_DIRS}:
        reap_abandoned(runs_root)
    print(interrupted_message(), file=sys.stderr)
    return 128 + signum


# A watchdog's reaping: processes (10 s grace) and a kind cluster's deletion.
_WATCHDOG_SECONDS = 90.0


def _wait_for_watchdog(run_dir: Path) -> None:
    """Until the watchdog of a run whose owner died has finished reaping (it marks the
    ledger closed), so that what is reported left is not what it is still undoing."""
    from trainjob_conformance.kube.waits import WaitTimeout, wait_for
    from trainjob_conformance.lifecycle.ledger import CLOSED, DETACHED, LEDGER_FILE, ProcessLedger

    ledger = ProcessLedger(run_dir / LEDGER_FILE)
    if not ledger.path.exists():
        return
    with contextlib.suppress(WaitTimeout):
        wait_for(
            f"the watchdog of {run_dir} to finish",
            lambda: ledger.owner_alive() or ledger.state in (CLOSED, DETACHED),
            timeout=_WATCHDOG_SECONDS,
            interval=0.2,
        )


def interrupted_message() -> str:
    """What the interruption left, checked, never assumed."""
    from trainjob_conformance.cluster.registry import leftovers
    from trainjob_conformance.lifecycle.processes import still_running

    left = {run_dir: still_running(run_dir) + leftovers(run_dir) for run_dir in RUN_DIRS}
    left = {run_dir: names for run_dir, names in left.items() if names}
    if not left and not GROUPS_LEFT:
        return "trainjob-conformance: interrupted; nothing it started is still running"
    lines = ["trainjob-conformance: interrupted; still running:"]
    for run_dir, names in left.items():
        lines.append(f"  {', '.join(names)}: trainjob-conformance down --run-dir {run_dir}")
    for pgid in GROUPS_LEFT:
        lines.append(f"  pytest's workers, process group {pgid}: kill -KILL -- -{pgid}")
    return "\n".join(lines)
