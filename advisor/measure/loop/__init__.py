"""The instrumented training loop that diagnoses a loader: `run` (the loop, its errors and the
steps it can emulate), `usage` (the process tree's CPU and memory while it runs), `results`
(`LoopRun`, `LoopSummary` with spreads)."""
