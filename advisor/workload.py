"""What the training consumes: the demand side the loader must keep up with."""

from __future__ import annotations

from dataclasses import dataclass

MAX_RATE = 1e7  # samples/s: beyond this a number is a typo, not a workload
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
    """

    consumer_rate: float | None = None
    batch_size: int = 32
    epochs: int = 1
    nodes: int = 1
    gpus_per_node: int = 1
    transform: str | None = None
    data_location: str | None = None

    def __post_init__(self) -> None:
        if self.data_location is not None and self.data_location not in DATA_LOCATIONS:
            raise ValueError(f"{self.data_location=} must be one of {DATA_LOCATIONS}")
        if self.consumer_rate is not None and not 0 < self.consumer_rate <= MAX_RATE:
            raise ValueError(f"consumer_rate={self.consumer_rate} must be in (0, {MAX_RATE:g}]")
        if not 1 <= self.batch_size <= 1_000_000:
            raise ValueError(f"batch_size={self.batch_size} must be in [1, 1000000]")
        if not 1 <= self.epochs <= 100_000:
            raise ValueError(f"epochs={self.epochs} must be in [1, 100000]")
        if not 1 <= self.nodes <= 100_000:
            raise ValueError(f"nodes={self.nodes} must be in [1, 100000]")
        if not 1 <= self.gpus_per_node <= 64:
            raise ValueError(f"gpus_per_node={self.gpus_per_node} must be in [1, 64]")

    @classmethod
    def from_step_time(cls, step_time_s: float, batch_size: int, **kwargs: object) -> Workload:
        """The consumption rate of a job that takes `step_time_s` per batch of `batch_size`."""
        if not 0 < step_time_s <= 3600:
            raise ValueError(f"step_time_s={step_time_s} must be in (0, 3600]")
        return cls(consumer_rate=batch_size / step_time_s, batch_size=batch_size, **kwargs)  # type: ignore[arg-type]

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node
