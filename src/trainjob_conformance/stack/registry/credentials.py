"""Registry credentials, from the Docker config and nowhere else.

Docker reads `$DOCKER_CONFIG/config.json` when DOCKER_CONFIG is set and
`~/.docker/config.json` otherwise; so does the harness (the oras client alone
would read only the second). The environment variables oras would otherwise
take a password from (ORAS_USER, ORAS_PASS) and ~/.netrc are never read, so
what `docker login` wrote is the one place credentials come from, and no
command line or log ever carries them.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from trainjob_conformance.errors import ConformanceError

DOCKER_CONFIG_ENV = "DOCKER_CONFIG"
WHERE = "$DOCKER_CONFIG/config.json, else ~/.docker/config.json"


def docker_config_path() -> Path:
    explicit = os.environ.get(DOCKER_CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser() / "config.json"
    return Path.home() / ".docker" / "config.json"


def _hostname(key: str) -> str:
    """The host a config key names: Docker accepts `https://host:port/v2/` as well as `host:port`."""
    if "://" in key:
        return urlsplit(key).netloc or key
    return key.split("/", 1)[0]


def oras_auth_config() -> dict[str, Any]:
    """The Docker config in the shape oras's auth backend reads (auths by host name,
    the credential store and helpers, which run as Docker runs them).

    Never empty: oras would load ~/.docker/config.json itself into an empty one.
    """
    path = docker_config_path()
    config: dict[str, Any] = {}
    if path.is_file():
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ConformanceError(
                f"the Docker config {path} cannot be read ({error.__class__.__name__}): "
                "fix or remove it; registry credentials are read from it"
            ) from None
        if not isinstance(config, dict):
            raise ConformanceError(f"the Docker config {path} is not a JSON object: fix it")
    auths: dict[str, dict[str, Any]] = {}
    for key, entry in (config.get("auths") or {}).items():
        if not isinstance(entry, dict):
            continue
        entry = dict(entry)
        if not entry.get("auth") and entry.get("username") and entry.get("password"):
            pair = f"{entry['username']}:{entry['password']}".encode()
            entry["auth"] = base64.b64encode(pair).decode()
        auths[_hostname(str(key))] = entry
    return {
        "auths": auths,
        "credsStore": config.get("credsStore"),
        "credHelpers": dict(config.get("credHelpers") or {}),
    }


def login_hint(host: str) -> str:
    """How to give the harness credentials for `host`, never showing any."""
    return (
        f"credentials are read from the Docker config ({WHERE}; now {docker_config_path()}): "
        f"log in with `docker login {host}` (or `oras login {host}`), which writes them there"
    )
