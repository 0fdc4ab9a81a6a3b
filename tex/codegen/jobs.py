"""Compiling the parts of a split module (``split.py``) to object code, in forked processes.

``compile_parts(texts)`` turns each part's unoptimized IR text into a ``PartResult``: its
object code for the host (emitted by the target machine MCJIT itself uses), its optimized
IR text and the external functions it declares. The first part is compiled in this
process; each other part in a child process forked for it, which inherits the text,
parses, verifies and optimizes it (``optimize``: the O3 pipeline), emits its object code,
writes the three to a pipe and exits. On two CPUs two parts compile at once: threads could
not do this, llvmlite holds one lock around every call into LLVM.

Fork safety. The children are forked while this thread holds tex's ``LLVM_LOCK`` and
llvmlite's own lock, so no thread of the process is inside LLVM at that moment and LLVM's
state is consistent in the child (glibc makes ``malloc`` safe across ``fork``). The child
runs only LLVM calls on objects of its own, a write to its pipe and ``os._exit`` (no
``atexit`` handlers, no cleanup of the parent's objects; it never needs libgomp, whose
threads do not exist in it). Only Linux forks; elsewhere, without access to llvmlite's
lock, or with ``TEX_COMPILE_JOBS`` at 1, every part compiles here, one after the other.

Failures never hang or crash the build: a part whose child cannot be forked, exits nonzero,
dies, sends a malformed reply, or has not answered ``max(CHILD_WAIT_MIN_S,
CHILD_WAIT_FACTOR * t)`` seconds after this process compiled the first part in ``t``
seconds (it is killed then) is compiled in this process instead, which raises the proper
error when the IR itself is at fault.

``TEX_COMPILE_JOBS`` (read at import): how many processes compile the parts of one module
at once; default: the CPUs this process may run on, at most ``MAX_DEFAULT_JOBS``; 0 or 1:
no child process.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from .. import debug
from .host import LLVM_LOCK, declared_externals, host_target, optimize

__all__ = ["PartResult", "compile_part", "compile_parts", "can_fork", "COMPILE_JOBS",
           "MAX_DEFAULT_JOBS", "CHILD_WAIT_MIN_S", "CHILD_WAIT_FACTOR"]

MAX_DEFAULT_JOBS = 4
# how long the children get once this process has compiled its own part (see above)
CHILD_WAIT_MIN_S = 60.0
CHILD_WAIT_FACTOR = 20.0
_LENGTHS = struct.Struct("<QQQ")  # a child's reply: three lengths, then the three payloads


def _default_jobs() -> int:
    """The CPUs this process may run on, at most ``MAX_DEFAULT_JOBS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_JOBS))


COMPILE_JOBS = max(1, debug.count_setting("TEX_COMPILE_JOBS", debug.env("TEX_COMPILE_JOBS"),
                                          _default_jobs()))


@dataclass(frozen=True)
class PartResult:
    """One compiled part: object code, optimized IR text, the external functions it
    declares (other parts' functions among them)."""

    object: bytes
    text: str
    externals: tuple[str, ...]


def compile_part(text: str) -> PartResult:
    """Parse, verify, optimize and emit object code for one part, in this process."""
    host = host_target()
    context = llvm.create_context()  # freed with the module (see tex.codegen.llvm)
    with LLVM_LOCK:
        try:
            mod = optimize(text, host, context)
            with debug.timed("llvm.print"):
                opt = str(mod)
            externals = tuple(declared_externals(mod))
            with debug.timed("llvm.codegen"):
                obj = host.target_machine(jit=True).emit_object(mod)
            mod.close()
        finally:
            context.close()
    return PartResult(obj, opt, externals)


def _llvmlite_lock() -> Any:
    """llvmlite's lock around every call into LLVM, or None when this llvmlite has none
    reachable (then nothing forks)."""
    lock = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    return lock if hasattr(lock, "__enter__") and hasattr(lock, "__exit__") else None


def can_fork() -> bool:
    """Whether parts may compile in forked children here (Linux, llvmlite's lock)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and \
        _llvmlite_lock() is not None


def _encode(r: PartResult) -> bytes:
    text, externals = r.text.encode(), "\n".join(r.externals).encode()
    return _LENGTHS.pack(len(r.object), len(text), len(externals)) + r.object + text + \
        externals


def _decode(data: bytes) -> PartResult | None:
    """A child's reply, or None when it is malformed."""
    if len(data) < _LENGTHS.size:
        return None
    n_obj, n_text, n_ext = _LENGTHS.unpack_from(data)
    body = memoryview(data)[_LENGTHS.size:]
    if len(body) != n_obj + n_text + n_ext:
        return None
    try:
        text = bytes(body[n_obj:n_obj + n_text]).decode()
        ext = bytes(body[n_obj + n_text:]).decode()
    except UnicodeDecodeError:
        return None
    return PartResult(bytes(body[:n_obj]), text, tuple(ext.split("\n")) if ext else ())


@dataclass
class _Child:
    """A forked child compiling one part: its process id and the read end of its pipe."""

    pid: int
    fd: int
    reaped: bool = False


def _child_main(text: str, fd: int) -> None:
    """In the child: compile, reply, leave (never returns)."""
    code = 1
    try:
        data = _encode(compile_part(text))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        code = 0
    finally:
        os._exit(code)  # no atexit handlers, no finalizers of the parent's objects


def _fork(texts: Sequence[str]) -> list[_Child | None]:
    """A child per text (None where ``fork`` failed), forked while no thread is in LLVM."""
    children: list[_Child | None] = []
    with LLVM_LOCK, _llvmlite_lock():
        for text in texts:
            try:
                r, w = os.pipe()
            except OSError:
                children.append(None)
                continue
            try:
                pid = os.fork()
            except OSError:
                os.close(r)
                os.close(w)
                children.append(None)
                continue
            if pid == 0:
                os.close(r)
                _child_main(text, w)
            os.close(w)  # before the next fork: only its own child may hold the write end
            children.append(_Child(pid, r))
    return children


def _reap(child: _Child, kill: bool) -> int | None:
    """Wait for ``child`` (killed first with ``kill``): its exit code, None when unknown
    (killed, or reaped by someone else)."""
    with contextlib.suppress(OSError):
        os.close(child.fd)
    if child.reaped:
        return None
    child.reaped = True
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
    try:
        _, status = os.waitpid(child.pid, 0)
    except ChildProcessError:  # SIGCHLD ignored: the system reaped it
        return None
    return os.waitstatus_to_exitcode(status)


def _collect(child: _Child, deadline: float) -> PartResult | None:
    """The child's result; None when it failed or missed ``deadline`` (then it is
    killed)."""
    chunks: list[bytes] = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([child.fd], [], [], remaining)[0]:
                _reap(child, kill=True)
                return None
            data = os.read(child.fd, 1 << 20)
            if not data:
                break
            chunks.append(data)
    except OSError:
        _reap(child, kill=True)
        return None
    code = _reap(child, kill=False)
    if code not in (0, None):
        return None
    return _decode(b"".join(chunks))


@contextlib.contextmanager
def _children(texts: Sequence[str], jobs: int) -> Iterator[list[_Child | None]]:
    """Children compiling ``texts`` (None for each that compiles here), every one of them
    killed and reaped on the way out."""
    forked = _fork(texts) if jobs > 1 and texts and can_fork() else []
    children = forked + [None] * (len(texts) - len(forked))
    try:
        yield children
    finally:
        for child in children:
            if child is not None and not child.reaped:
                _reap(child, kill=True)


def compile_parts(texts: Sequence[str], jobs: int | None = None) -> list[PartResult]:
    """Compile every part (see the module docstring): the first here, the others in up to
    ``jobs - 1`` children (default ``COMPILE_JOBS``), the rest here too."""
    jobs = COMPILE_JOBS if jobs is None else jobs
    if not texts:
        return []
    rest = list(texts[1:])
    with _children(rest[:max(0, jobs - 1)], jobs) as children:
        start = time.monotonic()
        first = compile_part(texts[0])
        deadline = time.monotonic() + max(CHILD_WAIT_MIN_S,
                                          CHILD_WAIT_FACTOR * (time.monotonic() - start))
        with debug.timed("llvm.wait"):
            replies = [_collect(c, deadline) if c is not None else None for c in children]
    replies += [None] * (len(rest) - len(replies))
    # a part no child compiled (not forked, failed, too slow) compiles here
    return [first, *(r if r is not None else compile_part(t) for r, t in zip(replies, rest))]
