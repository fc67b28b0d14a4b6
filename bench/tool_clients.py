"""The reader bench's command-line clients, the ceiling: `curl --parallel` and `wrk`, which discard
bodies; their CPU and peak RSS are the tool process's."""

from __future__ import annotations

import json
import math
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.client_run import Measurement, Spec

TOOL_TIMEOUT_MARGIN_S = 60.0


def _run_tool(args: list[str], timeout_s: float) -> tuple[str, float, float]:
    """Run a tool to completion; (stdout, wall seconds, peak RSS MiB sampled from VmHWM every
    20 ms). Its CPU lands in RUSAGE_CHILDREN of this process once it is reaped."""
    # Read from this process, which the tool's figures leave out (its CPU is the tool's
    # RUSAGE_CHILDREN, its RSS the tool's VmHWM); imported here, where no Python client runs.
    from advisor.measure.hardware.host import peak_rss_bytes

    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], peak_rss_bytes(proc.pid) / 2**20)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        sampler.join(timeout=1.0)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {proc.returncode}: {err.decode()[-500:]}")
    return out.decode(), wall, peak[0]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _curl_config(spec: Spec, items: list[tuple[str, int]], path: Path) -> None:
    lines = []
    for key, _ in items:
        lines.append(f'url = "{spec.url(key)}"\noutput = "/dev/null"\n')
    path.write_text("".join(lines))


def run_curl(spec: Spec) -> Measurement:
    """`curl --parallel --parallel-max N` over a config of URLs (signed with --aws-sigv4 when the
    endpoint needs it). A calibration pass over the keys sizes the timed list to `seconds`."""
    curl = shutil.which("curl") or "/usr/bin/curl"
    base = [curl, "--silent", "--show-error", "--fail", "--parallel", "--parallel-immediate"]
    base += ["--parallel-max", str(spec.concurrency), "--max-time", "120"]
    base += ["--write-out", "%{size_download}\\n"]
    if spec.signed:
        base += ["--aws-sigv4", f"aws:amz:{spec.region}:s3"]
        base += ["--user", f"{spec.access_key}:{spec.secret_key}"]
    with tempfile.TemporaryDirectory(prefix="bench-curl-") as tmp:
        cfg = Path(tmp) / "urls.txt"
        items = list(zip(spec.keys, spec.sizes, strict=True))
        # Calibration (untimed for the result): one pass, or the first objects of a large set.
        calib = items[: max(1, min(len(items), spec.max_objects))]
        _curl_config(spec, calib, cfg)
        t0 = time.perf_counter()
        _run_tool([*base, "--config", str(cfg)], spec.seconds * 20 + TOOL_TIMEOUT_MARGIN_S)
        rate = len(calib) / max(time.perf_counter() - t0, 1e-3)
        count = int(min(spec.max_objects, max(len(items), rate * spec.seconds)))
        timed = [items[i % len(items)] for i in range(count)]
        _curl_config(spec, timed, cfg)
        cpu0 = _children_cpu_s()
        out, wall, peak = _run_tool(
            [*base, "--config", str(cfg)], spec.seconds * 20 + TOOL_TIMEOUT_MARGIN_S
        )
        cpu = _children_cpu_s() - cpu0
    sizes = [int(x) for x in out.split()]
    expected = sum(size for _, size in timed)
    errors = len(timed) - len(sizes) + (0 if sum(sizes) == expected else 1)
    return Measurement(
        "curl",
        spec.concurrency,
        len(sizes),
        sum(sizes),
        wall,
        cpu,
        peak,
        errors=errors,
    )


WRK_SCRIPT = """
local paths = {}
for line in io.lines("%(paths)s") do paths[#paths + 1] = line end
local counter = 0
function setup(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[((i + offset) %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nWRKJSON {"requests": %%d, "bytes": %%d, "duration_us": %%d, '
    .. '"errors": %%d}\\n', summary.requests, summary.bytes, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def run_wrk(spec: Spec) -> Measurement:
    """`wrk` with a Lua script rotating over the object paths; unsigned only (nginx). Bytes count
    headers too (wrk reports bytes read from the socket)."""
    if spec.signed:
        raise SystemExit("wrk cannot sign requests; use it on the unsigned endpoint only")
    wrk = shutil.which("wrk") or "/usr/bin/wrk"
    threads = max(1, min(2, spec.concurrency))
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        paths = Path(tmp) / "paths.txt"
        paths.write_text("".join(f"/{spec.bucket}/{key}\n" for key in spec.keys))
        script = Path(tmp) / "rotate.lua"
        script.write_text(WRK_SCRIPT % {"paths": paths})
        duration = max(1, math.ceil(spec.seconds))
        args = [wrk, "-t", str(threads), "-c", str(spec.concurrency), "-d", f"{duration}s"]
        args += ["--timeout", "30s", "-s", str(script), spec.endpoint]
        cpu0 = _children_cpu_s()
        out, _, peak = _run_tool(args, duration + TOOL_TIMEOUT_MARGIN_S)
        cpu = _children_cpu_s() - cpu0
    line = next(x for x in out.splitlines() if x.startswith("WRKJSON "))
    summary = json.loads(line[len("WRKJSON ") :])
    mean = sum(spec.sizes) / len(spec.sizes)
    # wrk counts header bytes; report body bytes as requests x mean size for comparability.
    requests = summary["requests"]
    return Measurement(
        "wrk",
        spec.concurrency,
        requests,
        int(requests * mean),
        summary["duration_us"] / 1e6,
        cpu,
        peak,
        errors=summary["errors"],
        note=f"socket bytes {summary['bytes']}",
    )
