"""scripts/steps.sh: a foreground step of ./scripts/test stops at once on Ctrl-C and
on a SIGTERM sent to the script alone, and its exit status passes through."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.interrupts import default_ctrl_c
from trainjob_conformance.kube.waits import wait_for

pytestmark = pytest.mark.harness

STEPS = Path(__file__).resolve().parents[1] / "scripts" / "steps.sh"
# A step that says when it runs, and writes which signal stopped it.
STEP = """
import pathlib, signal, sys, time
here = pathlib.Path(sys.argv[1])
def stopped(number, frame):
    (here / "stopped-by").write_text(signal.Signals(number).name)
    sys.exit(1)
signal.signal(signal.SIGTERM, stopped)
(here / "running").write_text("")
time.sleep(60)
"""


def script(tmp_path: Path, step: str) -> Path:
    path = tmp_path / "script.sh"
    path.write_text(
        "set -euo pipefail\n"
        f"source {STEPS}\n"
        "trap interrupted INT TERM\n"
        f"{step}\n"
        "echo after the step\n"
    )
    return path


def started_step(tmp_path: Path) -> subprocess.Popen[str]:
    (tmp_path / "step.py").write_text(STEP)
    path = script(tmp_path, f'run_step {sys.executable} "{tmp_path}/step.py" "{tmp_path}"')
    # As a terminal starts it: a shell started with SIGINT ignored cannot trap it.
    process = subprocess.Popen(
        ["bash", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_ctrl_c,
    )
    wait_for("the step to run", lambda: (tmp_path / "running").exists(), timeout=20, interval=0.05)
    return process


@pytest.mark.parametrize(
    "send",
    [
        pytest.param(lambda p: p.send_signal(signal.SIGTERM), id="SIGTERM-to-the-script-alone"),
        pytest.param(lambda p: os.killpg(p.pid, signal.SIGINT), id="Ctrl-C-to-the-group"),
    ],
)
def test_a_signal_stops_the_running_step_at_once_and_the_script_with_130(tmp_path, send):
    process = started_step(tmp_path)
    sent = time.monotonic()
    send(process)
    try:
        code = process.wait(timeout=20)
    finally:  # a script that did not stop leaves nothing behind
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert (code, process.stdout.read()) == (130, "")
    # The step was told (SIGTERM: a background job ignores SIGINT) and did not run out.
    assert (tmp_path / "stopped-by").read_text() == "SIGTERM"
    assert time.monotonic() - sent < 10


def test_a_steps_exit_status_is_the_scripts_to_keep(tmp_path):
    path = script(tmp_path, "code=0; run_step sh -c 'exit 3' || code=$?; echo \"step $code\"")
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=20)
    assert (done.returncode, done.stdout) == (0, "step 3\nafter the step\n")
