"""What a dataset does with a sample that fails to read or decode.

`SamplePolicy("raise")` (the default) raises `SampleError` naming the object (and the tar
member) and the original error; `SamplePolicy("skip")` leaves the sample out and counts it, and
raises once more than `max_skipped_share` of the samples seen so far failed: a few corrupt
images in a large set are skipped, a broken transform or a set that went away is not.
The counts of every process of a loader (its DataLoader workers included) are shared, so
`SampleCounts.totals()` in the training process sees them all; so are each process's reader
throttling counters (`SampleCounts.reader_totals()`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ON_ERROR = ("raise", "skip")
MIN_SEEN = 100  # the share skipped is measured over at least this many samples
_SLOTS = 1024  # one per DataLoader worker id (and the main process); more share the last
# The reader's counters (`S3Reader.stats()`) of each process, summed over the loader's processes:
# its throttling, and the requests it sent again (throttled, failed or cut short).
READER_COUNTERS = ("throttled", "rate_cuts", "rate_limited_ms", "retries")


class SampleError(ValueError):
    """A sample failed to read or decode. The message names the object (a tar shard's sample
    as ``<shard uri>#<key>``) and the original error, which is kept as `__cause__`."""


@dataclass(frozen=True)
class SamplePolicy:
    """What a dataset does with a sample whose read or transform fails.

    Attributes:
        on_error: ``"raise"`` (default): raise `SampleError` naming the object; ``"skip"``:
            leave the sample out and count it.
        max_skipped_share: with ``"skip"``, raise once more than this share of the samples a
            process has seen in the epoch (counted over at least 100) were skipped. Default
            0.01; in [0, 1].
    """

    on_error: str = "raise"
    max_skipped_share: float = 0.01

    def __post_init__(self) -> None:
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error={self.on_error!r} must be one of {ON_ERROR}")
        share = self.max_skipped_share
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise ValueError(f"max_skipped_share={share!r} must be a number in [0, 1]")
        if math.isnan(share) or not 0 <= share <= 1:
            raise ValueError(f"max_skipped_share={share!r} must be in [0, 1]")


class SampleCounts:
    """Samples seen and skipped, summed over every process that shares this object (shared
    memory, one slot per DataLoader worker, so that no two processes write the same slot)."""

    def __init__(self) -> None:
        import torch  # with the datasets, not with the policy (the CLI parses it without torch)
        from torch.utils.data import get_worker_info

        self._table = torch.zeros((_SLOTS, 2), dtype=torch.int64).share_memory_()
        width = len(READER_COUNTERS)
        self._reader_table = torch.zeros((_SLOTS, width), dtype=torch.int64).share_memory_()
        self._worker_info = get_worker_info

    def _slot(self) -> int | None:
        if sys.is_finalizing():
            # a dataset iterator left open until interpreter exit flushes from its cleanup:
            # nothing reads the counts any more, and torch may be torn down (an import there
            # fails, a tensor op aborts the process)
            return None
        info = self._worker_info()
        return min(info.id + 1, _SLOTS - 1) if info is not None else 0

    def add(self, seen: int, skipped: int) -> None:
        slot = self._slot()
        if slot is None:
            return
        self._table[slot, 0] += seen
        self._table[slot, 1] += skipped

    def note_reader(self, stats: Mapping[str, int]) -> None:
        """This process's reader counters as they are now (they only grow)."""
        slot = self._slot()
        if slot is None:
            return
        for column, name in enumerate(READER_COUNTERS):
            self._reader_table[slot, column] = int(stats.get(name, 0))

    def reader_totals(self) -> dict[str, int]:
        """The readers' throttling and retry counters (see `S3Reader.stats`), summed over the
        processes."""
        sums = (int(v) for v in self._reader_table.sum(dim=0))
        return dict(zip(READER_COUNTERS, sums, strict=True))

    def totals(self) -> dict[str, int]:
        seen, skipped = (int(v) for v in self._table.sum(dim=0))
        return {"samples_seen": seen, "samples_skipped": skipped}

    def reset(self) -> None:
        self._table.zero_()
        self._reader_table.zero_()


def readable_name(uri: str) -> bool:
    """False for a local file whose name is not UTF-8 (listed with surrogate escapes): no reader
    can open it by that name."""
    try:
        uri.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unreadable_name(uri: str) -> SampleError:
    """The error for a file name that is not UTF-8, shown with its bytes escaped."""
    shown = uri.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return SampleError(f"reading {shown} failed: its file name is not valid UTF-8; rename the file")


def check_name(uri: str) -> None:
    """Raise `unreadable_name` for a name no reader can open."""
    if not readable_name(uri):
        raise unreadable_name(uri)


def failure(what: str, name: str, exc: BaseException) -> str:
    """``<what> failed on <name>: <Type>: <first line of the message>``."""
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return f"{what} failed on {name}: {detail}"


def transform_label(transform: Callable[[Any], Any]) -> str:
    """How an error names the transform: the default decoder by its name, else "your transform"."""
    from native_loader.decoders import DEFAULT_DECODERS, decode_raw

    transform = getattr(transform, "__wrapped__", transform)
    if transform in DEFAULT_DECODERS.values() or transform is decode_raw:
        return f"the default decoder ({getattr(transform, '__name__', 'decoder')})"
    return "your transform"


def sample_name(item: Any) -> str:
    """The object a raw dataset item came from: a read's URI, a tar sample's key."""
    uri = getattr(item, "uri", None)
    if isinstance(uri, str):
        return uri
    if isinstance(item, dict):
        return str(item.get("__url__") or item.get("__key__") or "a sample")
    return "a sample"


class SampleGuard:
    """Applies one policy over one process's pass: reads and transforms that fail are raised as
    `SampleError` or skipped and counted, until the share skipped passes the cap."""

    def __init__(
        self,
        policy: SamplePolicy,
        counts: SampleCounts | None = None,
        flush_every: int = 1,
        reader_stats: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self.policy = policy
        self.counts = counts
        self.reader_stats = reader_stats  # noted in the shared counts at every flush
        self.seen = 0
        self.skipped = 0
        # Samples that went through are added to the shared counts `flush_every` at a time
        # (and by `flush`): one shared-memory update per record would cost more than reading
        # a line of a text shard.
        self.flush_every = flush_every
        self._unflushed = 0

    def ok(self, count: int = 1) -> None:
        """``count`` samples went through."""
        self.seen += count
        self._unflushed += count
        if self._unflushed >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Add the samples counted here since the last flush to the shared counts."""
        if self.counts is not None and self._unflushed:
            self.counts.add(self._unflushed, 0)
        self._unflushed = 0
        if self.counts is not None and self.reader_stats is not None:
            self.counts.note_reader(self.reader_stats())

    def failed(self, message: str, exc: BaseException) -> None:
        """A sample failed (`message` names it): raise, or count it and return to skip it."""
        if self.policy.on_error == "raise":
            raise SampleError(message) from exc
        self.flush()
        self.seen += 1
        self.skipped += 1
        if self.counts is not None:
            self.counts.add(1, 1)
        share = self.policy.max_skipped_share
        if self.skipped > share * max(self.seen, MIN_SEEN):
            raise SampleError(
                f"{self.skipped} of {self.seen} samples failed, over the "
                f"max_skipped_share={share:g} of on_error='skip'; the last: {message}"
            ) from exc

    def apply(self, transform: Callable[[Any], Any], name: str, item: Any) -> tuple[bool, Any]:
        """(True, transform(item)), or (False, None) for a sample skipped."""
        try:
            out = transform(item)
        except Exception as exc:
            self.failed(failure(transform_label(transform), name, exc), exc)
            return False, None
        self.ok()
        return True, out


def parsed_items(items: Iterator[Any], what: str, uri: str, guard: SampleGuard) -> Iterator[Any]:
    """`items` of one shard until one fails to parse: that goes to `guard` (the shard's items
    not yet read are skipped with it). Read failures (OSError) and the guard's own
    `SampleError` pass through as they are."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except (OSError, SampleError):  # a read failure; one the guard already raised
            raise
        except Exception as exc:
            guard.failed(failure(what, uri, exc), exc)
            return
        yield item
