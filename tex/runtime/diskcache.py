"""The JIT's persistent compile cache: a ``tex.diskstore.DiskCache`` whose entries also
depend on the LLVM that compiled them.

``tex.runtime.jit`` stores what a second process needs to skip LLVM (the object code MCJIT
emitted, the entry's name and error-record flag, the bounds checks, the ``get_source``
texts) as named sections, and, under a schedule's key, what it needs to skip lowering (the
lowered function's key and text: ``jit.FrontCache``). The files, the bound, eviction,
corruption and concurrency are ``tex.diskstore``'s (its docstring); this module adds the
key's LLVM fields.

The key: the in-process key (``tex.runtime.jit.cache_key``: a SHA-256 of the lowered
function, target, options, host CPU name and features) plus the host triple, the LLVM
version and llvmlite's version (``llvm_fields``), and the store's format version and
fingerprint of tex's sources.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import llvmlite
import llvmlite.binding as llvm

from ..codegen.host import LLVM_LOCK, host_target
from ..diskstore import (
    DEFAULT_LIMIT_MB,
    FORMAT_VERSION,
    MAGIC,
    RESCAN_WRITES,
    RESULTS,
    DiskCache,
    default_directory,
    source_fingerprint,
)

__all__ = ["DiskCache", "DISK", "DEFAULT_LIMIT_MB", "FORMAT_VERSION", "MAGIC", "RESCAN_WRITES",
           "default_directory", "disk_cache_stats", "engine_of_objects", "llvm_fields",
           "source_fingerprint", "support_engine"]


def llvm_fields() -> dict[str, str]:
    """What compiled code depends on beyond its key: the host triple and LLVM's version."""
    return {"triple": host_target().triple,
            "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "llvmlite": llvmlite.__version__}


DISK = DiskCache.from_env(llvm_fields)


def engine_of_objects(objects: Sequence[bytes]) -> llvm.ExecutionEngine:
    """A new engine holding the object files ``objects`` (calls between them resolved)."""
    with LLVM_LOCK:
        context = llvm.create_context()
        empty = llvm.parse_assembly("", context=context)
        engine = llvm.create_mcjit_compiler(empty, host_target().target_machine(jit=True))
        try:
            for obj in objects:
                engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            engine.finalize_object()
        finally:
            engine.remove_module(empty)
            empty.close()
            context.close()
    return engine


def support_engine(ir: str) -> llvm.ExecutionEngine:
    """An engine running ``ir``, a module of tex's own support code (the kernels'
    allocator, math functions the process lacks). Its object code for this host is kept
    under its own key: compiling it took every process ~15 ms, loading it takes 1."""
    host = host_target()
    key = "support:" + hashlib.sha256("\0".join((ir, host.cpu, host.features)).encode()
                                      ).hexdigest()
    sections = DISK.get(key)
    if sections is not None and "object" in sections:
        return engine_of_objects([sections["object"]])
    with LLVM_LOCK:
        mod = llvm.parse_assembly(ir)
        mod.verify()
        obj = host.target_machine(jit=True).emit_object(mod)
    DISK.put(key, {"object": obj})
    return engine_of_objects([obj])


def disk_cache_stats() -> dict[str, object]:
    """This process's disk cache counters for compiled code (hits, misses, writes, corrupt
    entries deleted, entries evicted), its directory (None: disabled), its bound in bytes,
    and under ``"results"`` the counters of the saved ``differentiate`` and
    ``auto_schedule`` results (``tex.diskstore.RESULTS``)."""
    stats: dict[str, object] = dict(DISK.counters())
    stats["directory"] = str(DISK.directory) if DISK.enabled else None
    stats["limit"] = DISK.limit
    stats["results"] = RESULTS.counters()
    return stats
