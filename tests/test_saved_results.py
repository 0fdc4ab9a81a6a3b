"""Results of ``differentiate`` and ``auto_schedule`` kept on disk (``tex.ir.saved``,
``tex.ir.codec``): a result found there is the result computed, for every program; a key
tells programs apart; a bad entry is a miss, never a crash; a second process finds them.

The session runs with the results cache off (conftest); these tests give it a directory.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import tex
from tex import diskstore, topi
from tex.autodiff import report
from tex.ir.codec import DERIVED, IR_CODECS, Unencodable, decode, encode
from tex.schedule import auto_schedule
from tex.schedule.key import schedule_text

from fuzz_programs import programs

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import workloads  # noqa: E402  (benchmarks/ is not a package)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> diskstore.DiskCache:
    """The results cache, on, in a fresh directory."""
    cache = diskstore.DiskCache(tmp_path / "results")
    monkeypatch.setattr(diskstore, "RESULTS", cache)
    return cache


def _records(value: object, known: object) -> list:
    """``value``'s records, encoded against ``known``'s walk (structure, names included)."""
    base = encode(known, IR_CODECS)
    enc = encode(value, IR_CODECS, base)
    return [enc.records, enc.value]


def _placeholders(t: tex.Tensor) -> list[tex.Tensor]:
    """The placeholders ``t`` reads, in creation order."""
    ops = set(tex.graph(t).nodes)
    return sorted((n.output(0) for n in ops if isinstance(n, tex.ir.PlaceholderOp)),
                  key=lambda p: p.op.seq)


def _same_gradients(loss: tex.Tensor, wrt: list[tex.Tensor]) -> tuple:
    """Differentiate twice (computed, then found) and schedule twice; check that each found
    result equals the computed one. Returns the found gradients and schedule."""
    first = tex.differentiate(loss, wrt)
    hits = diskstore.RESULTS.stats["hits"]
    again = tex.differentiate(loss, wrt)
    assert diskstore.RESULTS.stats["hits"] == hits + 1
    assert list(again) is not list(first)
    inputs = [loss, wrt]
    assert _records(list(again), inputs) == _records(list(first), inputs)
    assert _records(again.adjoints, inputs) == _records(first.adjoints, inputs)
    assert _records(again.adjoint_summands, inputs) == _records(first.adjoint_summands, inputs)
    assert str(report(again, file=None)) == str(report(first, file=None))
    outs = [loss, *again]
    s1 = auto_schedule(outs, target="llvm")
    hits = diskstore.RESULTS.stats["hits"]
    s2 = auto_schedule(outs, target="llvm")
    assert diskstore.RESULTS.stats["hits"] == hits + 1
    args = [*_placeholders(loss), *outs]
    text = schedule_text(s1, args)
    assert text is not None and schedule_text(s2, args) == text
    assert str(tex.lower(s2, args)) == str(tex.lower(s1, args))
    return again, s2


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_workload_results_found_equal_computed(results, name: str) -> None:
    w = workloads.WORKLOADS[name](small=True)
    grads, s = _same_gradients(w.loss, w.wrt)
    # the found schedule builds and computes what the interpreter does
    outs = [w.loss, *grads]
    f = tex.build(s, [*w.placeholders, *outs])
    feed = workloads.random_arrays(w, seed=3)
    got = [np.empty(t.shape, np.float32) for t in outs]
    f(*[feed[t.name] for t in w.placeholders], *got)
    want = tex.testing.evaluate(outs, {t: feed[t.name] for t in w.placeholders})
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)
    assert results.stats["corrupt"] == 0


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(prog=programs(dtypes=("float32",)))
def test_fuzzed_results_found_equal_computed(results, prog) -> None:
    _same_gradients(prog.out if prog.out.ndim == 0 else topi.sum(prog.out),
                    prog.used_inputs())


def test_codec_round_trip_keeps_interning_and_identity() -> None:
    A = tex.placeholder((4, 3), name="A")
    k = tex.reduce_axis((0, 3), name="k")
    B = tex.compute((4,), lambda i: tex.sum(A[i, k] * 2.0, axis=k), name="B",
                    attrs={"note": ("x", 1, 2.5, None, True)})
    base = encode([A], IR_CODECS)
    enc = encode([B], IR_CODECS, base)
    wire = json.loads(json.dumps([enc.records, enc.value]))
    (B2,), objects = decode(*wire, IR_CODECS, base.objects)
    assert objects[:len(base.objects)] == base.objects and objects[-1] is B2
    assert B2 is not B and B2.op.input_tensors == [A]  # refers to the caller's A
    assert B2.op.attrs == {"note": ("x", 1, 2.5, None, True)}
    assert str(B2.op) == str(B.op)
    # interned nodes come back interned: a constant is the same object
    assert B2.op.body[0].source[0].b is B.op.body[0].source[0].b


def test_unencodable_values_are_not_saved(results) -> None:
    A = tex.placeholder((4,), name="A")
    B = tex.compute((4,), lambda i: A[i] * A[i], name="B", attrs={"callback": object()})
    L = topi.sum(B)
    with pytest.raises(Unencodable):
        encode([L], IR_CODECS)
    (g,) = tex.differentiate(L, [A])
    assert results.stats["writes"] == 0 and results.stats["misses"] == 0
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(tex.testing.evaluate(g, {A: x}), 2 * x)


def test_user_fdiff_is_not_saved(results) -> None:
    A = tex.placeholder((4,), name="A")
    L = topi.sum(tex.compute((4,), lambda i: A[i] * A[i], name="B"))
    tex.differentiate(L, [A], fdiff=tex.autodiff.DiffBuildingBlock)
    assert results.stats["writes"] == results.stats["hits"] == results.stats["misses"] == 0


def test_keys_tell_programs_apart(results) -> None:
    """A program that differs in a constant, a name, a shape, the inputs asked for or
    ``strict`` misses; the same program built again (new objects) hits."""
    def program(c: float = 2.0, name: str = "B", n: int = 4) -> tuple:
        A = tex.placeholder((n,), name="A")
        W = tex.placeholder((n,), name="W")
        B = tex.compute((n,), lambda i: A[i] * W[i] * c, name=name)
        return topi.sum(B), A, W

    def grad(prog: tuple, wrt_w: bool = False, strict: bool = False) -> np.ndarray:
        L, A, W = prog
        (g,) = tex.differentiate(L, [W if wrt_w else A], strict=strict)
        n = A.shape[0]
        a, w = np.arange(n, dtype=np.float32), np.full(n, 3, np.float32)
        return tex.testing.evaluate(g, {A: a, W: w})

    np.testing.assert_allclose(grad(program()), np.full(4, 6))
    assert results.stats["writes"] == 1
    np.testing.assert_allclose(grad(program()), np.full(4, 6))
    assert results.stats["hits"] == 1
    np.testing.assert_allclose(grad(program(c=5.0)), np.full(4, 15))
    np.testing.assert_allclose(grad(program(n=5)), np.full(5, 6))
    np.testing.assert_allclose(grad(program(), wrt_w=True), np.arange(4) * 2)
    grad(program(), strict=True)
    grad(program(name="C"))
    assert results.stats["hits"] == 1 and results.stats["writes"] == 6


def test_bad_entries_are_misses(results) -> None:
    """An entry that does not decode is deleted and counted as corrupt, and the result is
    computed again and stored anew."""
    A = tex.placeholder((4,), name="A")
    L = topi.sum(tex.compute((4,), lambda i: tex.exp(A[i]), name="B"))
    tex.differentiate(L, [A])
    (entry,) = results.entries()
    data = entry.read_bytes()
    (n,) = struct.unpack_from("<I", data, len(diskstore.MAGIC))
    key = json.loads(data[len(diskstore.MAGIC) + 4:len(diskstore.MAGIC) + 4 + n]
                     )["fields"]["key"]
    bad = [b'[[["NoSuchNode", 1]], 0]', b'[[["Var", "x", "float32"]], 7]',
           b'[[], ["z", 1]]', b"not json", b'[[["Tensor", 99, 0]], 0]']
    for k, payload in enumerate(bad):
        results.put(key, {"result": payload})
        (g,) = tex.differentiate(L, [A])
        assert results.stats["corrupt"] == k + 1
        x = np.linspace(0, 1, 4, dtype=np.float32)
        np.testing.assert_allclose(tex.testing.evaluate(g, {A: x}), np.exp(x), rtol=1e-6)
    # each time the good result was stored again (results.put above wrote the bad ones)
    assert results.stats["writes"] == 1 + 2 * len(bad)
    tex.differentiate(L, [A])
    assert results.stats["corrupt"] == len(bad)


SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import tex
    from tex import topi
    from tex.runtime import disk_cache_stats
    X = tex.placeholder((8, 16), name="X")
    W = tex.placeholder((4, 16), name="W")
    k = tex.reduce_axis((0, 16), name="k")
    Y = tex.compute((8, 4), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="Y")
    L = topi.sum(topi.tanh(Y))
    (gW,) = tex.differentiate(L, [W])
    f = tex.build(tex.schedule.auto_schedule([L, gW]), [X, W, L, gW])
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 16), np.float32), rng.standard_normal((4, 16), np.float32)
    loss, g = np.empty((), np.float32), np.empty((4, 16), np.float32)
    f(x, w, loss, g)
    print(json.dumps({"results": disk_cache_stats()["results"], "hits": disk_cache_stats()["hits"],
                      "g": g.tolist(), "loss": float(loss)}))
""")


def test_a_second_process_finds_the_results(tmp_path: Path) -> None:
    env = dict(os.environ, TEX_CACHE_DIR=str(tmp_path), TEX_CACHE_RESULTS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, text=True,
                             capture_output=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    cold, warm = run(), run()
    assert cold["results"]["writes"] == 2 and cold["results"]["hits"] == 0
    assert warm["results"]["hits"] == 2 and warm["results"]["writes"] == 0
    assert warm["results"]["corrupt"] == 0 and warm["hits"] >= 1  # and the kernel
    assert warm["g"] == cold["g"] and warm["loss"] == cold["loss"]


def test_results_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TEX_CACHE_RESULTS=0`` (the test session's setting) keeps nothing."""
    monkeypatch.setenv("TEX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TEX_CACHE_RESULTS", "0")
    assert not diskstore._results_from_env().enabled
    monkeypatch.setenv("TEX_CACHE_RESULTS", "1")
    assert diskstore._results_from_env().enabled


def test_dumps_bypass_the_results(results, capsys: pytest.CaptureFixture) -> None:
    """With IR dumps on, differentiate runs (its dump printed) and keeps nothing."""
    A = tex.placeholder((4,), name="A")
    L = topi.sum(tex.compute((4,), lambda i: A[i] * A[i], name="B"))
    tex.differentiate(L, [A])
    with tex.debug.config(dump="differentiate"):
        tex.differentiate(L, [A])
    assert "A_grad" in capsys.readouterr().err
    assert results.stats["hits"] == 0 and results.stats["writes"] == 1


def test_a_schedule_has_no_state_the_snapshot_misses(results) -> None:
    """Every attribute of a Stage and of a Schedule is in the snapshot or rebuilt from it,
    so a field added later must be decided on (Schedule.snapshot/restored)."""
    from tex.schedule.schedule import SNAPSHOT_FIELDS
    stage_derived = {"schedule", "_op", "_attach_stage"}
    # (scan_body: restored from the stages' "scan" attach types)
    schedule_derived = {"outputs", "stages", "stage_map", "saved", "_readers", "_stale",
                        "_stale_heap", "_renamed", "_position", "_defer", "_attached",
                        "scan_body"}
    for name in ("conv2d", "softmax", "layernorm"):
        w = workloads.WORKLOADS[name](small=True)
        outs = [w.loss, *tex.differentiate(w.loss, w.wrt)]
        for s in (auto_schedule(outs), auto_schedule(outs, target="cuda")):
            assert set(vars(s)) == schedule_derived
            for st in s.stages:
                assert set(vars(st)) <= set(SNAPSHOT_FIELDS) | stage_derived, st


def test_gpu_schedules_are_found_equal(results) -> None:
    w = workloads.WORKLOADS["dense"](small=True)
    outs = [w.loss, *tex.differentiate(w.loss, w.wrt)]
    s1 = auto_schedule(outs, target="cuda")
    s2 = auto_schedule(outs, target="cuda")
    assert results.stats["hits"] == 1
    assert schedule_text(s1, [*w.placeholders, *outs]) == \
        schedule_text(s2, [*w.placeholders, *outs])


def test_every_slot_is_stored_or_derived() -> None:
    for cls, codec in IR_CODECS.items():
        slots = {name for k in cls.__mro__ for name in getattr(k, "__slots__", ())
                 if name != "__weakref__"}
        missing = slots - set(codec.fields) - set(DERIVED.get(cls, {}))
        assert not missing, f"{cls.__name__}: decide how {sorted(missing)} are stored"


@pytest.mark.parametrize("name", ["conv2d", "layernorm", "dense"])
def test_builds_of_found_schedules_key_what_they_lower(results, monkeypatch, name) -> None:
    """A found schedule is keyed against its entry (tex.schedule.key.front_text): the key
    agrees with the lowered function's (TEX_CACHE_VERIFY lowers and compares), and a
    schedule changed after it was found gets a key of its own and computes right."""
    from tex.runtime import jit

    def program() -> tuple:
        w = workloads.WORKLOADS[name](small=True)
        outs = [w.loss, *tex.differentiate(w.loss, w.wrt)]
        return w, outs, auto_schedule(outs)

    w, outs, s = program()
    assert s.saved is not None  # computed and stored
    tex.build(s, [*w.placeholders, *outs])
    jit.clear_cache()
    monkeypatch.setenv("TEX_CACHE_VERIFY", "1")
    w, outs, s = program()
    assert results.stats["hits"] == 2 and s.saved is not None
    args = [*w.placeholders, *outs]
    feed = workloads.random_arrays(w, seed=5)
    want = tex.testing.evaluate(outs, {t: feed[t.name] for t in w.placeholders})

    def check(f: tex.runtime.BuiltFunction) -> None:
        got = [np.empty(t.shape, np.float32) for t in outs]
        f(*[feed[t.name] for t in w.placeholders], *got)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)

    found = tex.schedule.key.front_text(s, args)
    assert found is not None and found.startswith("saved ")
    check(tex.build(s, args))  # found by its front key, then lowered and compared
    for st in s.stages:  # change the schedule: split a loop that carries no annotation
        if st.attach_type != "root":
            continue
        free = [iv for iv in st.leaf_iter_vars if iv not in st.annotations and
                iv.dom.extent > 1 and iv.kind != "reduce"]
        if free:
            st.split(free[0], factor=2)
            break
    else:
        pytest.fail("no loop to split")
    changed = tex.schedule.key.front_text(s, args)
    assert changed is not None and changed.startswith("saved ") and changed != found
    check(tex.build(s, args))


def test_clearing_the_disk_cache_clears_the_results(results, tmp_path, monkeypatch) -> None:
    from tex.runtime import jit
    monkeypatch.setattr(jit, "DISK", diskstore.DiskCache(tmp_path / "code"))
    A = tex.placeholder((4,), name="A")
    tex.differentiate(topi.sum(tex.compute((4,), lambda i: A[i] * A[i], name="B")), [A])
    assert len(results.entries()) == 1
    jit.clear_cache(disk=True)
    assert results.entries() == []
