"""Loopback ports: every listener the harness starts is on 127.0.0.1."""

from __future__ import annotations

import atexit
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

LOOPBACK = "127.0.0.1"
# Ports are picked here and bound by a manager or forwarder a moment later.
# Inside the kernel's ephemeral range, any outgoing connection on the machine
# (the readiness polls alone open many) can take the port in between; kwokctl
# counts its own ports down from 32767. So picks come from below both.
_LOWEST = 20000
_HIGHEST = 32000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Every port handed out by this process: two picks made before either is bound
# would both pass the bind check (a MultiKueue worker cluster's JobSet health
# port and its Kueue webhook port once came out the same).
_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()
# The harness's other processes on the machine pick from the same range (a lane's
# clusters beside prove's and kind's): a port one of them picked and has not bound
# yet passes the bind check here too (a MultiKueue worker's Trainer once exited on
# "address already in use" for its webhook port). So each pick is claimed machine-wide
# by a file named after the port, holding the claimer's pid, while that process lives.
_CLAIMS = Path(tempfile.gettempdir()) / "trainjob-conformance-ports"
# kwokctl picks its own ports (counting down from 32767) and binds them while its
# create runs, so creates are serialized machine-wide, under a lock kept beside the
# claims, not in a build cache: `./scripts/test` runs `prove` from a cache of its
# own beside the lanes, and two locks let two creates pick the same port (an etcd
# that exited on "bind: address already in use", 2026-11-29).
KWOKCTL_CREATE_LOCK = Path(tempfile.gettempdir()) / "trainjob-conformance-kwokctl-create.lock"


def _highest() -> int:
    try:
        ephemeral_low = int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _HIGHEST
    return min(_HIGHEST, ephemeral_low - 1)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing listens on and this process has not handed out before."""
    with _HANDING_OUT:
        port = _pick()
        _HANDED_OUT.add(port)
        return port


def _pick() -> int:
    highest = _highest()
    if highest > _LOWEST:
        for _ in range(500):
            port = random.randint(_LOWEST, highest)
            if port not in _HANDED_OUT and _bindable(port) and _claim(port):
                return port
    # No room below the ephemeral range on this machine: let the kernel choose.
    for _ in range(500):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            return port
    raise OSError("no free loopback port left to hand out")


def _claimer_alive(claim: Path) -> bool:
    try:
        pid = int(claim.read_text())
    except (OSError, ValueError):
        return True  # being written by its claimer (or unreadable: left alone)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process, alive
    return True


_SWEPT: set[Path] = set()


def _sweep(claims: Path) -> None:
    """Once per process: remove the claims whose process is gone (one killed, or one
    that ended without running its exit handlers, as a pytest-xdist worker does)."""
    if claims in _SWEPT:
        return
    _SWEPT.add(claims)
    for claim in claims.iterdir():
        if not _claimer_alive(claim):
            claim.unlink(missing_ok=True)


def _claim(port: int) -> bool:
    """Claim `port` for this process, unless a living harness process has; a claim
    whose process is gone is taken over. A reused pid only makes a port skipped."""
    _CLAIMS.mkdir(parents=True, exist_ok=True)
    _sweep(_CLAIMS)
    claim = _CLAIMS / str(port)
    for _ in range(2):
        try:
            descriptor = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _claimer_alive(claim):
                return False
            claim.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as file:
            file.write(str(os.getpid()))
        atexit.register(_release, claim)
        return True
    return False


def _release(claim: Path) -> None:
    """This process's claim goes when it ends; one killed leaves it to be taken over."""
    try:
        if claim.read_text() == str(os.getpid()):
            claim.unlink()
    except OSError:
        pass
