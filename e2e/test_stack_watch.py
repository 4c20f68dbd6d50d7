"""The harness's own stack watch, on a real embedded cluster of its own.

A manager that dies mid-run must turn the policy under test into ERROR,
naming the manager and how it ended, well within the wait bound, never FAIL.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from trainjob_conformance.paths import CACHE_ENV, cache_root

INNER_TEST = """
import os
import signal

import pytest

from trainjob_conformance.lifecycle.ledger import LEDGER_FILE, ProcessLedger
from trainjob_conformance.kube.kinds import JOBSET


@pytest.mark.policy("TJ-STACK-001")
def test_jobset_manager_dies_mid_policy(trainjob_view, trainjob_cluster):
    ledger = ProcessLedger(trainjob_cluster.run_dir / LEDGER_FILE)
    (manager,) = [p for p in ledger.living() if p.name == "jobset"]
    os.kill(manager.pid, signal.SIGKILL)

    trainjob_view.create_trainjob("smoke", num_nodes=1)
    trainjob_view.wait("JobSet smoke", lambda: trainjob_view.find(JOBSET, "smoke"))
"""


@pytest.fixture(scope="session")
def real_caches() -> dict[str, str]:
    """The build and Go caches, read before pytester gives each test a HOME of its own."""
    caches = {CACHE_ENV: str(cache_root())}
    for name in ("GOMODCACHE", "GOCACHE", "GOPATH"):
        found = subprocess.run(["go", "env", name], capture_output=True, text=True, check=True)
        caches[name] = found.stdout.strip()
    return caches


@pytest.mark.harness
def test_a_manager_killed_mid_policy_is_an_error_naming_it(
    real_caches, pytester, pytestconfig, tmp_path, monkeypatch
):
    root = pytestconfig.rootpath
    pytester.makepyfile(test_inner=INNER_TEST)
    # Without these the inner run, in pytester's HOME, would rebuild the stack.
    for name, value in real_caches.items():
        monkeypatch.setenv(name, value)

    result = pytester.runpytest_subprocess(
        f"--trainjob-catalog={root / 'fixtures' / 'policies.yaml'}",
        f"--trainjob-templates={root / 'templates'}",
        f"--trainjob-run-dir={tmp_path / 'run'}",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )

    result.assert_outcomes(errors=1)
    summary = result.stdout.str().split("TrainJob conformance")[-1]
    line = next(line for line in summary.splitlines() if "TJ-STACK-001" in line)
    assert line.split()[1] == "ERROR", line
    assert "the stack broke: jobset manager killed by SIGKILL" in summary, summary
    # The wait's bound is 60 s; the watch looks every 0.5 s.
    seconds = float(re.search(r"([\d.]+)s", line.split("ERROR", 1)[1]).group(1))
    assert seconds < 10, f"ERROR took {seconds}s"
