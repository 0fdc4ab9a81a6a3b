"""Compiling LLVM IR to object code in forked processes: the parts of a split module
(``split.py``) in parallel, and every compile under a deadline (the guard).

``compile_parts(texts)`` turns each part's unoptimized IR text into a ``PartResult``: its
object code for the host (emitted by the target machine MCJIT itself uses), its optimized
IR text and the external functions it declares. This process and up to ``jobs - 1``
children forked for the purpose (which inherit the texts) take parts from one queue,
largest first, until none is left: a pipe holding one byte per part index, each read of a
byte claiming a part, so a process slowed by a costly part or a busy CPU simply takes fewer
(static shares were off by a third: LLVM's cost per character of IR varies tenfold between
functions). For each part a process parses, verifies, optimizes (``optimize``: the O3
pipeline) and emits object code; a child then sends all its results over a pipe and exits.
On two CPUs two parts compile at once: threads could not do this, llvmlite holds one lock
around every call into LLVM.

``Stream`` starts sooner: each part ``submit``-ted while the module is still being emitted
goes to a child forked for it at once (at most ``jobs - 1`` at a time), and ``finish``
compiles the parts left as ``compile_parts`` does.

The guard. What this process would compile itself (its share of the queue, a module too
small to split; a GPU program's PTX: ``ptx.optimized_ptx``) goes to ``guarded``: a child
forked at the first compile (the guard) runs one such job at a time and replies; this
process waits at most ``guard_deadline_s`` for it. LLVM is a C++ library that may abort its
process (the llvmlite wheels are built with assertions) or run a pass for ever on some IR
(the fuzzer found a vectorizer plan walking 3**28 steps): in the guard, either costs the
guard, which is killed and replaced, and the text is compiled again with the reduced
pipeline (LLVM's O1 without vectorizers and unroller: ``host.optimize``; a
``RuntimeWarning`` says so); if that fails too, ``InternalError`` names the functions. The
guard's phase timings join the caller's (``debug.relay_timings``). Idle for ``GUARD_IDLE_S``
it leaves (it holds the owner's memory as it was at the fork); a job that comes as it leaves,
or meets a guard something else killed (``SIGKILL``), goes to a new one. A process forked
from the guard's owner starts its own. ``TEX_COMPILE_GUARD=0`` (read at import), or no
``fork``: compiled in this process.

Fork safety. The children are forked while this thread holds tex's ``LLVM_LOCK`` and
llvmlite's own lock, so no thread of the process is inside LLVM at that moment and LLVM's
state is consistent in the child (glibc makes ``malloc`` safe across ``fork``). The child
runs only LLVM calls on objects of its own, writes to its pipe and ``os._exit`` (no
``atexit`` handlers, no cleanup of the parent's objects; it never needs libgomp, whose
threads do not exist in it). Another thread's build waits at ``LLVM_LOCK`` while the
children are forked. Only Linux forks; elsewhere, or without access to llvmlite's lock,
every part compiles here, one after the other, with no guard; with ``TEX_COMPILE_JOBS`` at
1 they compile one after the other in the guard.

Failures never hang or crash the build: the parts of a child that cannot be forked, exits
nonzero, dies, sends a malformed reply, or has not answered ``max(CHILD_WAIT_MIN_S,
CHILD_WAIT_FACTOR * t)`` seconds after the queue ran dry (``t``: the longest part this
process compiled; the child is killed then) are compiled under the guard instead (a late
child's with the reduced pipeline at once), which raises the proper error when the IR
itself is at fault.

``TEX_COMPILE_JOBS`` (read at import): how many processes compile the parts of one module
at once; default: the CPUs this process may run on, at most ``MAX_DEFAULT_JOBS``; 0 or 1:
no child process but the guard.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import pickle
import re
import select
import signal
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from .. import debug
from .host import LLVM_LOCK, declared_externals, host_target, optimize

__all__ = ["PartResult", "Stream", "compile_part", "compile_parts", "compile_guarded",
           "can_fork", "guarded", "guard_deadline_s", "guard_pid", "stop_guard", "COMPILE_JOBS",
           "MAX_DEFAULT_JOBS", "MAX_PARTS", "CHILD_WAIT_MIN_S", "CHILD_WAIT_FACTOR", "GUARD",
           "GUARD_CHARS_PER_S", "GUARD_IDLE_S"]

MAX_DEFAULT_JOBS = 4
# how long the children get once this process has compiled its own part (see above)
CHILD_WAIT_MIN_S = 60.0
CHILD_WAIT_FACTOR = 20.0
# a reply record: the part's index and three lengths, then the three payloads
_RECORD = struct.Struct("<QQQQ")
MAX_PARTS = 255  # parts are claimed as one byte each


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


def compile_part(text: str, reduced: bool = False) -> PartResult:
    """Parse, verify, optimize (``reduced``: see ``host.optimize``) and emit object code
    for one part, in this process."""
    host = host_target()
    context = llvm.create_context()  # freed with the module (see tex.codegen.llvm)
    with LLVM_LOCK:
        try:
            mod = optimize(text, host, context, reduced)
            try:
                with debug.timed("llvm.print"):
                    opt = str(mod)
                externals = tuple(declared_externals(mod))
                with debug.timed("llvm.codegen"):
                    obj = host.target_machine(jit=True).emit_object(mod)
            finally:
                mod.close()  # before its context
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


def _encode(index: int, r: PartResult) -> bytes:
    """One reply record: the part's index, three lengths, then the three payloads."""
    text, externals = r.text.encode(), "\n".join(r.externals).encode()
    return _RECORD.pack(index, len(r.object), len(text), len(externals)) + r.object + \
        text + externals


def _decode(data: bytes, parts: int) -> dict[int, PartResult] | None:
    """A child's reply (its parts by index), or None when it is malformed."""
    out: dict[int, PartResult] = {}
    view = memoryview(data)
    while view:
        if len(view) < _RECORD.size:
            return None
        index, n_obj, n_text, n_ext = _RECORD.unpack_from(view)
        end = _RECORD.size + n_obj + n_text + n_ext
        if index >= parts or len(view) < end:
            return None
        a, b = _RECORD.size + n_obj, _RECORD.size + n_obj + n_text
        try:
            text, ext = bytes(view[a:b]).decode(), bytes(view[b:end]).decode()
        except UnicodeDecodeError:
            return None
        out[index] = PartResult(bytes(view[_RECORD.size:a]), text,
                                tuple(ext.split("\n")) if ext else ())
        view = view[end:]
    return out


def _claim(queue: int) -> int | None:
    """The index of the next part nobody has taken from the queue (None: none left).
    A pipe holding one byte per part, written whole before any reader starts: each read
    of one byte takes one part, whichever process reads it."""
    data = os.read(queue, 1)
    return data[0] if data else None


@dataclass
class _Child:
    """A forked child compiling parts: its process id, the read end of its pipe, what it
    sent so far and whether it is done sending (or its pipe failed)."""

    pid: int
    fd: int
    reaped: bool = False
    chunks: list[bytes] = field(default_factory=list)
    eof: bool = False
    failed: bool = False


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data (or end of file) within ``timeout`` seconds (``poll``: a
    descriptor numbered past 1,023 is beyond ``select``)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout) * 1000.0))


def _drain(child: _Child, timeout: float = 0.0) -> None:
    """Read what ``child`` sends, waiting at most ``timeout`` seconds for the first bytes
    (never for more: a child that is still compiling is left to it)."""
    try:
        while not child.eof and _readable(child.fd, timeout):
            timeout = 0.0
            data = os.read(child.fd, 1 << 20)
            if data:
                child.chunks.append(data)
            else:
                child.eof = True
    except OSError:
        child.eof = child.failed = True


def _child_main(texts: Sequence[str], queue: int, fd: int) -> None:
    """In the child: compile the parts it claims, reply with all of them, leave (never
    returns)."""
    code = 1
    try:
        replies = []
        while (k := _claim(queue)) is not None:
            replies.append(_encode(k, compile_part(texts[k])))
        view = memoryview(b"".join(replies))
        while view:
            view = view[os.write(fd, view):]
        code = 0
    finally:
        os._exit(code)  # no atexit handlers, no finalizers of the parent's objects


def _fork(texts: Sequence[str], queue: int, n: int) -> list[_Child]:
    """Up to ``n`` children taking parts from ``queue`` (fewer where ``fork`` fails), forked
    while no thread is in LLVM."""
    children: list[_Child] = []
    with LLVM_LOCK, _llvmlite_lock():
        for _ in range(n):
            try:
                r, w = os.pipe()
            except OSError:
                break
            try:
                pid = os.fork()
            except OSError:
                os.close(r)
                os.close(w)
                break
            if pid == 0:
                os.close(r)
                _child_main(texts, queue, w)
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


def _collect(child: _Child, deadline: float, parts: int) -> dict[int, PartResult] | None:
    """The parts the child compiled; none when it failed, None when it missed ``deadline``
    (then it is killed)."""
    while not child.eof:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        _drain(child, remaining)
    if not child.eof:
        _reap(child, kill=True)
        return None
    if child.failed:
        _reap(child, kill=True)
        return {}
    if _reap(child, kill=False) not in (0, None):
        return {}
    return _decode(b"".join(child.chunks), parts) or {}


def _queue(order: Sequence[int]) -> int | None:
    """A pipe's read end holding ``order`` one byte each, its write end closed (None when
    no pipe could be made)."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        os.write(w, bytes(order))  # far below a pipe's capacity: never blocks
    except OSError:
        os.close(r)
        return None
    finally:
        os.close(w)
    return r


def compile_parts(texts: Sequence[str], jobs: int | None = None) -> list[PartResult]:
    """Compile every part (see the module docstring) with up to ``jobs`` processes
    (default ``COMPILE_JOBS``): this one and ``jobs - 1`` children take parts from one
    queue, largest first, until none is left."""
    return Stream(jobs).finish(texts)


class Stream:
    """Parts compiled while the module they come from is still being emitted.

    ``submit(text)`` forks a child compiling that part at once (``ready`` says whether one
    of the ``jobs - 1`` children streaming may take a part now); ``finish(rest)`` compiles
    the parts left as ``compile_parts`` does (while the streaming children end theirs) and
    returns every result, submitted parts first. A streaming child that fails or is too
    slow (see the module docstring) has its part compiled here. Without ``fork``, or with
    one job, ``ready`` is always False and everything compiles in ``finish``.
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = COMPILE_JOBS if jobs is None else jobs
        self.enabled = self.jobs > 1 and can_fork()
        self.texts: list[str] = []  # the submitted parts
        self.children: list[tuple[_Child, int]] = []  # each with the index of its part

    def ready(self) -> bool:
        """Whether a part submitted now starts at once: fewer than ``jobs - 1`` submitted
        parts are still compiling (reads what the children have sent, without waiting)."""
        if not self.enabled or len(self.texts) >= MAX_PARTS:
            return False
        running = 0
        for child, _ in self.children:
            _drain(child)
            running += not child.eof
        return running < self.jobs - 1

    def submit(self, text: str) -> None:
        """Compile ``text`` in a child forked now (here in ``finish`` if none can be)."""
        k = len(self.texts)
        self.texts.append(text)
        if not self.enabled:
            return
        queue = _queue([0])
        if queue is None:
            return
        try:
            with debug.timed("llvm.fork"):
                forked = _fork([text], queue, 1)
        finally:
            os.close(queue)
        self.children += [(child, k) for child in forked]

    def abandon(self) -> None:
        """Kill the children still compiling submitted parts and forget those parts (the
        module compiles another way)."""
        for child, _ in self.children:
            if not child.reaped:
                _reap(child, kill=True)
        self.children, self.texts = [], []

    def finish(self, rest: Sequence[str]) -> list[PartResult]:
        """The results of the submitted parts, then of the parts ``rest``, compiled now by
        this process and up to ``jobs - 1`` children taking them from one queue, largest
        first."""
        n0 = len(self.texts)
        results: dict[int, PartResult] = {}
        late: set[int] = set()  # the parts of children killed for missing the deadline
        # each child with the index of its first part and its number of parts
        children = [(child, k, 1) for child, k in self.children]
        queue = None
        if self.jobs > 1 and 1 < len(rest) <= MAX_PARTS and can_fork():
            queue = _queue(sorted(range(len(rest)), key=lambda k: -len(rest[k])))
        try:
            if queue is not None:
                forked = _fork(rest, queue, min(self.jobs, len(rest)) - 1)
                children += [(child, n0, len(rest)) for child in forked]
            longest = 0.0
            for k in iter(lambda: _claim(queue), None) if queue is not None else \
                    range(len(rest)):
                start = time.monotonic()
                results[n0 + k] = compile_guarded(rest[k])
                longest = max(longest, time.monotonic() - start)
            # each child has at most the part it is compiling left to do
            deadline = time.monotonic() + max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * longest)
            with debug.timed("llvm.wait"):
                for child, first, parts in children:
                    got = _collect(child, deadline, parts)
                    if got is None:  # too slow: one of its parts may make LLVM hang
                        late.update(range(first, first + parts))
                    else:
                        results.update((first + k, r) for k, r in got.items())
        finally:
            if queue is not None:
                os.close(queue)
            for child, _, _ in children:
                if not child.reaped:
                    _reap(child, kill=True)
        # what no process compiled (a child failed or was too slow) compiles under the
        # guard, a late child's parts with the reduced pipeline at once
        texts = [*self.texts, *rest]
        return [results[k] if k in results else compile_guarded(t, reduced_first=k in late)
                for k, t in enumerate(texts)]


# -- the guard ---------------------------------------------------------------------------
# A request: a length, then the pickled job (a module's and a function's name, the
# arguments). A reply: one status byte, then (status 0) the phase timings (JSON) and the
# pickled result, or a message (1: an InternalError's, relayed as it is; 2: another
# exception's, wrapped), each after its length.
_LENGTH = struct.Struct("<Q")
# LLVM's pace on the gradients of the model benchmark: 200-360 KB of IR text per second
# (parse, O3, code generation); the guard waits CHILD_WAIT_FACTOR times as long as a text
# should take at this slower pace, and at least CHILD_WAIT_MIN_S
GUARD_CHARS_PER_S = 100_000
GUARD = debug.env("TEX_COMPILE_GUARD") != "0"
# the guard leaves after this many seconds without a job: forked, it shares the owner's
# memory as it was then, so every page the owner writes afterwards is copied (a 1 GiB
# array written in place cost 1 GiB more while the guard lived); idle, it gives them back
# (the next compile forks a new one: milliseconds)
GUARD_IDLE_S = 5.0
_IDLE_EXIT = 75  # its exit status then
# a job is sent again to a new guard, at most this many times, when the last one left idle
# or was killed (by another process) as it came
_RESENDS = 3


def guard_deadline_s(chars: int) -> float:
    """How long the guard may take over a text of ``chars`` characters."""
    return max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * chars / GUARD_CHARS_PER_S)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file, on an error, or past ``deadline``
    (``time.monotonic``; None: wait as long as it takes)."""
    chunks, got = [], 0
    try:
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not _readable(fd, remaining):
                    return None
            data = os.read(fd, n - got)
            if not data:
                return None
            chunks.append(data)
            got += len(data)
    except OSError:
        return None
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _guard_main(requests: int, replies: int) -> None:
    """In the guard: run each job it is sent and reply, until its owner closes the
    request pipe (never returns)."""
    code = 1
    try:
        # Ctrl-C reaches the whole process group: the owner decides (it kills the guard
        # when a compile is interrupted)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            if not _readable(requests, GUARD_IDLE_S):
                code = _IDLE_EXIT
                break
            head = _read_exact(requests, _LENGTH.size, None)
            data = None if head is None else \
                _read_exact(requests, _LENGTH.unpack(head)[0], None)
            if data is None:  # the owner closed the pipe
                code = 0
                break
            try:
                module, name, args = pickle.loads(data)
                with debug.timings() as t:
                    result = _job((module, name))(*args)
                rows, body = json.dumps(t.rows).encode(), pickle.dumps(result)
                reply = b"\0" + _LENGTH.pack(len(rows)) + rows + _LENGTH.pack(len(body)) + body
            except Exception as err:  # the owner raises it (an InternalError as it was)
                status = b"\1" if isinstance(err, debug.InternalError) else b"\2"
                text = str(err) if status == b"\1" else f"{type(err).__name__}: {err}"
                message = text.encode(errors="replace")
                reply = status + _LENGTH.pack(len(message)) + message
            _write_all(replies, reply)
    finally:
        os._exit(code)  # as a compiling child leaves (``_child_main``)


@dataclass
class _Guard:
    """A forked process compiling texts one at a time for its owner (see
    ``compile_guarded``): its id, the owner's id, the owner's ends of the two pipes."""

    pid: int
    owner: int
    requests: int
    replies: int

    @classmethod
    def start(cls) -> _Guard | None:
        """A new guard, forked while no thread is in LLVM; None when none can be made."""
        with LLVM_LOCK, _llvmlite_lock():
            fds: list[int] = []
            try:
                fds += os.pipe()
                fds += os.pipe()
                pid = os.fork()
            except OSError:
                for fd in fds:
                    os.close(fd)
                return None
            request_r, request_w, reply_r, reply_w = fds
            if pid == 0:
                # only its own pipe ends stay open: the owner's other files close when
                # the owner closes them, its pipes reach end of file when it closes them
                keep = sorted((request_r, reply_w))
                os.closerange(3, keep[0])
                os.closerange(keep[0] + 1, keep[1])
                os.closerange(keep[1] + 1, _max_fd())
                _guard_main(request_r, reply_w)
            os.close(request_r)
            os.close(reply_w)
        return cls(pid, os.getpid(), request_w, reply_r)

    def ask(self, job: tuple[str, str, tuple[Any, ...]], deadline: float
            ) -> tuple[Any] | Exception | str | None:
        """The result of ``job`` (in a 1-tuple); the error it raised; ``_UNSERVED`` when
        the guard had left idle as the job came; None when it died or missed ``deadline``
        (``time.monotonic``)."""
        data = pickle.dumps(job)
        try:
            _write_all(self.requests, _LENGTH.pack(len(data)) + data)
        except OSError:
            return self.left()
        status = _read_exact(self.replies, 1, deadline)
        if status is None and time.monotonic() < deadline:  # end of file: it left
            return self.left()
        if status not in (b"\0", b"\1", b"\2"):
            return None
        parts = []
        for _ in range(2 if status == b"\0" else 1):
            head = _read_exact(self.replies, _LENGTH.size, deadline)
            body = None if head is None else \
                _read_exact(self.replies, _LENGTH.unpack(head)[0], deadline)
            if body is None:
                return None
            parts.append(body)
        if status == b"\0":
            debug.relay_timings([(n, d, s) for n, d, s in json.loads(parts[0])])
            return (pickle.loads(parts[1]),)
        message = parts[0].decode(errors="replace")
        return debug.InternalError.relayed(message) if status == b"\1" else \
            debug.InternalError(f"compiling failed in the compile guard: {message}")

    def left(self) -> str | None:
        """After the guard closed its pipes before the deadline: ``_UNSERVED`` when it
        left idle or was killed by someone else (``SIGKILL``: this process kills a guard
        only past its deadline; another killed it as the job came, which ``gone`` had not
        seen yet, or the system ran out of memory), reaped now; None when it died (LLVM
        aborts or faults: the text's doing)."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        code = os.waitstatus_to_exitcode(status)
        return _UNSERVED if code in (_IDLE_EXIT, -signal.SIGKILL) else None

    def gone(self) -> bool:
        """Whether the guard has exited (reaped now)."""
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return pid != 0

    def stop(self) -> None:
        """Close the pipes, kill the guard and reap it. (Killed, never waited for: it
        holds nothing worth finishing, and a copy of the request pipe in some process
        forked without Python's fork hooks would keep it from seeing end of file.)"""
        self.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def close(self) -> None:
        """Close this process's ends of the pipes."""
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        return 1 << 16


class _Guards:
    """This process's guard (started at the first compile, again after one was killed)
    and the lock that lets one thread at a time use it. A process forked from the owner
    forgets the owner's guard (closing its copies of the pipes) and starts its own."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.guard: _Guard | None = None

    def get(self) -> _Guard | None:
        """The running guard, started if there is none (None: none can be)."""
        g = self.guard
        if g is not None and g.owner != os.getpid():  # (a fork the hook did not see)
            self.forget()
            g = None
        if g is not None and g.gone():  # died between compiles (killed): not the text's doing
            g.stop()
            g = self.guard = None
        if g is None:
            g = self.guard = _Guard.start()
        return g

    def stop(self) -> None:
        """Stop the guard (a new one starts at the next compile)."""
        g, self.guard = self.guard, None
        if g is not None and g.owner == os.getpid():
            g.stop()

    def forget(self) -> None:
        """In a forked child: the owner's guard is not this process's (its pipe ends
        are closed here, so that the guard still sees end of file when its owner goes)."""
        g, self.guard = self.guard, None
        if g is not None and g.owner != os.getpid():
            g.close()


    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread may have held the owner's at the
        fork, and no thread here would ever release it) and no guard yet."""
        self.lock = threading.Lock()
        self.forget()


_GUARDS = _Guards()
atexit.register(_GUARDS.stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_GUARDS.after_fork)


def guard_pid() -> int | None:
    """The process id of this process's guard; None when none runs."""
    g = _GUARDS.guard
    return g.pid if g is not None and g.owner == os.getpid() else None


def stop_guard() -> None:
    """Stop this process's guard; the next compile starts a new one (tests change what a
    new one runs)."""
    with _GUARDS.lock:
        _GUARDS.stop()


def compile_guarded(text: str, reduced_first: bool = False) -> PartResult:
    """``compile_part(text)`` in the guard (``guarded``); ``reduced_first``: only with the
    reduced pipeline (a child compiling the text was too slow)."""
    return guarded((__name__, "compile_part"), (text,), text, _functions(text), reduced_first)


def guarded(fn: tuple[str, str], args: tuple[Any, ...], text: str, what: str,
            reduced_first: bool = False) -> Any:
    """``f(*args, reduced)``, ``f`` the function ``fn`` names (a module and a name in it,
    looked up where the job runs; ``reduced``: LLVM's reduced pipeline), where LLVM can
    neither hang nor crash this process: in the guard, a child process that runs one such
    job at a time, under a deadline (``guard_deadline_s`` of the IR ``text``). When the
    guard dies on the job (LLVM aborts: the llvmlite wheels are built with assertions) or
    misses the deadline (LLVM's passes have exponential paths: a vectorizer plan once
    walked 3**28 steps), it is killed and the job run again with ``reduced`` true, with a
    ``RuntimeWarning``; when that fails too, ``InternalError`` names ``what`` (the
    functions). ``reduced_first``: only the reduced job. Without ``fork`` or with
    ``TEX_COMPILE_GUARD=0`` it runs here."""
    if not GUARD or not can_fork():
        return _job(fn)(*args, reduced_first)
    limit = guard_deadline_s(len(text))
    with _GUARDS.lock:
        for reduced in (True,) if reduced_first else (False, True):
            reply: tuple[Any] | Exception | str | None = _UNSERVED
            for _ in range(_RESENDS):
                guard = _GUARDS.get()
                if guard is None:  # no fork now: run here, unguarded
                    return _job(fn)(*args, reduced)
                try:
                    with debug.timed("llvm.compile"):
                        reply = guard.ask((*fn, (*args, reduced)), time.monotonic() + limit)
                except BaseException:  # interrupted: the reply it owes must never be read
                    _GUARDS.stop()
                    raise
                if reply is not _UNSERVED:
                    break
                _GUARDS.stop()  # (left idle as the job came: a new one takes it)
            if reply is _UNSERVED:
                reply = None
            if isinstance(reply, tuple):
                if reduced and not reduced_first:
                    warnings.warn(f"LLVM crashed or ran past {limit:.0f} s compiling {what} "
                                  "with O3; compiled with a reduced pipeline (the code may "
                                  "run slower)", RuntimeWarning, stacklevel=3)
                return reply[0]
            if reply is not None:
                raise reply
            _GUARDS.stop()
    raise debug.InternalError(f"LLVM crashed or ran past {limit:.0f} s compiling {what}, "
                              "with O3 and with a reduced pipeline", text)


_UNSERVED = "unserved"  # (``_Guard.ask``: the guard had left idle)


def _job(fn: tuple[str, str]) -> Callable[..., Any]:
    """The function ``(module, name)`` names, as the module holds it now."""
    return getattr(importlib.import_module(fn[0]), fn[1])  # type: ignore[no-any-return]


def _functions(text: str) -> str:
    """The functions ``text`` defines, for a message."""
    names = [n for n in re.findall(r'^define [^@]*@"?([^"(\s]+)', text, re.M)
             if not n.startswith("tex.")]  # (tex's helpers: the math functions)
    shown = ", ".join(f"'{n}'" for n in names[:4])
    return (shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")) or "a module"
