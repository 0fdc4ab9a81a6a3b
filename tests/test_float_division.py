"""Float ``//`` and ``%``: one definition, NumPy's (``floor_divide``, ``mod``), in the built
function, in ``tex.testing.evaluate`` and in constant folding; integer division by a constant
zero is refused at construction."""
from __future__ import annotations

import numpy as np
import pytest

import tex

FLOAT_DTYPES = ["float16", "float32", "float64"]


def _operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every sign combination, quotients next to an integer (rounding edges), the issue's
    -511 // 13.1, exact multiples, signed zeros, infinities, nan and a zero divisor."""
    rng = np.random.default_rng(20)
    b = rng.uniform(0.1, 20, 24).astype(dtype)
    k = rng.integers(-50, 50, 24).astype(dtype)
    eps = np.finfo(dtype).eps
    near = [k * b * (1 + s * eps) for s in (-2, -1, 0, 1, 2)]  # a / b within ulps of k
    pairs = [(-511.0, 13.1), (511.0, -13.1), (1.0, 0.1), (-1.0, 0.1), (3.0, 0.3), (7.5, 2.5),
             (-7.5, 2.5), (0.0, 3.0), (-0.0, 3.0), (0.0, -3.0), (5.0, np.inf),
             (-5.0, np.inf), (np.inf, 2.0), (np.nan, 2.0), (2.0, np.nan), (1.0, 0.0),
             (-1.0, 0.0), (0.0, 0.0), (1e-3, -7.0), (-1e-3, 7.0)]
    a = np.concatenate([*near, np.array([p[0] for p in pairs])]).astype(dtype)
    bb = np.concatenate([b] * len(near) + [np.array([p[1] for p in pairs])]).astype(dtype)
    signs = np.array([1, -1, 1, -1] * (len(a) // 4 + 1))[:len(a)]
    flip = signs[::-1][:len(a)]
    a = np.concatenate([a, (a * signs).astype(dtype)])
    bb = np.concatenate([bb, (bb * flip).astype(dtype)])
    return a, bb


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    np.testing.assert_array_equal(got, want, err_msg=what)
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), \
        f"{what}: the sign of a zero result differs from NumPy"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["floordiv", "floormod"])
def test_float_floordiv_and_floormod_match_numpy_in_both_paths(dtype: str, op: str) -> None:
    a, b = _operands(dtype)
    n = a.size
    A = tex.placeholder((n,), dtype, name="A")
    B = tex.placeholder((n,), dtype, name="B")
    fn = (lambda x, y: x // y) if op == "floordiv" else (lambda x, y: x % y)
    C = tex.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, b) if op == "floordiv" else np.mod(a, b)
    got = np.zeros(n, dtype)
    tex.build([C])(a, b, got)
    _same(got, want, f"built {dtype} {op}")
    _same(tex.testing.evaluate(C, {A: a, B: b}), want, f"evaluate {dtype} {op}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_floordiv_by_a_constant_matches_numpy(dtype: str) -> None:
    """-511 // 13.1 in float16 is -40 (the quotient -39.003 rounds to -39.0 in float16
    first); x // 1.0 is floor(x), not x; 0 // x keeps nan for x = 0."""
    a = np.array([-511, 511, 2.5, -2.5, 0.0, 7.0], dtype)
    A = tex.placeholder((a.size,), dtype, name="A")
    for c in (13.1, 1.0, -0.3):
        C = tex.compute(a.shape, lambda i: A[i] // tex.const(c, dtype), name="C")
        with np.errstate(all="ignore"):
            want = np.floor_divide(a, np.array(c, dtype))
        got = np.zeros_like(a)
        tex.build([C])(a, got)
        _same(got, want, f"built {dtype} // {c}")
        _same(tex.testing.evaluate(C, {A: a}), want, f"evaluate {dtype} // {c}")
    Z = tex.compute(a.shape, lambda i: tex.const(0.0, dtype) // A[i], name="Z")
    with np.errstate(all="ignore"):
        want = np.floor_divide(np.zeros_like(a), a)
    got = np.zeros_like(a)
    tex.build([Z])(a, got)
    _same(got, want, f"built 0 // x ({dtype})")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_constant_folding_uses_numpy_floordiv(dtype: str) -> None:
    c = tex.const(-511.0, dtype) // tex.const(13.1, dtype)
    assert c.value == float(np.floor_divide(np.array(-511, dtype), np.array(13.1, dtype)))
    assert (tex.const(1.0, dtype) // tex.const(0.1, dtype)).value == \
        float(np.floor_divide(np.array(1.0, dtype), np.array(0.1, dtype)))
