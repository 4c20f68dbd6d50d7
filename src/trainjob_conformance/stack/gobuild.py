"""Build upstream main packages through the Go module proxy, cached by version.

A module whose go.mod replaces siblings by relative paths (Kubernetes staging,
etcd) cannot be built with `go install pkg@version`; the harness writes a small
wrapper module that requires it and pins each of those siblings to its
published version, then runs an ordinary `go build` inside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.lifecycle.interrupts import die_with_parent
from trainjob_conformance.lifecycle.turns import one_at_a_time
from trainjob_conformance.paths import cache_root
from trainjob_conformance.progress import step
from trainjob_conformance.stack.components import (
    BUILD_ORDER,
    WRAPPER_MAIN,
    Component,
    component,
)
from trainjob_conformance.stack.profiles import Profile

_RELATIVE_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+(\.\.?/\S*)\s*$")
_GO_DIRECTIVE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ModuleInfo:
    module: str
    version: str
    source_dir: Path
    gomod_path: Path
    commit: str
    time: str


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise ConformanceError(
            "no Go toolchain on PATH: install Go >= 1.26 (https://go.dev/doc/install) "
            "so the harness can build the cluster from upstream releases"
        )
    return go


def _go_env(cgo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    if cgo:
        env["CGO_ENABLED"] = "1"
    else:
        env.setdefault("CGO_ENABLED", "0")
    # A wrapper module must be free to record the requirements it discovers.
    env["GOFLAGS"] = "-mod=mod"
    return env


def download_module(module: str, version: str) -> ModuleInfo:
    """Fetch a module into the Go module cache and say where its source is."""
    # Outside any module: run from the user's directory, `go` would honour a
    # go.mod or go.work found there.
    cache_root().mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=_go_env(),
        cwd=cache_root(),
        check=False,
    )
    try:
        data = json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        data = {}
    if result.returncode != 0 or "Error" in data or not data.get("Dir"):
        detail = data.get("Error") or result.stderr.strip() or "no output"
        raise ConformanceError(
            f"could not download {module}@{version} through the Go module proxy "
            f"(GOPROXY={os.environ.get('GOPROXY', 'default')}): {detail}. "
            "Check the network or GOPROXY and try again."
        )
    info = json.loads(Path(data["Info"]).read_text())
    origin = info.get("Origin") or {}
    return ModuleInfo(
        module=module,
        version=version,
        source_dir=Path(data["Dir"]),
        gomod_path=Path(data["GoMod"]),
        commit=str(origin.get("Hash", "")),
        time=str(info.get("Time", "")),
    )


def wrapper_gomod(component: Component, version: str, upstream_gomod: str) -> str:
    """A go.mod that requires the component and pins its relative replaces."""
    go_match = _GO_DIRECTIVE.search(upstream_gomod)
    go_version = go_match.group(1) if go_match else "1.26"
    pinned = component.replace_version(version)
    replaces = []
    for line in upstream_gomod.splitlines():
        match = _RELATIVE_REPLACE.match(line)
        # FORBIDDEN_DEPENDENCY is etcd's guard against modules it never requires.
        if match and "FORBIDDEN" not in match.group(2):
            replaces.append(f"\t{match.group(1)} => {match.group(1)} {pinned}")
    lines = [
        f"module trainjob-conformance.local/build/{component.key}",
        "",
        f"go {go_version}",
        "",
        f"require {component.module} {version}",
    ]
    if replaces:
        lines += ["", "replace (", *replaces, ")"]
    return "\n".join(lines) + "\n"


def cache_version(component_key: str, version: str) -> str:
    """The version as the cache's directory names spell it: with the variant of a
    component that builds a main of its own (`v1.14.2+plugins-1a2b3c4d`)."""
    variant = component(component_key).variant
    return f"{version}+{variant}" if variant else version


def bin_dir(component_key: str, version: str) -> Path:
    return cache_root() / "bin" / component_key / cache_version(component_key, version)


def binary_path(component_key: str, version: str, binary: str) -> Path:
    return bin_dir(component_key, version) / binary


# The linker drops the debug information (-s -w, as upstream's release builds
# do), so the compiler need not write it: about a tenth less CPU per build
# (docs/measurements.md, 2026-11-28). The machine code is the same.
_COMPILE_FLAGS = ("-gcflags=all=-dwarf=false",)

# A build yields the CPU to whatever else runs (a cluster, other tests).
_BUILD_NICENESS = 10


def _build_child() -> None:
    """For `preexec_fn`: die with the harness, and give way to other processes."""
    die_with_parent()
    os.nice(_BUILD_NICENESS)


def _run_logged(args: list[str], cwd: Path, log: Path, what: str, cgo: bool = False) -> None:
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(args)}\n")
        sink.flush()
        # go runs in a process group of its own, so that stopping it stops the
        # compilers and the linker it started too. die_with_parent covers this
        # process being SIGKILLed.
        process = subprocess.Popen(
            args,
            cwd=cwd,
            env=_go_env(cgo),
            stdout=sink,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=_build_child,
        )
        returncode = _wait_or_stop(process)
    if returncode != 0:
        raise ConformanceError(
            f"{what} failed (exit {returncode}): {_first_error(log)}; see the build log {log}"
        )


def _first_error(log: Path) -> str:
    """go's own words for the failure: its first error line after the last command, so
    that a full disk or a compile error is named in the terminal, not only in the log."""
    lines = log.read_text(errors="replace").splitlines()
    last_command = max((i for i, line in enumerate(lines) if line.startswith("$ ")), default=-1)
    said = [line.strip() for line in lines[last_command + 1 :] if line.strip()]
    errors = [line for line in said if not line.startswith("#")]
    return (errors or said or ["go said nothing"])[0][:300]


def _wait_or_stop(process: subprocess.Popen[bytes]) -> int:
    """Wait for go; on Ctrl-C or SIGTERM (raised here as KeyboardInterrupt) stop its group."""
    try:
        return process.wait()
    except BaseException:
        stop_group(process)
        raise


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process's whole group, once: only while it is not yet reaped.

    Until it is reaped, its pid (the group's id) cannot be given to another process.
    """
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _remove_abandoned_partials(target: Path) -> None:
    """Partial outputs of builds whose process is gone (killed with SIGKILL)."""
    for partial in target.parent.glob(f".{target.name}.partial-*"):
        pid = partial.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            partial.unlink(missing_ok=True)


# How long a build waits for another process's build of the same release (the
# longest compile here, Kubernetes' on a loaded machine, took about 10 minutes).
_BUILD_TURN_TIMEOUT = 1800.0


def build_component(component_key: str, version: str) -> dict[str, Path]:
    """Build every binary of one component at one version, unless cached.

    Two processes that need the same release (a background build and a run that
    starts beside it, two cells of a table) take turns: they would share a work
    directory, and the second finds the binaries the first built."""
    component_ = component(component_key)
    outputs = {b: binary_path(component_key, version, b) for b in component_.binaries}
    if all(path.is_file() for path in outputs.values()):
        return outputs
    lock = cache_root() / "locks" / f"build-{component_key}@{cache_version(component_key, version)}"
    with one_at_a_time(lock, f"the build of {component_key} {version}", _BUILD_TURN_TIMEOUT):
        if all(path.is_file() for path in outputs.values()):
            return outputs
        return _build_missing(component_key, version, outputs)


def _build_missing(component_key: str, version: str, outputs: dict[str, Path]) -> dict[str, Path]:
    component_ = component(component_key)
    go = go_binary()
    info = download_module(component_.module, version)
    keyed = cache_version(component_key, version)
    workdir = cache_root() / "work" / f"{component_key}@{keyed}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(wrapper_gomod(component_, version, info.gomod_path.read_text()))
    if component_.generated_main is not None:
        (workdir / "main.go").write_text(component_.generated_main(info.source_dir))
    # Start from upstream's go.sum: it records the hashes upstream verified,
    # including for modules the checksum database does not serve (Kueue's
    # scheduler-library pre-release), so the build checks against those.
    upstream_sum = info.source_dir / "go.sum"
    wrapper_sum = workdir / "go.sum"
    if upstream_sum.is_file() and not wrapper_sum.exists():
        wrapper_sum.write_text(upstream_sum.read_text())
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    build_date = info.time or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ldflags = " ".join(["-s", "-w", *component_.ldflags(version, info.commit, build_date)])
    outputs[next(iter(outputs))].parent.mkdir(parents=True, exist_ok=True)

    for binary, package in component_.binaries.items():
        target = outputs[binary]
        if target.is_file():
            continue
        log = logs / f"{binary}-{keyed}.log"
        # A main of the harness's own needs upstream's module, not one of its packages.
        own_main = package == WRAPPER_MAIN
        wanted = component_.module if own_main else package
        built = str(workdir / "main.go") if own_main else package
        log.write_text(f"building {built} from {component_.module}@{version}\n")
        _remove_abandoned_partials(target)
        with step(f"building {binary} {version}"):
            _run_logged([go, "get", f"{wanted}@{version}"], workdir, log, f"go get {wanted}")
            partial = target.with_name(f".{binary}.partial-{os.getpid()}")
            args = [go, "build", "-trimpath", *_COMPILE_FLAGS, "-ldflags", ldflags]
            args += ["-o", str(partial)]
            if component_.tags:
                args += ["-tags", ",".join(component_.tags)]
            try:
                _run_logged(
                    [*args, package], workdir, log, f"building {binary} {version}", component_.cgo
                )
                # The rename is atomic, so an interrupted build never leaves a
                # file under the final name.
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return outputs


def build_profile(profile: Profile) -> dict[str, Path]:
    """Build (or reuse) every binary a profile needs; returns name -> path."""
    binaries: dict[str, Path] = {}
    for key in BUILD_ORDER:
        if profile.has(key):
            binaries.update(build_component(key, profile.version(key)))
    return binaries


def module_source(component_key: str, version: str) -> Path:
    """The upstream source tree in the module cache, for manifests and CRDs."""
    return download_module(component(component_key).module, version).source_dir
