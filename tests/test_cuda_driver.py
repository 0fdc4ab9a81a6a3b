"""The CUDA driver layer of tex.runtime.cuda: choosing the binding (NVIDIA's cuda-python or
ctypes), its errors, and a whole call through the cuda-python path against a stand-in
for ``cuda.bindings.driver`` whose memory and launches are the GPU simulator's."""
from __future__ import annotations

import ctypes
import sys
import types
from typing import Any

import numpy as np
import pytest

import tex
from tex.lower.stmt import BufferParam
from tex.runtime import cuda as rt
from tex.runtime.gpusim import SimulatedDriver


class _Result(int):
    """A stand-in for the bindings' ``CUresult`` enum (an int with a name)."""


class FakeCudaPython:
    """The slice of ``cuda.bindings.driver`` tex calls: each call returns
    ``(status, values...)``; memory and kernels are a ``SimulatedDriver``'s."""

    CUdevice_attribute = int

    def __init__(self, program: Any, fail: dict[str, int] | None = None) -> None:
        self.sim = SimulatedDriver(program)
        self.fail = fail or {}
        self.calls: list[str] = []
        self.current = None

    def _ok(self, name: str, *values: Any) -> tuple[Any, ...]:
        self.calls.append(name)
        return (_Result(self.fail.get(name, 0)), *values)

    def cuGetErrorName(self, code: int) -> tuple[Any, bytes]:
        return (_Result(0), {700: b"CUDA_ERROR_ILLEGAL_ADDRESS",
                             2: b"CUDA_ERROR_OUT_OF_MEMORY"}.get(int(code), b""))

    def cuGetErrorString(self, code: int) -> tuple[Any, bytes]:
        return (_Result(0), b"described by the driver")

    def cuInit(self, flags: int) -> tuple[Any, ...]:
        return self._ok("cuInit")

    def cuDeviceGetCount(self) -> tuple[Any, ...]:
        return self._ok("cuDeviceGetCount", 1)

    def cuDeviceGet(self, ordinal: int) -> tuple[Any, ...]:
        return self._ok("cuDeviceGet", ordinal)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[Any, ...]:
        return self._ok("cuDevicePrimaryCtxRetain", "ctx")

    def cuDeviceGetAttribute(self, attr: int, dev: int) -> tuple[Any, ...]:
        return self._ok("cuDeviceGetAttribute", {75: 9, 76: 0, 16: 132}[attr])

    def cuDeviceGetName(self, n: int, dev: int) -> tuple[Any, ...]:
        return self._ok("cuDeviceGetName", b"Fake GPU".ljust(n, b"\0"))

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[Any, ...]:
        self.current = ctx
        return self._ok("cuCtxSetCurrent")

    def cuModuleLoadData(self, image: bytes) -> tuple[Any, ...]:
        assert image.endswith(b"\0")
        return self._ok("cuModuleLoadData", self.sim.load_module(image[:-1].decode()))

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple[Any, ...]:
        return self._ok("cuModuleGetFunction", self.sim.function(module, name.decode()))

    def cuMemAlloc(self, nbytes: int) -> tuple[Any, ...]:
        return self._ok("cuMemAlloc", self.sim.alloc(nbytes))

    def cuMemFree(self, ptr: int) -> tuple[Any, ...]:
        self.sim.free(ptr)
        return self._ok("cuMemFree")

    def cuMemcpyHtoD(self, dst: int, src: int, nbytes: int) -> tuple[Any, ...]:
        self.sim.to_device(dst, src, nbytes)
        return self._ok("cuMemcpyHtoD")

    def cuMemcpyDtoH(self, dst: int, src: int, nbytes: int) -> tuple[Any, ...]:
        self.sim.to_host(dst, src, nbytes)
        return self._ok("cuMemcpyDtoH")

    def cuLaunchKernel(self, fn: str, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       shared: int, stream: int, params: int, extra: int) -> tuple[Any, ...]:
        assert self.current == "ctx" and shared == 0 and stream == 0 and extra == 0
        kernel = self.sim.kernels[fn]
        slots = (ctypes.c_void_p * len(kernel.params)).from_address(params)
        args = [(ctypes.c_uint64 if isinstance(p, BufferParam) else p.var.dtype.ctype
                 ).from_address(slot) for p, slot in zip(kernel.params, slots)]
        if not self.fail.get("cuLaunchKernel"):
            self.sim.launch(fn, (gx, gy, gz), (bx, by, bz), args)
        return self._ok("cuLaunchKernel")

    def cuCtxSynchronize(self) -> tuple[Any, ...]:
        return self._ok("cuCtxSynchronize")


def scaled_sum() -> tex.runtime.cuda.CudaFunction:
    """B[i] = A[i] * k over 100 elements (a buffer and a scalar parameter)."""
    A = tex.placeholder((100,), "float32", name="A")
    k = tex.var("k", "float32")
    B = tex.compute((100,), lambda i: A[i] * k, name="B")
    s = tex.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, tex.thread_axis("blockIdx.x"))
    s[B].bind(tx, tex.thread_axis("threadIdx.x"))
    return tex.build(s, [A, k, B], target="cuda")


def test_a_call_through_the_cuda_python_binding() -> None:
    f = scaled_sum()
    api = FakeCudaPython(f.program)
    driver = rt.CudaPythonDriver(api)
    assert (driver.capability, driver.sm_count, driver.name) == ((9, 0), 132, "Fake GPU")
    f._driver_factory = lambda: driver
    a = np.arange(100, dtype=np.float32)
    b = np.zeros(100, np.float32)
    f(a, 2.5, b)
    np.testing.assert_array_equal(b, a * np.float32(2.5))
    assert api.sim.launched == ["main_kernel0"]
    assert api.sim.memory == {}  # every device allocation freed
    assert api.calls[-3:] == ["cuMemcpyDtoH", "cuMemFree", "cuMemFree"]


def test_a_failed_bounds_check_through_the_cuda_python_binding() -> None:
    """A call's error slot is allocated, zeroed, passed to the kernel, read back after the
    launch and freed; the failure is raised after the outputs were copied back, and the
    next call starts from a fresh slot."""
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((16,), "int32", name="I")
    C = tex.compute((16,), lambda i: A[I[i]] * 2.0, name="C")
    s = tex.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    f = tex.build(s, [A, I, C], target="cuda")
    api = FakeCudaPython(f.program)
    f._driver_factory = lambda: rt.CudaPythonDriver(api)
    a = np.arange(1, 5, dtype=np.float32)
    ix = (np.arange(16) % 4).astype(np.int32)
    ix[9] = 4
    c = np.zeros(16, np.float32)
    with pytest.raises(tex.testing.OutOfBoundsError,
                       match=r"index 4 in dimension 0 of 'A' .*valid range \[0, 3\]"):
        f(a, ix, c)
    np.testing.assert_array_equal(c, np.where(ix < 4, a[np.minimum(ix, 3)], 0) * 2)
    assert api.sim.memory == {}  # the slot freed with the rest
    assert api.calls.count("cuMemAlloc") == 4  # A, I, C and the slot
    ix[9] = 1
    f(a, ix, c)
    np.testing.assert_array_equal(c, a[ix] * 2)


def test_driver_errors_carry_the_driver_error_name() -> None:
    f = scaled_sum()
    api = FakeCudaPython(f.program, fail={"cuLaunchKernel": 700})
    f._driver_factory = lambda: rt.CudaPythonDriver(api)
    with pytest.raises(rt.CudaError, match="cuLaunchKernel failed: "
                       "CUDA_ERROR_ILLEGAL_ADDRESS \\(700\\): described by the driver") as err:
        f(np.zeros(100, np.float32), 1.0, np.zeros(100, np.float32))
    assert err.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS" and err.value.code == 700
    assert api.sim.memory == {}  # freed on the error path too


def test_binding_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="TEX_CUDA_BINDING='cupy'"):
        rt.open_driver(binding="cupy")
    fake = FakeCudaPython(scaled_sum().program)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    assert rt.open_driver().binding == "cuda-python"  # preferred when installed
    assert rt.open_driver(binding="cuda-python").api is fake
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        with pytest.raises(RuntimeError, match="no CUDA driver"):
            rt.open_driver(binding="ctypes")
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # not installed
    monkeypatch.setitem(sys.modules, "cuda.cuda", None)
    with pytest.raises(RuntimeError, match="cuda-python is not installed"):
        rt.open_driver(binding="cuda-python")


def test_bindings_without_a_driver_library() -> None:
    """Real cuda-python (when installed) on a machine without libcuda: RuntimeError."""
    api = rt._cuda_python()
    if api is None:
        pytest.skip("cuda-python is not installed")
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        with pytest.raises(RuntimeError, match="no CUDA driver"):
            rt.CudaPythonDriver(api)
    else:  # pragma: no cover - a machine with a driver
        assert rt.CudaPythonDriver(api).sm_count > 0
