"""The compile guard (``tex.codegen.jobs.compile_guarded``): LLVM runs in a child process
under a deadline, so that a crash (an assertion in LLVM aborts its process) or a pass that
never finishes costs a retry with the reduced pipeline, or a clear error, never the
caller's process or an endless wait."""
from __future__ import annotations

import itertools
import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import tex
from tex import debug
from tex.codegen import jobs

pytestmark = pytest.mark.skipif(not (jobs.can_fork() and jobs.GUARD),
                                reason="the guard forks (Linux only; TEX_COMPILE_GUARD=0 "
                                "turns it off)")

_NAMES = itertools.count()


@pytest.fixture(autouse=True)
def fresh_guard() -> Iterator[None]:
    """Each test starts its own guard (forked after its patches) and stops it after: a
    guard forked with a patched ``optimize`` must not serve later tests."""
    jobs.stop_guard()
    yield
    jobs.stop_guard()


def _build_and_run() -> None:
    """Build a small function never built before (no cache can answer) and check it."""
    n = 37 + next(_NAMES)
    A = tex.placeholder((n, 16), name="A")
    B = tex.compute((n, 16), lambda i, j: tex.exp(A[i, j]) * 2.0 + A[i, (j + 1) % 16],
                    name="B")
    # (the process id too: a forked child's counter continues from its parent's, and the
    # kernel it builds reaches the disk cache the parent reads)
    f = tex.build([B], name=f"guarded_{os.getpid()}_{n}")
    a = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
    b = np.zeros((n, 16), np.float32)
    f(a, b)
    np.testing.assert_allclose(b, np.exp(a) * 2 + np.roll(a, -1, axis=1), rtol=1e-5,
                               atol=1e-5)


def _patch_optimize(monkeypatch: pytest.MonkeyPatch,
                    misbehave: Callable[[bool], None]) -> None:
    """``optimize`` calling ``misbehave(reduced)`` first, in the guards forked from now on;
    their deadline 2 s."""
    optimize = jobs.optimize

    def patched(text: str, host: object = None, context: object = None,
                reduced: bool = False) -> object:
        misbehave(reduced)
        return optimize(text, host, context, reduced)  # type: ignore[arg-type]

    monkeypatch.setattr(jobs, "optimize", patched)
    monkeypatch.setattr(jobs, "CHILD_WAIT_MIN_S", 2.0)
    monkeypatch.setattr(jobs, "CHILD_WAIT_FACTOR", 0.0)


def _hangs_at_o3(reduced: bool) -> None:
    if not reduced:
        time.sleep(600)


def _aborts_at_o3(reduced: bool) -> None:
    if not reduced:
        os.abort()  # what an LLVM assertion does


def _always_aborts(reduced: bool) -> None:
    os.abort()


@pytest.mark.parametrize("misbehave", [_hangs_at_o3, _aborts_at_o3],
                         ids=["hangs", "crashes"])
def test_a_failed_o3_compile_is_retried_with_the_reduced_pipeline(
        monkeypatch: pytest.MonkeyPatch, misbehave: Callable[[bool], None]) -> None:
    _patch_optimize(monkeypatch, misbehave)
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"LLVM crashed or ran past 2 s compiling "
                      r"'guarded_\d+_\d+'.*reduced pipeline"):
        _build_and_run()
    assert time.monotonic() - start < 30  # the hung guard was killed, not waited for


def test_a_compile_failing_both_ways_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_optimize(monkeypatch, _always_aborts)
    with pytest.raises(debug.InternalError, match=r"LLVM crashed or ran past 2 s compiling "
                       r"'guarded_\d+_\d+', with O3 and with a reduced pipeline"):
        _build_and_run()
    monkeypatch.undo()
    jobs.stop_guard()
    _build_and_run()  # the process lives on, and a new guard compiles


def test_a_text_that_does_not_verify_raises_the_guards_error() -> None:
    text = 'define void @"broken"() {\nentry:\n  ret i32 0\n}\n'
    with pytest.raises(debug.InternalError, match="generated LLVM IR does not verify") as e:
        jobs.compile_guarded(text)
    assert str(e.value).count("internal error") == 1  # relayed, not wrapped again
    assert 'ret i32 0' in str(e.value)  # with the IR, as compile_part raises it


def test_a_killed_guard_is_replaced() -> None:
    _build_and_run()
    guard = jobs.guard_pid()
    assert guard is not None
    os.kill(guard, signal.SIGKILL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a dead guard is not a failed compile
        _build_and_run()
    assert jobs.guard_pid() not in (None, guard)


def test_a_guard_killed_as_the_job_comes_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed by someone else after this process last looked (``gone`` still says it
    runs): the job meets a dead guard, which is no crash of LLVM's, and goes to a new
    guard at O3, without a warning (the full suite on a busy machine built before the
    kernel had killed the guard of ``test_a_killed_guard_is_replaced``)."""
    _build_and_run()
    guard = jobs.guard_pid()
    assert guard is not None
    os.kill(guard, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _state(guard) not in ("Z", None) and time.monotonic() < deadline:
        time.sleep(0.01)  # (dead, not reaped: the next ``gone`` would see it)
    monkeypatch.setattr(jobs._Worker, "gone", lambda self: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _build_and_run()
    assert jobs.guard_pid() not in (None, guard)


def _state(pid: int) -> str | None:
    """A process's state letter from /proc (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_timings_of_the_guard_are_in_the_callers_table() -> None:
    with debug.timings() as t:
        _build_and_run()
    names = [name for name, _, _ in t.rows]
    assert {"llvm.compile", "llvm.parse", "llvm.opt", "llvm.codegen"} <= set(names)
    depth = {name: d for name, d, _ in t.rows}
    assert depth["llvm.opt"] == depth["llvm.compile"] + 1
    assert t.seconds("llvm.compile") >= t.seconds("llvm.opt") > 0


def test_a_forked_process_starts_its_own_guard() -> None:
    _build_and_run()
    parent_guard = jobs.guard_pid()
    assert parent_guard is not None
    pid = os.fork()
    if pid == 0:  # the child: compiles with a guard of its own, leaves the parent's alone
        code = 1
        try:
            assert jobs.guard_pid() is None  # (the parent's is not this process's)
            _build_and_run()
            code = 0 if jobs.guard_pid() not in (None, parent_guard) else 2
            jobs.stop_guard()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert jobs.guard_pid() == parent_guard
    _build_and_run()  # the parent's guard still answers


def test_a_fork_while_another_thread_compiles_leaves_the_child_able_to_compile() -> None:
    """A process forked while another thread holds the guard's lock (it is compiling)
    gets a lock of its own and a guard of its own; the parent's guard, still running,
    sees end of file once the parent closes its pipe (the child closed its copies)."""
    import threading

    _build_and_run()
    held, release = threading.Event(), threading.Event()

    def compile_holding_the_lock() -> None:
        with jobs._POOL.lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=compile_holding_the_lock)
    t.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:  # (with the inherited, held lock the build would wait for ever: 30 s)
                done: list[int] = []
                worker = threading.Thread(target=lambda: (_build_and_run(), done.append(1)),
                                          daemon=True)
                worker.start()
                worker.join(30)
                code = 0 if done else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        t.join()
    assert os.waitstatus_to_exitcode(status) == 0
    guard = jobs.guard_pid()
    jobs.stop_guard()
    with pytest.raises(ChildProcessError):
        os.waitpid(guard, os.WNOHANG)  # (reaped)


def test_the_guard_works_past_descriptor_1023() -> None:
    """A process with many files open: the guard's pipes get descriptors ``select``
    cannot wait on; the waits use ``poll``."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this system allows {hard} open files, not enough to pass 1,023")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while len(held) < 1100 and (not held or held[-1] < 1030):
            held.append(os.open(os.devnull, os.O_RDONLY))
        _build_and_run()  # the guard starts now, its pipes numbered past 1,023
        guard = jobs._POOL.workers[0]
        assert min(guard.requests, guard.replies) > 1023
    finally:
        jobs.stop_guard()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_idle_guard_leaves_and_the_next_compile_starts_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle for ``GUARD_IDLE_S``, the guard leaves (it no longer holds the owner's memory
    as it was at the fork); the next compile forks another, with no warning."""
    monkeypatch.setattr(jobs, "GUARD_IDLE_S", 0.3)
    _build_and_run()
    first = jobs.guard_pid()
    assert first is not None
    deadline = time.monotonic() + 10
    while True:
        pid, status = os.waitpid(first, os.WNOHANG)
        if pid or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert pid == first and os.waitstatus_to_exitcode(status) == jobs._IDLE_EXIT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _build_and_run()
    assert jobs.guard_pid() not in (None, first)


def test_a_job_sent_as_the_guard_leaves_idle_goes_to_a_new_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard leaves idle just as a job comes (its pipe is already closed, or it exits
    before reading it): the job is sent again to a new guard, not counted as a crash."""
    monkeypatch.setattr(jobs, "GUARD_IDLE_S", 0.1)
    ask = jobs._Worker.ask
    calls: list[int] = []

    def late(self: jobs._Worker, job: object, deadline: float) -> object:
        calls.append(self.pid)
        if len(calls) == 1:
            time.sleep(0.5)  # the new guard's idle time runs out first
        return ask(self, job, deadline)  # type: ignore[arg-type]

    monkeypatch.setattr(jobs._Worker, "ask", late)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not a failed compile: no reduced pipeline
        _build_and_run()
    assert len(calls) == 2 and calls[0] != calls[1]


def test_without_the_guard_llvm_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "GUARD", False)
    _build_and_run()
    assert jobs.guard_pid() is None


def test_an_interrupted_compile_kills_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the guard compiles: the guard is killed (its late reply would answer
    the next request), the next build starts a new one and is right."""
    _build_and_run()
    guard = jobs.guard_pid()
    read = jobs._read_exact

    def interrupted(fd: int, n: int, deadline: float | None) -> bytes | None:
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "_read_exact", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _build_and_run()
    assert jobs.guard_pid() is None
    with pytest.raises(ChildProcessError):
        os.waitpid(guard, os.WNOHANG)  # (reaped)
    monkeypatch.setattr(jobs, "_read_exact", read)
    _build_and_run()
    assert jobs.guard_pid() not in (None, guard)


def test_ptx_compiles_in_the_guard_and_survives_a_crash(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The NVPTX backend runs in the guard too: an O3 compile of the kernels that aborts
    is retried with the reduced pipeline (no GPU needed to make PTX)."""
    from tex.codegen import ptx

    optimized = ptx.optimized_ptx

    def aborts_at_o3(text: str, target: object, libdevice: object, kernels: frozenset[str],
                     reduced: bool = False) -> tuple[str, str]:
        if not reduced:
            os.abort()
        return optimized(text, target, libdevice, kernels, reduced)  # type: ignore[arg-type]

    monkeypatch.setattr(ptx, "optimized_ptx", aborts_at_o3)
    n = 1000 + next(_NAMES)
    A = tex.placeholder((n,), name="A")
    C = tex.compute((n,), lambda i: tex.sqrt(A[i]) * 3.0, name="C")
    with pytest.warns(RuntimeWarning,
                      match=r"compiling the kernels 'guarded_ptx_\d+_kernel0' with O3"):
        text = tex.build([C], target="cuda", name=f"guarded_ptx_{n}").get_source("ptx")
    assert ".entry" in text and "sqrt.rn.f32" in text
