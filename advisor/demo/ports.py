"""Ports on 127.0.0.1 for the demo's servers: picked free, and who listens on them.

A port found free by binding port 0 and closing the socket is free only until something else
binds it: a test running beside it, a second demo, any program. `free_ports` narrows that
window: it leaves each port it returns in TIME_WAIT, and for about a minute the kernel gives
such a port to no one binding port 0 and to no outgoing connection, while a server that binds
it by number with SO_REUSEADDR still can (SeaweedFS and any Go server, asyncio, tornado/Jupyter,
nginx and Python's http.server all set it). Something that binds that very number can still
take it, so a server started on picked ports checks that it listens on them (`listeners`) and
picks again if not (`advisor.demo.server`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable

HOST = "127.0.0.1"
LISTEN = "0A"  # a socket's state in /proc/net/tcp


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1, for servers that bind with SO_REUSEADDR;
    each is left in TIME_WAIT, out of reach of other programs' port 0 for about a minute."""
    listeners: list[socket.socket] = []
    try:
        for _ in range(count):  # held open together so that they differ
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, 0))
            listener.listen(1)
        ports = [listener.getsockname()[1] for listener in listeners]
        for listener in listeners:
            _leave_in_time_wait(listener)
        return ports
    finally:
        for listener in listeners:
            listener.close()


def _leave_in_time_wait(listener: socket.socket) -> None:
    """Connect to `listener` and close the accepted end first: that end, on the listener's
    port, stays in TIME_WAIT. Best effort: the port is free either way."""
    with contextlib.suppress(OSError):
        listener.settimeout(1.0)
        with socket.create_connection(listener.getsockname(), timeout=1.0):
            accepted, _ = listener.accept()
            accepted.close()


def listeners(ports: Iterable[int], pid: int | None) -> tuple[set[int], set[int]] | None:
    """Of `ports`, those process `pid` listens on and those another process listens on, on any
    address (a server on 127.0.0.1 cannot have a port held on 0.0.0.0); with `pid` None, every
    listener is another's. None where /proc cannot tell (not Linux, or `pid` unreadable)."""
    wanted, listening = set(ports), dict[str, int]()  # socket inode -> port
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            if table.endswith("6") and not os.path.exists(table):
                continue  # no IPv6 on this machine
            with open(table) as rows:
                for row in list(rows)[1:]:
                    fields = row.split()
                    port = int(fields[1].rsplit(":", 1)[1], 16)
                    if fields[3] == LISTEN and port in wanted:
                        listening[fields[9]] = port
        own = _socket_inodes(pid) if pid is not None else set()
    except (OSError, ValueError, IndexError):
        return None
    mine = {port for inode, port in listening.items() if inode in own}
    return mine, set(listening.values()) - mine


def _socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` has open (`socket:[inode]` in /proc/PID/fd)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed since the listing
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    return inodes
