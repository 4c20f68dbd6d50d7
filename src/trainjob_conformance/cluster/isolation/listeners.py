"""Which TCP sockets a run's processes listen on, and in which network namespace.

Read from /proc: a process's socket inodes (`/proc/PID/fd`), the listening
sockets of its network namespace (`/proc/PID/net/tcp`, `tcp6`, state 0A) and
that namespace's interfaces (`/proc/PID/net/dev`); the processes below the
given ones come from psutil. The rule the harness keeps:
in the host's network namespace nothing listens beyond loopback; a process in
a namespace of its own may listen on any address there, provided the
namespace has no interface but `lo`, so nothing outside can reach it.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    pid: int
    name: str
    address: str
    port: int
    netns: str

    @property
    def loopback(self) -> bool:
        address = ipaddress.ip_address(self.address)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        return address.is_loopback

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.name} (pid {self.pid}) on {host}:{self.port}"


def _hex_address(text: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_listening(table: str) -> dict[int, tuple[str, int]]:
    """Inode -> (address, port) of the listening sockets in one /proc/net/tcp{,6} text."""
    found = {}
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        address, port = fields[1].split(":")
        found[int(fields[9])] = (_hex_address(address), int(port, 16))
    return found


def parse_interfaces(dev: str) -> list[str]:
    """Interface names in a /proc/net/dev text."""
    return [line.split(":", 1)[0].strip() for line in dev.splitlines()[2:] if ":" in line]


def _read(path: str) -> str:
    try:
        with open(path) as source:
            return source.read()
    except OSError:
        return ""


def netns_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for entry in entries:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{entry}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def listeners_of(pid: int, name: str) -> list[Listener]:
    # /proc/PID/net/tcp{,6}, not psutil's net_connections(): psutil reads
    # /proc/net/tcp{,6}, the tables of the caller's network namespace, so it
    # misses the listeners of a manager in a namespace of its own; the tables
    # under /proc/PID/net are those of PID's namespace.
    netns = netns_of(pid)
    inodes = _socket_inodes(pid)
    found = []
    for table in ("tcp", "tcp6"):
        for inode, (address, port) in parse_listening(_read(f"/proc/{pid}/net/{table}")).items():
            if inode in inodes:
                found.append(Listener(pid, name, address, port, netns))
    return found


def descendants(pids: Iterable[int]) -> set[int]:
    """`pids` and every process below them (children a forwarder or launcher forked)."""
    found = set()
    for pid in pids:
        found.add(pid)
        try:
            found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # gone (or not ours to read): the pid itself stays, as audit() expects
    return found


@dataclass
class ListenerAudit:
    """Every listener of the given processes, judged against the loopback rule."""

    host_netns: str
    listeners: list[Listener] = field(default_factory=list)
    # netns -> its interfaces, for every private namespace a process is in
    private: dict[str, list[str]] = field(default_factory=dict)

    @property
    def violations(self) -> list[str]:
        found = [
            f"{listener} listens beyond loopback in the host's network namespace"
            for listener in self.listeners
            if listener.netns == self.host_netns and not listener.loopback
        ]
        for netns, interfaces in self.private.items():
            others = [name for name in interfaces if name != "lo"]
            if others:
                who = ", ".join(str(x) for x in self.listeners if x.netns == netns) or "no listener"
                found.append(
                    f"network namespace {netns} has interfaces {', '.join(others)} besides lo "
                    f"({who})"
                )
        return found

    def isolated(self) -> list[Listener]:
        return [x for x in self.listeners if x.netns != self.host_netns]


def audit(processes: dict[int, str]) -> ListenerAudit:
    """Judge the listeners of `processes` (pid -> name) and of their descendants."""
    result = ListenerAudit(host_netns=netns_of(os.getpid()))
    for pid in sorted(descendants(processes)):
        netns = netns_of(pid)
        if not netns:
            continue  # gone
        name = processes.get(pid) or _read(f"/proc/{pid}/comm").strip() or "?"
        if netns != result.host_netns and netns not in result.private:
            result.private[netns] = parse_interfaces(_read(f"/proc/{pid}/net/dev"))
        result.listeners.extend(listeners_of(pid, name))
    return result
