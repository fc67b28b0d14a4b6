"""What the rules read, beside the inputs: `context` (`Context`: the profile, the machine, the
workload and the trial, and the model fed what the trial measured), which holds `reading`'s
`TrainingReads` as `ctx.reads` (where the data is, what training reads and whether the trial
read it); `evidence` (the trial's sweep as evidence); `readpath` (what the num_workers decision
says of the read path); `measured` (the choice among the measured counts and how firm it is);
`gain` (advice only beyond the noise); `dealing` (an epoch's objects dealt to the readers);
`copy_rate` (one figure for a copy's rate); `request_plan` (a job's GETs against the storage's
limit).
"""
