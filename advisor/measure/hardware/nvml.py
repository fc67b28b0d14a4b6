"""GPUs through NVML: the only module that imports ``pynvml`` (lazily, in `load_pynvml`).

Like gpustat's ``nvml.py``, the probe never raises because a GPU is missing or odd: no GPU,
no driver, no NVML library or no ``pynvml`` module give no GPUs and a note; a call the device
does not support (``NVML_ERROR_NOT_SUPPORTED``) leaves that field None.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from advisor.core.extras import install_command
from advisor.measure.hardware.machine import GpuInfo

_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED, the same value in every pynvml release
NOT_SUPPORTED_REASON = "not supported by this GPU (NVML_ERROR_NOT_SUPPORTED)"
_FEATURE_ENABLED = 1  # NVML_FEATURE_ENABLED
_DEFAULT_MAX_NVLINKS = 18


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _Nvml:
    """Calls into an NVML module, turning NotSupported into None and other errors into notes."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self.notes: list[str] = []
        self.why_none = ""  # why the last call that answered None did so

    def is_nvml_error(self, exc: BaseException) -> bool:
        error_type = getattr(self.m, "NVMLError", None)
        return isinstance(error_type, type) and isinstance(exc, error_type)

    def not_supported(self, exc: BaseException) -> bool:
        code = getattr(self.m, "NVML_ERROR_NOT_SUPPORTED", _NOT_SUPPORTED)
        return getattr(exc, "value", None) == code

    def call(self, what: str, fn_name: str, *args: Any) -> Any:
        fn = getattr(self.m, fn_name, None)
        if fn is None:
            self.why_none = f"this pynvml has no {fn_name}"
            self.notes.append(f"{what}: {self.why_none}")
            return None
        try:
            value = fn(*args)
        except Exception as exc:
            if self.is_nvml_error(exc) and self.not_supported(exc):
                self.why_none = NOT_SUPPORTED_REASON
                return None
            self.why_none = f"{type(exc).__name__}: {exc}"
            self.notes.append(f"{what}: {self.why_none}")
            return None
        if value is None:
            self.why_none = f"{fn_name} answered nothing"
        return value

    def nvlink_links(self, handle: Any, index: int) -> int | None:
        fn = getattr(self.m, "nvmlDeviceGetNvLinkState", None)
        if fn is None:
            self.why_none = "this pynvml has no nvmlDeviceGetNvLinkState"
            return None
        max_links = int(getattr(self.m, "NVML_NVLINK_MAX_LINKS", _DEFAULT_MAX_NVLINKS))
        enabled = getattr(self.m, "NVML_FEATURE_ENABLED", _FEATURE_ENABLED)
        active = 0
        for link in range(max_links):
            try:
                state = fn(handle, link)
            except Exception as exc:
                if link == 0 and self.is_nvml_error(exc) and self.not_supported(exc):
                    self.why_none = NOT_SUPPORTED_REASON
                    return None
                if link == 0 and not self.is_nvml_error(exc):
                    self.why_none = f"{type(exc).__name__}: {exc}"
                    self.notes.append(f"GPU {index} NVLink: {self.why_none}")
                    return None
                break  # past the device's last link (InvalidArgument / NotSupported)
            if state == enabled:
                active += 1
        return active


def probe_gpus(module: Any) -> tuple[tuple[GpuInfo, ...], list[str]]:
    nv = _Nvml(module)
    try:
        module.nvmlInit()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return (), [f"no GPU information: NVML could not start ({reason})"]
    try:
        count = nv.call("GPU count", "nvmlDeviceGetCount")
        if not count:
            return (), [*nv.notes, "NVML found no GPU"]
        system: dict[str, str] = {}
        driver = nv.call("driver version", "nvmlSystemGetDriverVersion")
        if driver is None:
            system["driver_version"] = nv.why_none
        cuda = nv.call("CUDA driver version", "nvmlSystemGetCudaDriverVersion")
        if cuda is None:
            system["cuda_driver_version"] = nv.why_none
        gpus = []
        for i in range(int(count)):
            handle = nv.call(f"GPU {i}", "nvmlDeviceGetHandleByIndex", i)
            if handle is None:
                continue
            gpus.append(_probe_gpu(nv, handle, i, driver, cuda, system))
        return tuple(gpus), nv.notes
    finally:
        try:
            module.nvmlShutdown()
        except Exception as exc:
            nv.notes.append(f"NVML shutdown: {type(exc).__name__}: {exc}")


def _probe_gpu(
    nv: _Nvml, handle: Any, i: int, driver: Any, cuda: Any, system: dict[str, str]
) -> GpuInfo:
    """One GPU's answers; `null_reasons` says why each field left None is None."""
    reasons = dict(system)

    def ask(field_name: str, fn_name: str) -> Any:
        value = nv.call(f"GPU {i} {field_name}", fn_name, handle)
        if value is None:
            reasons[field_name] = nv.why_none
        return value

    name = ask("name", "nvmlDeviceGetName")
    reasons.pop("name", None)  # the name falls back to "unknown", never None
    memory = ask("memory_total_bytes", "nvmlDeviceGetMemoryInfo")
    total = getattr(memory, "total", None)
    if memory is not None and total is None:
        reasons["memory_total_bytes"] = "nvmlDeviceGetMemoryInfo answered no total"
    nvlinks = nv.nvlink_links(handle, i)
    if nvlinks is None:
        reasons["nvlink_active_links"] = nv.why_none
    return GpuInfo(
        index=i,
        name=_text(name) if name is not None else "unknown",
        memory_total_bytes=int(total) if total is not None else None,
        pcie_gen_current=_opt_int(ask("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration")),
        pcie_gen_max=_opt_int(ask("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_current=_opt_int(ask("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth")),
        pcie_width_max=_opt_int(ask("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth")),
        nvlink_active_links=nvlinks,
        driver_version=_text(driver) if driver is not None else None,
        cuda_driver_version=_opt_int(cuda),
        null_reasons=reasons,
    )


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


class GpuUtilization:
    """Samples GPU `index`'s utilisation (NVML: percent of time a kernel was running) in a thread.

    `with GpuUtilization() as util: ...` then `util.samples`; no samples without NVML or a GPU.
    """

    def __init__(self, index: int = 0, interval_s: float = 0.1, nvml: Any = None) -> None:
        self.index, self.interval_s = index, interval_s
        self.nvml: Any = nvml if nvml is not None else load_pynvml()[0]
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuUtilization:
        if self.nvml is None:
            return self
        try:
            self.nvml.nvmlInit()
            handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception:
            return self  # no GPU: an empty series, like the probe's empty tuple
        self._thread = threading.Thread(target=self._run, args=(handle,), daemon=True)
        self._thread.start()
        return self

    def _run(self, handle: Any) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(int(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except Exception:
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self.nvml.nvmlShutdown()


def load_pynvml() -> tuple[ModuleType | None, str | None]:
    try:
        import pynvml
    except ImportError:
        return (
            None,
            f"no GPU probe available: nvidia-ml-py is not installed ({install_command('gpu')})",
        )
    except Exception as exc:  # a broken install raising at import
        return None, f"no GPU information: pynvml is not importable ({type(exc).__name__})"
    return pynvml, None
