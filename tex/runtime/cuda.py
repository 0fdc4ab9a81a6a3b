"""Running PTX on an NVIDIA GPU: the CUDA driver API, and ``CudaFunction``.

The driver API is reached through NVIDIA's ``cuda-python`` bindings when they are installed
(``pip install tex[cuda]``), else through ctypes on ``libcuda.so.1`` (installed with the
NVIDIA driver on every machine that has a GPU; no CUDA toolkit needed);
``TEX_CUDA_BINDING=ctypes|cuda-python`` forces one. Nothing here touches a GPU at import:
the driver is loaded and initialized on the first call of a built function; without it, or
without a device, the call raises ``RuntimeError`` naming what is missing.
``get_source("ptx")`` never needs it.

``CudaFunction(*args)`` checks every argument like the CPU ``BuiltFunction`` (count, dtype,
shape, C-contiguity, writeable outputs that overlap nothing) and accepts, per buffer:

- a ``numpy.ndarray``: copied to the device before the kernels run; outputs are copied back
  (written in place);
- an object with ``__cuda_array_interface__`` (CuPy arrays, Numba device arrays, PyTorch
  CUDA tensors): its device memory is used in place, no copy;
- an object with ``__dlpack__`` whose ``__dlpack_device__`` is a CUDA device (JAX, and the
  above): used in place.

Root temporaries live in device memory allocated per call. Kernels run in order on the
default stream; the call returns after they finished (``cuCtxSynchronize``). A driver error
becomes ``CudaError`` (a ``RuntimeError``) with the driver's error name
(``CUDA_ERROR_ILLEGAL_ADDRESS``...).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import debug
from ..arith.extent import bind_extent
from ..ir.expr import Var
from ..ir.tensor import Tensor
from ..lower.gpu import DeviceProgram
from ..lower.stmt import BufferParam
from .module import (
    ArgSpec,
    ModuleAPI,
    SymbolicShapes,
    arg_specs,
    check_host_array,
    check_overlap,
    conversion_hint,
    data_pointer,
    param_signature,
    time_calls,
)

__all__ = ["CudaError", "Driver", "CudaPythonDriver", "open_driver", "get_driver",
           "CudaFunction", "DeviceModule"]


class CudaError(RuntimeError):
    """An error reported by the CUDA driver (``name``: e.g. ``CUDA_ERROR_OUT_OF_MEMORY``)."""

    def __init__(self, call: str, code: int, name: str, text: str = "") -> None:
        super().__init__(f"{call} failed: {name} ({code}){': ' + text if text else ''}")
        self.call = call
        self.code = code
        self.name = name


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

_LIBCUDA_NAMES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib")
_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
_NO_DRIVER = ("no CUDA driver: libcuda.so.1 was not found, so this machine cannot run "
              "target='cuda' functions (install the NVIDIA driver on a machine with an NVIDIA "
              "GPU); get_source('ptx') still works")


class Driver:
    """The CUDA driver API subset tex uses, on the primary context of one device, through
    ctypes on ``libcuda``. ``CudaPythonDriver`` is the same over NVIDIA's bindings."""

    binding = "ctypes"

    def __init__(self, device: int = 0) -> None:
        self.lock = threading.Lock()
        self._open()
        self._init()
        count = self._device_count()
        if count <= device:
            raise RuntimeError(f"no CUDA device {device}: the driver reports "
                               f"{count} device(s)")
        self.device = self._device_get(device)
        self.ctx = self._primary_context()
        self.capability = (self.attribute(_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                           self.attribute(_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.sm_count = self.attribute(_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.name = self._device_name()

    # -- set-up (one implementation per binding) -----------------------------------------
    def _open(self) -> None:
        lib = None
        for name in (*_LIBCUDA_NAMES, ctypes.util.find_library("cuda")):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise RuntimeError(_NO_DRIVER)
        self.lib = lib

    def _init(self) -> None:
        self.check("cuInit", self.lib.cuInit(0))

    def _device_count(self) -> int:
        count = ctypes.c_int(0)
        self.check("cuDeviceGetCount", self.lib.cuDeviceGetCount(ctypes.byref(count)))
        return count.value

    def _device_get(self, ordinal: int) -> Any:
        dev = ctypes.c_int(0)
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(dev), ordinal))
        return dev

    def _primary_context(self) -> Any:
        ctx = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain",
                   self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.device))
        return ctx

    def _device_name(self) -> str:
        name = ctypes.create_string_buffer(256)
        self.check("cuDeviceGetName", self.lib.cuDeviceGetName(name, 256, self.device))
        return name.value.decode(errors="replace")

    # -- the calls -------------------------------------------------------------------------
    def check(self, call: str, code: int) -> None:
        """Raise ``CudaError`` (with the driver's error name) unless ``code`` is success."""
        if code == 0:
            return
        name = ctypes.c_char_p()
        text = ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        raise CudaError(call, code, (name.value or b"CUDA_ERROR_UNKNOWN").decode(),
                        (text.value or b"").decode())

    def attribute(self, attr: int) -> int:
        v = ctypes.c_int(0)
        self.check("cuDeviceGetAttribute",
                   self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, self.device))
        return v.value

    def activate(self) -> None:
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(self.ctx))

    def load_module(self, ptx: str) -> Any:
        self.activate()
        mod = ctypes.c_void_p()
        image = ctypes.create_string_buffer(ptx.encode())
        self.check("cuModuleLoadData", self.lib.cuModuleLoadData(ctypes.byref(mod), image))
        return mod

    def function(self, module: Any, name: str) -> Any:
        fn = ctypes.c_void_p()
        self.check("cuModuleGetFunction",
                   self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()))
        return fn

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64(0)
        self.check("cuMemAlloc", self.lib.cuMemAlloc_v2(ctypes.byref(ptr),
                                                        ctypes.c_size_t(max(nbytes, 1))))
        return ptr.value

    def free(self, ptr: int) -> None:
        self.check("cuMemFree", self.lib.cuMemFree_v2(ctypes.c_uint64(ptr)))

    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.check("cuMemcpyHtoD", self.lib.cuMemcpyHtoD_v2(
                ctypes.c_uint64(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes)))

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.check("cuMemcpyDtoH", self.lib.cuMemcpyDtoH_v2(
                ctypes.c_void_p(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes)))

    def launch(self, fn: Any, grid: Sequence[int], block: Sequence[int],
               args: Sequence[Any]) -> None:
        """Launch with ``args``: ctypes values, one per kernel parameter."""
        ptrs = _param_array(args)
        self.check("cuLaunchKernel", self.lib.cuLaunchKernel(
            fn, *[ctypes.c_uint(g) for g in grid], *[ctypes.c_uint(b) for b in block],
            ctypes.c_uint(0), None, ptrs, None))

    def synchronize(self) -> None:
        self.check("cuCtxSynchronize", self.lib.cuCtxSynchronize())


def _param_array(args: Sequence[Any]) -> ctypes.Array[ctypes.c_void_p]:
    """The ``void**`` of kernel parameters: one pointer to each ctypes value."""
    return (ctypes.c_void_p * max(len(args), 1))(
        *[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])


class CudaPythonDriver(Driver):
    """``Driver`` over NVIDIA's ``cuda-python`` bindings (``cuda.bindings.driver``, or
    ``cuda.cuda`` before 12.6), used when they are installed: they find the driver library
    the way NVIDIA supports, and their calls return ``(CUresult, value...)`` tuples."""

    binding = "cuda-python"

    def __init__(self, api: Any, device: int = 0) -> None:
        self.api = api
        super().__init__(device)

    def _open(self) -> None:
        return None  # the bindings load libcuda themselves, at the first call

    def _call(self, call: str, *args: Any) -> Any:
        """``api.<call>(*args)``: its values after the status (one, a tuple or None)."""
        try:
            out = getattr(self.api, call)(*args)
        except (OSError, RuntimeError) as err:  # the bindings' "library not found"
            if call == "cuInit":
                raise RuntimeError(f"{_NO_DRIVER} ({type(err).__name__}: {err})") from None
            raise
        status, values = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
        self.check(call, status)
        return values[0] if len(values) == 1 else (values or None)

    def check(self, call: str, code: Any) -> None:
        if int(code) == 0:
            return
        name = text = b""
        # a failing name lookup must not hide the error itself
        with contextlib.suppress(Exception):
            _, name = self.api.cuGetErrorName(code)
            _, text = self.api.cuGetErrorString(code)
        name = name.decode() if isinstance(name, bytes) else str(name or "")
        text = text.decode() if isinstance(text, bytes) else str(text or "")
        raise CudaError(call, int(code), name or "CUDA_ERROR_UNKNOWN", text)

    def _init(self) -> None:
        self._call("cuInit", 0)

    def _device_count(self) -> int:
        return int(self._call("cuDeviceGetCount"))

    def _device_get(self, ordinal: int) -> Any:
        return self._call("cuDeviceGet", ordinal)

    def _primary_context(self) -> Any:
        return self._call("cuDevicePrimaryCtxRetain", self.device)

    def _device_name(self) -> str:
        name = self._call("cuDeviceGetName", 256, self.device)
        raw = bytes(name).split(b"\0", 1)[0]
        return raw.decode(errors="replace")

    def attribute(self, attr: int) -> int:
        return int(self._call("cuDeviceGetAttribute",
                              self.api.CUdevice_attribute(attr), self.device))

    def activate(self) -> None:
        self._call("cuCtxSetCurrent", self.ctx)

    def load_module(self, ptx: str) -> Any:
        self.activate()
        return self._call("cuModuleLoadData", ptx.encode() + b"\0")

    def function(self, module: Any, name: str) -> Any:
        return self._call("cuModuleGetFunction", module, name.encode())

    def alloc(self, nbytes: int) -> int:
        return int(self._call("cuMemAlloc", max(nbytes, 1)))

    def free(self, ptr: int) -> None:
        self._call("cuMemFree", ptr)

    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self._call("cuMemcpyHtoD", dst, src, nbytes)

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self._call("cuMemcpyDtoH", dst, src, nbytes)

    def launch(self, fn: Any, grid: Sequence[int], block: Sequence[int],
               args: Sequence[Any]) -> None:
        ptrs = _param_array(args)  # the bindings take a void** as an address
        self._call("cuLaunchKernel", fn, *grid, *block, 0, 0, ctypes.addressof(ptrs), 0)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")


def _cuda_python() -> Any | None:
    """NVIDIA's driver bindings module when installed, else None."""
    try:
        from cuda.bindings import driver as api  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cuda as api  # older cuda-python
        except ImportError:
            return None
    return api


@functools.cache
def _have_driver() -> bool:
    """Whether a CUDA driver opens on this machine (probed once, as ``_driver``)."""
    try:
        _driver()
    except RuntimeError:
        return False
    return True


def open_driver(device: int = 0, binding: str | None = None) -> Driver:
    """A driver on ``device``: through ``cuda-python`` when installed, else ctypes.

    ``binding`` (default ``$TEX_CUDA_BINDING`` or ``"auto"``) forces ``"cuda-python"`` or
    ``"ctypes"``.
    """
    choice = (binding or debug.env("TEX_CUDA_BINDING") or "auto").strip().lower()
    if choice not in ("auto", "cuda-python", "ctypes"):
        raise ValueError(f"TEX_CUDA_BINDING={choice!r}: expected 'auto', 'cuda-python' or "
                         "'ctypes'")
    if choice != "ctypes":
        api = _cuda_python()
        if api is not None:
            return CudaPythonDriver(api, device)
        if choice == "cuda-python":
            raise RuntimeError("TEX_CUDA_BINDING=cuda-python but NVIDIA's cuda-python is "
                               "not installed (pip install cuda-python)")
    return Driver(device)


_DRIVER_LOCK = threading.Lock()


@functools.cache
def _driver() -> Driver:
    return open_driver()


def get_driver() -> Driver:
    """The process's driver on device 0 (initialized on first use).

    Raises
    ------
    RuntimeError
        No driver library, or no device.
    """
    with _DRIVER_LOCK:
        return _driver()


# --------------------------------------------------------------------------------------
# Device arrays from other libraries
# --------------------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_DL_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged
_DL_KIND = {0: "i", 1: "u", 2: "f", 6: "b"}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _contiguous(shape: tuple[int, ...], strides: Sequence[int] | None, itemsize: int,
                in_bytes: bool) -> bool:
    if strides is None:
        return True
    expect = itemsize if in_bytes else 1
    for n, s in zip(reversed(shape), reversed(list(strides))):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _device_view(a: Any, spec: ArgSpec, where: str) -> tuple[int, str] | None:
    """``(device pointer, how)`` of a CUDA array object, or None if ``a`` is not one."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        ptr, readonly = cai["data"]
        strides = cai.get("strides")
        _check_view(spec, where, dtype, shape,
                    _contiguous(shape, strides, dtype.itemsize, True), bool(readonly))
        return int(ptr or 0), "cuda_array_interface"
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        dev_type, _ = a.__dlpack_device__()
        if int(dev_type) not in _DL_CUDA:
            return None
        capsule = a.__dlpack__()
        managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        t = managed.dl_tensor
        kind = _DL_KIND.get(t.dtype.code)
        if kind is None or t.dtype.lanes != 1:
            raise TypeError(f"{where}: DLPack dtype code {t.dtype.code} is not supported")
        dtype = np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{t.dtype.bits // 8}")
        shape = tuple(int(t.shape[k]) for k in range(t.ndim))
        strides = None if not t.strides else [int(t.strides[k]) for k in range(t.ndim)]
        _check_view(spec, where, dtype, shape,
                    _contiguous(shape, strides, dtype.itemsize, False), False)
        # the capsule keeps its producer's memory alive while ``a`` lives (the caller holds
        # ``a`` for the call); tex does not take ownership, so the capsule is not consumed
        return int((t.data or 0) + t.byte_offset), "dlpack"
    return None


def _check_view(spec: ArgSpec, where: str, dtype: np.dtype, shape: tuple[int, ...],
                contiguous: bool, readonly: bool) -> None:
    if dtype != spec.dtype:
        raise TypeError(f"{where} must have dtype {spec.dtype.name}, got {dtype.name}")
    if shape != spec.shape:
        raise ValueError(f"{where} must have shape {spec.shape}, got {shape}")
    if not contiguous:
        raise ValueError(f"{where} must be C-contiguous (make a contiguous copy on the device)")
    if spec.is_output and readonly:
        raise ValueError(f"output {where} is read-only; pass a writeable array")


# --------------------------------------------------------------------------------------
# The built function
# --------------------------------------------------------------------------------------

class DeviceModule:
    """The device code of a CUDA build, as TVM's ``imported_modules[0]``: its PTX."""

    type_key = "ptx"

    def __init__(self, owner: CudaFunction) -> None:
        self._owner = owner

    def get_source(self, fmt: str = "") -> str:
        """The PTX ("", "ptx"), or another format of ``CudaFunction.get_source``."""
        return self._owner.get_source(fmt or "ptx")

    def __repr__(self) -> str:
        return f"DeviceModule(ptx of {self._owner.name})"


class CudaFunction(ModuleAPI):
    """A function built for ``target="cuda"``; call it with NumPy arrays or CUDA arrays.

    Attributes
    ----------
    name, args, target : as ``BuiltFunction``
    program : DeviceProgram
        The kernels and their launch configurations.
    """

    def __init__(self, program: DeviceProgram, sources: dict[str, str], target: str,
                 driver: Callable[[], Any] = get_driver) -> None:
        func = program.func
        self.name = func.name
        self.target = target
        self.program = program
        self.args: list[Tensor | Var] = [
            p.tensor if isinstance(p, BufferParam) else p.var for p in func.params]
        self._sources = sources
        self._driver_factory = driver
        self._loaded: tuple[Any, dict[str, Any]] | None = None
        self._lowered_text = str(func)
        self._specs = arg_specs(param_signature(func.params))
        self._shapes = SymbolicShapes(param_signature(func.params), self.name)

    type_key = "cuda"

    @property
    def imported_modules(self) -> list[Any]:
        """The device code (``[DeviceModule]``: ``.get_source()`` is the PTX)."""
        return [DeviceModule(self)]

    # -- calling ---------------------------------------------------------------------------
    def _load(self) -> tuple[Any, dict[str, Any]]:
        if self._loaded is None:
            driver = self._driver_factory()
            module = driver.load_module(self._sources["ptx"])
            fns = {k.name: driver.function(module, k.name) for k in self.program.kernels}
            self._loaded = (driver, fns)
        return self._loaded

    def _where(self, spec: ArgSpec) -> str:
        return f"{self.name}: {spec.where()}"

    def __call__(self, *arrays: Any) -> None:
        if debug.env("TEX_CUDA_SIMULATE") == "1" and not _have_driver():
            # no GPU here, and the simulator asked for: code written for a GPU (TVM's
            # tutorials, a test suite) runs unchanged, every thread on the CPU
            self.simulate(*arrays)
            return
        plan = self._plan(arrays)
        driver, fns = self._load()
        with driver.lock:
            driver.activate()
            self._run(driver, fns, plan)

    def simulate(self, *arrays: Any) -> None:
        """Run on the CPU (``tex.runtime.gpusim``): every thread of every block in
        lockstep, with checks for races, out-of-bounds accesses and divergent barriers.
        Takes NumPy arrays like a call; for testing schedules without a GPU (slow)."""
        from .gpusim import SimulatedDriver
        plan = self._plan(arrays)
        driver = SimulatedDriver(self.program)
        self._run(driver, {k.name: k.name for k in self.program.kernels}, plan)

    def _plan(self, arrays: Sequence[Any]) -> list[tuple[ArgSpec, Any, str, int]]:
        """Every argument checked (before the driver is touched): (spec, value, how, ptr)."""
        specs = self._specs
        sizes = self._shapes.check_call(specs, arrays, self._signature)
        if sizes is not None:  # this call's shapes
            specs = tuple(dataclasses.replace(sp, shape=sizes.shapes[sp.position])
                          if sp.is_buffer else sp for sp in specs)
        plan: list[tuple[ArgSpec, Any, str, int]] = []  # (spec, value, how, pointer)
        for spec, a in zip(specs, arrays):
            if not spec.is_buffer:
                plan.append((spec, spec.convert(a, spec), "scalar", 0))  # type: ignore[misc]
                continue
            if isinstance(a, np.ndarray):
                check_host_array(self.name, spec, a)
                plan.append((spec, a, "host", data_pointer(a)))
                continue
            view = _device_view(a, spec, self._where(spec))
            if view is None:
                raise TypeError(f"{self._where(spec)} must be a numpy.ndarray or a CUDA array "
                                f"(__cuda_array_interface__ or DLPack) of {spec.dtype.name}"
                                f"{list(spec.shape)}, got {type(a).__module__}."
                                f"{type(a).__qualname__}{conversion_hint(a)}")
            plan.append((spec, a, view[1], view[0]))
        if sizes is not None and len(arrays) < len(specs):
            for spec, v in zip(specs[len(arrays):], sizes.derived):
                plan.append((spec, spec.convert(v, spec), "scalar", 0))  # type: ignore[misc]
        self._check_overlap(plan)
        return plan

    def _run(self, driver: Any, fns: dict[str, Any], plan: list[tuple[ArgSpec, Any, str, int]]
             ) -> None:
        func = self.program.func
        owned: list[int] = []
        try:
            values: dict[Any, Any] = {}
            copies: list[tuple[np.ndarray, int]] = []
            sizes: dict[Var, int] = {}  # the shape variables' values (symbolic shapes)
            for p, (spec, a, how, ptr) in zip(func.params, plan):
                if how == "scalar":
                    values[p.var] = p.var.dtype.ctype(a)  # type: ignore[union-attr]
                    sizes[p.var] = int(a)  # type: ignore[union-attr]
                    continue
                if how == "host":
                    dev = driver.alloc(a.nbytes)
                    owned.append(dev)
                    if not spec.is_output:
                        driver.to_device(dev, ptr, a.nbytes)
                    else:
                        copies.append((a, dev))
                    ptr = dev
                values[p.buffer] = ctypes.c_uint64(ptr)  # type: ignore[union-attr]
            for t in self.program.temps:
                dev = driver.alloc(max(1, int(bind_extent(t.shape[0], sizes))) *
                                   t.dtype.itemsize)
                owned.append(dev)
                values[t] = ctypes.c_uint64(dev)
            # the error slot of the bounds checks: one per call, so concurrent calls on
            # other streams or threads never see each other's failures
            slot = self.program.error_slot
            record = np.zeros(2, np.int64)
            if slot is not None:
                dev = driver.alloc(record.nbytes)
                owned.append(dev)
                driver.to_device(dev, record.ctypes.data, record.nbytes)
                values[slot] = ctypes.c_uint64(dev)
            for k, loops in self.program.launches(sizes):
                for v, x in loops.items():  # (a host loop's value: a scan's step)
                    values[v] = v.dtype.ctype(x)
                args = [values[p.buffer if isinstance(p, BufferParam) else p.var]
                        for p in k.params]
                grid = k.launch_grid(sizes)
                if 0 not in grid:  # (a symbolic extent of 0: nothing to launch)
                    driver.launch(fns[k.name], grid, k.block, args)
            driver.synchronize()
            for a, dev in copies:
                driver.to_host(data_pointer(a), dev, a.nbytes)
            if slot is not None:
                driver.to_host(record.ctypes.data, values[slot].value, record.nbytes)
        finally:
            for dev in owned:
                driver.free(dev)
        error = self.program.bounds_error(record)
        if error is not None:
            raise error

    def _check_overlap(self, plan: list[tuple[ArgSpec, Any, str, int]]) -> None:
        """Outputs overlap no other argument in the same memory (host or device)."""
        for on_host in (True, False):
            spans = [(ptr, ptr + int(np.prod(spec.shape)) * spec.dtype.itemsize, spec.position)
                     for spec, _, how, ptr in plan
                     if how != "scalar" and (how == "host") == on_host]
            if len(spans) > 1:
                check_overlap(self.name, self._specs, spans)

    def _signature(self) -> str:
        return ", ".join(
            f"{'out ' if s.is_output else ''}{s.name}: {s.dtype.name}{list(s.shape)}"
            if s.is_buffer else f"{s.name}: {s.dtype.name}" for s in self._specs)

    # -- inspection -----------------------------------------------------------------------
    def get_source(self, fmt: str = "ptx") -> str:
        """The generated code: "ptx", "ll"/"llvm" (optimized NVPTX LLVM IR), "ll.raw" (as
        emitted) or "kernels" (the lowered kernels with their launch configurations)."""
        key = {"": "ptx", "ll": "ll", "llvm": "ll", "ll.opt": "ll", "ll.raw": "ll.raw",
               "llvm.raw": "ll.raw", "ptx": "ptx", "kernels": "kernels"}.get(fmt)
        if key is None:
            raise ValueError(f"get_source: unknown format {fmt!r} for a CUDA function; "
                             "expected 'ptx', 'll', 'll.raw' or 'kernels'")
        return self._sources[key]

    def benchmark(self, *args: Any, number: int = 10, repeat: int = 5) -> float:
        """Median seconds per call (transfers of NumPy arguments included; pass CUDA
        arrays to time the kernels alone)."""
        return time_calls(self, args, number, repeat)

    @property
    def lowered(self) -> str:
        """The loop nest this function was compiled from (printed)."""
        return self._lowered_text

    def __repr__(self) -> str:
        return f"CudaFunction({self.name}({self._signature()}), target='{self.target}')"
