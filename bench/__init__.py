"""Benchmarks of Loader Advisor, run with ``python -m bench [NAME] [options]`` (or ``make bench``).

`BENCHMARKS` in `bench.__main__` is the registry: a name, the module that implements it (it
exposes ``main(argv: list[str]) -> int``) and a one-line description. Results go to
``bench/results/`` (not committed); docs/benchmarks.md records measured tables with their command.
"""
