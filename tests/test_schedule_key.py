"""The build cache's key before lowering (``tex.schedule.key``): equal for the same program
built anew, different for every schedule primitive, argument order and body change, and
complete (every field of every class it walks is keyed or left out with a reason)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tex
from tex.debug import timings
from tex.ir.expr import ExprOp
from tex.ir.tensor import PlaceholderOp
from tex.runtime import jit
from tex.runtime.diskcache import DiskCache
from tex.schedule import Schedule
from tex.schedule.key import FIELDS, IGNORED, STAGE_FIELDS, STAGE_IGNORED, schedule_text


def _slots(cls: type) -> set[str]:
    return {name for c in cls.__mro__ for name in getattr(c, "__slots__", ())
            if name != "__weakref__"}


def test_every_field_is_keyed_or_ignored_with_a_reason() -> None:
    for cls, fields in FIELDS.items():
        slots, ignored, keyed = _slots(cls), set(IGNORED.get(cls, {})), set(fields)
        assert slots == keyed | ignored, (cls.__name__, slots ^ (keyed | ignored))
        assert not keyed & ignored
    X = tex.placeholder((4,), name="X")
    s = tex.create_schedule(tex.compute((4,), lambda i: X[i] + 1.0, name="Y").op)
    assert set(vars(s.stages[0])) == \
        {f for f in STAGE_FIELDS if f not in ("op", "attach_stage")} | set(STAGE_IGNORED)


def test_every_expression_class_is_keyed() -> None:
    """A new node class must be added to FIELDS (or the schedules using it go unkeyed)."""
    pending = list(ExprOp.__subclasses__())
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        if cls not in seen:
            seen.add(cls)
            pending += cls.__subclasses__()
    concrete = {c for c in seen if c.__name__ != "Expr"}
    assert concrete <= set(FIELDS), concrete - set(FIELDS)


def _program(c: float = 2.0, n: int = 64, dtype: str = "float32", name: str = "B"):
    A = tex.placeholder((n, 32), dtype, name="A")
    E = tex.compute((n, 32), lambda i, j: A[i, j] * c, name="E")
    k = tex.reduce_axis((0, 32), name="k")
    R = tex.compute((n,), lambda i: tex.sum(E[i, k], axis=k), name="R")
    B = tex.compute((n, 32), lambda i, j: A[i, j] * R[i] + 1.0, name=name)
    return A, R, B


def _text(make: Callable[[], tuple[Schedule, list]]) -> str:
    s, args = make()
    text = schedule_text(s, args)
    assert text is not None
    return text


def _default(**kw):
    A, R, B = _program(**kw)
    return tex.create_schedule(B.op), [A, B]


def test_the_same_program_built_anew_has_the_same_text() -> None:
    assert _text(_default) == _text(_default)


def _with(edit: Callable) -> Callable[[], tuple[Schedule, list]]:
    def make():
        A, R, B = _program()
        s = tex.create_schedule(B.op)
        edit(s, A, R, B)
        return s, [A, B]
    return make


VARIANTS = {
    "constant": lambda: _default(c=3.0),
    "shape": lambda: _default(n=48),
    "dtype": lambda: _default(dtype="float64"),
    "stage name": lambda: _default(name="C"),
    "argument order": lambda: (lambda s, a: (s, a[::-1]))(*_default()),
    "split": _with(lambda s, A, R, B: s[B].split(B.op.axis[1], factor=8)),
    "split factor": _with(lambda s, A, R, B: s[B].split(B.op.axis[1], factor=4)),
    "reorder": _with(lambda s, A, R, B: s[B].reorder(B.op.axis[1], B.op.axis[0])),
    "fuse": _with(lambda s, A, R, B: s[B].fuse(*B.op.axis)),
    "parallel": _with(lambda s, A, R, B: s[B].parallel(B.op.axis[0])),
    "vectorize": _with(lambda s, A, R, B: s[B].vectorize(B.op.axis[1])),
    "unroll": _with(lambda s, A, R, B: s[B].unroll(B.op.axis[1])),
    "compute_inline": _with(lambda s, A, R, B: s[R.op.input_tensors[0]].compute_inline()),
    "compute_at": _with(lambda s, A, R, B: s[R].compute_at(s[B], B.op.axis[0])),
    "cache_write": _with(lambda s, A, R, B: s.cache_write(B, "local")),
    "cache_read": _with(lambda s, A, R, B: s.cache_read(A, "local", [B])),
    "rfactor": _with(lambda s, A, R, B: s.rfactor(R, s[R].split(R.op.reduce_axis[0],
                                                                  factor=8)[1])),
}


def test_every_change_changes_the_text() -> None:
    texts = {"default": _text(_default)}
    for what, make in VARIANTS.items():
        texts[what] = _text(make)
    by_text: dict[str, list[str]] = {}
    for what, text in texts.items():
        by_text.setdefault(text, []).append(what)
    assert all(len(v) == 1 for v in by_text.values()), [v for v in by_text.values()
                                                        if len(v) > 1]


def test_unknown_objects_leave_the_schedule_unkeyed() -> None:
    A, R, B = _program()
    s = tex.create_schedule(B.op)
    assert schedule_text(s, [A, B, object()]) is None


@pytest.fixture
def fresh(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty caches, in memory and on disk, for the test alone."""
    monkeypatch.setattr(jit, "DISK", DiskCache(tmp_path / "cache"))
    jit.clear_cache()
    yield
    jit.clear_cache()


@pytest.mark.parametrize("what", list(VARIANTS))
def test_a_changed_program_is_never_served_the_earlier_kernel(fresh: None, what: str) -> None:
    """Built after the default program (whose front entry and kernel are cached), every
    variant computes its own numbers; built again, it is found by its key, not lowered."""
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)

    def run(make: Callable) -> tuple[np.ndarray, float]:
        s, args = make()
        with timings() as tm:
            f = tex.build(s, args)
        ins = [np.asarray(a, np.dtype(t.dtype.name))[: t.shape[0]] for t in args
               if isinstance(t.op, PlaceholderOp)]
        outs = [np.zeros(t.shape, t.dtype.name) for t in args
                if not isinstance(t.op, PlaceholderOp)]
        order = iter(ins), iter(outs)
        f(*[next(order[not isinstance(t.op, PlaceholderOp)]) for t in args])
        return outs[0], tm.seconds("lower")

    base, lowered = run(_default)
    assert lowered > 0
    got, lowered = run(VARIANTS[what])
    assert lowered > 0  # a different key: lowered, not served the default's kernel
    again, lowered = run(VARIANTS[what])
    assert lowered == 0  # the same key: found before lowering
    np.testing.assert_array_equal(again, got)
    x = a[: got.shape[0]].astype(got.dtype)
    c = 3.0 if what == "constant" else 2.0
    want = x * (x * c).sum(axis=1, keepdims=True) + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
