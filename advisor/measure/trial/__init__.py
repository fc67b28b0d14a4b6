"""The live trial, one concept per module: `data` (what it reads, its clock), `results`
(plain result types), `probes` (storage, decode cost, host-to-device copy), `steady` (one
loader measurement's steady window), `sweep` (num_workers as training sees them), `run`
(`run_trial`, which runs them all within one budget)."""
