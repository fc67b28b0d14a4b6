"""native_loader: a C++ S3 reader for PyTorch data loading.

The compiled core is private (`native_loader._native`); this package holds the public API.
"""

from __future__ import annotations

from native_loader import _native

__version__: str = _native.version()

__all__ = ["__version__", "native_versions"]


def native_versions() -> dict[str, str]:
    """Versions of the native library and what it links (for bug reports and the hardware step)."""
    return {
        "native_loader": _native.version(),
        "libcurl": _native.curl_version(),
        "tls": _native.curl_ssl_version(),
    }
