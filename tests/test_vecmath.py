"""The float32 exp/log/tanh of tex.codegen.vecmath: accuracy in ulp against float64 NumPy
over dense sweeps of the float32 range, IEEE special values, and vector = scalar."""
from __future__ import annotations

import numpy as np
import pytest

import tex

N = 1 << 16


def _build(op: str, n: int, vector: bool) -> tex.build:
    x = tex.placeholder((n,), "float32", name="x")
    y = tex.compute((n,), lambda i: getattr(tex, op)(x[i]), name="y")
    s = tex.create_schedule(y.op)
    if vector:
        _, xi = s[y].split(y.op.axis[0], factor=8)
        s[y].vectorize(xi)
    return tex.build(s, [x, y])


def _ulp_error(got: np.ndarray, want64: np.ndarray) -> np.ndarray:
    want = want64.astype(np.float32)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    ulp = np.where(ulp == 0, np.spacing(np.float32(0)), ulp)
    return np.abs(got.astype(np.float64) - want64) / ulp


def _sweep(lo: float, hi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([np.linspace(lo, hi, N // 2), rng.uniform(lo, hi, N // 2)]
                          ).astype(np.float32)


@pytest.mark.parametrize(("op", "ref", "lo", "hi", "max_ulp"), [
    ("exp", np.exp, -103.0, 88.7, 2.0),
    ("exp", np.exp, -2.0, 2.0, 2.0),
    ("log", np.log, 1e-37, 3e38, 2.0),
    ("log", np.log, 0.25, 4.0, 2.0),
    ("tanh", np.tanh, -12.0, 12.0, 3.0),
    ("tanh", np.tanh, -0.7, 0.7, 3.0),
])
def test_accuracy_in_ulp(op: str, ref, lo: float, hi: float, max_ulp: float) -> None:
    x = _sweep(lo, hi, seed=hash(op) % 1000)
    if op == "log":  # log-uniform over the range
        x = np.exp(np.linspace(np.log(lo), np.log(hi), N)).astype(np.float32)
    f = _build(op, N, vector=True)
    y = np.empty_like(x)
    f(x, y)
    want = ref(x.astype(np.float64))
    err = _ulp_error(y, want)
    finite = np.isfinite(want) & (np.abs(want) > 1.2e-38)  # normal results
    assert err[finite].max() <= max_ulp, (op, x[finite][err[finite].argmax()])


def test_log_of_subnormals() -> None:
    x = np.array([1e-45, 1e-40, 5e-39, 1.1754942e-38], np.float32)
    y = np.empty_like(x)
    _build("log", 4, vector=False)(x, y)
    assert np.all(_ulp_error(y, np.log(x.astype(np.float64))) <= 2.0)


@pytest.mark.parametrize("vector", [False, True])
def test_special_values(vector: bool) -> None:
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, 100.0, -100.0, 89.0, -104.0, -88.0,
                  -1.0, 1e-45, 20.0, -20.0, 0.5, 1.0], np.float32)
    out = {}
    for op in ("exp", "log", "tanh"):
        y = np.empty_like(x)
        _build(op, x.size, vector)(x, y)
        out[op] = y
    with np.errstate(all="ignore"):
        for op, ref in (("exp", np.exp), ("log", np.log), ("tanh", np.tanh)):
            want = ref(x.astype(np.float64)).astype(np.float32)
            same_class = (np.isnan(want) == np.isnan(out[op])) & \
                (np.isinf(want) == np.isinf(out[op]))
            assert same_class.all(), (op, x[~same_class], out[op][~same_class])
            inf_or_zero = np.isinf(want) | (want == 0)
            assert np.array_equal(out[op][inf_or_zero], want[inf_or_zero]), op
    assert np.signbit(out["tanh"][1])  # tanh(-0) = -0
    assert out["exp"][6] > 0  # exp(-100) is a subnormal, not flushed to zero


@pytest.mark.parametrize("op", ["exp", "log", "tanh"])
def test_vector_body_equals_scalar(op: str) -> None:
    x = _sweep(0.01, 20.0, seed=3)[:1000]
    a, b = np.empty_like(x), np.empty_like(x)
    _build(op, x.size, True)(x, a)
    _build(op, x.size, False)(x, b)
    assert np.array_equal(a, b)


def test_ir_calls_the_vector_function_not_libm() -> None:
    f = _build("exp", 64, vector=True)
    raw = f.get_source("ll.raw")
    assert "tex.exp.v" in raw
    asm = f.get_source("asm")
    assert "expf" not in asm
