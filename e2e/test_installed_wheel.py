"""The harness installed as a user installs it: a wheel in a fresh venv, run
from a directory outside the checkout, against this run's cluster.

The new venv finds the harness's dependencies through a path line to the
project venv's site-packages (no download in a test); the harness itself comes
only from the wheel, which is checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.harness

REPO = Path(__file__).resolve().parents[1]


def _sh(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the venv's bin directory, an environment without the checkout, a work directory)."""
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("runs from the checkout, which builds the wheel")
    base = tmp_path_factory.mktemp("user")
    wheels = base / "wheels"
    _sh(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(REPO),
        ],
        cwd=base,
        env=dict(os.environ),
    )
    (wheel,) = wheels.glob("trainjob_conformance-*.whl")
    venv = base / "venv"
    _sh([sys.executable, "-m", "venv", str(venv)], cwd=base, env=dict(os.environ))
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Dependencies from the project venv; appended after the venv's own site-packages,
    # and its .pth files (the checkout's editable install) are not processed.
    (site / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(
        [str(venv / "bin"), *(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)]
    )
    _sh(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        base,
        env,
    )
    work = base / "anywhere"
    work.mkdir()
    return venv / "bin", env, work


def test_the_wheel_carries_the_suite_and_says_its_version(installed):
    bin_dir, env, work = installed
    out = _sh([str(bin_dir / "trainjob-conformance"), "--version"], work, env)
    assert out.startswith("trainjob-conformance 0."), out
    where = _sh(
        [
            str(bin_dir / "python"),
            "-c",
            "import trainjob_conformance.paths as p; s = p.require_suite(); print(s.root)",
        ],
        work,
        env,
    ).strip()
    assert "site-packages" in where and str(REPO) not in where, where
    # The upstream-fix list, which the report's summary and `outdated` read.
    figure = _sh([str(bin_dir / "python"), "-m", "trainjob_conformance.policies.fixes"], work, env)
    assert figure.splitlines()[-1].startswith("total: "), figure
    rendered = _sh(
        [
            str(bin_dir / "trainjob-conformance"),
            "render",
            "trainjob",
            "--values",
            '{"name": "a", "namespace": "n"}',
        ],
        work,
        env,
    )
    assert "kind: TrainJob" in rendered


def test_the_installed_harness_runs_against_a_cluster_and_archives_the_run(
    installed, trainjob_cluster
):
    bin_dir, env, work = installed
    report = work / "reports"
    out = _sh(
        [
            str(bin_dir / "trainjob-conformance"),
            "run",
            "--cluster",
            "existing",
            "--kubeconfig",
            str(trainjob_cluster.kubeconfig),
            "--profile",
            trainjob_cluster.profile,
            "--report",
            str(report),
            "-n",
            "0",
            "--",
            "-k",
            "naming_missing_runtime",
        ],
        work,
        env,
    )
    assert "TJ-STACK-002" in out and "pass" in out, out
    archive = report / f"{trainjob_cluster.profile}-results.tar.gz"
    with tarfile.open(archive) as opened:
        names = opened.getnames()
    assert "trainjob-conformance-results/catalog/policies.yaml" in names, names
    assert "trainjob-conformance-results/meta/command.txt" in names, names
    shown = _sh([str(bin_dir / "trainjob-conformance"), "report", str(archive)], work, env)
    assert "conformance.html" in shown


def test_the_plugin_runs_a_users_own_pack_without_the_checkout(installed, trainjob_cluster):
    bin_dir, env, work = installed
    repo = work / "platform-policies"
    shutil.copytree(REPO / "examples" / "queue-required", repo / "queue-required")
    out = _sh(
        [
            str(bin_dir / "python"),
            "-m",
            "pytest",
            "queue-required",
            "-p",
            "no:cacheprovider",
            "--trainjob-cluster",
            "existing",
            "--trainjob-kubeconfig",
            str(trainjob_cluster.kubeconfig),
            "--trainjob-pack",
            "queue-required",
        ],
        repo,
        env,
    )
    assert "2 passed" in out, out
