"""Split modules (``tex.codegen.split``) compiled in forked children (``tex.codegen.jobs``):
the same results as the whole module, a fallback in this process for every way a child can
fail, and disk-cache entries of several objects (loaded again; rebuilt when damaged)."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import tex
from tex import build as build_module
from tex import debug
from tex.codegen import jobs
from tex.codegen import llvm as codegen_llvm
from tex.codegen.split import part_text, split_text
from tex.lower import StagedFunc
from tex.runtime import jit
from tex.runtime.diskcache import DiskCache
from tex.schedule import auto_schedule
from tex.testing import evaluate

pytestmark = pytest.mark.skipif(not jobs.can_fork(), reason="parts compile in forked "
                                "children on Linux only")

HEADER = '; ModuleID = "m"\ntarget triple = "x86_64-unknown-linux-gnu"\n'
# an entry, two outlined (noinline) functions, an inlinable helper both of them call
MODULE = HEADER + '''
declare float @expf(float)

define void @"m"(ptr %"p") nounwind
{
entry:
  call void @"m.nest1"(ptr %"p")
  call void @"m.nest2"(ptr %"p")
  ret void
}

define internal void @"m.nest1"(ptr %"p") noinline nounwind
{
entry:
  %"x" = load float, ptr %"p"
  %"y" = call float @"tex.helper"(float %"x")
  store float %"y", ptr %"p"
  ret void
}

define internal void @"m.nest2"(ptr %"p") noinline nounwind
{
entry:
  %"x" = load float, ptr %"p"
  %"y" = call float @"tex.helper"(float %"x")
  %"z" = call float @expf(float %"y"), !prof !0
  store float %"z", ptr %"p"
  ret void
}

define internal float @"tex.helper"(float %"a") alwaysinline nounwind
{
entry:
  %"b" = fmul float %"a", 0x4000000000000000
  ret float %"b"
}
!0 = !{ !"branch_weights", i32 1 }
'''


def test_split_text_parts_are_modules_of_their_own() -> None:
    split = split_text(MODULE, 2)
    assert split is not None and len(split.texts) == 2
    assert split.defined == (frozenset({"m", "m.nest1"}), frozenset({"m.nest2"}))
    first, second = split.texts
    # the entry's part declares the other part's function, which that part exports
    assert 'declare void @"m.nest2"' in first and 'define void @"m.nest2"' in second
    assert 'define internal void @"m.nest1"' in first  # called only from its own part
    # the inlinable helper is copied, internal, into both parts; the metadata too
    assert all('define internal float @"tex.helper"' in t for t in split.texts)
    assert all("declare float @expf(float)" in t and "!0 = " in t for t in split.texts)
    for text in split.texts:  # each part is a valid module
        llvm.parse_assembly(text, context=llvm.create_context()).verify()


@pytest.mark.parametrize("text", [
    MODULE + '@"g" = internal global i32 0\n',  # a global variable: kept whole
    MODULE.replace("}\n\ndefine internal float", "\ndefine internal float"),  # no "}"
    HEADER + 'define void @"m"() nounwind\n{\nentry:\n  ret void\n}\n',  # one function
])
def test_split_text_keeps_other_shapes_whole(text: str) -> None:
    assert split_text(text, 2) is None


def test_split_text_leaves_out_functions_placed_already() -> None:
    """The rest of a streamed module: a function a streamed part placed is declared where
    it is called, defined nowhere; one part is a split too."""
    split = split_text(MODULE, 2, placed=frozenset({"m.nest1"}))
    assert split is not None and split.all_defined == {"m", "m.nest2"}
    assert 'declare void @"m.nest1"' in split.texts[0]  # the entry's part
    assert all('define internal void @"m.nest1"' not in t and 'define void @"m.nest1"'
               not in t for t in split.texts)
    one = split_text(MODULE, 1, placed=frozenset({"m.nest1", "m.nest2"}))
    assert one is not None and one.defined == (frozenset({"m"}),)
    for text in [*split.texts, *one.texts]:
        llvm.parse_assembly(text, context=llvm.create_context()).verify()


# a module while it is being emitted: nest2 went out in an earlier part (declared now),
# nest1 and nest3 are finished, the entry is not (left out)
EMITTING = HEADER + '''
declare float @expf(float)

declare void @"m.nest2"(ptr %"p")
''' + MODULE[MODULE.index('define internal void @"m.nest1"'):
             MODULE.index('define internal void @"m.nest2"')] + '''\
define internal void @"m.nest3"(ptr %"p") noinline nounwind
{
entry:
  call void @"m.nest2"(ptr %"p")
  ret void
}
''' + MODULE[MODULE.index('define internal float @"tex.helper"'):]


def test_part_text_places_finished_functions_and_exports_them() -> None:
    part = part_text(EMITTING, frozenset({"m.nest1", "m.nest3"}))
    assert part is not None
    # exported: the entry, emitted later in another part, calls them
    assert 'define void @"m.nest1"' in part and 'define void @"m.nest3"' in part
    assert 'declare void @"m.nest2"' in part  # placed by the earlier part
    assert 'define internal float @"tex.helper"' in part and "!0 = " in part
    llvm.parse_assembly(part, context=llvm.create_context()).verify()
    only = part_text(EMITTING, frozenset({"m.nest3"}))
    assert only is not None and "tex.helper" not in only and "m.nest1" not in only


def test_part_text_refuses_calls_of_unfinished_functions() -> None:
    """A part would not parse if it called a function neither in it nor declared (one
    still being emitted): none is made."""
    unfinished = EMITTING.replace('declare void @"m.nest2"(ptr %"p")\n', "")
    assert part_text(unfinished, frozenset({"m.nest1", "m.nest3"})) is None
    assert part_text(unfinished, frozenset({"m.nest1"})) is not None
    assert part_text(EMITTING, frozenset({"m.nest9"})) is None  # not in the text
    assert part_text(EMITTING + '@"g" = internal global i32 0\n',
                     frozenset({"m.nest1"})) is None


def test_split_text_balances_parts() -> None:
    body = "{\nentry:\n" + "  %\"x\" = add i32 1, 1\n" * 50 + "  ret void\n}"
    fns = [f'define void @"m"() nounwind\n{body}'] + \
        [f'define internal void @"m.nest{k}"() noinline nounwind\n{body}' for k in range(7)]
    split = split_text(HEADER + "\n" + "\n".join(fns) + "\n", 4)
    assert split is not None
    assert [len(d) for d in split.defined] == [2, 2, 2, 2]


def _mlp() -> tuple[list[tex.Tensor], list[tex.Tensor]]:
    """A small dense-tanh loss and its gradients: three parallel loops once scheduled."""
    X = tex.placeholder((64, 128), name="X")
    W = tex.placeholder((128, 96), name="W")
    k = tex.reduce_axis((0, 128), name="k")
    H = tex.compute((64, 96), lambda i, j: tex.sum(X[i, k] * W[k, j], axis=k), name="H")
    T = tex.compute((64, 96), lambda i, j: tex.tanh(H[i, j]), name="T")
    r, c = tex.reduce_axis((0, 64), name="r"), tex.reduce_axis((0, 96), name="c")
    L = tex.compute((), lambda: tex.sum(T[r, c] * T[r, c], axis=[r, c]), name="L")
    return [X, W], [L, *tex.differentiate(L, [X, W])]


def _build(name: str = "mlp") -> tuple[tex.runtime.BuiltFunction, list[tex.Tensor]]:
    inputs, outs = _mlp()
    f = tex.build(auto_schedule(outs, target="llvm"), [*inputs, *outs], name=name)
    return f, [*inputs, *outs]


def _run(f: tex.runtime.BuiltFunction, args: list[tex.Tensor]) -> list[np.ndarray]:
    """``f`` on fixed inputs: its outputs; checked against ``evaluate``."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 128)).astype(np.float32) * 0.1
    w = rng.standard_normal((128, 96)).astype(np.float32) * 0.1
    outs = [np.zeros(tuple(int(d) for d in t.shape), np.float32) for t in args[2:]]
    f(x, w, *outs)
    want = evaluate(args[2:], {args[0]: x, args[1]: w})
    for got, ref in zip(outs, want):
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)
    return outs


@pytest.fixture
def split_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DiskCache:
    """Every module split in two (a child per part), a disk cache of the test's own, the
    in-process cache emptied around the test."""
    cache = DiskCache(tmp_path / "cache")
    monkeypatch.setattr(jit, "DISK", cache)
    monkeypatch.setattr(codegen_llvm, "SPLIT_MIN_CHARS", 0)
    monkeypatch.setattr(jobs, "COMPILE_JOBS", 2)
    jit.clear_cache()
    yield cache
    jit.clear_cache()


@pytest.fixture
def streamed_builds(split_builds: DiskCache, monkeypatch: pytest.MonkeyPatch) -> DiskCache:
    """``split_builds``, and every function emitted whole sent to a child compiling it as
    soon as a child is free (a part of its own each)."""
    monkeypatch.setattr(codegen_llvm, "STREAM_MIN_CHARS", 0)
    monkeypatch.setattr(codegen_llvm, "STREAM_MAX_CHARS", 0)
    return split_builds


def _parts(f: tex.runtime.BuiltFunction) -> int:
    return f.get_source("ll").count("; ModuleID")


def test_split_build_equals_whole_build(split_builds: DiskCache,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    f, args = _build()
    parts = _parts(f)
    assert parts >= 2
    split_out = _run(f, args)
    asm = f.get_source("asm")
    assert asm.count("\t.file") == parts and "mlp.par" in asm
    raw = f.get_source("ll.raw")
    assert raw.count("; ModuleID") == 1 and 'define internal void @"mlp.par1.body"' in raw
    monkeypatch.setattr(jobs, "COMPILE_JOBS", 1)
    jit.clear_cache()
    split_builds.clear()
    whole, args = _build()
    assert _parts(whole) == 1
    for a, b in zip(split_out, _run(whole, args)):
        np.testing.assert_array_equal(a, b)  # the same code, bit for bit


def test_parallel_wrappers_are_defined_once_across_parts(split_builds: DiskCache) -> None:
    """A parallel loop's wrapper goes into one part, the others declare it: a copy in
    every part that runs a parallel loop was compiled again in each (noinline wrappers)."""
    f, args = _build()
    assert _parts(f) >= 2
    defined = re.findall(r'^define [^@]*@"?(mlp\.wrapper\d+)', f.get_source("ll"), re.M)
    assert defined and len(defined) == len(set(defined)), defined
    _run(f, args)


def test_streamed_build_equals_whole_build(streamed_builds: DiskCache,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts compiled while the module is emitted: the module's text is the one printed
    whole, the code the same bit for bit."""
    with debug.timings() as t:
        f, args = _build()
    streamed = [name for name, _, _ in t.rows].count("llvm.submit")  # one per part sent
    assert streamed >= 1 and _parts(f) >= streamed + 1
    out = _run(f, args)
    monkeypatch.setattr(jobs, "COMPILE_JOBS", 1)
    jit.clear_cache()
    streamed_builds.clear()
    with debug.timings() as t:
        whole, args = _build()
    assert _parts(whole) == 1 and "llvm.submit" not in [name for name, _, _ in t.rows]
    assert f.get_source("ll.raw") == whole.get_source("ll.raw")
    for a, b in zip(out, _run(whole, args)):
        np.testing.assert_array_equal(a, b)


def test_streamed_module_with_run_time_checks(streamed_builds: DiskCache) -> None:
    """A gather's gradient with a run-time bounds check: the check's report function
    (created in the middle of a function, placed on its own) goes out with the first part
    that calls it; the numbers are the interpreter's and a bad index is still reported."""
    n, m, rows = 64, 32, 100
    W = tex.placeholder((rows, m), name="W")
    ix = tex.placeholder((n,), "int32", name="I")
    T = tex.compute((n, m), lambda i, j: tex.tanh(W[ix[i], j]), name="T")
    r, c = tex.reduce_axis((0, n), "r"), tex.reduce_axis((0, m), "c")
    L = tex.compute((), lambda: tex.sum(T[r, c] * T[r, c], axis=[r, c]), name="L")
    dW, = tex.differentiate(L, [W]).result
    with debug.timings() as t:
        f = tex.build(auto_schedule([L, dW], target="llvm"), [W, ix, L, dW], name="gather")
    assert [name for name, _, _ in t.rows].count("llvm.submit") >= 1
    assert 'define internal void @"gather.report"' in f.get_source("ll.raw")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((rows, m)).astype(np.float32)
    rows_read = rng.integers(0, rows, n).astype(np.int32)
    loss, grad = np.zeros((), np.float32), np.zeros((rows, m), np.float32)
    f(w, rows_read, loss, grad)
    want = evaluate([L, dW], {W: w, ix: rows_read})
    np.testing.assert_allclose(loss, want[0], rtol=1e-5)
    np.testing.assert_allclose(grad, want[1], rtol=1e-5, atol=1e-6)
    rows_read[3] = rows + 900
    with pytest.raises(debug.OutOfBoundsError, match="index 1000 in dimension 0 of 'W'"):
        f(w, rows_read, loss, grad)


def test_failed_emission_leaves_no_streaming_child(streamed_builds: DiskCache,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An error while the module is emitted, after parts went to children: the error
    reaches the caller and every child is killed and reaped (no zombie, no open pipe)."""
    placed = codegen_llvm._Streamer.placed
    calls: list[str] = []

    def fails_late(self: codegen_llvm._Streamer, fn: object) -> None:
        placed(self, fn)
        calls.append(self.entry)
        if len(calls) == 2:
            raise RuntimeError("emission failed")

    monkeypatch.setattr(codegen_llvm._Streamer, "placed", fails_late)
    fds = _settled()
    with pytest.raises(RuntimeError, match="emission failed"):
        _build("failing")
    assert len(calls) == 2
    assert _settled() == fds


def test_failed_lowering_of_a_later_nest_leaves_no_streaming_child(
        streamed_builds: DiskCache, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build lowers nest after nest while children compile the first ones: an error in
    the passes of a later nest reaches the caller, and every child is killed and reaped."""
    passed = StagedFunc.passed
    calls: list[int] = []

    def fails_late(self: StagedFunc, nest: object, trace: object = None) -> object:
        calls.append(1)
        if len(calls) == 6:
            raise RuntimeError("a pass failed")
        return passed(self, nest, trace)  # type: ignore[arg-type]

    monkeypatch.setattr(StagedFunc, "passed", fails_late)
    fds = _settled()
    with debug.timings() as t, pytest.raises(RuntimeError, match="a pass failed"):
        _build("failing_pass")
    assert [name for name, _, _ in t.rows].count("llvm.submit") >= 1  # (workers had parts)
    assert _settled() == fds


def test_streamed_build_of_a_cached_kernel_drops_what_it_started(
        streamed_builds: DiskCache, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose schedule is not in the front cache lowers and compiles nest by nest;
    when the whole function turns out to be cached (built before from another schedule),
    the parts sent to children are dropped and the cached kernel is used."""
    f, _ = _build()
    monkeypatch.setattr(build_module, "_front_key", lambda *args: None)
    fds = _settled()
    with debug.timings() as t:
        g, args = _build()  # new placeholders, the same function
    rows = [name for name, _, _ in t.rows]
    assert rows.count("llvm.submit") >= 1 and "llvm.wait" not in rows and "llvm.opt" not in rows
    assert g._kernel is f._kernel
    assert _settled() == fds
    _run(g, args)


def _settled() -> int:
    """The files this process has open, once the compile guard is stopped; raises
    unless every child process is reaped (none running, no zombie)."""
    jobs.stop_guard()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)
    return len(os.listdir("/proc/self/fd"))


def _fork_fails() -> int:
    raise OSError("no more processes")


# the jobs a failing worker runs in place of ``compile_part`` (looked up there by name)
def _worker_exits(text: str, reduced: bool) -> object:
    os._exit(3)


def _worker_replies_garbage(text: str, reduced: bool) -> object:
    return "not a compiled part"


def _worker_hangs(text: str, reduced: bool) -> object:
    time.sleep(60)
    return None


@pytest.mark.parametrize("stream", [False, True], ids=["split", "streamed"])
@pytest.mark.parametrize("failure", ["fork", "exit", "garbage", "hang"])
def test_failed_worker_part_compiles_again(split_builds: DiskCache,
                                           monkeypatch: pytest.MonkeyPatch,
                                           failure: str, stream: bool) -> None:
    """Whatever parts failing workers took (streamed ones too) are compiled again under
    ``compile_guarded``: all of them; without ``fork``, all of them here."""
    if stream:
        monkeypatch.setattr(codegen_llvm, "STREAM_MIN_CHARS", 0)
        monkeypatch.setattr(codegen_llvm, "STREAM_MAX_CHARS", 0)
    jobs.stop_guard()  # (no worker forked before the patches)
    if failure == "fork":
        monkeypatch.setattr(os, "fork", _fork_fails)
    else:
        job = {"exit": _worker_exits, "garbage": _worker_replies_garbage,
               "hang": _worker_hangs}[failure]
        monkeypatch.setattr(jobs, "PART_JOB", (__name__, job.__name__))
        monkeypatch.setattr(jobs, "CHILD_WAIT_MIN_S", 0.5)
        monkeypatch.setattr(jobs, "CHILD_WAIT_FACTOR", 0.0)
    here: list[tuple[str, bool]] = []
    guarded = jobs.compile_guarded
    monkeypatch.setattr(jobs, "compile_guarded", lambda t, reduced_first=False: (
        here.append((t, reduced_first)), guarded(t, reduced_first))[1])
    start = time.monotonic()
    f, args = _build()
    assert time.monotonic() - start < 30  # a hung worker is killed, never waited for
    assert len(here) == _parts(f) >= 2
    # a late worker's parts (maybe one that makes LLVM hang) go to the reduced pipeline
    assert any(reduced for _, reduced in here) == (failure == "hang")
    _run(f, args)
    _settled()  # every worker reaped: no zombie left


def test_parts_compile_on_kept_workers(split_builds: DiskCache) -> None:
    """The parts of one module, and of the next, go to the same workers (no process
    forked per part): at most ``TEX_COMPILE_JOBS`` of them, all alive after the builds."""
    jobs.stop_guard()
    f, args = _build()
    assert _parts(f) >= 2
    first = jobs.worker_pids()
    assert 1 <= len(first) <= jobs.COMPILE_JOBS
    jit.clear_cache()
    split_builds.clear()
    g, args = _build()
    assert jobs.worker_pids() == first
    _run(g, args)
    _settled()


def test_disk_cache_round_trip_of_a_split_module(split_builds: DiskCache) -> None:
    f, args = _build()
    assert len(split_builds.entries()) == 2  # the kernel, and the schedule's front entry
    assert split_builds.stats["writes"] == 2
    jit.clear_cache()
    g, args = _build()
    assert split_builds.stats["hits"] == 2 and g._kernel is not f._kernel
    for fmt in ("ll", "ll.raw", "asm"):
        assert g.get_source(fmt) == f.get_source(fmt)
    for a, b in zip(_run(f, args), _run(g, args)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("section", ["object.1", "ll.1", "meta"])
def test_damaged_split_entry_is_rebuilt(split_builds: DiskCache,
                                        monkeypatch: pytest.MonkeyPatch, section: str) -> None:
    keys: list[str] = []
    put = split_builds.put
    monkeypatch.setattr(split_builds, "put", lambda key, s: (keys.append(key), put(key, s)))
    _build()
    sections = split_builds.get(keys[0])
    assert sections is not None and {"object", "object.1", "ll", "ll.1"} <= set(sections)
    if section == "meta":  # claims one object more
        meta = json.loads(sections["meta"])
        meta["objects"] += 1
        sections["meta"] = json.dumps(meta).encode()
    else:
        del sections[section]
    put(keys[0], sections)
    jit.clear_cache()
    writes = split_builds.stats["writes"]
    f, args = _build()  # the entry is dropped, the function compiled and stored anew
    _run(f, args)
    # the kernel and (found first, then written again after the rebuild) the front entry
    assert split_builds.stats["writes"] == writes + 2
    jit.clear_cache()
    hits = split_builds.stats["hits"]
    _run(*_build())  # the new entries load
    assert split_builds.stats["hits"] == hits + 2
    assert split_builds.stats["writes"] == writes + 2


def test_compile_parts_keeps_the_order_of_the_parts() -> None:
    """Parts claimed by any process come back in their own places."""
    texts = [HEADER + f'define i32 @"f{k}"() nounwind\n{{\nentry:\n  ret i32 {k}\n}}\n'
             for k in range(7)]
    results = jobs.compile_parts(texts, 2)
    assert [f'@f{k}()' in r.text for k, r in enumerate(results)] == [True] * 7
    assert all(r.object and r.externals == () for r in results)
