"""The float32 math of tex.codegen.vecmath: exp/log/tanh through the CPU backend, and the PTX
backend's fallbacks (sin, cos, tan, log2, log10, pow, fmod) JIT-compiled for the host:
accuracy in ulp against float64 NumPy over dense sweeps of the float32 range, IEEE and C
special values, fmod's exactness, and vector = scalar."""
from __future__ import annotations

import ctypes
import math

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

import tex
from tex.codegen import vecmath
from tex.codegen.host import LLVM_LOCK, host_target
from tex.codegen.vecmath import FALLBACK, fallback_function

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


# -- the PTX backend's fallbacks (sin, cos, tan, log2, log10, pow, fmod) ------------------
# Not used by the CPU backend, so they are JIT-compiled here for the host: one module with
# a loop ``run_<op>[_v](in..., out, n)`` per function, scalar and 8-lane vector.

_FALLBACK_OPS = ["sin", "cos", "tan", "log2", "log10", "pow", "fmod"]
_LANES = 8
_F32 = ir.FloatType()
_I64 = ir.IntType(64)


def _loop(module: ir.Module, op: str, lanes: int) -> str:
    """``void run(float* in..., float* out, i64 n)``: ``out[i] = op(in[i]...)``, ``n`` counted
    in scalars or vectors."""
    t = ir.VectorType(_F32, lanes) if lanes else _F32
    fn = fallback_function(module, op, t)
    arity = len(fn.args)
    name = f"run_{op}_v" if lanes else f"run_{op}"
    w = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * (arity + 1)
                                            + [_I64]), name)
    *ins, out, n = w.args
    entry, body, done = (w.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(_I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(_I64)
    i.add_incoming(ir.Constant(_I64, 0), entry)
    args = [b.load(b.gep(p, [i], source_etype=t), typ=t, align=4) for p in ins]
    b.store(b.call(fn, args), b.gep(out, [i], source_etype=t), align=4)
    nxt = b.add(i, ir.Constant(_I64, 1))
    i.add_incoming(nxt, body)
    b.cbranch(b.icmp_signed("<", nxt, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return name


class _Fallbacks:
    """The fallback functions compiled for the host, callable on float32 arrays."""

    def __init__(self) -> None:
        ht = host_target()
        module = ir.Module("fallbacks")
        module.triple = ht.triple
        module.data_layout = ht.data_layout
        names = {(op, lanes): _loop(module, op, lanes)
                 for op in _FALLBACK_OPS for lanes in (0, _LANES)}
        self.ir = str(module)
        with LLVM_LOCK:
            mod = llvm.parse_assembly(self.ir)
            mod.verify()
            self.engine = llvm.create_mcjit_compiler(mod, ht.target_machine(jit=True))
            self.engine.finalize_object()
            self.fns = {}
            for (op, lanes), name in names.items():
                arity = 1 if op in FALLBACK else 2
                proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1), ctypes.c_int64)
                self.fns[op, lanes] = proto(self.engine.get_function_address(name))

    def __call__(self, op: str, *xs: np.ndarray, vector: bool = False) -> np.ndarray:
        xs = tuple(np.ascontiguousarray(x, np.float32) for x in xs)
        n = xs[0].size
        lanes = _LANES if vector else 0
        assert all(x.size == n for x in xs) and n % max(lanes, 1) == 0
        out = np.empty(n, np.float32)
        self.fns[op, lanes](*[x.ctypes.data for x in xs], out.ctypes.data, n // max(lanes, 1))
        return out


@pytest.fixture(scope="module")
def fb() -> _Fallbacks:
    return _Fallbacks()


def _log_sweep(lo: float, hi: float, n: int = N) -> np.ndarray:
    return np.exp(np.linspace(np.log(lo), np.log(hi), n)).astype(np.float32)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Equal values (nan matching nan) with equal signs (for non-nan)."""
    return np.where(np.isnan(want), np.isnan(got),
                    (got == want) & (np.signbit(got) == np.signbit(want)))


# float32 arguments whose reduction mod pi/2 is hardest (|r| ~ 2^-29.2, 2^-28.9, 2^-27.8,
# and the hardest above 2^100: found by continued fractions of 2^e * 2/pi), the largest
# float32, the Cody-Waite limit, and their neighbours
_HARD = np.array([math.ldexp(16367173, 72), math.ldexp(10741887, 11),
                  math.ldexp(16573937, -16), math.ldexp(14173733, 88),
                  math.ldexp(12438944, 103), 3.4028235e38, 1e30, 131071.99, 131072.0,
                  105615.0], np.float32)


@pytest.mark.parametrize(("op", "ref"), [("sin", np.sin), ("cos", np.cos), ("tan", np.tan)])
@pytest.mark.parametrize(("lo", "hi"), [(-4.0, 4.0), (-131072.0, 131072.0),  # Cody-Waite
                                        (-1e-30, 1e-30), (1e5, 2e5)])  # tiny; the switch
def test_fallback_trig_in_ulp(fb: _Fallbacks, op: str, ref, lo: float, hi: float) -> None:
    x = _sweep(lo, hi, seed=7)
    err = _ulp_error(fb(op, x), ref(x.astype(np.float64)))
    assert err.max() <= 0.501, (op, x[err.argmax()], err.max())


@pytest.mark.parametrize(("op", "ref"), [("sin", np.sin), ("cos", np.cos), ("tan", np.tan)])
def test_fallback_trig_huge_arguments(fb: _Fallbacks, op: str, ref) -> None:
    """Payne-Hanek over the rest of the float32 range, both signs, and the hardest cases."""
    x = _log_sweep(131072.0, 3.4028235e38)
    x = np.concatenate([x, -x[::7], _HARD, -_HARD, np.nextafter(_HARD, np.float32(0))])
    err = _ulp_error(fb(op, x), ref(x.astype(np.float64)))
    assert err.max() <= 0.501, (op, x[err.argmax()], err.max())


def test_fallback_trig_special_values(fb: _Fallbacks) -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, -1e-38], np.float32)
    sin, cos, tan = (fb(op, x) for op in ("sin", "cos", "tan"))
    want_odd = np.array([0.0, -0.0, np.nan, np.nan, np.nan, 1e-45, -1e-45, -1e-38], np.float32)
    assert _same(sin, want_odd).all(), sin
    assert _same(tan, want_odd).all(), tan
    assert _same(cos, np.array([1, 1, np.nan, np.nan, np.nan, 1, 1, 1], np.float32)).all(), cos


def test_two_over_pi_table() -> None:
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(300):
        bits = 24 * len(vecmath._TWO_OVER_PI_24)
        want = int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** bits))
    got = 0
    for chunk in vecmath._TWO_OVER_PI_24:
        got = (got << 24) | chunk
    assert got == want


@pytest.mark.parametrize(("op", "ref", "max_ulp"), [("log2", np.log2, 1.14),
                                                    ("log10", np.log10, 0.91)])
def test_fallback_log2_log10_in_ulp(fb: _Fallbacks, op: str, ref, max_ulp: float) -> None:
    """The bounds are the maxima over every float32 (1.4131359 and 1.3192264)."""
    worst = np.array([1.4131359, 1.3192264], np.float32)
    for x in (_log_sweep(1e-45, 3.4028235e38), _sweep(0.5, 2.0, seed=11),
              _sweep(0.999, 1.001, seed=12), worst):
        err = _ulp_error(fb(op, x), ref(x.astype(np.float64)))
        assert err.max() <= max_ulp, (op, x[err.argmax()], err.max())
    special = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
    with np.errstate(all="ignore"):
        assert _same(fb(op, special), ref(special)).all()


def test_fallback_log2_log10_exact_powers(fb: _Fallbacks) -> None:
    k = np.arange(-149, 128)
    assert np.array_equal(fb("log2", np.ldexp(np.float32(1), k)), k.astype(np.float32))
    k = np.arange(0, 11)
    assert np.array_equal(fb("log10", 10.0 ** k), k.astype(np.float32))


@pytest.mark.parametrize(("xlo", "xhi", "ylo", "yhi", "log_x"), [
    (0.0, 10.0, -30.0, 30.0, False),
    (1e-38, 3e38, -3.0, 3.0, True),  # every exponent, results over and under the range
    (0.999, 1.001, -1e5, 1e5, False),  # near 1 with large exponents
])
def test_fallback_pow_in_ulp(fb: _Fallbacks, xlo: float, xhi: float, ylo: float, yhi: float,
                             log_x: bool) -> None:
    rng = np.random.default_rng(5)
    x = (_log_sweep(xlo, xhi) if log_x else rng.uniform(xlo, xhi, N)).astype(np.float32)
    y = rng.uniform(ylo, yhi, N).astype(np.float32)
    got = fb("pow", x, y)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    normal = (np.abs(want) >= 1.1754944e-38) & (np.abs(want) <= 3.4028234e38)
    err = _ulp_error(got[normal], want[normal])
    assert err.max() <= 0.501, (x[normal][err.argmax()], err.max())
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)  # inf beyond the range, subnormals rounded once
    assert np.array_equal(got[~normal], want32[~normal])


def test_fallback_pow_special_cases(fb: _Fallbacks) -> None:
    """C powf's special cases: the float32 NumPy power of every pair of these values."""
    vals = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
                     np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e30, -1e30, 16777216.0,
                     16777218.0, -16777218.0, 1e10], np.float32)
    x, y = (a.ravel() for a in np.meshgrid(vals, vals))
    got = fb("pow", x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    ok = _same(got, want)
    assert ok.all(), list(zip(x[~ok], y[~ok], got[~ok], want[~ok]))
    # negative x, integer y: the sign from y's parity, exactly representable results
    x = -np.arange(1, 9, dtype=np.float32)
    for y in (3.0, 4.0, -3.0, -4.0):
        assert _same(fb("pow", x, np.full(8, y)), np.power(x, np.float32(y))).all()


def _random_float32(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform random bit patterns of finite float32 values (subnormals included)."""
    bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32)
    bits |= rng.integers(0, 2, n, dtype=np.uint32) << 31
    return bits.view(np.float32)


def test_fallback_fmod_is_exact(fb: _Fallbacks) -> None:
    rng = np.random.default_rng(9)
    a, b = _random_float32(rng, N), _random_float32(rng, N)  # quotients up to 2^280
    c = rng.uniform(-1e4, 1e4, N).astype(np.float32)
    d = rng.uniform(-10.0, 10.0, N).astype(np.float32)
    huge = np.array([1e30, -1e30, 1e30, 3.4028235e38, 3.4028235e38, 3.4028235e38, 1e-38,
                     16777215.0, 1e38], np.float32)
    small = np.array([3.0, 7.0, 0.1, 1e-45, 3.0, -2.9e-39, 1e-45, 1e-45, 1.3], np.float32)
    for x, y in ((a, b), (c, d), (huge, small)):
        got = fb("fmod", x, y)
        assert _same(got, np.fmod(x, y)).all(), (x[~_same(got, np.fmod(x, y))])
    assert fb("fmod", np.float32([1e30]), np.float32([3.0]))[0] == np.fmod(
        np.float32(1e30), np.float32(3.0))


def test_fallback_fmod_special_values(fb: _Fallbacks) -> None:
    inf, nan = np.inf, np.nan
    a = np.array([5.0, -5.0, inf, -inf, nan, 1.0, 7.0, -7.0, 0.0, -0.0, 0.0], np.float32)
    b = np.array([0.0, -0.0, 2.0, 2.0, 1.0, nan, inf, -inf, 3.0, 3.0, 0.0], np.float32)
    got = fb("fmod", a, b)
    want = np.array([nan, nan, nan, nan, nan, nan, 7.0, -7.0, 0.0, -0.0, nan], np.float32)
    assert _same(got, want).all(), got


@pytest.mark.parametrize("op", _FALLBACK_OPS)
def test_fallback_vector_equals_scalar(fb: _Fallbacks, op: str) -> None:
    rng = np.random.default_rng(13)
    n = 4096
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 38, n)).astype(np.float32)
    args = (x,) if op in FALLBACK else (x, (rng.standard_normal(n) * 8.0).astype(np.float32))
    a, b = fb(op, *args), fb(op, *args, vector=True)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_fallbacks_are_straight_line_ir(fb: _Fallbacks) -> None:
    """One basic block each, and no call but to llvm.* intrinsics (no libm, no branch)."""
    mod = llvm.parse_assembly(fb.ir)
    for fn in mod.functions:
        if fn.name.startswith("tex."):
            assert len(list(fn.blocks)) == 1, fn.name
        elif fn.is_declaration:
            assert fn.name.startswith("llvm."), fn.name
