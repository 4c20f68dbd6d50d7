"""A reproduction bundle shows its gap on a real cluster, and stops showing it once fixed.

The harness records the gap's test on this run's cluster, `repro` writes the
bundle from that record, and its repro.sh runs with kubectl alone: REPRODUCED
on the cluster as it is; NOT REPRODUCED once the bundle's stand-in fix (an
admission policy that enforces the policy) is applied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainjob_conformance.stack.gobuild import binary_path

pytestmark = pytest.mark.harness

# Each gap with its test and the component the cluster must run for it.
GAPS = {
    "TO-MB-004": ("test_managed_by_is_immutable_in_the_webhooks_words", "training-operator"),
    "TJ-EDIT-007": (
        "test_gate_removed_while_suspended_is_gone_from_the_pods_after_resume",
        "trainer",
    ),
}


def _kubectl(versions: dict[str, str]) -> str:
    built = binary_path("kubernetes", versions.get("kubernetes", ""), "kubectl")
    found = str(built) if built.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.skip("repro.sh needs kubectl: none on PATH and none built for this Kubernetes")
    return found


def _harness(*args: str, cwd: Path) -> str:
    command = [sys.executable, "-m", "trainjob_conformance.cli", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _repro(bundle: Path, kubeconfig: Path, kubectl: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECTL": kubectl, "REPRO_TIMEOUT": "60"}
    return subprocess.run(
        [str(bundle / "repro.sh"), str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )


@pytest.mark.parametrize("policy", sorted(GAPS))
def test_the_bundle_reproduces_the_gap_and_not_its_stand_in_fix(trainjob_cluster, tmp_path, policy):
    test, component = GAPS[policy]
    if component not in trainjob_cluster.versions:
        pytest.skip(f"{policy} is about {component}, which this cluster does not run")
    kubeconfig = trainjob_cluster.kubeconfig
    profile = trainjob_cluster.profile
    kubectl = _kubectl(trainjob_cluster.versions)
    reports, bundle = tmp_path / "reports", tmp_path / "bundle"
    _harness(
        "run", "--cluster", "existing", "--kubeconfig", str(kubeconfig), "--profile", profile,
        "--report", str(reports), "-n", "0", "--", "-k", test,
        cwd=tmp_path,
    )  # fmt: skip
    _harness(
        "repro", policy, "--profile", profile, "--results", str(reports), "--out", str(bundle),
        cwd=tmp_path,
    )  # fmt: skip

    clean = _repro(bundle, kubeconfig, kubectl)
    assert clean.returncode == 0, f"{clean.stdout}\n{clean.stderr}"
    assert f"\nREPRODUCED: {policy}" in clean.stdout, clean.stdout

    # Applied, and in effect once its canary answers (the script waits for that).
    env = {**os.environ, "KUBECTL": kubectl}
    applied = subprocess.run(
        [str(bundle / "apply-stand-in-fix.sh"), str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
    )
    fix = [
        kubectl,
        "--kubeconfig",
        str(kubeconfig),
        "delete",
        "-f",
        str(bundle / "stand-in-fix.yaml"),
    ]
    try:
        assert applied.returncode == 0, f"{applied.stdout}\n{applied.stderr}"
        fixed = _repro(bundle, kubeconfig, kubectl)
    finally:
        subprocess.run([*fix, "--ignore-not-found"], check=True, capture_output=True)
    assert fixed.returncode == 1, f"{fixed.stdout}\n{fixed.stderr}"
    assert "\nNOT REPRODUCED: " in fixed.stdout, fixed.stdout
