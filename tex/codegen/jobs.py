"""Compiling LLVM IR to object code in worker processes: every compile under a deadline,
and the parts of a split module (``split.py``) several at once.

A worker is a process forked from this one (while no thread is inside LLVM) that runs the
jobs it is sent one at a time and replies to each: ``compile_part`` (parse, verify,
optimize with ``optimize``'s O3 pipeline, emit object code for the host, as MCJIT's target
machine would) of an IR text, or a GPU program's ``ptx.optimized_ptx``. This process waits
for each reply at most ``guard_deadline_s`` of the text. LLVM is a C++ library that may
abort its process (the llvmlite wheels are built with assertions) or run a pass for ever
on some IR (the fuzzer found a vectorizer plan walking 3**28 steps): in a worker, either
costs the worker, which is killed, and the text is compiled again with the reduced
pipeline (LLVM's O1 without vectorizers and unroller: ``host.optimize``; a
``RuntimeWarning`` says so); if that fails too, ``InternalError`` names the functions. No
kernel is compiled by LLVM in this process.

The workers form a pool (``_Pool``): at most ``TEX_COMPILE_JOBS`` of them (or as many as a
``Stream`` asks for), started when first needed and kept: idle for ``GUARD_IDLE_S`` a
worker leaves (forked, it holds this process's memory as it was at the fork: every page
written afterwards is copied while it lives), and a job that comes as it leaves, or meets
a worker something else killed (``SIGKILL``), goes to a new one. Kept workers matter: a
process forked per part cost 30-45 ms of CPU per part (page tables and copy-on-write
faults on both sides, compiling slower by a third), the pool's workers pay that once.
``guarded`` (``compile_guarded``) runs one job on a free worker and waits for it; the
phase timings of that job join the caller's (``debug.relay_timings``).

``Stream`` compiles the parts of one module on several workers at once, the first ones
while the module is still being emitted: each part ``submit``-ted goes to a free worker at
once (at most ``jobs - 1`` busy: this process is emitting the rest), and ``finish`` sends
the parts left, largest first, to up to ``jobs`` workers, a new one whenever a worker
replies, and collects every result: a worker slowed by a costly part or a busy CPU simply
takes fewer (static shares were off by a third: LLVM's cost per character of IR varies
tenfold between functions). On two CPUs two parts compile at once: threads could not do
this, llvmlite holds one lock around every call into LLVM. A part whose worker dies or
replies with something else than a result is compiled again under ``compile_guarded``
(which raises the proper error when the IR itself is at fault); a part past its deadline
(its worker killed) is compiled again with the reduced pipeline at once.

Fork safety. The workers are forked while this thread holds tex's ``LLVM_LOCK`` and
llvmlite's own lock, so no thread of the process is inside LLVM at that moment and LLVM's
state is consistent in the worker (glibc makes ``malloc`` safe across ``fork``). A worker
runs only LLVM calls on objects of its own, writes to its pipe and ``os._exit`` (no
``atexit`` handlers, no cleanup of the parent's objects; it never needs libgomp, whose
threads do not exist in it). A process forked from the pool's owner starts its own
workers. Only Linux forks; elsewhere, without access to llvmlite's lock, or with
``TEX_COMPILE_GUARD=0`` (read at import), everything compiles in this process, one part
after the other, with no deadline.

``TEX_COMPILE_JOBS`` (read at import): how many workers compile the parts of one module
at once; default: the CPUs this process may run on, at most ``MAX_DEFAULT_JOBS``; 0 or 1:
one worker, every module compiled whole.
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
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from .. import debug
from .host import LLVM_LOCK, declared_externals, host_target, optimize

__all__ = ["PartResult", "Stream", "compile_part", "compile_parts", "compile_guarded",
           "can_fork", "guarded", "guard_deadline_s", "guard_pid", "worker_pids", "stop_guard",
           "COMPILE_JOBS", "MAX_DEFAULT_JOBS", "CHILD_WAIT_MIN_S", "CHILD_WAIT_FACTOR",
           "GUARD", "GUARD_CHARS_PER_S", "GUARD_IDLE_S"]

MAX_DEFAULT_JOBS = 4
# the least time a worker gets for a job, and how many times longer than LLVM's slower pace
# (GUARD_CHARS_PER_S) it may take over a text
CHILD_WAIT_MIN_S = 60.0
CHILD_WAIT_FACTOR = 20.0


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
    """Whether LLVM may run in forked workers here (Linux, llvmlite's lock)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and \
        _llvmlite_lock() is not None


def _readable(fds: Sequence[int], timeout: float) -> set[int]:
    """Those of ``fds`` that have data (or end of file) within ``timeout`` seconds
    (``poll``: a descriptor numbered past 1,023 is beyond ``select``)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _ in poller.poll(max(0.0, timeout) * 1000.0)}


# the job a Stream sends for each part (a module and a function in it: tests point it
# elsewhere to make workers fail)
PART_JOB = (__name__, "compile_part")


@dataclass
class _Sent:
    """A part a ``Stream`` sent to a worker: the worker, the part's index, the deadline of
    its reply (``time.monotonic``)."""

    worker: _Worker
    index: int
    deadline: float


class Stream:
    """The parts of one module compiled on several workers at once, the first while the
    module is still being emitted.

    ``submit(text)`` sends a part to a free worker at once (``ready`` says whether one of
    the ``jobs - 1`` a stream keeps busy while the module is emitted may take one now; a
    part no worker takes waits for ``finish``); ``finish(rest)`` compiles the parts left on
    up to ``jobs`` workers (see the module docstring) and returns every result, submitted
    parts first. Without workers (no ``fork``, ``TEX_COMPILE_GUARD=0``) or with one job,
    ``ready`` is always False and ``finish`` compiles every part under
    ``compile_guarded``, one after the other.
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = COMPILE_JOBS if jobs is None else jobs
        self.enabled = self.jobs > 1 and GUARD and can_fork()
        self.texts: list[str] = []  # the parts, submitted first
        self.sent: list[_Sent] = []  # those a worker is compiling
        self.waiting: list[int] = []  # submitted parts no worker took
        self.results: dict[int, PartResult] = {}
        self.redo: dict[int, bool] = {}  # parts to compile again: index -> reduced first

    def ready(self) -> bool:
        """Whether a part submitted now starts at once: fewer than ``jobs - 1`` submitted
        parts are still compiling (collects the replies that came, without waiting)."""
        if not self.enabled:
            return False
        self._collect(0.0)
        return len(self.sent) < self.jobs - 1

    def submit(self, text: str) -> None:
        """Send ``text`` to a free worker (compiled in ``finish`` if none is free)."""
        k = len(self.texts)
        self.texts.append(text)
        if not self.enabled:
            self.waiting.append(k)
            return
        with debug.timed("llvm.submit"):
            if not self._send(k, wait=False):
                self.waiting.append(k)

    def abandon(self) -> None:
        """Kill the workers still compiling submitted parts and forget those parts (the
        module compiles another way)."""
        for s in self.sent:
            _POOL.drop(s.worker)
        self.sent, self.texts, self.waiting = [], [], []
        self.results, self.redo = {}, {}

    def finish(self, rest: Sequence[str]) -> list[PartResult]:
        """The results of the submitted parts, then of the parts ``rest``, compiled now on
        up to ``jobs`` workers, largest first."""
        n0 = len(self.texts)
        self.texts += rest
        todo = sorted([*self.waiting, *range(n0, len(self.texts))],
                      key=lambda k: -len(self.texts[k]))
        self.waiting = []
        try:
            with debug.timed("llvm.wait"):
                while todo or self.sent:
                    while todo and self.enabled and len(self.sent) < self.jobs and \
                            self._send(todo[0], wait=not self.sent):
                        todo.pop(0)
                    if not self.sent:  # no worker to be had: compiled below, here
                        self.redo.update((k, False) for k in todo)
                        todo = []
                        break
                    self._collect(min(s.deadline for s in self.sent) - time.monotonic())
                    self._expire()
        except BaseException:
            self.abandon()  # no worker's late reply may answer another request
            raise
        # what no worker compiled (one died, replied wrongly or was too slow) compiles
        # under compile_guarded, a late worker's part with the reduced pipeline at once
        for k, late in sorted(self.redo.items()):
            self.results[k] = compile_guarded(self.texts[k], reduced_first=late)
        return [self.results[k] for k in range(len(self.texts))]

    def _send(self, k: int, wait: bool) -> bool:
        """Send part ``k`` to a free worker (``wait``: for one to be free, when all that
        may run are busy); whether one took it."""
        text = self.texts[k]
        worker = _POOL.take(max(self.jobs, COMPILE_JOBS), wait)
        if worker is None:
            return False
        if not worker.send((*PART_JOB, (text, False))):  # (it left as the part came)
            _POOL.drop(worker)
            return False
        self.sent.append(_Sent(worker, k, time.monotonic() + guard_deadline_s(len(text))))
        return True

    def _collect(self, timeout: float) -> None:
        """Take the replies that come within ``timeout`` seconds (all that came by then)."""
        if not self.sent:
            return
        ready = _readable([s.worker.replies for s in self.sent], timeout)
        for s in [s for s in self.sent if s.worker.replies in ready]:
            self.sent.remove(s)
            reply = s.worker.receive(s.deadline, relay=False)
            if isinstance(reply, tuple) and isinstance(reply[0], PartResult):
                _POOL.give(s.worker)
                self.results[s.index] = reply[0]
            elif isinstance(reply, debug.InternalError):
                _POOL.give(s.worker)
                raise reply  # the text's fault: say so now
            else:  # it died, left, replied with something else: compiled again at O3
                _POOL.drop(s.worker)
                self.redo[s.index] = False

    def _expire(self) -> None:
        """Kill the workers past their part's deadline: the part may make LLVM hang."""
        now = time.monotonic()
        for s in [s for s in self.sent if s.deadline <= now]:
            self.sent.remove(s)
            _POOL.drop(s.worker)
            self.redo[s.index] = True


def compile_parts(texts: Sequence[str], jobs: int | None = None) -> list[PartResult]:
    """Compile every part (see ``Stream``) on up to ``jobs`` workers at once (default
    ``COMPILE_JOBS``), largest first."""
    return Stream(jobs).finish(texts)


# -- the workers -------------------------------------------------------------------------
# A request: a length, then the pickled job (a module's and a function's name, the
# arguments). A reply: one status byte, then (status 0) the phase timings (JSON) and the
# pickled result, or a message (1: an InternalError's, relayed as it is; 2: another
# exception's, wrapped), each after its length.
_LENGTH = struct.Struct("<Q")
# LLVM's pace on the gradients of the model benchmark: 200-360 KB of IR text per second
# (parse, O3, code generation); a worker may take CHILD_WAIT_FACTOR times as long as a text
# should take at this slower pace, and at least CHILD_WAIT_MIN_S
GUARD_CHARS_PER_S = 100_000
GUARD = debug.env("TEX_COMPILE_GUARD") != "0"
# a worker leaves after this many seconds without a job: forked, it shares the owner's
# memory as it was then, so every page the owner writes afterwards is copied (a 1 GiB
# array written in place cost 1 GiB more while a worker lived); idle, it gives them back
# (the next compile forks a new one: milliseconds)
GUARD_IDLE_S = 5.0
_IDLE_EXIT = 75  # its exit status then
# a job is sent again to a new worker, at most this many times, when the last one left
# idle or was killed (by another process) as it came
_RESENDS = 3


def guard_deadline_s(chars: int) -> float:
    """How long a worker may take over a text of ``chars`` characters."""
    return max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * chars / GUARD_CHARS_PER_S)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file, on an error, or past ``deadline``
    (``time.monotonic``; None: wait as long as it takes)."""
    chunks, got = [], 0
    try:
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not _readable([fd], remaining):
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


def _worker_main(requests: int, replies: int) -> None:
    """In a worker: run each job it is sent and reply, until its owner closes the request
    pipe or it idled ``GUARD_IDLE_S`` (never returns)."""
    code = 1
    try:
        # Ctrl-C reaches the whole process group: the owner decides (it kills the worker
        # when a compile is interrupted)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            if not _readable([requests], GUARD_IDLE_S):
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
        os._exit(code)  # no atexit handlers, no finalizers of the parent's objects


@dataclass(eq=False)
class _Worker:
    """A forked process running jobs one at a time for its owner: its id, the owner's id,
    the owner's ends of the two pipes, whether it was reaped (its id may be reused)."""

    pid: int
    owner: int
    requests: int
    replies: int
    reaped: bool = False

    @classmethod
    def start(cls) -> _Worker | None:
        """A new worker, forked while no thread is in LLVM; None when none can be made."""
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
                # the owner closes them, its pipes (and the other workers') reach end of
                # file when it closes them
                keep = sorted((request_r, reply_w))
                os.closerange(3, keep[0])
                os.closerange(keep[0] + 1, keep[1])
                os.closerange(keep[1] + 1, _max_fd())
                _worker_main(request_r, reply_w)
            os.close(request_r)
            os.close(reply_w)
        return cls(pid, os.getpid(), request_w, reply_r)

    def ask(self, job: tuple[str, str, tuple[Any, ...]], deadline: float
            ) -> tuple[Any] | Exception | str | None:
        """The result of ``job`` (in a 1-tuple), its phase timings relayed; see
        ``receive``."""
        if not self.send(job):
            return self.left()
        return self.receive(deadline)

    def send(self, job: tuple[str, str, tuple[Any, ...]]) -> bool:
        """Send ``job``; False when the worker's pipe is closed (it left)."""
        data = pickle.dumps(job)
        try:
            _write_all(self.requests, _LENGTH.pack(len(data)) + data)
        except OSError:
            return False
        return True

    def receive(self, deadline: float, relay: bool = True
                ) -> tuple[Any] | Exception | str | None:
        """The reply to the job sent: its result (in a 1-tuple; ``relay``: its phase
        timings join this thread's); the error it raised; ``_UNSERVED`` when the worker
        had left idle as the job came or was killed by someone else; None when it died or
        missed ``deadline`` (``time.monotonic``)."""
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
            if relay:
                debug.relay_timings([(n, d, s) for n, d, s in json.loads(parts[0])])
            try:
                return (pickle.loads(parts[1]),)
            except Exception:  # (a reply cut short or garbled)
                return None
        message = parts[0].decode(errors="replace")
        return debug.InternalError.relayed(message) if status == b"\1" else \
            debug.InternalError(f"compiling failed in a compile worker: {message}")

    def left(self) -> str | None:
        """After the worker closed its pipes before the deadline: ``_UNSERVED`` when it
        left idle or was killed by someone else (``SIGKILL``: this process kills a worker
        only past its deadline; another killed it as the job came, which ``gone`` had not
        seen yet, or the system ran out of memory), reaped now; None when it died (LLVM
        aborts or faults: the text's doing)."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        finally:
            self.reaped = True
        code = os.waitstatus_to_exitcode(status)
        return _UNSERVED if code in (_IDLE_EXIT, -signal.SIGKILL) else None

    def gone(self) -> bool:
        """Whether the worker has exited (reaped now)."""
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid = self.pid
        self.reaped = pid != 0
        return self.reaped

    def stop(self) -> None:
        """Close the pipes, kill the worker and reap it. (Killed, never waited for: it
        holds nothing worth finishing, and a copy of the request pipe in some process
        forked without Python's fork hooks would keep it from seeing end of file.)"""
        self.close()
        if self.reaped:
            return
        self.reaped = True
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


class _Pool:
    """This process's workers, each either free or taken by one caller at a time (a
    ``guarded`` job, a ``Stream``'s part), started when none is free and fewer than asked
    for run. A process forked from the owner forgets the owner's workers (closing its
    copies of their pipes) and starts its own."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.workers: list[_Worker] = []  # in the order they started
        self.taken: set[int] = set()  # the ids of those taken

    def take(self, most: int, wait: bool) -> _Worker | None:
        """A free worker, started when none is and fewer than ``most`` run; when ``most``
        are taken: None, or with ``wait`` the first one given back. None too when no
        worker can be started (no ``fork`` now)."""
        with self.lock:
            while True:
                if self.workers and self.workers[0].owner != os.getpid():
                    self.forget()  # (a fork the hook did not see)
                for w in list(self.workers):
                    if w.pid in self.taken:
                        continue
                    if w.gone():  # died between jobs (killed): not the text's doing
                        self.workers.remove(w)
                        w.stop()
                        continue
                    self.taken.add(w.pid)
                    return w
                if len(self.workers) < max(1, most):
                    w = _Worker.start()
                    if w is not None:
                        self.workers.append(w)
                        self.taken.add(w.pid)
                    return w
                if not wait:
                    return None
                self.lock.wait()

    def give(self, worker: _Worker) -> None:
        """``worker`` is free again."""
        with self.lock:
            self.taken.discard(worker.pid)
            self.lock.notify()

    def drop(self, worker: _Worker) -> None:
        """Kill ``worker`` (it failed, is late, or owes a reply nobody will read)."""
        with self.lock:
            if worker in self.workers:
                self.workers.remove(worker)
            self.taken.discard(worker.pid)
            self.lock.notify()
        if worker.owner == os.getpid():
            worker.stop()

    def stop(self) -> None:
        """Stop every worker (new ones start at the next compile)."""
        with self.lock:
            workers, self.workers = self.workers, []
            self.taken = set()
            self.lock.notify_all()
        for w in workers:
            if w.owner == os.getpid():
                w.stop()

    def forget(self) -> None:
        """In a forked child: the owner's workers are not this process's (their pipe ends
        are closed here, so that they still see end of file when their owner goes)."""
        workers, self.workers, self.taken = self.workers, [], set()
        for w in workers:
            if w.owner != os.getpid():
                w.close()

    def after_fork(self) -> None:
        """In a forked child: a new lock (another thread may have held the owner's at the
        fork, and no thread here would ever release it) and no workers yet."""
        self.lock = threading.Condition()
        self.forget()


_POOL = _Pool()
atexit.register(_POOL.stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.after_fork)


def guard_pid() -> int | None:
    """The process id of this process's first worker (the one a lone compile takes);
    None when none runs."""
    pids = worker_pids()
    return pids[0] if pids else None


def worker_pids() -> list[int]:
    """The process ids of this process's workers, in the order they started."""
    return [w.pid for w in _POOL.workers if w.owner == os.getpid()]


def stop_guard() -> None:
    """Stop this process's workers; the next compile starts new ones (tests change what
    a new one runs)."""
    _POOL.stop()


def compile_guarded(text: str, reduced_first: bool = False) -> PartResult:
    """``compile_part(text)`` on a worker (``guarded``); ``reduced_first``: only with the
    reduced pipeline (a worker compiling the text was too slow)."""
    return guarded((__name__, "compile_part"), (text,), text, _functions(text), reduced_first)


def guarded(fn: tuple[str, str], args: tuple[Any, ...], text: str, what: str,
            reduced_first: bool = False) -> Any:
    """``f(*args, reduced)``, ``f`` the function ``fn`` names (a module and a name in it,
    looked up where the job runs; ``reduced``: LLVM's reduced pipeline), where LLVM can
    neither hang nor crash this process: on a free worker (waiting for one when
    ``TEX_COMPILE_JOBS`` are busy), under a deadline (``guard_deadline_s`` of the IR
    ``text``). When the worker dies on the job (LLVM aborts: the llvmlite wheels are built
    with assertions) or misses the deadline (LLVM's passes have exponential paths: a
    vectorizer plan once walked 3**28 steps), it is killed and the job run again with
    ``reduced`` true, with a ``RuntimeWarning``; when that fails too, ``InternalError``
    names ``what`` (the functions). ``reduced_first``: only the reduced job. Without
    ``fork`` or with ``TEX_COMPILE_GUARD=0`` it runs here."""
    if not GUARD or not can_fork():
        return _job(fn)(*args, reduced_first)
    limit = guard_deadline_s(len(text))
    for reduced in (True,) if reduced_first else (False, True):
        reply: tuple[Any] | Exception | str | None = _UNSERVED
        for _ in range(_RESENDS):
            worker = _POOL.take(COMPILE_JOBS, wait=True)
            if worker is None:  # no fork now: run here, unguarded
                return _job(fn)(*args, reduced)
            try:
                with debug.timed("llvm.compile"):
                    reply = worker.ask((*fn, (*args, reduced)), time.monotonic() + limit)
            except BaseException:  # interrupted: the reply it owes must never be read
                _POOL.drop(worker)
                raise
            if reply is not _UNSERVED and reply is not None:
                _POOL.give(worker)
                break
            _POOL.drop(worker)  # (left idle as the job came: a new one takes it)
            if reply is None:
                break
        if isinstance(reply, tuple):
            if reduced and not reduced_first:
                warnings.warn(f"LLVM crashed or ran past {limit:.0f} s compiling {what} "
                              "with O3; compiled with a reduced pipeline (the code may "
                              "run slower)", RuntimeWarning, stacklevel=3)
            return reply[0]
        if isinstance(reply, Exception):
            raise reply
    raise debug.InternalError(f"LLVM crashed or ran past {limit:.0f} s compiling {what}, "
                              "with O3 and with a reduced pipeline", text)


_UNSERVED = "unserved"  # (``_Worker.receive``: the worker had left idle as the job came)


def _job(fn: tuple[str, str]) -> Callable[..., Any]:
    """The function ``(module, name)`` names, as the module holds it now."""
    return getattr(importlib.import_module(fn[0]), fn[1])  # type: ignore[no-any-return]


def _functions(text: str) -> str:
    """The functions ``text`` defines, for a message."""
    names = [n for n in re.findall(r'^define [^@]*@"?([^"(\s]+)', text, re.M)
             if not n.startswith("tex.")]  # (tex's helpers: the math functions)
    shown = ", ".join(f"'{n}'" for n in names[:4])
    return (shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")) or "a module"
