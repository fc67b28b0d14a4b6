"""``python -m bench gpu``: the GPU paths, measured on a real GPU.

1. Host-to-device copies: pinned against pageable GB/s for a range of batch sizes (what PIN-2
   compares, at the sizes a trial's batches have).
2. The advice on a real GPU: ``python -m advisor recommend`` on a local demo folder, as a user
   runs it (the trial's sweep, its H2D step and the PIN-* decision that follows).
3. The exported module feeding the GPU: ``make_dataloader(pin_memory=p)`` for p in (True, False),
   interleaved, each batch moved with ``to_device`` (``non_blocking=True``) and consumed by a GPU
   step of ``batch_size / consumer_rate`` seconds (``torch.cuda._sleep``, a kernel that keeps the
   GPU busy for a set number of cycles); samples/s, GPU step time from CUDA events and GPU
   utilisation from NVML. The first batch is checked against a CPU decode of the same files.
4. Decode placement: batched ``torchvision.io.decode_jpeg(device="cuda")`` on the demo's JPEGs
   and on larger ones (images/s, GPU ms per batch, the host thread's CPU per image) beside the
   CPU decode of the same files in one thread (the default decoder, Pillow, and torchvision's
   CPU decode). ``--record`` writes the figures as the module DEC-1 falls back on where no GPU
   is present (advisor/measure/hardware/gpu_decode_recorded.py).
5. ``advisor.diagnose`` on the exported loader with a real model step: each batch resized on
   the GPU to 224x224 and a ResNet-18 (torchvision, random weights) forward, backward and
   optimiser step; the waiting share and GPU utilisation it reports.

Without a CUDA device it says so and exits 0. Results: a table on stdout and JSON in --out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from advisor.demo.datasets import DemoSpec, write_folder
from advisor.measure.hardware import GpuUtilization
from bench.gpu_decode_placement import decode_placement, write_recorded
from bench.loader_sweep import load_module
from bench.record import begin
from native_loader import to_device
from native_loader.decoders import decode_image

MIB = 2**20


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def copy_gb_s(size_bytes: int, pinned: bool, repeats: int = 10) -> float:
    """GB/s of `repeats` host-to-device copies of `size_bytes`, timed with CUDA events."""
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=pinned)
    device = torch.empty(size_bytes, dtype=torch.uint8, device="cuda")
    device.copy_(host, non_blocking=pinned)  # warm-up: first-touch and allocator
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    wall = time.perf_counter()
    start.record()
    for _ in range(repeats):
        device.copy_(host, non_blocking=pinned)
    end.record()
    torch.cuda.synchronize()
    # A pageable copy blocks the host: the events then miss the staging, the wall clock does not.
    seconds = max(start.elapsed_time(end) / 1e3, time.perf_counter() - wall)
    return size_bytes * repeats / seconds / 1e9


def h2d_sweep(sizes_mib: list[float], rounds: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes_mib:
        size_bytes = int(size * MIB)
        measured: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for pinned in (False, True):
                measured[pinned].append(copy_gb_s(size_bytes, pinned))
        pinned_s, pageable_s = _spread(measured[True]), _spread(measured[False])
        rows.append(
            {
                "batch_mib": size,
                "pinned_gb_s": pinned_s,
                "pageable_gb_s": pageable_s,
                "ratio_median": pinned_s["median"] / pageable_s["median"],
            }
        )
    return rows


def sleep_cycles_per_s() -> float:
    """Clock cycles per second that `torch.cuda._sleep` spins (calibrated with CUDA events)."""
    cycles = 50_000_000
    torch.cuda._sleep(1000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / (start.elapsed_time(end) / 1e3)


def _tensors(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for v in batch.values() for t in _tensors(v)]
    if isinstance(batch, (list, tuple)):
        return [t for v in batch for t in _tensors(v)]
    return []


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.cpu().contiguous().numpy().tobytes()).hexdigest()


def train(
    loader: Any, step_s: float, batches: int, cycles_per_s: float, expect: set[str] | None
) -> dict[str, Any]:
    """Iterate `batches` batches, each moved to the GPU and consumed by a `step_s` GPU step."""
    cycles = int(step_s * cycles_per_s)
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    samples, steady_samples, wrong = 0, 0, 0
    started = steady_from = time.perf_counter()
    first_batch_s = None
    with GpuUtilization(interval_s=0.05) as util:
        for index, batch in enumerate(loader):
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - started
                steady_from = time.perf_counter()
            on_gpu = to_device(batch, "cuda")
            if index == 0 and expect is not None:
                wrong = sum(_digest(t) not in expect for t in _tensors(on_gpu))
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            torch.cuda._sleep(cycles)
            end.record()
            events.append((begin, end))
            samples += len(batch)
            if index > 0:
                steady_samples += len(batch)
            if index + 1 >= batches:
                break
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - steady_from
    step_ms = [b.elapsed_time(e) for b, e in events[1:]]
    busy = util.samples[len(util.samples) // 4 :] or [0]  # leave out the start-up quarter
    return {
        "samples": samples,
        "samples_per_s": steady_samples / elapsed,
        "time_to_first_batch_s": first_batch_s,
        "gpu_step_ms_median": statistics.median(step_ms) if step_ms else None,
        "gpu_utilization_median": statistics.median(busy),
        "gpu_utilization_samples": len(util.samples),
        "first_batch_mismatches": wrong,
    }


def recommend(folder: str, out: Path, consumer_rate: float, batch: int, seconds: float) -> Any:
    command = [
        sys.executable, "-m", "advisor", "recommend", folder, "--consumer-rate", str(consumer_rate),
        "--batch-size", str(batch), "--seconds", str(seconds), "--export", str(out / "loader.py"),
        "--json", "--quiet",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 4 + 120)
    if done.returncode != 0:
        raise SystemExit(f"advisor recommend failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    result["wall_s"] = time.perf_counter() - started
    return result


def model_step() -> Any:
    """A real GPU step: resize each image to 224x224 on the GPU, ResNet-18 forward, backward and
    an SGD step, then wait for the GPU (so the loop times the step, not its launch)."""
    import torch.nn.functional as F
    import torchvision

    model = torchvision.models.resnet18(num_classes=10).cuda()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: Any) -> None:
        images = _tensors(batch)
        inputs = torch.stack(
            [
                F.interpolate(
                    to_device(t, "cuda").permute(2, 0, 1)[None].float() / 255, size=(224, 224)
                )[0]
                for t in images
                if t.dim() == 3
            ]
        )
        loss = model(inputs).logsumexp(dim=1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        torch.cuda.synchronize()

    return step


def diagnose_with_model(module: Any, pin: bool, seconds: float) -> dict[str, Any]:
    from advisor import diagnose
    from advisor.core.bounds import LoopLimits
    from advisor.report.diagnosis import diagnosis_lines

    result = diagnose(
        module.make_dataloader(pin_memory=pin), model_step(),
        limits=LoopLimits(max_seconds=seconds), label="exported loader, ResNet-18 step",
    )  # fmt: skip
    for line in diagnosis_lines(result):
        print(f"diagnose: {line}", flush=True)
    return result.to_dict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench gpu", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu"))
    parser.add_argument("--data", type=Path, default=Path("/tmp/loader-advisor-bench-gpu"))
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--consumer-rate", type=float, default=1500.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--trial-seconds", type=float, default=30.0)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer images, rounds and batches")
    parser.add_argument(
        "--record", type=Path, default=None,
        help="write the GPU decode figures as the module DEC-1 falls back on to this path",
    )  # fmt: skip
    parser.add_argument("--diagnose-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    run = begin("gpu", argv)
    if not torch.cuda.is_available():
        print("bench gpu: skipped, no CUDA device")
        return 0
    if args.quick:
        args.images, args.rounds, args.batches, args.trial_seconds = 800, 2, 30, 15.0
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}

    report["h2d"] = h2d_sweep([1, 4, 16, 64, 256], rounds=args.rounds)
    for row in report["h2d"]:
        print(
            f"h2d {row['batch_mib']:>5g} MiB: pinned {row['pinned_gb_s']['median']:.1f} GB/s "
            f"({row['pinned_gb_s']['min']:.1f}-{row['pinned_gb_s']['max']:.1f}), pageable "
            f"{row['pageable_gb_s']['median']:.1f} ({row['pageable_gb_s']['min']:.1f}-"
            f"{row['pageable_gb_s']['max']:.1f}): {row['ratio_median']:.2f}x",
            flush=True,
        )

    folder = write_folder(args.data, DemoSpec(images=args.images, large_files=0))["small-images"]
    files = sorted(Path(folder).rglob("*.jp*g"))
    report["decode"] = decode_placement([p.read_bytes() for p in files[:512]], 64, args.rounds)
    if args.record is not None:
        write_recorded(args.record, report["device"], torch.__version__, 64, report["decode"])
    run.write(args.out / "gpu.json", report)

    advice = recommend(folder, args.out, args.consumer_rate, args.batch_size, args.trial_seconds)
    rec = advice["recommendation"]
    report["advice"] = {
        "wall_s": advice["wall_s"],
        "num_workers": rec["num_workers"],
        "pin_memory": rec["pin_memory"],
        "rules": rec["fired_rules"],
        "pin_decision": [d for d in rec["decisions"] if d["name"] == "pin_memory"],
        "host_to_device": advice["trial"]["host_to_device"],
        "sweep": [
            {k: p[k] for k in ("num_workers", "pin_memory", "samples_per_s", "steady")}
            for p in advice["trial"]["sweep"]
        ],
    }
    print(f"advice: {json.dumps(report['advice'], indent=1)}", flush=True)

    expect = {_digest(decode_image(p.read_bytes())) for p in files}
    module = load_module(args.out / "loader.py")
    cycles_per_s = sleep_cycles_per_s()
    step_s = args.batch_size / args.consumer_rate
    runs: dict[str, list[dict[str, Any]]] = {"pin": [], "no-pin": []}
    for _ in range(args.rounds):
        for pin in (True, False):
            loader = module.make_dataloader(pin_memory=pin)
            result = train(loader, step_s, args.batches, cycles_per_s, expect)
            runs["pin" if pin else "no-pin"].append(result)
            del loader
            print(f"pin_memory={pin}: {json.dumps(result)}", flush=True)
    report["training"] = {
        "consumer_rate": args.consumer_rate,
        "step_s": step_s,
        "runs": runs,
        "summary": {
            name: {
                "samples_per_s": _spread([r["samples_per_s"] for r in rs]),
                "gpu_utilization": _spread([r["gpu_utilization_median"] for r in rs]),
                "gpu_step_ms": _spread([r["gpu_step_ms_median"] for r in rs]),
                "mismatches": sum(r["first_batch_mismatches"] for r in rs),
            }
            for name, rs in runs.items()
        },
    }
    run.write(args.out / "gpu.json", report)
    print(json.dumps(report["training"]["summary"], indent=1))

    report["decode"]["trial_cpu_decode"] = advice["trial"].get("decode")
    report["decode"]["trial_gpu_decode"] = advice["trial"].get("gpu_decode")
    run.write(args.out / "gpu.json", report)

    report["diagnose"] = diagnose_with_model(module, rec["pin_memory"], args.diagnose_seconds)
    run.write(args.out / "gpu.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
