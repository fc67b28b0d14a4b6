"""native_loader: a C++ S3 reader for PyTorch data loading.

    from native_loader import S3Reader, ReaderConfig
    with S3Reader(ReaderConfig(max_inflight_requests=64)) as reader:
        for result in reader.read_many(info.uri for info in reader.list("s3://bucket/train/")):
            array = numpy.frombuffer(result, dtype=numpy.uint8)

The compiled core is private (`native_loader._native`); this package holds the public API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from native_loader import _native
from native_loader.config import Credentials, ReaderConfig
from native_loader.errors import S3Error
from native_loader.reader import ObjectInfo, ReadResult, S3Reader
from native_loader.sample_errors import SampleError, SamplePolicy
from native_loader.uri import parse_uri

if TYPE_CHECKING:
    from native_loader.datasets import S3IterableDataset
    from native_loader.device import to_device
    from native_loader.map_dataset import S3MapDataset

__version__: str = _native.version()

__all__ = [
    "Credentials",
    "ObjectInfo",
    "ReadResult",
    "ReaderConfig",
    "S3Error",
    "S3IterableDataset",
    "S3MapDataset",
    "S3Reader",
    "SampleError",
    "SamplePolicy",
    "__version__",
    "native_versions",
    "parse_uri",
    "to_device",
]


def native_versions() -> dict[str, str]:
    """Versions of the native library and what it links (for bug reports and the hardware step)."""
    return {
        "native_loader": _native.version(),
        "libcurl": _native.curl_version(),
        "tls": _native.curl_ssl_version(),
    }


def __getattr__(name: str) -> Any:
    # The datasets import torch: load them on first use so the reader alone stays light.
    if name == "S3IterableDataset":
        from native_loader.datasets import S3IterableDataset

        return S3IterableDataset
    if name == "S3MapDataset":
        from native_loader.map_dataset import S3MapDataset

        return S3MapDataset
    if name == "to_device":
        from native_loader.device import to_device

        return to_device
    raise AttributeError(f"module 'native_loader' has no attribute {name!r}")
