"""The emulated network for benchmarks: `advisor.demo.proxy.Proxy` in a process of its own.

In the benchmark's own process the proxy's thread would compete for the GIL with the client it
measures (a DataLoader's main process, say), so it runs in a child process, at a higher priority
(nice PROXY_NICE, when allowed) than the clients: it stands for the network, so it must not queue
behind the client it measures.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from testing import die_with_parent

REPO = Path(__file__).resolve().parent.parent
PROXY_NICE = -10

_PROXY_MAIN = """
import sys
from advisor.demo.proxy import NetworkProfile, Proxy
network = NetworkProfile(latency_ms=float(sys.argv[2]), bandwidth_mbps=float(sys.argv[3]))
with Proxy(sys.argv[1], network=network) as proxy:
    print(proxy.url, flush=True)
    sys.stdin.read()  # serve until the parent closes stdin (or dies: PR_SET_PDEATHSIG)
"""


def raise_priority(pid: int) -> None:
    """Give a server process (SeaweedFS, nginx) the proxy's priority, when allowed.

    On Linux a nice value belongs to a thread: `setpriority` on the process id alone renices its
    first thread, and a Go server such as SeaweedFS runs its goroutines on the others, so every
    thread is reniced (threads it starts later inherit the value from the thread that starts
    them)."""
    tasks = Path(f"/proc/{pid}/task")
    threads = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [pid]
    for thread in threads:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, thread, PROXY_NICE)


@contextlib.contextmanager
def proxy_process(upstream: str, latency_ms: float, bandwidth_mbps: float = 0.0) -> Iterator[str]:
    """A proxy in front of `upstream` adding `latency_ms` before every response's first byte and
    capping each connection at `bandwidth_mbps` MB/s (0: no cap). Yields its URL."""

    def before_exec() -> None:
        die_with_parent()
        with contextlib.suppress(OSError):
            os.nice(PROXY_NICE)

    proc = subprocess.Popen(
        [sys.executable, "-c", _PROXY_MAIN, upstream, str(latency_ms), str(bandwidth_mbps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=before_exec,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # "" if it exited: bounded by its start timeout
        if not url.startswith("http://"):
            raise RuntimeError(f"proxy did not start (exit code {proc.poll()})")
        yield url
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
