"""MCJIT engines and the in-process compile cache.

Every compiled function gets its own MCJIT execution engine (with its own host target
machine); a ``Kernel`` owns the engine, and every ``BuiltFunction`` made from it keeps the
kernel alive, so machine code lives exactly as long as something can call it.

Memory (measured on x86-64, LLVM 22): a live kernel costs about 0.75 MB of native memory,
almost all of it the engine's target machine, whose X86 subtarget tables LLVM builds on
first code generation and which MCJIT owns (one per engine, never shared); the machine code
and the ``get_source`` texts add a few KB for a small elementwise kernel, about 0.3 MB for
a dense layer's fused loss-and-gradient. The IR module is not kept: each module is
optimized in an LLVM context of its own (the global context would keep every module's
uniqued constants and metadata for good), and ``jit_compile`` disposes module and context
once the code is emitted. Everything else is freed when the last reference to the kernel
goes (the engine's code and target machine); glibc keeps the freed pages for the next
kernels, so RSS stays flat rather than dropping. What stays per build is about 4 KB of
native memory (1.5 KB of it a pass-instrumentation object llvmlite never frees; see
``tex.codegen.host.run_default_pipeline`` for the pipeline it used to leak too).

The compile cache maps a structural key of the work (``cache_key``: the printed
``LoweredFunc`` and its canonical listing, ``tex.lower.structure``, with every node's dtype
so that texts printing alike but typed differently differ; the target, ``fastmath``, the
thread count and the host CPU name and features) to its ``Kernel``. It is an LRU guarded
by a lock, bounded by entry count: ``CACHE_SIZE`` entries, 64 unless ``TEX_JIT_CACHE=<n>``
says otherwise (read at import; ``0`` disables caching), so the cache itself holds at most
about 50 MB of small kernels (64 x 0.75 MB), more for large ones. Building the same thing
twice returns the same kernel without compiling; the least recently used entry is dropped
when full (functions already built from it keep working and keep it alive).
``clear_cache()`` empties it, ``CACHE.resize(n)`` changes the bound.

In front of it, ``FRONT`` maps a schedule's key (``front_key``: the canonical text of the
schedule and its arguments, ``tex.schedule.key``, with the name, target, options and host)
to a ``FrontEntry``: the lowered function's key, its printed text and which arguments are
outputs; all a ``BuiltFunction`` needs besides the kernel, so a hit skips lowering. It keeps
as many entries in memory as ``CACHE`` keeps kernels, and each in the disk cache too.

The disk cache (``tex.runtime.diskcache``) sits below it: ``jit_compile(compiled, key)``
loads the object code the compile made (``tex.codegen.jobs``: LLVM runs in child processes)
and stores it with the entry's name, error-record flag, bounds checks, declared externals
and the two IR texts (zlib-compressed; the assembly is regenerated on demand, as for a
fresh build). ``load_cached(key)`` makes the same ``Kernel`` from such an entry: the
support module is registered and every declared external checked first, then a new engine
over an empty module takes the object file. A damaged entry is deleted and reported as a
miss; ``clear_cache(disk=True)`` empties the disk cache too.

Symbols: JIT code calls libm (``erf``, ``tanhf``, ``fmodf``...), libc (``malloc``) and
libgomp, all resolved from the process. LLVM's backend may also call compiler-rt's half
conversions (``__truncdfhf2`` for float64 -> float16 everywhere, ``__truncsfhf2`` and
``__extendhfsf2`` without F16C), which CPython processes usually lack: a small support
module defines them (correctly rounded, checked on every half value) and registers the
ones the process does not have. Before loading a module, every external function it
declares must resolve, or ``jit_compile`` raises instead of crashing later.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from .. import debug, diskstore
from ..codegen import CodegenOptions, CompiledModule, host_target
from ..codegen.host import LLVM_LOCK
from ..debug import InternalError
from ..dtype import DTYPES
from ..lower.bounds_check import BoundsReportOp
from ..lower.stmt import BufferParam, LoweredFunc
from ..lower.structure import structure
from .diskcache import DISK, engine_of_objects, support_engine
from .workspace import ensure_workspace
from .workspace import release as release_workspace

__all__ = ["Kernel", "jit_compile", "load_cached", "cache_key", "CompileCache", "CACHE",
           "CACHE_SIZE", "DEFAULT_CACHE_SIZE", "FRONT", "FrontCache", "FrontEntry",
           "clear_cache", "front_key", "SUPPORT_SYMBOLS", "support_ir", "checks_of",
           "checks_record"]

DEFAULT_CACHE_SIZE = 64


def _cache_size_from_env() -> int:
    """``TEX_JIT_CACHE`` (a non-negative entry count), else ``DEFAULT_CACHE_SIZE``."""
    return debug.count_setting("TEX_JIT_CACHE", debug.env("TEX_JIT_CACHE"),
                               DEFAULT_CACHE_SIZE)


CACHE_SIZE = _cache_size_from_env()

# compiler-rt half conversions (LLVM IR, integer arithmetic only)
_SUPPORT_IR = r'''
define internal i16 @tex.f32_to_f16_bits(float %f) {
entry:
  %u0 = bitcast float %f to i32
  %sign = and i32 %u0, -2147483648
  %u = xor i32 %u0, %sign
  %big = icmp uge i32 %u, 1199570944        ; (127 + 16) << 23: overflows to inf, or inf/nan
  br i1 %big, label %infnan, label %finite
infnan:
  %isnan = icmp ugt i32 %u, 2139095040     ; 255 << 23
  %o1 = select i1 %isnan, i32 32256, i32 31744   ; 0x7e00 / 0x7c00
  br label %done
finite:
  %small = icmp ult i32 %u, 947912704      ; 113 << 23: half subnormal or zero
  br i1 %small, label %sub, label %norm
sub:
  %uf = bitcast i32 %u to float
  %s = fadd float %uf, 0x3FE0000000000000  ; denorm magic 0.5 = ((127-15)+(23-10)+1) << 23
  %sb = bitcast float %s to i32
  %o2 = sub i32 %sb, 1056964608
  br label %done
norm:
  %odd0 = lshr i32 %u, 13
  %odd = and i32 %odd0, 1
  %r1 = add i32 %u, -939520001              ; ((15 - 127) << 23) + 0xfff
  %r2 = add i32 %r1, %odd
  %o3 = lshr i32 %r2, 13
  br label %done
done:
  %o = phi i32 [%o1, %infnan], [%o2, %sub], [%o3, %norm]
  %sh = lshr i32 %sign, 16
  %res = or i32 %o, %sh
  %t = trunc i32 %res to i16
  ret i16 %t
}

define half @__truncsfhf2(float %f) {
  %b = call i16 @tex.f32_to_f16_bits(float %f)
  %h = bitcast i16 %b to half
  ret half %h
}

define half @__truncdfhf2(double %d) {
entry:
  ; round to odd into float (exact for the second rounding), then round to nearest half
  %t = fptrunc double %d to float
  %back = fpext float %t to double
  %exact = fcmp oeq double %back, %d
  %bits = bitcast float %t to i32
  %at = call double @llvm.fabs.f64(double %back)
  %ad = call double @llvm.fabs.f64(double %d)
  %over = fcmp ogt double %at, %ad
  %down = sub i32 %bits, 1
  %tb = select i1 %over, i32 %down, i32 %bits
  %odd = or i32 %tb, 1
  %r = select i1 %exact, i32 %bits, i32 %odd
  %f = bitcast i32 %r to float
  %b = call i16 @tex.f32_to_f16_bits(float %f)
  %h = bitcast i16 %b to half
  ret half %h
}

define float @__extendhfsf2(half %h) {
entry:
  %hb = bitcast half %h to i16
  %w = zext i16 %hb to i32
  %sign0 = and i32 %w, 32768
  %sign = shl i32 %sign0, 16
  %em = and i32 %w, 32767
  %sh = shl i32 %em, 13
  %special = icmp uge i32 %em, 31744
  br i1 %special, label %infnan, label %finite
infnan:
  %x = or i32 %sh, 2139095040
  br label %done
finite:
  %f = bitcast i32 %sh to float
  %m = fmul float %f, 0x46F0000000000000   ; 2^112
  %mb = bitcast float %m to i32
  br label %done
done:
  %o = phi i32 [%x, %infnan], [%mb, %finite]
  %r = or i32 %o, %sign
  %res = bitcast i32 %r to float
  ret float %res
}
declare double @llvm.fabs.f64(double)
'''
_SUPPORT_SYMBOLS = ("__truncsfhf2", "__truncdfhf2", "__extendhfsf2")
SUPPORT_SYMBOLS = _SUPPORT_SYMBOLS


def support_ir() -> str:
    """The support module's IR (the half conversions ``SUPPORT_SYMBOLS``), for a shared
    library whose code calls them (``tex.runtime.library``)."""
    return _SUPPORT_IR
_support_engines: list[llvm.ExecutionEngine] = []  # kept alive: registered code lives here


def _ensure_support() -> None:
    """Register the support functions the process lacks, and the kernels' allocator
    (``workspace.py``), once."""
    ensure_workspace()
    with LLVM_LOCK:
        if _support_engines:
            return
        missing = [s for s in _SUPPORT_SYMBOLS if not llvm.address_of_symbol(s)]
    engine = support_engine(_SUPPORT_IR)
    with LLVM_LOCK:
        if _support_engines:
            return
        for name in missing:
            llvm.add_symbol(name, engine.get_function_address(name))
        _support_engines.append(engine)


def _check_symbols(externals: list[str], name: str) -> None:
    """Raise when an external function of module ``name`` cannot be resolved in this
    process."""
    for symbol in externals:
        if not llvm.address_of_symbol(symbol):
            raise RuntimeError(f"cannot load '{name}': it calls '{symbol}', which no "
                               "library loaded in this process provides")


@dataclass(eq=False)
class Kernel:
    """Machine code for one function: what owns it (its MCJIT engine, or the shared library
    ``tex.runtime.library`` loaded) and its entry address."""

    name: str
    address: int  # the entry: the parameters, then the call's error record (tex.codegen.module)
    sources: CompiledModule
    engine: llvm.ExecutionEngine | ctypes.CDLL = field(repr=False)


def jit_compile(compiled: CompiledModule, key: str | None = None) -> Kernel:
    """Load a compiled module's object files into a new MCJIT engine. With ``key`` (a
    ``cache_key``), the object code is also stored in the disk cache."""
    _ensure_support()
    if not compiled.objects:
        raise RuntimeError(f"module '{compiled.name}' was already given to an engine")
    return _jit_objects(compiled, key)


def _jit_objects(compiled: CompiledModule, key: str | None) -> Kernel:
    """``jit_compile``: the module's object files (several for a split module) in one
    engine."""
    objects, externals = compiled.objects, list(compiled.externals)
    _check_symbols(externals, compiled.name)
    compiled.objects = ()  # loaded now: the kernel need not keep the object code
    with debug.timed("llvm.link"):
        engine, address = _load_objects(compiled.name, objects)
    if not address:
        raise InternalError(f"the objects of '{compiled.name}' do not define it")
    if key is not None and DISK.enabled:
        with debug.timed("build.disk_store"):
            DISK.put(key, _sections(compiled, objects, externals))
    return Kernel(compiled.name, address, compiled, engine)


def _load_objects(name: str, objects: Sequence[bytes]) -> tuple[llvm.ExecutionEngine, int]:
    """A new engine holding ``objects`` (calls between them resolved), and the address of
    ``name`` in it (0 when none defines it)."""
    engine = engine_of_objects(objects)
    with LLVM_LOCK:
        return engine, engine.get_function_address(name)


def _sections(compiled: CompiledModule, objects: Sequence[bytes], externals: list[str]
              ) -> dict[str, bytes]:
    """A disk cache entry: the object code (``object``, then ``object.1``... for the parts
    of a split module), what the loader needs, the source texts."""
    meta = {"name": compiled.name, "errors": compiled.errors, "notes": list(compiled.notes),
            "checks": checks_record(compiled.bounds_checks), "externals": externals,
            "objects": len(objects),
            "parts": len(compiled.parts_opt), "openmp": compiled.uses_openmp}
    opt = compiled.parts_opt or (compiled.llvm_ir_opt,)
    out = {"meta": json.dumps(meta).encode(),
           "ll.raw": zlib.compress(compiled.llvm_ir.encode(), 1)}
    for k, obj in enumerate(objects):
        out[_numbered("object", k)] = obj
    for k, text in enumerate(opt):
        out[_numbered("ll", k)] = zlib.compress(text.encode(), 1)
    return out


def checks_record(checks: Sequence[BoundsReportOp]) -> list[list[Any]]:
    """The run-time bounds checks as JSON-able rows (the disk cache's entries and shared
    libraries keep them so): tensor, dimension, extent, index dtype."""
    return [[c.tensor_name, c.dim, c.extent if isinstance(c.extent, int) else str(c.extent),
             c.output(0).dtype.name] for c in checks]


def checks_of(rows: Sequence[Sequence[Any]]) -> tuple[BoundsReportOp, ...]:
    """The checks ``checks_record`` wrote."""
    return tuple(BoundsReportOp(t, int(d), e if isinstance(e, str) else int(e), DTYPES[dt])
                 for t, d, e, dt in rows)


def _numbered(section: str, k: int) -> str:
    """The name of the ``k``-th section of a kind: ``object``, ``object.1``, ..."""
    return section if k == 0 else f"{section}.{k}"


def load_cached(key: str) -> Kernel | None:
    """The kernel the disk cache holds for ``key``, loaded into a new engine; None when
    there is none (a damaged entry is deleted: the caller compiles and stores anew)."""
    sections = DISK.get(key)
    if sections is None:
        return None
    try:
        meta = json.loads(sections["meta"].decode())
        name, externals = meta["name"], list(meta["externals"])
        checks = checks_of(meta["checks"])
        n_objects, n_parts = int(meta["objects"]), int(meta["parts"])
        if n_objects < 1 or n_parts not in (0, n_objects):
            raise ValueError("bad object count")
        objects = [sections[_numbered("object", k)] for k in range(n_objects)]
        packed = [sections[_numbered("ll", k)] for k in range(max(1, n_parts))]
        raw = sections["ll.raw"]
        # the texts are decompressed when get_source first asks (the sections' checksum
        # was verified on reading)
        parts = functools.cache(lambda: tuple(zlib.decompress(p).decode() for p in packed))
        compiled = CompiledModule(name, lambda: zlib.decompress(raw).decode(),
                                  lambda: "\n".join(parts()), bool(meta["errors"]),
                                  tuple(meta["notes"]), checks,
                                  parts_opt=parts if n_parts else (),
                                  externals=tuple(externals), openmp=bool(meta["openmp"]))
    except (KeyError, ValueError, TypeError, UnicodeDecodeError, zlib.error):
        DISK.discard(key)
        return None
    _ensure_support()
    try:
        _check_symbols(externals, name)
    except RuntimeError:
        return None  # a fresh build says why
    engine, address = _load_objects(name, objects)
    if not address:
        DISK.discard(key)
        return None
    return Kernel(name, address, compiled, engine)


def cache_key(func: LoweredFunc, target: str, options: CodegenOptions) -> str:
    """The structural key of building ``func`` (see the module docstring)."""
    host = host_target()
    h = hashlib.sha256()
    params = [p.buffer if isinstance(p, BufferParam) else p.var for p in func.params]
    for part in (str(func), structure(func.body, params), target, repr(options), host.cpu,
                 host.features):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class CompileCache:
    """A thread-safe LRU map from cache keys to kernels (``FrontCache`` keeps its entries
    in one too)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, Kernel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Kernel | None:
        with self._lock:
            k = self._items.get(key)
            if k is not None:
                self._items.move_to_end(key)
            return k

    def put(self, key: str, kernel: Kernel) -> Kernel:
        """Insert ``kernel`` (or return the one another thread inserted meanwhile)."""
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._items.move_to_end(key)
                return old
            self._items[key] = kernel
            self._evict()
            return kernel

    def resize(self, size: int) -> None:
        """Bound the cache to ``size`` entries (0: cache nothing), evicting the least
        recently used ones now."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"CompileCache.resize: size must be a non-negative int, "
                             f"got {size!r}")
        with self._lock:
            self.size = size
            self._evict()

    def _evict(self) -> None:
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


CACHE = CompileCache()


@dataclass(frozen=True)
class FrontEntry:
    """What a build found by its front key needs besides the kernel: the lowered
    function's key (``cache_key``), its printed text, and which arguments are outputs."""

    key: str
    lowered: str
    outputs: tuple[bool, ...]


def front_key(text: str, name: str, target: str, options: CodegenOptions) -> str:
    """The key of building a schedule before it is lowered: ``text`` is its canonical
    text with the arguments (``tex.schedule.key.schedule_text``)."""
    host = host_target()
    h = hashlib.sha256(b"front\0")
    for part in (text, name, target, repr(options), host.cpu, host.features):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class FrontCache:
    """Front key -> ``FrontEntry``: an LRU in memory (as many entries as ``bound`` keeps
    kernels) over the disk cache, where an entry is its own file."""

    def __init__(self, bound: CompileCache) -> None:
        self.bound = bound
        self._memory = CompileCache(bound.size)

    def get(self, key: str) -> FrontEntry | None:
        entry = self._memory.get(key)
        if entry is not None:
            return entry  # type: ignore[return-value]
        sections = DISK.get(key)
        if sections is None:
            return None
        try:
            meta = json.loads(sections["front"].decode())
            entry = FrontEntry(str(meta["key"]),
                               zlib.decompress(sections["lowered"]).decode(),
                               tuple(bool(x) for x in meta["outputs"]))
        except (KeyError, ValueError, TypeError, UnicodeDecodeError, zlib.error):
            DISK.discard(key)
            return None
        self._remember(key, entry)
        return entry

    def put(self, key: str, entry: FrontEntry) -> None:
        self._remember(key, entry)
        meta = {"key": entry.key, "outputs": list(entry.outputs)}
        DISK.put(key, {"front": json.dumps(meta).encode(),
                       "lowered": zlib.compress(entry.lowered.encode(), 1)})

    def _remember(self, key: str, entry: FrontEntry) -> None:
        if self._memory.size != self.bound.size:  # CACHE.resize: the same bound here
            self._memory.resize(self.bound.size)
        self._memory.put(key, entry)  # type: ignore[arg-type]

    def clear(self) -> None:
        self._memory.clear()


FRONT = FrontCache(CACHE)


def clear_cache(disk: bool = False) -> None:
    """Forget every cached kernel (functions already built keep theirs) and free the
    temporaries kept for reuse (``tex.runtime.workspace``); ``disk=True`` also deletes the
    disk cache's entries (``tex.diskstore``: compiled code and the saved results of
    ``differentiate`` and ``auto_schedule``, which share its directory)."""
    CACHE.clear()
    FRONT.clear()
    release_workspace()
    if disk:
        DISK.clear()
        diskstore.RESULTS.clear()
