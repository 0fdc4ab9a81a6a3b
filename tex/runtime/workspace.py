"""The allocator of kernels' large temporaries: freed blocks kept for the next call.

A kernel's buffers too large for its stack (``tex.codegen.module.MAX_STACK_BYTES``) are
allocated when its nest starts and freed when it ends, every call, with the same sizes.
Through ``malloc``/``free`` each call got fresh pages from the kernel (glibc hands blocks of
128 KB and more to ``mmap``, and trims the heap top it frees), and the page faults that zero
them cost as much as a third of a ResNet block's gradient (resnet_28 at 1 thread: 313 ms a
call, 176 ms with the pages kept). So generated code calls ``tex_workspace_alloc(n)`` and
``tex_workspace_free(p, n)``: a freed block is kept in a table of ``SLOTS`` entries, and an
allocation of the same size takes it back. At most ``limit_bytes()`` are kept
(``TEX_WORKSPACE_CACHE_MB``, default ``DEFAULT_LIMIT_MB``; ``0`` keeps nothing;
``set_limit`` changes it); a block that does not fit, or finds the table full, goes back to
``free``. ``release()`` frees every kept block (``tex.runtime.clear_cache`` calls it);
``stats()`` says how much is kept.

The two functions are compiled once per process from the LLVM IR below and registered with
LLVM's symbol table before any kernel is loaded (``tex.runtime.jit``). They are safe to call
from any thread (a parallel region's threads allocate their own buffers): a spin lock guards
the table, held for one scan of it. A forked child inherits the table with the memory it
points to, so both stay valid there.
"""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm

from ..codegen.host import LLVM_LOCK
from ..codegen.module import WORKSPACE_ALLOC as ALLOC_SYMBOL
from ..codegen.module import WORKSPACE_FREE as FREE_SYMBOL
from ..debug import env
from .diskcache import support_engine

__all__ = ["ALLOC_SYMBOL", "FREE_SYMBOL", "DEFAULT_LIMIT_MB", "LIBRARY_LIMIT", "SLOTS",
           "ensure_workspace", "library_ir", "limit_bytes", "release", "set_limit", "stats"]

SLOTS = 64  # kept blocks at most (a kernel has a few dozen large temporaries)
DEFAULT_LIMIT_MB = 1024

_IR = r'''
@lock = internal global i32 0
@sizes = internal global [SLOTS x i64] zeroinitializer
@ptrs = internal global [SLOTS x ptr] zeroinitializer
@kept = global i64 0
@limit = global i64 0

declare ptr @malloc(i64)
declare void @free(ptr)

define internal void @acquire() {
entry:
  br label %spin
spin:
  %old = atomicrmw xchg ptr @lock, i32 1 acquire
  %busy = icmp ne i32 %old, 0
  br i1 %busy, label %spin, label %done
done:
  ret void
}

define internal void @unlock() {
entry:
  store atomic i32 0, ptr @lock release, align 4
  ret void
}

; a kept block of exactly n bytes, else malloc(n)
define ptr @ALLOC(i64 %n) {
entry:
  call void @acquire()
  br label %scan
scan:
  %i = phi i64 [0, %entry], [%i1, %next]
  %sp = getelementptr [SLOTS x i64], ptr @sizes, i64 0, i64 %i
  %s = load i64, ptr %sp
  %hit = icmp eq i64 %s, %n
  br i1 %hit, label %found, label %next
next:
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, SLOTS
  br i1 %end, label %miss, label %scan
found:
  %pp = getelementptr [SLOTS x ptr], ptr @ptrs, i64 0, i64 %i
  %p = load ptr, ptr %pp
  store i64 0, ptr %sp
  store ptr null, ptr %pp
  %k = load i64, ptr @kept
  %k1 = sub i64 %k, %n
  store i64 %k1, ptr @kept
  call void @unlock()
  ret ptr %p
miss:
  call void @unlock()
  %m = call ptr @malloc(i64 %n)
  ret ptr %m
}

; keep p (n bytes) in an empty slot while the total kept stays within @limit, else free it
define void @FREE(ptr %p, i64 %n) {
entry:
  %null = icmp eq ptr %p, null
  br i1 %null, label %out, label %lock
lock:
  call void @acquire()
  %k = load i64, ptr @kept
  %k1 = add i64 %k, %n
  %lim = load i64, ptr @limit
  %over = icmp ugt i64 %k1, %lim
  br i1 %over, label %drop, label %scan
scan:
  %i = phi i64 [0, %lock], [%i1, %next]
  %sp = getelementptr [SLOTS x i64], ptr @sizes, i64 0, i64 %i
  %s = load i64, ptr %sp
  %empty = icmp eq i64 %s, 0
  br i1 %empty, label %keep, label %next
next:
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, SLOTS
  br i1 %end, label %drop, label %scan
keep:
  %pp = getelementptr [SLOTS x ptr], ptr @ptrs, i64 0, i64 %i
  store i64 %n, ptr %sp
  store ptr %p, ptr %pp
  store i64 %k1, ptr @kept
  call void @unlock()
  br label %out
drop:
  call void @unlock()
  call void @free(ptr %p)
  br label %out
out:
  ret void
}

; free every kept block
define void @tex_workspace_release() {
entry:
  call void @acquire()
  br label %scan
scan:
  %i = phi i64 [0, %entry], [%i1, %next]
  %sp = getelementptr [SLOTS x i64], ptr @sizes, i64 0, i64 %i
  %s = load i64, ptr %sp
  %used = icmp ne i64 %s, 0
  br i1 %used, label %drop, label %next
drop:
  %pp = getelementptr [SLOTS x ptr], ptr @ptrs, i64 0, i64 %i
  %p = load ptr, ptr %pp
  call void @free(ptr %p)
  store i64 0, ptr %sp
  store ptr null, ptr %pp
  br label %next
next:
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, SLOTS
  br i1 %end, label %done, label %scan
done:
  store i64 0, ptr @kept
  call void @unlock()
  ret void
}
'''.replace("SLOTS", str(SLOTS)).replace("@ALLOC", "@" + ALLOC_SYMBOL) \
   .replace("@FREE", "@" + FREE_SYMBOL)

# a shared library's own copy of the allocator (``tex.runtime.library``) names its counters
# so that they cannot clash with another library's symbols
LIBRARY_LIMIT = "tex_workspace_limit"


def library_ir() -> str:
    """The allocator's IR for a shared library: the same two functions, its counters named
    ``tex_workspace_kept`` and ``LIBRARY_LIMIT`` (set it after loading: it starts at 0,
    which keeps no block)."""
    return _IR.replace("@kept", "@tex_workspace_kept").replace("@limit", "@" + LIBRARY_LIMIT)


# the engine that owns the compiled allocator (per process: it holds the kept blocks)
_engine: list[llvm.ExecutionEngine] = []


def limit_bytes() -> int:
    """The most bytes kept for reuse: ``TEX_WORKSPACE_CACHE_MB`` (a non-negative integer;
    anything else is a ``ValueError``), default ``DEFAULT_LIMIT_MB``."""
    raw = env("TEX_WORKSPACE_CACHE_MB")
    if raw is None or raw.strip() == "":
        return DEFAULT_LIMIT_MB << 20
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise ValueError(f"TEX_WORKSPACE_CACHE_MB must be a non-negative integer (megabytes), "
                         f"got {raw!r}")
    return mb << 20


def ensure_workspace() -> None:
    """Compile the allocator and register its two symbols (once per process)."""
    if _engine:
        return
    engine = support_engine(_IR)
    with LLVM_LOCK:  # (one lock: no order to get wrong with the JIT's)
        if _engine:
            return  # another thread was first
        for name in (ALLOC_SYMBOL, FREE_SYMBOL):
            llvm.add_symbol(name, engine.get_function_address(name))
        ctypes.c_int64.from_address(engine.get_global_value_address("limit")).value = \
            limit_bytes()
        _engine.append(engine)


def _global(name: str) -> ctypes.c_int64 | None:
    if not _engine:
        return None
    return ctypes.c_int64.from_address(_engine[0].get_global_value_address(name))


def stats() -> dict[str, int]:
    """``{"kept_bytes": ..., "limit_bytes": ...}`` of this process's allocator."""
    kept, limit = _global("kept"), _global("limit")
    return {"kept_bytes": 0 if kept is None else int(kept.value),
            "limit_bytes": limit_bytes() if limit is None else int(limit.value)}


def set_limit(nbytes: int) -> None:
    """Keep at most ``nbytes`` from now on (the environment's bound otherwise); blocks kept
    beyond it are freed."""
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValueError(f"set_limit: expected a non-negative int of bytes, got {nbytes!r}")
    ensure_workspace()
    limit = _global("limit")
    assert limit is not None
    limit.value = nbytes
    kept = _global("kept")
    if kept is not None and kept.value > nbytes:
        release()


def release() -> None:
    """Free every kept block (the next calls allocate afresh)."""
    if not _engine:
        return
    fn = ctypes.CFUNCTYPE(None)(_engine[0].get_function_address("tex_workspace_release"))
    fn()
