"""float32 ``exp``, ``log`` and ``tanh`` as LLVM IR that vectorizes.

LLVM lowers ``llvm.exp.v8f32`` to eight scalar ``expf`` calls, which made every softmax,
sigmoid and tanh ten times slower than the arithmetic around it. These versions are
straight-line IR (range reduction, a minimax polynomial in Horner form with
``llvm.fmuladd``, exponent bit tricks), so a vectorized loop stays vectorized. The same
function serves scalars and vectors, so a loop's vector body and its scalar remainder
agree bit for bit.

Accuracy (float32, checked against float64 NumPy in ``tests/test_vecmath.py`` over a dense
sweep): ``exp`` and ``log`` within 2 ulp, ``tanh`` within 3 ulp, over the whole float32
range; special values follow IEEE: ``exp(-inf) = 0``, ``exp(inf) = inf``, overflow to inf,
underflow through the subnormals to 0; ``log(0) = -inf``, ``log(x < 0) = nan``,
``log(inf) = inf``, subnormal inputs handled; ``tanh(±inf) = ±1``, ``tanh(-0) = -0``; NaN in,
NaN out. The polynomial coefficients are the classical Cephes ones (public domain).

Each function is emitted once per module and type as an internal ``alwaysinline``
function named ``tex.<op>.<type>`` (``tex.exp.v8f32``), so the IR stays readable.
"""
from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

__all__ = ["VECMATH", "vecmath_function"]

_F32 = ir.FloatType()
_I32 = ir.IntType(32)

# exp: x = n ln2 + r, |r| <= ln2 / 2; ln2 in two parts so n * ln2_hi is exact
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
# log: x = m 2^e, sqrt(1/2) <= m < sqrt(2)
_SQRTHF = 0.707106781186547524
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)
# tanh: an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)


class _Emit:
    """Helpers over one builder for a float32 scalar or vector type."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type) -> None:
        self.b = b
        self.t = t
        self.lanes = t.count if isinstance(t, ir.VectorType) else 0
        self.it = ir.VectorType(_I32, self.lanes) if self.lanes else _I32
        self.mod = b.module

    def c(self, v: float) -> ir.Constant:
        if self.lanes:
            return ir.Constant(self.t, [ir.Constant(_F32, v)] * self.lanes)
        return ir.Constant(_F32, v)

    def ci(self, v: int) -> ir.Constant:
        if self.lanes:
            return ir.Constant(self.it, [ir.Constant(_I32, v)] * self.lanes)
        return ir.Constant(_I32, v)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        suffix = f"v{self.lanes}f32" if self.lanes else "f32"
        full = f"{name}.{suffix}"
        fn = self.mod.globals.get(full)
        if fn is None:
            fn = ir.Function(self.mod, ir.FunctionType(self.t, [self.t] * len(args)), full)
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, x: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.fmuladd", a, x, c)

    def horner(self, x: ir.Value, coefs: tuple[float, ...]) -> ir.Value:
        acc = self.c(coefs[0])
        for k in coefs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def scale2(self, x: ir.Value, n: ir.Value) -> ir.Value:
        """``x * 2**n`` for integer-valued ``n`` in [-252, 254], in two exact steps so both
        exponents stay normal (results may still round into the subnormals or overflow)."""
        b = self.b
        n1 = b.ashr(n, self.ci(1))
        n2 = b.sub(n, n1)
        p1 = b.bitcast(b.shl(b.add(n1, self.ci(127)), self.ci(23)), self.t)
        p2 = b.bitcast(b.shl(b.add(n2, self.ci(127)), self.ci(23)), self.t)
        return b.fmul(b.fmul(x, p1), p2)


def _exp_body(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    # clamp far outside the finite range (results still overflow/underflow exactly);
    # minnum/maxnum drop a NaN, so it is put back at the end
    xc = e.intrinsic("llvm.maxnum", e.intrinsic("llvm.minnum", x, e.c(100.0)), e.c(-110.0))
    nf = e.intrinsic("llvm.roundeven", b.fmul(xc, e.c(_LOG2E)))
    r = e.fma(nf, e.c(-_LN2_HI), xc)
    r = e.fma(nf, e.c(-_LN2_LO), r)
    z = b.fmul(r, r)
    p = e.horner(r, _EXP_P)
    y = b.fadd(e.fma(p, z, r), e.c(1.0))
    n = b.fptosi(nf, e.it)
    out = e.scale2(y, n)
    return b.select(b.fcmp_unordered("uno", x, x), x, out)


def _log_body(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    # subnormal inputs: scale into the normal range first
    tiny = b.fcmp_ordered("<", x, e.c(1.17549435e-38))
    xs = b.select(tiny, b.fmul(x, e.c(8388608.0)), x)  # * 2^23
    bias = b.select(tiny, e.ci(23), e.ci(0))
    bits = b.bitcast(xs, e.it)
    ex = b.sub(b.sub(b.and_(b.lshr(bits, e.ci(23)), e.ci(0xFF)), e.ci(126)), bias)
    m = b.bitcast(b.or_(b.and_(bits, e.ci(0x807FFFFF)), e.ci(0x3F000000)), e.t)  # [0.5, 1)
    small = b.fcmp_ordered("<", m, e.c(_SQRTHF))
    ex = b.select(small, b.sub(ex, e.ci(1)), ex)
    m = b.select(small, b.fsub(b.fadd(m, m), e.c(1.0)), b.fsub(m, e.c(1.0)))
    ef = b.sitofp(ex, e.t)
    z = b.fmul(m, m)
    y = b.fmul(b.fmul(m, z), e.horner(m, _LOG_P))
    y = e.fma(ef, e.c(_LN2_LO), y)
    y = e.fma(z, e.c(-0.5), y)
    out = b.fadd(m, y)
    out = e.fma(ef, e.c(_LN2_HI), out)
    # IEEE special cases: log(+inf) = inf, log(0) = -inf, log(x < 0) = nan, nan -> nan
    inf = e.c(float("inf"))
    out = b.select(b.fcmp_ordered("==", x, inf), inf, out)
    out = b.select(b.fcmp_ordered("==", x, e.c(0.0)), e.c(float("-inf")), out)
    return b.select(b.fcmp_unordered("<", x, e.c(0.0)), e.c(float("nan")), out)


def _tanh_body(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    ax = e.intrinsic("llvm.fabs", x)
    z = b.fmul(x, x)
    small = e.fma(b.fmul(x, z), e.horner(z, _TANH_P), x)
    t = _exp_body(e, b.fadd(ax, ax))
    big = b.fsub(e.c(1.0), b.fdiv(e.c(2.0), b.fadd(t, e.c(1.0))))
    out = b.select(b.fcmp_ordered("<", ax, e.c(0.625)), small, big)
    # both branches are odd; copysign keeps tanh(-0) = -0 (a sum of zeros is +0)
    return e.intrinsic("llvm.copysign", out, x)


VECMATH: dict[str, Callable[[_Emit, ir.Value], ir.Value]] = {
    "exp": _exp_body,
    "log": _log_body,
    "tanh": _tanh_body,
}


def vecmath_function(module: ir.Module, op: str, t: ir.Type) -> ir.Function:
    """``@tex.<op>.<type>`` in ``module`` (emitted on first use) for float32 ``t``."""
    lanes = t.count if isinstance(t, ir.VectorType) else 0
    name = f"tex.{op}.v{lanes}f32" if lanes else f"tex.{op}.f32"
    fn = module.globals.get(name)
    if fn is not None:
        return fn  # type: ignore[no-any-return]
    fn = ir.Function(module, ir.FunctionType(t, [t]), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(VECMATH[op](_Emit(b, t), fn.args[0]))
    return fn
