"""A private network namespace for a manager that cannot be told to bind loopback.

Some releases (Trainer v2.0.x, training-operator v1.9.x) give their webhook
server a port and no host, so it listens on every interface. The harness runs
such a manager in a network namespace of its own, where "every interface" is
one loopback device that nothing outside can reach, and bridges exactly the
paths it needs through Unix sockets in the run directory:

    outbound (the manager reaches the API server):
        netns 127.0.0.1:P --unix out-P.sock--> host 127.0.0.1:P
    inbound (the API server reaches the webhook; the harness reads readiness):
        host 127.0.0.1:Q --unix in-Q.sock--> netns 127.0.0.1:Q

The same port number is used on both sides, so the manager's kubeconfig and
the webhook configurations are the ones every other manager uses. Two
forwarder processes (`cluster/isolation/forward.py`) do the bridging: one inside the
namespace, which also holds it (`unshare --net`), and one on the host; the
manager joins the namespace with `nsenter`. All three are in the run's ledger,
so the watchdog stops them with the rest.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.kube.waits import wait_for
from trainjob_conformance.lifecycle.processes import HostProcess, RunOwnership
from trainjob_conformance.ports import LOOPBACK

_READY_TIMEOUT = 20.0
_FORWARDER = [sys.executable, "-m", "trainjob_conformance.cluster.isolation.forward"]


def require_namespaces(why: str) -> None:
    """One line saying what is missing when private namespaces cannot be made here."""
    if os.geteuid() != 0:
        raise ConformanceError(
            f"{why}; the harness runs it in a private network namespace, which needs root "
            "(as on CI runners): run as root, or use a newer release"
        )
    missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
    if missing:
        raise ConformanceError(
            f"{why}; the harness needs {' and '.join(missing)} (util-linux) on PATH to isolate it"
        )


@dataclass
class NetnsBridge:
    """The namespace of one manager and the two forwarders that bridge it."""

    name: str
    directory: Path
    owner: RunOwnership
    outbound: tuple[int, ...]  # host loopback ports the manager may reach
    inbound: tuple[int, ...]  # namespace ports the host may reach
    processes: list[HostProcess] = field(default_factory=list)

    @property
    def socket_dir(self) -> Path:
        return self.directory / "netns"

    def _routes(self) -> tuple[list[str], list[str]]:
        inside, host = [], []
        for port in self.outbound:
            inside.append(f"tcp:{LOOPBACK}:{port}=unix:out-{port}.sock")
            host.append(f"unix:out-{port}.sock=tcp:{LOOPBACK}:{port}")
        for port in self.inbound:
            inside.append(f"unix:in-{port}.sock=tcp:{LOOPBACK}:{port}")
            host.append(f"tcp:{LOOPBACK}:{port}=unix:in-{port}.sock")
        return inside, host

    def start(self) -> NetnsBridge:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        inside_routes, host_routes = self._routes()
        ready = {"inside": self.socket_dir / "inside.ready", "host": self.socket_dir / "host.ready"}
        for marker in ready.values():
            marker.unlink(missing_ok=True)
        holder = ["unshare", "--net", *_FORWARDER, "--loopback-up"]
        inside = HostProcess(
            f"{self.name}-netns-forwarder",
            [*holder, "--ready", ready["inside"].name, *inside_routes],
            self.directory / "netns-forwarder.log",
            cwd=self.socket_dir,
            owner=self.owner,
        )
        host = HostProcess(
            f"{self.name}-host-forwarder",
            [*_FORWARDER, "--ready", ready["host"].name, *host_routes],
            self.directory / "host-forwarder.log",
            cwd=self.socket_dir,
            owner=self.owner,
        )
        for process in (inside, host):
            self.processes.append(process.start())

        def both_ready() -> bool:
            for process in self.processes:
                process.ensure_running()
            return all(marker.exists() for marker in ready.values())

        wait_for(
            f"the {self.name} network namespace and its forwarders",
            both_ready,
            timeout=_READY_TIMEOUT,
            diagnostics=lambda: "\n".join(p.log_tail(10) for p in self.processes),
        )
        return self

    def enter(self) -> list[str]:
        """The command prefix that runs a program inside the namespace."""
        holder = self.processes[0]
        holder.ensure_running()
        return ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "--"]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
