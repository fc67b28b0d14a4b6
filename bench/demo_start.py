"""``python -m bench demo-start``: `%advisor --demo` in fresh Jupyter kernels, one after another.

Each kernel runs `%load_ext advisor` and `%advisor --demo` as a user's notebook does, with the
user's environment (no demo endpoint handed over), a private demo cache and a private temp
folder, and is timed from the magic until the demo's data set is in its endpoint. The first
kernel generates the data into the cache, uploads it and keeps the server's store; the next ones
start their server on a copy of that store (`advisor.demo.store`). After each kernel shuts down,
its server's data folder (`loader-advisor-s3-*`) must be gone from the temp folder.

    python -m bench demo-start              # two kernels, a fresh cache
    python -m bench demo-start --kernels 3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.demo import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_URL
from advisor.demo.datasets import ENV_CACHE
from testing.kernels import ipc_kernels

DATA_FOLDER_PREFIX = "loader-advisor-s3-"
KERNEL_READY_S = 60.0
DEMO_READY_S = 300.0  # the first start generates ~250 MB of images on a small machine
FOLDER_GONE_S = 40.0

# Runs in the kernel after `%advisor --demo` (whose work goes on in a background thread): wait
# until the demo's layout is in its endpoint, then print the seconds since the magic began.
_WAIT_FOR_DEMO = """
import time, advisor.demo
while time.monotonic() - _started < {timeout}:
    _demo = advisor.demo._demo
    if _demo is not None and _demo.uploaded and "small-images" in _demo.uploaded:
        break
    time.sleep(0.1)
print("DEMO_READY", round(time.monotonic() - _started, 2), advisor.demo._data_dir, flush=True)
"""


@dataclass(frozen=True)
class KernelStart:
    """One kernel's `%advisor --demo`: seconds until the data was in the endpoint (None: not
    within DEMO_READY_S), the server's data folder, and whether it was gone after shutdown."""

    seconds: float | None
    data_folder: Path | None
    folder_gone: bool


def cache_snapshot(cache: Path) -> dict[str, tuple[int, int]]:
    """Every file under `cache`: (size, modification time in ns); equal snapshots mean nothing
    was generated or rewritten in between."""
    return {
        str(p.relative_to(cache)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(cache.rglob("*"))
        if p.is_file()
    }


def _kernel_env(cache: Path, temp: Path) -> dict[str, str]:
    """The user's environment: no demo endpoint handed over; a private cache and temp folder."""
    demo = (ENV_URL, ENV_ACCESS_KEY, ENV_SECRET_KEY)
    env = {k: v for k, v in os.environ.items() if k not in demo}
    env.update({ENV_CACHE: str(cache), "TMPDIR": str(temp)})
    return env


def _run(client: Any, code: str, timeout: float) -> str:
    """Execute `code` in the kernel; its stdout (an error raises RuntimeError)."""
    out: list[str] = []

    def on_output(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    reply = client.execute_interactive(code, timeout=timeout, output_hook=on_output)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"kernel error running {code!r}:\n{''.join(out)[-3000:]}")
    return "".join(out)


def start_demo_in_kernel(cache: Path, temp: Path) -> KernelStart:
    """One fresh kernel: `%advisor --demo`, wait for its data, shut the kernel down, then wait
    for the server's data folder to be removed."""
    from jupyter_client.manager import KernelManager

    seconds = folder = None
    with ipc_kernels() as config:
        manager = KernelManager(kernel_name="python3", config=config)
        manager.start_kernel(env=_kernel_env(cache, temp), cwd=str(temp))
        client = manager.client()
        try:
            client.start_channels()
            client.wait_for_ready(timeout=KERNEL_READY_S)
            _run(client, "%load_ext advisor", KERNEL_READY_S)
            _run(
                client, "import time\n_started = time.monotonic()\n%advisor --demo", KERNEL_READY_S
            )
            line = _run(client, _WAIT_FOR_DEMO.format(timeout=DEMO_READY_S), DEMO_READY_S + 30)
            lines = (x.split() for x in line.splitlines())
            words = next(w for w in lines if w[:1] == ["DEMO_READY"])
            seconds = float(words[1]) if float(words[1]) < DEMO_READY_S else None
            folder = Path(words[2]) if words[2] != "None" else None
        finally:
            client.stop_channels()
            manager.shutdown_kernel()  # as Jupyter ends a kernel: asked to shut down, then killed
    deadline = time.monotonic() + FOLDER_GONE_S
    while folder is not None and folder.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return KernelStart(seconds, folder, folder is None or not folder.exists())


def leftover_data_folders(temp: Path) -> list[Path]:
    return sorted(temp.glob(f"{DATA_FOLDER_PREFIX}*"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench demo-start", description=__doc__)
    parser.add_argument("--kernels", type=int, default=2, help="kernels, one after another")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-demo-start-") as scratch:
        cache, temp = Path(scratch, "cache"), Path(scratch, "tmp")
        temp.mkdir()
        for n in range(1, args.kernels + 1):
            before = cache_snapshot(cache) if cache.exists() else {}
            start = start_demo_in_kernel(cache, temp)
            untouched = bool(before) and cache_snapshot(cache) == before
            took = f"{start.seconds:.1f} s" if start.seconds is not None else "not ready"
            print(
                f"kernel {n}: %advisor --demo ready in {took}; cache "
                f"{'read, untouched' if untouched else 'written'}; data folder "
                f"{'removed' if start.folder_gone else 'LEFT BEHIND'} after shutdown"
            )
        left = leftover_data_folders(temp)
        print(f"data folders left in the temp folder: {len(left)}")
    return 0 if not left else 1
