"""Questions for the Go module proxy: does a release exist, which releases are there.

The same proxy `go` builds from (GOPROXY), asked over its plain HTTP protocol
(https://go.dev/ref/mod#goproxy-protocol), so a check never downloads a module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.stack.components import COMPONENTS
from trainjob_conformance.stack.gobuild import binary_path
from trainjob_conformance.stack.profiles import Profile

DEFAULT_PROXY = "https://proxy.golang.org"
_TIMEOUT = 15.0
_RELEASE = re.compile(r"^v([0-9]+)\.([0-9]+)\.([0-9]+)$")


class ProxyUnreachable(ConformanceError):
    """No answer at all (DNS, connection, timeout): no module can be judged."""


@dataclass(frozen=True)
class Answer:
    status: int
    text: str

    def detail(self) -> str:
        first = self.text.strip().splitlines()[0] if self.text.strip() else "no message"
        return f"{self.status}: {first[:160]}"


def _configured() -> str:
    """GOPROXY as `go` sees it: the environment, else `go env` (its config file)."""
    value = os.environ.get("GOPROXY")
    if value is None and shutil.which("go"):
        result = subprocess.run(
            ["go", "env", "GOPROXY"], capture_output=True, text=True, check=False
        )
        value = result.stdout.strip() if result.returncode == 0 else None
    return value or DEFAULT_PROXY


def proxy_url() -> str:
    """The first proxy GOPROXY names; `direct` and `off` name no proxy to ask."""
    configured = _configured()
    for entry in re.split(r"[,|]", configured):
        entry = entry.strip()
        if entry == "off":
            break
        if entry.startswith(("https://", "http://")):
            return entry.rstrip("/")
    raise ConformanceError(
        f"GOPROXY={configured} names no module proxy to ask; set GOPROXY={DEFAULT_PROXY} "
        "(or your mirror)"
    )


def escape(path: str) -> str:
    """The proxy protocol's case encoding: an upper-case letter becomes `!` and lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


def ask(module: str, what: str) -> Answer:
    """GET <proxy>/<module>/@v/<what>; an answer of any status, or ProxyUnreachable."""
    base = proxy_url()
    url = f"{base}/{escape(module)}/@v/{escape(what)}"
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT) as response:
            return Answer(response.status, response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or error
        raise ProxyUnreachable(
            f"cannot reach the Go module proxy {base} ({reason}); check the network or GOPROXY"
        ) from None


def require_release(module: str, version: str) -> None:
    """Refuse, in one line, a version the proxy does not serve."""
    answer = ask(module, f"{version}.info")
    if answer.status == 200:
        return
    if answer.status >= 500:
        raise ConformanceError(
            f"the Go module proxy {proxy_url()} failed on {module}@{version} "
            f"({answer.detail()}); try again later"
        )
    raise ConformanceError(
        f"the Go module proxy {proxy_url()} has no {module}@{version} ({answer.detail()}); "
        "check the release tag upstream"
    )


def release_key(version: str) -> tuple[int, int, int]:
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"{version} is not a release vX.Y.Z")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch)


def releases(module: str) -> list[str] | Answer:
    """The module's releases, oldest first (pre-releases and pseudo-versions left out),
    or the proxy's answer when it would not list them."""
    answer = ask(module, "list")
    if answer.status != 200:
        return answer
    found = {line.strip() for line in answer.text.splitlines() if _RELEASE.match(line.strip())}
    return sorted(found, key=release_key)


def require_overrides(profile: Profile) -> None:
    """Each release a composed profile asks for must exist before anything is built.

    A component already in the build cache at that version was built from the
    proxy before, so it needs no question (and works offline).
    """
    for component, version in profile.overrides.items():
        binaries = COMPONENTS[component].binaries
        if all(binary_path(component, version, b).is_file() for b in binaries):
            continue
        require_release(COMPONENTS[component].module, version)
