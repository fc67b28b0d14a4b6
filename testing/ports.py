"""A port a test holds: nothing else is given it or binds it while the test runs.

A port found free and released (bind port 0, close) can be taken by a test running beside this
one before the server or the client the test meant it for uses it. A held port has no such
window.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 that stays this test's while the block runs. Bound with SO_REUSEADDR
    and never listening, it refuses connections (a closed port for a client to fail on); no
    other program binding port 0 or connecting out is given it, and one binding it by number
    without SO_REUSEADDR is refused; a server the test starts on it that binds with SO_REUSEADDR
    (SeaweedFS, the demo's proxy, Jupyter) gets it, as often as the test starts one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]
