"""GPU kernels -> LLVM IR for NVPTX -> PTX, through llvmlite and LLVM's NVPTX backend.

``compile_ptx(program, target)`` takes the kernels of a ``DeviceProgram``
(``tex.lower.gpu.split_kernels``) to one PTX module. Statements and expressions are emitted
by the CPU backend's scalar emitter (``tex.codegen.emit``), so integer division, float min/max,
casts, lazy selects and bool storage mean the same on both targets; this module adds what
differs on a GPU:

- each kernel is a ``ptx_kernel`` function (LLVM's calling convention for ``.entry``); a
  buffer parameter is a ``noalias`` pointer (NVPTX turns it into a global-space pointer),
  a scalar is passed by value;
- hardware indices are ``llvm.nvvm.read.ptx.sreg.{tid,ctaid}.{x,y,z}``, read once at entry;
- ``shared`` buffers are internal ``addrspace(3)`` arrays of the module, ``local`` buffers
  per-thread ``alloca`` s; a barrier is ``llvm.nvvm.barrier0`` (``bar.sync 0``);
- math functions call CUDA's libdevice (``__nv_expf``, ``__nv_sin``, ...: NVIDIA's
  correctly documented implementations, within 1-4 ulp) when a CUDA toolkit is found
  (``TEX_LIBDEVICE``, ``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``, or next to
  ``nvcc``); the bitcode is linked into the module, everything but the kernels made
  internal, and LLVM's O3 pipeline (which runs ``NVVMReflect``) keeps only what is used.
  Without libdevice, float32 math uses ``tex.codegen.vecmath``: ``exp``, ``log`` (2 ulp) and
  ``tanh`` (3 ulp) as on the CPU; ``sin``, ``cos``, ``tan`` (whole float32 range: Cody-Waite
  reduction below 2^17, Payne-Hanek above) and ``pow`` computed in float64 and rounded
  once (0.5 ulp measured, sin/cos/tan over every float32), ``log2`` and ``log10`` within
  1.14 ulp; float ``%`` exactly, as C's ``fmodf``. ``erf`` and ``sigmoid`` are legalized
  as on the CPU. The float64 functions (``exp`` ... ``pow``, ``erf``, float64 ``%``) still
  raise ``ValueError`` naming the function.
- ``sqrt`` is ``llvm.sqrt`` (``sqrt.rn``, correctly rounded), ``floor``/``ceil``/``trunc``/
  ``round`` and ``abs`` are LLVM intrinsics NVPTX lowers to single instructions.

LLVM's pipeline and the NVPTX backend run on a compile worker (``tex.codegen.jobs``): a
child process with a deadline, retried with a reduced pipeline when LLVM crashes or never
finishes. ``assemble(ptx, arch)`` runs ``ptxas`` (when installed) to check a module and return the
cubin. ``TEX_DUMP=ptx.llvm,ptx.llvm.opt,ptx`` prints the stages.
"""
from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .. import debug
from ..arith import Interval, range_interval
from ..debug import InternalError
from ..dtype import DType
from ..ir.expr import Binary, Op, Range, TensorRead, Unary, Var
from ..lower.bounds_check import BoundsReportOp
from ..lower.gpu import DeviceProgram, Kernel
from ..lower.passes import loop_domains
from ..lower.stmt import (
    Allocate,
    Barrier,
    BufferParam,
    For,
    ForKind,
    Nested,
    Stmt,
    symbol_name,
)
from ..target import CudaTarget
from . import jobs
from .emit import FunctionEmitter
from .host import LLVM_LOCK, run_default_pipeline
from .irtypes import I32, I64, PTR, VOID, abi_type, local_name, scalar_type, storage_type
from .module import CodegenOptions, ModuleEmitter
from .vecmath import FALLBACK, VECMATH, fallback_function, vecmath_function

__all__ = ["PTXModule", "compile_ptx", "emit_ptx_llvm", "optimized_ptx", "find_libdevice",
           "find_ptxas", "assemble", "TRIPLE", "LIBDEVICE_UNARY"]

TRIPLE = "nvptx64-nvidia-cuda"
MAX_LOCAL_BYTES = 64 * 1024  # per-thread local buffers larger than this are refused
_SHARED_PTR = ir.PointerType(addrspace=3)

# op -> libdevice base name: __nv_<name>f (float32) or __nv_<name> (float64)
LIBDEVICE_UNARY: dict[Op, str] = {
    Op.EXP: "exp", Op.LOG: "log", Op.LOG2: "log2", Op.LOG10: "log10", Op.SIN: "sin",
    Op.COS: "cos", Op.TAN: "tan", Op.TANH: "tanh", Op.ERF: "erf",
}
_SREG = {"threadIdx": "tid", "blockIdx": "ctaid"}


# --------------------------------------------------------------------------------------
# Toolkit discovery
# --------------------------------------------------------------------------------------

def _toolkit_roots() -> list[Path]:
    roots = [debug.env("CUDA_HOME"), debug.env("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    return [Path(r) for r in roots if r]


@functools.cache
def find_libdevice() -> str | None:
    """Path of CUDA's ``libdevice.10.bc``: ``$TEX_LIBDEVICE`` (a file; empty or ``none`` to
    disable), else under the CUDA toolkit; None when not found."""
    env = debug.env("TEX_LIBDEVICE")
    if env is not None:
        if env.strip().lower() in ("", "none", "0"):
            return None
        if not Path(env).is_file():
            raise ValueError(f"TEX_LIBDEVICE={env!r} is not a file (expected the path of "
                             "libdevice.10.bc, or 'none')")
        return env
    for root in _toolkit_roots():
        cand = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if cand.is_file():
            return str(cand)
    return None


@functools.cache
def find_ptxas() -> str | None:
    """Path of ``ptxas`` (PATH first, then the CUDA toolkit), or None."""
    found = shutil.which("ptxas")
    if found:
        return found
    for root in _toolkit_roots():
        cand = root / "bin" / "ptxas"
        if cand.is_file():
            return str(cand)
    return None


def assemble(ptx: str, arch: str = "sm_90") -> bytes | None:
    """Assemble ``ptx`` with ``ptxas -arch=<arch>``; the cubin, or None without ptxas.

    Raises
    ------
    RuntimeError
        When ptxas rejects the module (its messages included).
    """
    ptxas = find_ptxas()
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tex-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(out)],
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ptxas -arch={arch} rejected the PTX:\n"
                               f"{proc.stderr.strip() or proc.stdout.strip()}")
        return out.read_bytes()


# --------------------------------------------------------------------------------------
# Emitters
# --------------------------------------------------------------------------------------

class _PTXModuleEmitter(ModuleEmitter):
    """What the kernels of one module share (the llvmlite module, declarations)."""

    def __init__(self, kernel: Kernel, options: CodegenOptions, module: ir.Module,
                 libdevice: bool) -> None:
        super().__init__(kernel.as_func(), options, module, max_lanes=1)
        self.kernel = kernel
        self.libdevice = libdevice

    def domains(self) -> dict[Var, Interval]:
        """The loop variables' ranges and the hardware indices' (the launch's shape)."""
        dom = loop_domains(self.func.body)
        dims = dict(zip(("x", "y", "z"), zip(self.kernel.grid, self.kernel.block)))
        for v in self.kernel.indices:
            kind, axis = v.name.split(".")
            n = dims[axis][0 if kind == "blockIdx" else 1]
            # (a grid of symbolic extent: the index's range as a symbolic interval)
            dom[v] = Interval(0, n - 1) if isinstance(n, int) else range_interval(Range(0, n))
        return dom


class _PTXFunctionEmitter(FunctionEmitter):
    """One kernel's body."""

    m: _PTXModuleEmitter
    # a kernel's SIMD loops run serially per thread (lower.gpu): no vectorizer hints
    LOOP_HINTS = False
    # 32-bit index arithmetic, as CUDA compilers emit it (64-bit multiplies cost several
    # instructions on the GPU; addresses are widened once, at the access)
    WIDE_INDEX = False

    def bind_indices(self) -> None:
        """Read the kernel's hardware indices (``threadIdx.x``...) once, at entry."""
        for v in self.m.kernel.indices:
            kind, axis = v.name.split(".")
            fn = self.m.declare(f"llvm.nvvm.read.ptx.sreg.{_SREG[kind]}.{axis}", I32, [])
            self.vars[v] = self.b.call(fn, [], name=v.name)

    def report(self, e: TensorRead, ix: ir.Value) -> ir.Value:
        """A failed bounds check on the GPU: the first one of the launch (any thread)
        stores its number in the kernel's error slot with a compare-and-swap from 0, then
        its index (``tex.lower.gpu``); the read gives 0."""
        kernel = self.m.kernel
        op = e.tensor.op
        assert kernel.error_slot is not None and isinstance(op, BoundsReportOp)
        b = self.b
        slot = self.bufs[kernel.error_slot]
        number = ir.Constant(I64, kernel.checks.index(op) + 1)
        index = self.to_i64(ix, e.indices[0].dtype)
        won = b.extract_value(b.cmpxchg(slot, ir.Constant(I64, 0), number, "monotonic",
                                        "monotonic"), 1)
        with b.if_then(won, likely=False):
            b.store(index, b.gep(slot, [ir.Constant(I64, 1)], inbounds=True,
                                 source_etype=I64), align=8)
        d = e.tensor.dtype
        return ir.Constant(scalar_type(d), 0.0 if d.is_float else 0)

    def visit(self, s: Stmt) -> Nested[None]:
        """``s``; a ``Barrier`` is ``bar.sync 0``."""
        if isinstance(s, Barrier):
            self.b.call(self.m.declare("llvm.nvvm.barrier0", VOID, []), [])
            self.forget_loads()  # the block's other threads stored before it
            return
        yield super().visit(s)

    def loop(self, s: For) -> Nested[None]:
        """Serial and unrolled loops only (the kernel split bound the others)."""
        if s.kind in (ForKind.THREAD, ForKind.PARALLEL, ForKind.VECTORIZED):
            raise InternalError(f"loop '{s.var.name}' of kind {s.kind.value} in a kernel "
                                "(tex.lower.gpu should have removed it)", self.m.func)
        yield super().loop(s)

    @contextlib.contextmanager
    def allocation(self, s: Allocate) -> Iterator[None]:
        """Shared and local buffers (see the module doc)."""
        buf = s.buffer
        st = storage_type(buf.dtype)
        if not isinstance(buf.shape[0], int):
            raise ValueError(
                f"build(target='cuda'): the {s.scope} buffer '{buf.name}' has the symbolic "
                f"size {buf.shape[0]}; shared and local memory are sized when the kernel is "
                "compiled: compute the stage at a loop whose region is a constant tile "
                "(split the symbolic axis by a constant first)")
        n = int(buf.shape[0])
        if s.scope == "shared":
            arr = ir.ArrayType(st, n)
            g = ir.GlobalVariable(self.m.ir, arr,
                                  f"{self.m.kernel.name}.{symbol_name(buf.name)}",
                                  addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(arr, ir.Undefined)
            g.align = 16
            first = self.b.gep(g, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True,
                               source_etype=arr, name=local_name(buf.name))
            first.type = _SHARED_PTR  # llvmlite types it as a typed pointer
            self.bufs[buf] = first
        elif s.scope == "local":
            if n * buf.dtype.itemsize > MAX_LOCAL_BYTES:
                raise ValueError(f"build(target='cuda'): the local buffer '{buf.name}' holds "
                                 f"{n * buf.dtype.itemsize} bytes per thread (at most "
                                 f"{MAX_LOCAL_BYTES}); compute it at an inner loop")
            self.bufs[buf] = self.alloca(st, buf.name, count=n, align=16)
        else:
            raise InternalError(f"a {s.scope} buffer '{buf.name}' inside a kernel",
                                self.m.func)
        yield
        del self.bufs[buf]

    # math through libdevice ----------------------------------------------------------
    def libdevice_call(self, name: str, d: DType, args: Sequence[ir.Value],
                       what: str) -> ir.Value:
        """A call of libdevice's ``__nv_<name>[f]``; ``ValueError`` without libdevice."""
        if not self.m.libdevice:
            raise ValueError(
                f"build(target='cuda'): {what} on {d.name} needs CUDA's libdevice, which "
                "was not found (set TEX_LIBDEVICE to libdevice.10.bc, or CUDA_HOME to the "
                "CUDA toolkit)")
        t = scalar_type(d)
        fn = self.m.declare(f"__nv_{name}{'f' if d.bits == 32 else ''}", t, [t] * len(args))
        return self.call_float(fn, args)

    def unary(self, e: Unary, x: ir.Value) -> ir.Value:
        """Float math through libdevice, else ``vecmath``'s float32 versions."""
        name = LIBDEVICE_UNARY.get(e.op)
        if name is None or not e.dtype.is_float:
            return super().unary(e, x)
        if not self.m.libdevice and e.dtype.bits == 32:
            op = e.op.value
            if op in VECMATH:
                return self.b.call(vecmath_function(self.m.ir, op, x.type), [x])
            if op in FALLBACK:
                return self.b.call(fallback_function(self.m.ir, op, x.type), [x])
        return self.libdevice_call(name, e.dtype, [x], e.op.value)

    def binary(self, e: Binary, a: ir.Value, b: ir.Value) -> ir.Value:
        """Float ``**`` through libdevice (or ``vecmath``); the rest as on the CPU."""
        if e.op is Op.POW and e.a.dtype.is_float:
            if not self.m.libdevice and e.a.dtype.bits == 32:
                return self.b.call(fallback_function(self.m.ir, "pow", a.type), [a, b])
            return self.libdevice_call("pow", e.a.dtype, [a, b], "pow")
        return super().binary(e, a, b)

    def fmod(self, a: ir.Value, b: ir.Value, d: DType) -> ir.Value:
        """C's fmod through libdevice (or ``vecmath``'s exact float32 one)."""
        if not self.m.libdevice and d.bits == 32:
            return self.b.call(fallback_function(self.m.ir, "fmod", a.type), [a, b])
        return self.libdevice_call("fmod", d, [a, b], "float %")


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

@dataclass
class PTXModule:
    """A compiled device program: PTX text, the LLVM IR before and after optimization."""

    program: DeviceProgram
    target: CudaTarget
    ptx: str
    llvm_ir: str
    llvm_ir_opt: str
    libdevice: str | None


@functools.cache
def _nvptx_initialized() -> bool:
    with LLVM_LOCK:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    return True


def _target_machine(target: CudaTarget) -> llvm.TargetMachine:
    _nvptx_initialized()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=target.arch, opt=3)


def emit_ptx_llvm(program: DeviceProgram, target: CudaTarget,
                  options: CodegenOptions | None = None, libdevice: bool = True) -> str:
    """The unoptimized LLVM IR (NVPTX) of every kernel of ``program``."""
    options = options or CodegenOptions()
    with LLVM_LOCK:
        tm = _target_machine(target)
        module = ir.Module(name=symbol_name(program.func.name))
        module.triple = TRIPLE
        module.data_layout = str(tm.target_data)
    for kernel in program.kernels:
        m = _PTXModuleEmitter(kernel, options, module, libdevice)
        types = [(PTR if isinstance(p, BufferParam) else abi_type(p.var.dtype))
                 for p in kernel.params]
        fn = ir.Function(module, ir.FunctionType(VOID, types), kernel.name)
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        f = _PTXFunctionEmitter(m, fn, in_parallel=True)
        f.bind_params(kernel.params)
        f.bind_indices()
        body: Stmt = kernel.body
        for buf in reversed(kernel.shared):
            body = Allocate(buf, "shared", body)
        f.stmt(body)
        f.finish()
    text = str(module)
    if program.kernels:
        m.release()  # (every kernel's emitter shares the module)
    return text


def optimized_ptx(text: str, target: CudaTarget, libdevice: str | None,
                  kernels: frozenset[str], reduced: bool = False) -> tuple[str, str]:
    """The optimized LLVM IR and the PTX of NVPTX IR ``text`` (``libdevice``'s bitcode
    linked in when it calls it; every function but ``kernels`` made internal), in this
    process (``compile_ptx`` runs it on a compile worker, ``tex.codegen.jobs.guarded``).
    ``reduced``: LLVM's O1 without its unroller, for IR whose O3 crashed or never ended."""
    # a context of its own, freed with the module (the module holds it): LLVM's global one
    # would keep every module's uniqued constants and metadata for good
    context = llvm.create_context()
    with LLVM_LOCK:
        try:
            mod = llvm.parse_assembly(text, context=context)
            mod.verify()
        except RuntimeError as err:
            raise InternalError(f"generated NVPTX LLVM IR does not verify: {err}",
                                text) from None
        if libdevice is not None and "__nv_" in text:
            lib = llvm.parse_bitcode(Path(libdevice).read_bytes(), context=context)
            lib.triple = TRIPLE
            lib.data_layout = mod.data_layout
            mod.link_in(lib)
        for fn in mod.functions:
            if not fn.is_declaration and fn.name not in kernels:
                fn.linkage = "internal"
        tm = _target_machine(target)
        pto = llvm.create_pipeline_tuning_options(speed_level=1 if reduced else 3)
        pto.loop_unrolling = not reduced
        run_default_pipeline(mod, tm, pto)
        return str(mod), tm.emit_assembly(mod)


def compile_ptx(program: DeviceProgram, target: CudaTarget | None = None,
                options: CodegenOptions | None = None) -> PTXModule:
    """PTX for every kernel of ``program`` (legalized), for ``target`` (default sm_80).

    Raises
    ------
    ValueError
        A math function that needs libdevice when none was found; a local buffer too large.
    """
    target = target or CudaTarget()
    libdevice = find_libdevice()
    text = emit_ptx_llvm(program, target, options, libdevice is not None)
    debug.dump("ptx.llvm", text)
    kernels = frozenset(k.name for k in program.kernels)
    names = ", ".join(f"'{k}'" for k in sorted(kernels))
    opt, ptx = jobs.guarded((__name__, "optimized_ptx"), (text, target, libdevice, kernels),
                            text, f"the kernels {names}")
    debug.dump("ptx.llvm.opt", opt)
    debug.dump("ptx", ptx)
    if ".extern .func" in ptx:  # every call must have been resolved and inlined
        raise InternalError("the PTX calls an external function", ptx)
    return PTXModule(program, target, ptx, text, opt, libdevice)
