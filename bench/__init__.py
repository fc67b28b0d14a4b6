"""Benchmarks of Loader Advisor, run with ``python -m bench [NAME] [options]`` (or ``make bench``).

`BENCHMARKS` in `bench.__main__` is the registry: a name, the module that implements it (it
exposes ``main(argv: list[str]) -> int``) and a one-line description. Results go to
``bench/results/`` (not committed); docs/benchmarks.md records measured tables with their command.
"""


def own_peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM of /proc/self/status) in MiB, 0 where unknown.

    For the processes a benchmark measures (a client of `bench.clients`, the children of
    `bench.e2e_large` and `bench.e2e_shards`), which report their own peak: it imports nothing
    (`python -m bench.X` has loaded this package already), where
    `advisor.measure.hardware.host.peak_rss_bytes` would load the advisor's hardware package
    into the process it measures (118 modules, 16 MiB more VmHWM in a bare interpreter). A
    benchmark reading another process uses `peak_rss_bytes(pid)`. Not ru_maxrss: Linux carries
    the pre-exec image's peak across fork + exec; VmHWM belongs to the exec'd image alone.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0
