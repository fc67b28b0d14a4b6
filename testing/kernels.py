"""Jupyter kernels for tests and benchmarks, on Unix sockets instead of TCP ports.

A kernel manager picks its five TCP ports by binding to port 0 and closing the socket; the kernel
binds them a moment later. With tests running side by side, another process can take a port in
between, and the kernel dies before it answers ("Address already in use"). Unix sockets in a
folder of the caller's own have no such window.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def ipc_kernels() -> Iterator[Any]:
    """A traitlets `Config` for kernel managers (`KernelManager(config=...)`, or nbclient's
    `NotebookClient(config=...)`) that puts their channels on Unix sockets in a private folder,
    removed afterwards. The folder sits directly under the temp folder: a socket's path must stay
    under 108 bytes."""
    from traitlets.config import Config

    folder = Path(tempfile.mkdtemp(prefix="kernel-"))
    try:
        yield Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "ipc")}})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
