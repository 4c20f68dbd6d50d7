"""Loopback ports: every listener the harness starts is on 127.0.0.1."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
# Ports are picked here and bound by a manager or forwarder a moment later.
# Inside the kernel's ephemeral range, any outgoing connection on the machine
# (the readiness polls alone open many) can take the port in between; kwokctl
# counts its own ports down from 32767. So picks come from below both.
_LOWEST = 20000
_HIGHEST = 32000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


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
    highest = _highest()
    if highest > _LOWEST:
        for _ in range(500):
            port = random.randint(_LOWEST, highest)
            if _bindable(port):
                return port
    # No room below the ephemeral range on this machine: let the kernel choose.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])
