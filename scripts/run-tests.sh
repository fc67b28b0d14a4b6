#!/usr/bin/env bash
# `make test`'s pytest, in two passes over the whole suite:
#   1. the tests not marked `timing`, side by side in WORKERS processes: most of their time is
#      spent waiting on servers, kernels, browsers and trials of a fixed budget;
#   2. the `timing` tests, alone: their bounds on wall time, rates and the machine's load hold
#      only on a machine that no other test loads.
# Usage: [MARKS=expression] run-tests.sh PYTHON WORKERS [pytest arguments...]; MARKS narrows
# both passes (`make check`'s: no servers, kernels or browsers). Exit 5 is pytest's "nothing
# collected" (arguments that select only one kind); both passes collecting nothing fails.
set -u
# The hundreds of Python processes the suite starts (xdist workers, the CLI, kernels, exported
# modules) reuse compiled bytecode: an environment that forbids writing it makes each compile
# every module it imports again (0.2 s of a 0.5 s start, and pytest's rewritten tests).
unset PYTHONDONTWRITEBYTECODE
py=$1 workers=$2
shift 2
narrow=${MARKS:+ and ($MARKS)}
"$py" -m pytest -n "$workers" -m "not timing$narrow" "$@"
side=$?
"$py" -m pytest -p no:xdist -m "timing$narrow" "$@"
alone=$?
echo "make test: side by side exited $side, alone exited $alone (0 passed, 5 nothing collected)"
for status in "$side" "$alone"; do
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
if [ "$side" -eq 5 ] && [ "$alone" -eq 5 ]; then exit 5; fi
exit 0
