"""What the training consumes: the demand side the loader must keep up with."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.core.bounds import Range, bounded, check_ranges

MAX_RATE = 1e7  # samples/s: beyond this a number is a typo, not a workload
STEP_TIME_S = Range(0, 3600, float, low_open=True, unit="s")  # seconds per training step
DATA_LOCATIONS = ("s3", "efs", "nfs", "fsx", "local")


@dataclass(frozen=True)
class Workload:
    """The training job the loader feeds.

    consumer_rate: samples/s one GPU (one rank) consumes; None when unknown (the advisor then
        aims for the loader's best throughput).
    batch_size: samples per batch per rank (default 32).
    epochs: passes over the data set (default 1); multi-epoch runs favour caching or a local copy.
    nodes, gpus_per_node: the job's size (default 1 x 1); each rank reads 1/(nodes*gpus) of the set.
    transform: "module:callable" applied per sample, timed in the trial; None = default decoder.
    data_location: where the data already lives when the URI does not say: "s3", "efs", "nfs",
        "fsx" or "local"; None = infer from the URI (default).
    get_limit: GET/s the storage serves per key prefix before it throttles (503 SlowDown), as
        the user knows it for their endpoint; None = S3's published limits on AWS, and no limit
        checked on other endpoints (default).
    """

    consumer_rate: float | None = bounded(None, 0, MAX_RATE, low_open=True, unit="samples/s")
    batch_size: int = bounded(32, 1, 1_000_000, unit="samples")
    epochs: int = bounded(1, 1, 100_000, unit="epochs")
    nodes: int = bounded(1, 1, 100_000, unit="nodes")
    gpus_per_node: int = bounded(1, 1, 64, unit="GPUs")
    transform: str | None = None
    data_location: str | None = None
    get_limit: float | None = bounded(None, 0, 1e9, low_open=True, unit="GET/s")

    def __post_init__(self) -> None:
        if self.data_location is not None and self.data_location not in DATA_LOCATIONS:
            raise ValueError(f"{self.data_location=} must be one of {DATA_LOCATIONS}")
        check_ranges(self)

    @classmethod
    def from_step_time(cls, step_time_s: float, batch_size: int, **kwargs: object) -> Workload:
        """The consumption rate of a job that takes `step_time_s` per batch of `batch_size`."""
        if step_time_s not in STEP_TIME_S:
            raise ValueError(f"{step_time_s=} must be {STEP_TIME_S}")
        return cls(consumer_rate=batch_size / step_time_s, batch_size=batch_size, **kwargs)  # type: ignore[arg-type]

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node
