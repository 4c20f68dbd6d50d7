"""The TLS probe of a webhook server: a refusal is a breakage at once, a silence only
once it has lasted."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainjob_conformance.cluster.health.stack_watch import tls_endpoint_probe
from trainjob_conformance.cluster.serving.certs import CertificateAuthority
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.processes import HostProcess


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose server accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        return server.getsockname()[1]


def test_a_server_that_refuses_the_connection_is_broken_at_once() -> None:
    port = closed_port()
    probe = tls_endpoint_probe("jobset webhook server", "127.0.0.1", port, lambda: "log")

    breakage = probe()

    assert breakage is not None
    assert breakage.component == "jobset webhook server"
    assert f"does not answer TLS on 127.0.0.1:{port}" in breakage.state
    assert "refused" in breakage.state
    assert breakage.log_tail == "log"


def probe_with_clock(port: int, now: list[float], tail: str = "", timeout: float = 0.05):
    """The probe of a webhook server on `port`, its clock read from now[0]."""
    return tls_endpoint_probe(
        "jobset webhook server",
        "127.0.0.1",
        port,
        lambda: tail,
        hung_after=15,
        handshake_timeout=timeout,
        clock=lambda: now[0],
    )


def test_one_handshake_that_times_out_is_not_a_breakage(silent_port: int) -> None:
    now = [100.0]
    probe = probe_with_clock(silent_port, now)

    assert probe() is None
    now[0] += 14
    assert probe() is None


def test_a_server_silent_for_the_whole_grace_is_hung(silent_port: int) -> None:
    now = [100.0]
    probe = probe_with_clock(silent_port, now, tail="tail")

    assert probe() is None
    now[0] += 15
    breakage = probe()

    assert breakage is not None
    assert breakage.state == (
        f"does not answer TLS on 127.0.0.1:{silent_port} (timed out for 15 s)"
    )
    assert breakage.log_tail == "tail"


class SometimesSilentServer:
    """A TLS server that completes each handshake only while `answering` is set."""

    def __init__(self, directory: Path) -> None:
        cert = CertificateAuthority(directory / "ca").issue_serving_cert(directory / "s", "s")
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert.cert_file, cert.key_file)
        self.answering = threading.Event()
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.port = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            if not self.answering.is_set():
                self.held.append(connection)  # accepted, never answered
                continue
            try:
                self.context.wrap_socket(connection, server_side=True).close()
            except (OSError, ssl.SSLError):
                connection.close()

    def close(self) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


def test_an_answer_between_two_silences_starts_the_grace_again(tmp_path: Path) -> None:
    server = SometimesSilentServer(tmp_path)
    now = [100.0]
    probe = probe_with_clock(server.port, now, timeout=0.2)
    try:
        assert probe() is None  # silent from 100
        now[0] += 10
        server.answering.set()
        assert probe() is None  # answered at 110
        server.answering.clear()
        assert probe() is None  # silent again from 110
        now[0] += 10
        assert probe() is None  # 10 s of this silence, not 20
        now[0] += 5
        assert probe() is not None
    finally:
        server.close()


def test_a_manager_frozen_by_sigstop_is_seen_stopped_at_once(tmp_path: Path) -> None:
    process = HostProcess("sleeper", ["sleep", "30"], tmp_path / "sleep.log").start()
    try:
        assert not process.is_stopped()
        os.kill(process.pid or 0, signal.SIGSTOP)
        wait_for("sleep to stop", process.is_stopped, timeout=5, interval=0.01)
        os.kill(process.pid or 0, signal.SIGCONT)
        wait_for("sleep to resume", lambda: not process.is_stopped(), timeout=5, interval=0.01)
    finally:
        process.stop()
