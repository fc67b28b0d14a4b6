"""The processes on this machine that serve an S3 endpoint on its loopback.

An endpoint at 127.0.0.1 (a local MinIO or SeaweedFS, and any proxy in front of it) serves from
the cores the loader runs on: its CPU per sample is part of what reading costs this machine.
The whole machine's busy cores (`host.busy_cpu_s`) already count it; a CPU quota's own group
does not, since the server runs outside it. `quota_blind_servers` names the serving processes
the trial must add under a quota: the one listening on the endpoint's port and, transitively,
the loopback listeners it connects to (a proxy's upstream), found from `/proc/net/tcp{,6}` and
the processes' socket descriptors; outside the caller's own cgroup. A proxy holds its upstream
connections only while its clients hold theirs (the demo's proxy gives each client connection
its own), so an endpoint nobody reads from shows its proxy alone: `ServingScan` looks again
while the loader reads and keeps what it found.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

from advisor.measure.hardware.host import cgroup_cpu_limit

LISTEN, ESTABLISHED = "0A", "01"
HOPS = 4  # a proxy in front of a server in front of another is as deep as a chain goes here


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_port(url: str) -> int | None:
    """The TCP port of a loopback endpoint URL; None where it is not on the loopback."""
    parts = urlsplit(url)
    if not is_loopback(parts.hostname):
        return None
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def _address(field: str) -> tuple[bool, int]:
    """(on the loopback, port) of a /proc/net/tcp address such as ``0100007F:1F90``."""
    host, port = field.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address(raw[::-1])
    else:  # four little-endian 32-bit words
        words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
        ip = ipaddress.IPv6Address(words)
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified, int(port, 16)


def _tcp_sockets(root: Path) -> list[tuple[str, tuple[bool, int], tuple[bool, int], int]]:
    """(state, local, remote, inode) of every TCP socket, v4 and v6."""
    sockets = []
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (root / "proc/net" / name).read_text().splitlines()[1:]:
                fields = line.split()
                with contextlib.suppress(ValueError, IndexError):
                    local, remote = _address(fields[1]), _address(fields[2])
                    sockets.append((fields[3], local, remote, int(fields[9])))
    return sockets


def _socket_owners(root: Path) -> dict[int, int]:
    """Socket inode -> the process holding it, over every process this user can read."""
    owners: dict[int, int] = {}
    for entry in os.listdir(root / "proc"):
        if not entry.isdigit():
            continue
        fds = root / "proc" / entry / "fd"
        with contextlib.suppress(OSError):
            for fd in os.listdir(fds):
                with contextlib.suppress(OSError):
                    link = os.readlink(fds / fd)
                    if link.startswith("socket:["):
                        owners[int(link[8:-1])] = int(entry)
    return owners


def serving_processes(url: str | None, root: Path = Path("/")) -> frozenset[int]:
    """The processes serving `url` on this machine's loopback (none for a remote endpoint):
    its port's listener, then the loopback listeners those connect to, HOPS deep."""
    port = endpoint_port(url) if url else None
    if port is None:
        return frozenset()
    sockets = _tcp_sockets(root)
    owners = _socket_owners(root)
    listeners: dict[int, set[int]] = {}
    for state, (local_loop, local_port), _, inode in sockets:
        if state == LISTEN and local_loop and inode in owners:
            listeners.setdefault(local_port, set()).add(owners[inode])
    found = set(listeners.get(port, set())) - {os.getpid()}
    edge = set(found)
    for _ in range(HOPS):
        upstream = set()
        for state, _, (remote_loop, remote_port), inode in sockets:
            if state == ESTABLISHED and remote_loop and owners.get(inode) in edge:
                upstream |= listeners.get(remote_port, set())
        edge = upstream - found - {os.getpid()}
        if not edge:
            break
        found |= edge
    return frozenset(found)


def _cgroup_of(pid: int | str, root: Path) -> str | None:
    with contextlib.suppress(OSError):
        return (root / f"proc/{pid}/cgroup").read_text()
    return None


def quota_blind_servers(url: str | None, root: Path = Path("/")) -> frozenset[int]:
    """Under a CPU quota, the processes serving `url` on the loopback that the quota's group
    does not hold (their CPU is the loading's, and the group's reading misses it); none
    without a quota, where the busy cores count them already."""
    if cgroup_cpu_limit(root) is None:
        return frozenset()
    mine = _cgroup_of("self", root)
    return frozenset(p for p in serving_processes(url, root) if _cgroup_of(p, root) != mine)


class ServingScan:
    """The quota-blind servers of one endpoint (`quota_blind_servers`), as found so far: each
    `scan()`, taken while the loader reads, adds what serves it then, and nothing found is
    dropped, so the CPU counted between two readings of `found` is over one set of processes."""

    def __init__(self, url: str | None, root: Path = Path("/")) -> None:
        self.url = url
        self.root = root
        self.found: frozenset[int] = frozenset()

    def scan(self) -> frozenset[int]:
        if endpoint_port(self.url or "") is not None:
            self.found |= quota_blind_servers(self.url, self.root)
        return self.found
