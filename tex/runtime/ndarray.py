"""TVM's device and array spellings over NumPy: ``tex.cpu()``, ``tex.cuda()``,
``tex.device(...)`` and ``tex.nd.array(x, dev)``/``tex.nd.empty(...)``.

tex's built functions take NumPy arrays (a CUDA function copies them to the GPU and back),
so these are thin: a ``Device`` names where a TVM program meant the data to live, and an
``NDArray`` is a ``numpy.ndarray`` (a subclass: every built function, every NumPy function
takes it) with TVM's methods: ``.numpy()``/``.asnumpy()`` (a plain copy), ``.copyfrom``,
``.copyto`` and ``.device``. The data always lives in host memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtype import as_dtype
from ..target import target_kind

__all__ = ["Device", "FOREIGN_DEVICES", "NDArray", "array", "cpu", "cuda", "device", "empty",
           "gpu"]

# TVM's other device types: tex makes no code for them, so such a device never exists
FOREIGN_DEVICES = ("opencl", "cl", "vulkan", "metal", "rocm", "ext_dev", "hexagon", "webgpu",
                   "aocl", "sdaccel", "vpi")


@dataclass(frozen=True)
class Device:
    """A device as TVM names one: its type (``"cpu"`` or ``"cuda"``) and ordinal."""

    device_type: str
    device_id: int = 0

    @property
    def exist(self) -> bool:
        """Whether the device is present (a CUDA device: the driver finds it)."""
        if self.device_type == "cpu":
            return self.device_id == 0
        if self.device_type != "cuda":
            return False
        from .cuda import CudaError, open_driver  # the driver only when asked
        try:
            open_driver(self.device_id)
        except (CudaError, RuntimeError, OSError):
            return False
        return True

    def sync(self) -> None:
        """Wait for the device: a no-op (every call of a built function returns after its
        kernels finished)."""

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def _ordinal(dev_id: Any) -> int:
    if isinstance(dev_id, (bool, np.bool_)) or not isinstance(dev_id, (int, np.integer)) \
            or dev_id < 0:
        raise ValueError(f"device id must be an int >= 0, got {dev_id!r}")
    return int(dev_id)


def cpu(dev_id: int = 0) -> Device:
    """The host CPU (TVM's ``tvm.cpu(0)``)."""
    return Device("cpu", _ordinal(dev_id))


def cuda(dev_id: int = 0) -> Device:
    """CUDA GPU ``dev_id`` (TVM's ``tvm.cuda(0)``)."""
    return Device("cuda", _ordinal(dev_id))


gpu = cuda


def device(dev_type: Any, dev_id: int = 0) -> Device:
    """A device by TVM's names: ``"cpu"``/``"llvm"``, ``"cuda"``/``"gpu"``/``"nvptx"``, a
    target string (``"llvm -mcpu=..."``) or a ``tex.target.Target``."""
    kind_attr = getattr(getattr(dev_type, "kind", None), "name", None)
    name = kind_attr if isinstance(kind_attr, str) else dev_type
    if isinstance(name, str) and name.strip().lower() in ("cpu", "gpu"):
        return cpu(dev_id) if name.strip().lower() == "cpu" else cuda(dev_id)
    if isinstance(name, str) and name.strip().lower() in FOREIGN_DEVICES:
        # as TVM on a machine without the device: one that does not exist
        return Device(name.strip().lower(), _ordinal(dev_id))
    if not isinstance(name, str):
        raise TypeError(f"device: expected a device or target name such as 'cpu' or "
                        f"'cuda', got {type(dev_type).__name__} {dev_type!r}")
    try:
        kind = target_kind(name, "device")
    except ValueError:
        raise ValueError(f"device: unknown device {dev_type!r}; expected 'cpu', 'llvm', "
                         "'cuda' or 'nvptx'") from None
    return cuda(dev_id) if kind == "cuda" else cpu(dev_id)


# the host (a constant: every array made without a device is on it)
_HOST = Device("cpu", 0)


class NDArray(np.ndarray):
    """A NumPy array with TVM's ``NDArray`` methods (module docstring)."""

    _device: Device

    def __array_finalize__(self, obj: Any) -> None:
        self._device = getattr(obj, "_device", None) or _HOST

    @property
    def device(self) -> Device:
        """The device the array was made for."""
        return self._device

    dev = device

    def numpy(self) -> np.ndarray:
        """A plain ``numpy.ndarray`` copy (as TVM's ``.numpy()``)."""
        return np.array(self, copy=True).view(np.ndarray)

    asnumpy = numpy

    def copyfrom(self, source: Any) -> NDArray:
        """Copy ``source`` (an array of the same shape) into this array; returns it."""
        src = np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match the array's "
                             f"{self.shape}")
        np.copyto(self, src, casting="same_kind")
        return self

    def copyto(self, target: Any) -> NDArray:
        """Copy into ``target`` (an array), or into a new array on ``target`` (a Device)."""
        if isinstance(target, Device):
            return array(self, target)
        if not isinstance(target, np.ndarray):
            raise TypeError(f"copyto: expected an array or a Device, got "
                            f"{type(target).__name__}")
        np.copyto(target, self, casting="same_kind")
        return target if isinstance(target, NDArray) else array(target)


def _on(a: np.ndarray, dev: Device | None) -> NDArray:
    if dev is not None and not isinstance(dev, Device):
        raise TypeError(f"expected a device such as tex.cpu(0), got {type(dev).__name__} "
                        f"{dev!r}")
    if dev is not None and dev.device_type not in ("cpu", "cuda"):
        raise ValueError(f"no array can live on {dev!r}: tex runs on the host CPU and NVIDIA "
                         "GPUs only")
    out = a.view(NDArray)
    out._device = dev or cpu(0)
    return out


def array(arr: Any, device: Device | None = None) -> NDArray:
    """A C-contiguous copy of ``arr`` (any array-like) as an ``NDArray``."""
    return _on(np.array(np.asarray(arr), order="C", copy=True), device)


def empty(shape: Any, dtype: Any = "float32", device: Device | None = None) -> NDArray:
    """A new array of ``shape`` and ``dtype`` (its contents undefined, as TVM's)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    return _on(np.empty(shape, as_dtype(dtype, "nd.empty").numpy), device)
