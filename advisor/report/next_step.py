"""The one next step where the recommended loader cannot keep up: what to change to reach the
consumer's rate, from the stage that limits it at the advised count (the trial's bottleneck,
`advisor.decide.bottleneck`, or the model's limit where the trial did not measure that count),
in one line with its reasons (`keep_up_action`) and in a few words for the headline
(`one_action`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.core.units import counted, rate

if TYPE_CHECKING:
    from advisor.decide.judged import Comparison
    from advisor.decide.recommend import Recommendation


def keep_up_action(rec: Recommendation, comparison: Comparison | None = None) -> str | None:
    """One next step, in one line, where the recommended loader still cannot keep up with the
    consumer (`rec.input_bound`, unless the recommended loader measured in the user's loop
    waits under 5%): what to change to reach the consumer's rate, from the stage that limits
    it at the recommended count (`advisor.decide.bottleneck`). None: it keeps up."""
    if comparison is not None:
        after = comparison.verdicts()[1]
        if after is not None and after.level == "not input-bound":
            return None
    if getattr(rec, "input_bound", None) is not True:  # tests' stand-ins may have none
        return None
    limit = getattr(rec, "bottleneck", None)  # tests' stand-ins may have none
    stage, reached, planned = _limiting_stage(rec)
    short = ""
    if rec.consumer_rate and reached:
        said = f"{rate(reached)} predicted" if planned else rate(reached)
        short = f" ({said} of the {rate(rec.consumer_rate)} needed)"
    more = f"{rec.consumer_rate / reached:.1f}x" if rec.consumer_rate and reached else "more"
    offer = preprocess_offer(rec)
    idle = _idle_readers(rec)
    if idle is not None:
        objects, readers = idle
        return (
            f"To keep up{short}: split the data into at least {readers} shards: "
            f"{counted(objects, 'object')} for {readers} readers (ranks x workers) leave "
            f"{readers - objects} with nothing to read (see cost)."
        )
    if stage in ("cores", "decode") and offer is not None:
        return f"To keep up{short}: {OFFERS[offer].lower()} (see preprocessing)."
    if stage in ("cores", "decode") and _placement_weighed(rec):
        return (
            f"To keep up{short}: give the loader {more} the cores (a larger machine); no "
            "other place for the decode gains beyond the measured noise (see preprocessing)."
        )
    if stage in ("cores", "decode"):
        return (
            f"To keep up{short}: make each sample about {more} cheaper to load (decode or "
            "transform it once, offline, or store it smaller), or give the loader "
            f"{more} the cores (a larger machine)."
        )
    if stage == "handover":
        return (
            f"To keep up{short}: hand over less per batch between processes (uint8 instead "
            "of float samples, or smaller ones), or collate in the workers."
        )
    if stage == "storage" and rec.data_source == "copy-local" and _read_from_nvme(rec):
        return (
            f"To keep up{short}: the local NVMe disk's bandwidth is the limit: store each "
            "sample in fewer bytes, or stripe the copy over more NVMe disks."
        )
    if stage == "storage" and rec.data_source == "copy-local":
        return f"To keep up{short}: put the local copy on a faster disk (local NVMe)."
    if stage == "storage":
        return (
            f"To keep up{short}: copy the data to local disk first, or pack small objects "
            "into larger shards (`python -m advisor reshard`), then run the advisor on them."
        )
    if stage == "shards" and not _balance_advised(rec):
        return (
            f"To keep up{short}: each epoch starts with nothing in flight and ends with workers "
            "idle through its last objects, and no worker count or re-shard deals a rank's "
            "epoch better: give each rank more samples an epoch (a larger set, or fewer ranks)."
        )
    if stage == "shards":
        return (
            f"To keep up{short}: deal the shards evenly: the num_workers that does, or a "
            "re-shard into a multiple of the readers (ranks x workers); see num_workers."
        )
    if stage == "workers":
        return (
            f"To keep up{short}: run a longer live trial: more workers than it measured may "
            "read faster."
        )
    if stage is None:
        return "To keep up: run the live trial, which measures what limits the loader."
    if limit is not None and limit.within_noise:
        return (
            f"To keep up{short}: it read within the noise of keeping up, so a repeat may find "
            f"it does; for a margin, make each sample about {more} cheaper to load or give "
            f"the loader {more} the cores."
        )
    return (
        f"To keep up{short}: no measured stage is at its ceiling, so no one change is named; "
        f"making each sample about {more} cheaper to load, or giving the loader {more} the "
        "cores, raises every stage's ceiling."
    )


# The changes the preprocessing decision offers (MEAS-4, DEC-1), as the one action to take;
# DEC-1's "cpu" is no change: no other place gained beyond the measured noise.
OFFERS = {
    "preprocess-offline": "Decode or resize once, offline",
    "gpu": "Decode the images on the GPU, in the training loop",
    "pre-decoded": "Store the images decoded, once, offline",
}
# The model's limit (MEAS-2's evidence) as the stage whose action the headline gives.
_MODEL_STAGES = {
    "cpu": "cores", "bandwidth": "storage", "latency": "storage", "objects": "shards",
    "training": "handover",
}  # fmt: skip


def _limiting_stage(rec: Recommendation) -> tuple[str | None, float | None, bool]:
    """(stage, samples/s there, planned) for the action: the trial's bottleneck at the
    advised count; where the trial ran but did not measure that count (a plan for another
    machine, or a count above those measured), the model's limit at its predicted rate
    (planned True). (None, None, False) where no trial ran: only a trial can tell."""
    limit = getattr(rec, "bottleneck", None)  # tests' stand-ins may have none
    if limit is not None:
        return limit.stage, limit.measured_samples_per_s, False
    decisions = getattr(rec, "decisions", ())
    throughput = next((d for d in decisions if d.name == "throughput"), None)
    if throughput is None or not throughput.evidence.get("sweep_samples_per_s"):
        return None, None, False
    stage = _MODEL_STAGES.get(str(throughput.evidence.get("bottleneck")))
    return stage, rec.expected_samples_per_s if stage is not None else None, stage is not None


def one_action(rec: Recommendation) -> str:
    """The one next step, in a few words, from the limiting stage (`keep_up_action` gives it
    with its reasons)."""
    stage, reached, _ = _limiting_stage(rec)
    consumer = getattr(rec, "consumer_rate", None)
    more = f"{consumer / reached:.1f}x" if consumer and reached else "more"
    offer = preprocess_offer(rec)
    idle = _idle_readers(rec)
    if idle is not None:
        objects, readers = idle
        idle_count = readers - objects
        return f"Split the data into at least {readers} shards: {objects} leave {idle_count} idle."
    if stage in ("cores", "decode") and offer is not None:
        return f"{OFFERS[offer]}."
    if stage in ("cores", "decode") and _placement_weighed(rec):
        return f"Give the loader {more} the cores (a larger machine)."
    actions = {
        "cores": f"Give the loader {more} the cores, or make each sample cheaper.",
        "decode": f"Make each sample {more} cheaper to load, or use {more} the cores.",
        "handover": "Hand over less per batch: uint8 samples, or collate in the workers.",
        "storage": "Copy the data to local disk, or pack it into larger shards.",
        "shards": "Deal the shards evenly: see num_workers.",
        "workers": "Run a longer live trial: more workers may read faster.",
        "unexplained": f"Give the loader {more} the cores, or make each sample cheaper.",
    }
    if stage == "storage" and rec.data_source == "copy-local" and _read_from_nvme(rec):
        return "Store each sample in fewer bytes, or stripe more NVMe disks."
    if stage == "storage" and rec.data_source == "copy-local":
        return "Put the local copy on a faster disk (local NVMe)."
    if stage == "shards" and not _balance_advised(rec):
        return "Give each rank more samples an epoch: a larger set, or fewer ranks."
    if stage is None:
        return "Run the live trial: it measures what limits the loader."
    return actions.get(stage, actions["unexplained"])


def preprocess_offer(rec: Recommendation) -> str | None:
    """The preprocessing change the recommendation offers ("preprocess-offline", "gpu",
    "pre-decoded"); None: none (none gains beyond the measured noise, or none was weighed)."""
    found = next((d for d in getattr(rec, "decisions", ()) if d.name == "preprocess"), None)
    return found.value if found is not None and found.value in OFFERS else None


def _idle_readers(rec: Recommendation) -> tuple[int, int] | None:
    """(objects, readers) where COST-5 found fewer objects an epoch than readers, whose idle
    readers are the first thing to change; None where every reader gets one."""
    found = next((d for d in getattr(rec, "decisions", ()) if "COST-5" in d.rules), None)
    if found is None or "readers" not in found.evidence:
        return None
    return int(found.evidence["objects"]), int(found.evidence["readers"])


def _read_from_nvme(rec: Recommendation) -> bool:
    """True where the model reads the training data from a local NVMe disk (MEAS-2's)."""
    found = next((d for d in getattr(rec, "decisions", ()) if d.name == "throughput"), None)
    return found is not None and found.evidence.get("storage") == "local-nvme"


def _balance_advised(rec: Recommendation) -> bool:
    """True where NW-5 gave a count or a re-shard that deals the epoch's objects better."""
    return "NW-5" in getattr(rec, "fired_rules", ())


def _placement_weighed(rec: Recommendation) -> bool:
    """True where DEC-1 weighed where the decode runs and kept it on the CPU."""
    found = next((d for d in getattr(rec, "decisions", ()) if d.name == "preprocess"), None)
    return found is not None and found.value == "cpu"
