"""The processes serving a loopback endpoint, found from the machine's sockets, and their CPU
counted in a trial under a CPU quota (issue 56: a plan from a share of the machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from advisor.measure.hardware.local_server import (
    endpoint_port,
    quota_blind_servers,
    serving_processes,
)

# A listener on 127.0.0.1 that prints its port, connects to argv[1]'s port if given (a proxy
# to its upstream), and spins when argv[2] is "spin"; it ends when its stdin closes.
LISTENER = """
import socket, sys, threading, time
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(8)
upstream = None
if sys.argv[1] != "0":
    upstream = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
print(listener.getsockname()[1], flush=True)
if sys.argv[2] == "spin":
    def spin():
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
sys.stdin.read()
"""


@contextmanager
def listener(upstream: int = 0, spin: bool = False) -> Iterator[tuple[int, int]]:
    """(pid, port) of a LISTENER process."""
    with subprocess.Popen(
        [sys.executable, "-c", LISTENER, str(upstream), "spin" if spin else "idle"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            yield proc.pid, port
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)


def test_the_endpoint_port_is_known_only_on_the_loopback() -> None:
    assert endpoint_port("http://127.0.0.1:9000") == 9000
    assert endpoint_port("http://localhost/") == 80
    assert endpoint_port("https://[::1]/") == 443
    assert endpoint_port("https://s3.us-east-1.amazonaws.com") is None
    assert endpoint_port("http://10.0.0.5:9000") is None


def test_a_loopback_endpoint_is_served_by_its_listener_and_the_upstream_it_reads() -> None:
    with listener() as (server, server_port), listener(server_port) as (proxy, proxy_port):
        assert serving_processes(f"http://127.0.0.1:{proxy_port}") == {proxy, server}
        assert serving_processes(f"http://localhost:{server_port}/bucket") == {server}
    assert serving_processes("https://s3.us-east-1.amazonaws.com") == frozenset()
    assert serving_processes(None) == frozenset()


def test_without_a_quota_the_busy_cores_count_the_server_already(tmp_path: Path) -> None:
    root = tmp_path
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/\n")
    (root / "sys/fs/cgroup").mkdir(parents=True)
    (root / "sys/fs/cgroup/cpu.max").write_text("max 100000\n")
    with listener() as (_, port):
        assert quota_blind_servers(f"http://127.0.0.1:{port}", root) == frozenset()


@pytest.mark.timing
def test_under_a_quota_the_loop_counts_the_loopback_servers_cpu() -> None:
    """In a cgroup of one core, a loop's busy CPU is its group's, which a server outside the
    group does not add to: the loop names that server and adds its CPU (0.5 s of it over
    0.5 s of a spinning server), as the whole machine's busy cores would."""
    group = Path("/sys/fs/cgroup/cpu") / f"la-test-served-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.cfs_quota_us").write_text("100000")
    except OSError as exc:
        pytest.skip(f"no writable cgroup v1 cpu controller here: {exc}")
    try:
        with listener(spin=True) as (server, port):
            code = (
                "import os, time\n"
                f"open('{group}/cgroup.procs', 'w').write(str(os.getpid()))\n"
                "from advisor.measure.hardware.local_server import quota_blind_servers\n"
                "from advisor.measure.loop.instrument import InstrumentedLoop\n"
                f"servers = quota_blind_servers('http://127.0.0.1:{port}')\n"
                "loop = InstrumentedLoop(len, gpu=False, servers=servers)\n"
                "loop.start(); first = loop.mark(tree=False); time.sleep(0.5)\n"
                "last = loop.mark(tree=False)\n"
                "print(sorted(servers), last.served_cpu_s - first.served_cpu_s,"
                " last.busy_cpu_s - first.busy_cpu_s)\n"
            )
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                check=True,
            )  # fmt: skip
        servers, served, busy = out.stdout.rsplit("]", 1)[0] + "]", *out.stdout.split()[-2:]
        assert servers == f"[{server}]"
        assert 0.25 <= float(served) <= 0.75  # a spinning core for 0.5 s, shared with others
        assert float(busy) >= float(served) - 1e-6  # the group's own CPU, and the server's
    finally:
        group.rmdir()
