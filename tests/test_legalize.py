"""tex.lower.legalize: decomposed intrinsics match NumPy, including far out in the tails."""
from __future__ import annotations

import numpy as np
import pytest

from tex.build import build_lowered
from tex.dtype import DTYPES, DType, float32, int32
from tex.ir.expr import Binary, Cast, Const, Op, Unary, Var
from tex.ir.semantics import NUMPY_UNARY
from tex.ir.visit import post_order
from tex.lower.legalize import legalize
from tex.lower.stmt import (
    BufferParam,
    For,
    ForKind,
    LoweredFunc,
    Store,
    make_buffer,
    seq,
    walk_stmts,
)

F16, F64 = DTYPES["float16"], DTYPES["float64"]
OPS = [Op.SIGMOID, Op.TANH, Op.ERF, Op.RSQRT, Op.LOG10, Op.TAN]
TOL = {"float16": dict(rtol=2e-3, atol=1e-4), "float32": dict(rtol=1e-6, atol=1e-7),
       "float64": dict(rtol=1e-12, atol=1e-300)}


def _inputs(d: DType, op: Op) -> np.ndarray:
    rng = np.random.default_rng(7)
    tails = [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.3, -0.3, 1.0, -1.0, 3.9, -3.9, 4.5, -4.5,
             8.9, -8.9, 9.5, -9.5, 20.0, -20.0, 80.0, -80.0, 1e4, -1e4, np.inf, -np.inf, np.nan]
    body = np.concatenate([rng.standard_normal(200) * 3, rng.uniform(-12, 12, 200), tails])
    if op in (Op.RSQRT, Op.LOG10):
        body = np.abs(body)
    if op is Op.TAN:
        body = np.clip(body, -1.5, 1.5)
    with np.errstate(over="ignore"):
        return body.astype(d.numpy)


def _pointwise(op: Op, d: DType, n: int, kind: ForKind) -> LoweredFunc:
    A, B = make_buffer("A", n, d), make_buffer("B", n, d)
    i = Var("i", int32, "axis")
    body = For(i, Const(0, int32), Const(n, int32), kind, Store(B, i, Unary(op, A[i])))
    return LoweredFunc(f"{op.value}_{d}_{kind.name}", (BufferParam(A, A, False),
                                                      BufferParam(B, B, True)), body)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED], ids=lambda k: k.name)
@pytest.mark.parametrize("d", [F16, float32, F64], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_legalized_ops_match_numpy(op: Op, d: DType, kind: ForKind) -> None:
    x = _inputs(d, op)
    f = build_lowered(_pointwise(op, d, x.size, kind))
    got = np.zeros_like(x)
    f(x, got)
    with np.errstate(all="ignore"):
        want = NUMPY_UNARY[op](x)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (op, x[np.isnan(got) != np.isnan(want)])
    assert np.array_equal(np.isinf(got), np.isinf(want)), (op, x[np.isinf(got) != np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], err_msg=f"{op.value} {d}", **TOL[d.name])


@pytest.mark.parametrize("op", [Op.SIGMOID, Op.TANH, Op.ERF])
def test_bounded_ops_stay_in_range(op: Op) -> None:
    x = np.linspace(-50, 50, 100001, dtype=np.float32)
    f = build_lowered(_pointwise(op, float32, x.size, ForKind.VECTORIZED))
    got = np.zeros_like(x)
    f(x, got)
    lo = 0.0 if op is Op.SIGMOID else -1.0
    assert got.min() >= lo and got.max() <= 1.0 and not np.isnan(got).any()
    # the float32 rational forms wiggle by up to 3 ulp near saturation, never more
    assert np.diff(got).min() >= -4 * np.finfo(np.float32).eps
    with np.errstate(all="ignore"):
        want = NUMPY_UNARY[op](x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def _ops_in(func: LoweredFunc) -> set[tuple[Op, str]]:
    found = set()
    for s in walk_stmts(func.body):
        if isinstance(s, Store):
            for node in post_order(s.value):
                if isinstance(node, (Unary, Binary)):
                    found.add((node.op, node.dtype.name))
    return found


def test_what_legalize_keeps_and_removes_on_the_cpu() -> None:
    n = 4
    bufs = {d: (make_buffer(f"A{d}", n, d), make_buffer(f"B{d}", n, d)) for d in
            (F16, float32, F64)}
    i = Var("i", int32, "axis")
    stores = [Store(b, i, Unary(op, a[i])) for a, b in bufs.values() for op in OPS]
    params = tuple(BufferParam(t, t, k == 1) for pair in bufs.values()
                   for k, t in enumerate(pair))
    func = LoweredFunc("mixed", params, For(i, Const(0, int32), Const(n, int32),
                                             ForKind.SERIAL, seq(*stores)))
    legal = legalize(func)
    ops = _ops_in(legal)
    assert legal.name == func.name and legal.params == func.params
    assert not any(op in (Op.SIGMOID, Op.RSQRT) for op, _ in ops)
    assert (Op.ERF, "float32") not in ops
    # float32 tanh stays: the code generator emits it as vector IR (tex.codegen.vecmath)
    assert {(Op.TANH, "float32"), (Op.TANH, "float64"), (Op.ERF, "float64"), (Op.LOG10, "float32"),
            (Op.TAN, "float64")} <= ops
    assert not any(d == "float16" for _, d in ops), "float16 arithmetic must go via float32"
    assert legalize(func, "cpu").params == func.params


def test_float16_binary_ops_run_in_float32() -> None:
    A, B = make_buffer("A", 2, F16), make_buffer("B", 2, F16)
    i = Var("i", int32, "axis")
    func = LoweredFunc("h", (BufferParam(A, A, False), BufferParam(B, B, True)),
                       Store(B, i, Binary(Op.MUL, A[i], A[i])))
    (store,) = [s for s in walk_stmts(legalize(func).body) if isinstance(s, Store)]
    assert isinstance(store.value, Cast) and store.value.dtype is F16
    assert isinstance(store.value.a, Binary) and store.value.a.dtype is float32


def test_unknown_target_is_refused() -> None:
    A = make_buffer("A", 1, float32)
    func = LoweredFunc("f", (BufferParam(A, A, True),), Store(A, Const(0, int32),
                                                             Const(1.0, float32)))
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        legalize(func, "tpu")
