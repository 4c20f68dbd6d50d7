"""Loopback ports: every listener the harness starts is on 127.0.0.1."""

from __future__ import annotations

import socket

from trainjob_conformance.errors import ConformanceError

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def require_free(port: int, owner: str) -> int:
    """Fail early, with the fix, when a port the user fixed is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError as error:
            raise ConformanceError(
                f"port {port} on {LOOPBACK} (for {owner}) is in use: stop what listens there "
                "or let the harness pick free ports"
            ) from error
    return port
