"""Every tox env resolves: a profile's version must not be read as a Python version."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainjob_conformance.stack.profiles import profile_names

ROOT = Path(__file__).resolve().parents[1]


def tox_envs() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "tox.ini")
    listed = [e.strip() for e in parser["tox"]["env_list"].split(",")]
    return [*listed, "matrix"]


def resolved(env: str, key: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tox", "config", "-e", env, "-k", key],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # "key = value", or "key =" followed by indented lines.
    match = re.search(rf"^{key} =(.*)", result.stdout, flags=re.MULTILINE | re.DOTALL)
    assert match, result.stdout
    return " ".join(match.group(1).split())


@pytest.mark.parametrize("env", tox_envs())
def test_each_tox_env_resolves_to_this_python(env: str) -> None:
    base = resolved(env, "base_python")
    assert not re.fullmatch(r"\d+(\.\d+)*", base), f"tox reads {env!r} as Python {base}"


def test_every_profile_has_a_tox_env() -> None:
    commands = " ".join(resolved(env, "commands") for env in tox_envs())
    for name in profile_names():
        assert f"--profile {name} --report" in commands, f"no tox env runs profile {name}"


def test_an_upgrade_has_a_tox_env() -> None:
    assert "trainjob-conformance upgrade --from trainer-2.1 --to latest" in resolved(
        "upgrade", "commands"
    )


def test_kind_an_upgrade_on_kind_and_compat_have_tox_envs() -> None:
    """A nightly job calls each by its env name, beside the profiles' envs."""
    assert "run --cluster kind --profile latest" in resolved("kind", "commands")
    assert "upgrade --cluster kind --from trainer-2.2 --to latest" in resolved(
        "upgrade-kind", "commands"
    )
    assert "trainjob-conformance compat --trainer v2.2.1,v2.3.0" in resolved("compat", "commands")
    assert {"kind", "upgrade-kind", "compat"} <= set(tox_envs())
