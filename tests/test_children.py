"""The pytest children of prove, soak and compat (prove/runner.Children): an
interruption of the process waiting on one stops that child before it goes on."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import pytest

from tests.interrupts import python_ctrl_c
from trainjob_conformance.lifecycle.interrupts import process_exiting
from trainjob_conformance.prove.runner import Children

pytestmark = pytest.mark.harness

SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"


def test_an_interrupted_wait_stops_and_waits_for_its_child(tmp_path: Path):
    pid_file = tmp_path / "pid"
    children = Children()
    main = threading.main_thread().ident
    assert main is not None

    def interrupt_once_started() -> None:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            threading.Event().wait(0.05)
        # A real signal, as a CI runner's SIGTERM or Ctrl-C: it interrupts the wait.
        signal.pthread_kill(main, signal.SIGINT)

    with python_ctrl_c():
        threading.Thread(target=interrupt_once_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            children.run([sys.executable, "-c", SLEEPER, str(pid_file)], tmp_path / "log")

    assert process_exiting(int(pid_file.read_text()))
    assert children.running == set() and children.stopping
