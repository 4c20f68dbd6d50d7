"""Loopback ports: every listener the harness starts is on 127.0.0.1."""

from __future__ import annotations

import random
import socket
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
            if port not in _HANDED_OUT and _bindable(port):
                return port
    # No room below the ephemeral range on this machine: let the kernel choose.
    for _ in range(500):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            return port
    raise OSError("no free loopback port left to hand out")
