"""A byte forwarder between loopback TCP ports and Unix sockets.

It bridges a manager that runs in a private network namespace (see
`cluster/isolation/netns.py`) to the host: a Unix socket on the filesystem is reachable
from both namespaces, a TCP port only from its own. One process serves several
routes, each `LISTEN=TARGET` where either side is `tcp:127.0.0.1:PORT` or
`unix:PATH`. TCP listeners are refused on anything but 127.0.0.1.

Bytes only: TLS goes through untouched (the API server and the webhook servers
keep their own certificates), and a half-close is passed on, so HTTP/1.1,
watches and TLS close-notify behave as on a direct connection.

Run as `python -m trainjob_conformance.cluster.isolation.forward [--loopback-up]
--ready FILE ROUTE...`. With `--loopback-up` it first brings up `lo` (a fresh
network namespace has it down). Once every listener is bound it writes FILE,
which is what the harness waits for. Unix paths are relative to the working
directory, so a long run directory never meets the 108-byte socket path limit.

Only the standard library is used, so it starts in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


class RouteError(ValueError):
    """A route that is not `tcp:127.0.0.1:PORT` or `unix:PATH` on both sides."""


@dataclass(frozen=True)
class Endpoint:
    kind: str  # "tcp" or "unix"
    address: str  # the host for tcp, the path for unix
    port: int = 0

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        kind, _, rest = text.partition(":")
        if kind == "unix" and rest:
            return cls("unix", rest)
        if kind == "tcp":
            host, _, port = rest.rpartition(":")
            if host != LOOPBACK:
                raise RouteError(f"{text}: TCP endpoints must be on {LOOPBACK}")
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise RouteError(f"{text}: not a TCP port")
            return cls("tcp", host, int(port))
        raise RouteError(f"{text}: expected tcp:{LOOPBACK}:PORT or unix:PATH")

    def __str__(self) -> str:
        return f"tcp:{self.address}:{self.port}" if self.kind == "tcp" else f"unix:{self.address}"


@dataclass(frozen=True)
class Route:
    listen: Endpoint
    target: Endpoint

    @classmethod
    def parse(cls, text: str) -> Route:
        listen, sep, target = text.partition("=")
        if not sep:
            raise RouteError(f"{text}: a route is LISTEN=TARGET")
        return cls(Endpoint.parse(listen), Endpoint.parse(target))

    def __str__(self) -> str:
        return f"{self.listen}={self.target}"


def bring_loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _open(target: Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if target.kind == "unix":
        return await asyncio.open_unix_connection(target.address)
    return await asyncio.open_connection(target.address, target.port)


def _handler(route: Route):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await _open(route.target)
        except OSError:
            # Nothing listens behind the route (yet): the client sees a closed
            # connection, as it would see a refused one.
            writer.close()
            return
        try:
            await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))
        finally:
            for side in (writer, upstream_writer):
                side.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await side.wait_closed()

    return handle


async def _serve(route: Route) -> asyncio.Server:
    if route.listen.kind == "unix":
        path = Path(route.listen.address)
        path.unlink(missing_ok=True)
        server = await asyncio.start_unix_server(_handler(route), path=str(path))
        path.chmod(0o600)
        return server
    return await asyncio.start_server(
        _handler(route), route.listen.address, route.listen.port, reuse_address=True
    )


async def run(routes: list[Route], ready_file: Path | None) -> None:
    servers = [await _serve(route) for route in routes]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    for route in routes:
        print(f"forwarding {route}", flush=True)
    if ready_file is not None:
        ready_file.write_text(f"{os.getpid()}\n")
    await stop.wait()
    for server in servers:
        server.close()
    for route in routes:
        if route.listen.kind == "unix":
            Path(route.listen.address).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    loopback_up = "--loopback-up" in argv
    args = [a for a in argv if a != "--loopback-up"]
    ready_file = None
    if "--ready" in args:
        index = args.index("--ready")
        if index + 1 >= len(args):
            print("forward: --ready needs a file", file=sys.stderr)
            return 2
        ready_file = Path(args[index + 1])
        del args[index : index + 2]
    try:
        routes = [Route.parse(arg) for arg in args]
    except RouteError as error:
        print(f"forward: {error}", file=sys.stderr)
        return 2
    if not routes:
        print("forward: no route given (LISTEN=TARGET)", file=sys.stderr)
        return 2
    if loopback_up:
        bring_loopback_up()
    asyncio.run(run(routes, ready_file))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
