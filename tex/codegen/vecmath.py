"""float32 math as straight-line LLVM IR: ``exp``, ``log``, ``tanh`` that vectorize, and the
PTX backend's fallbacks for ``sin``, ``cos``, ``tan``, ``log2``, ``log10``, ``pow``, ``fmod``.

LLVM lowers ``llvm.exp.v8f32`` to eight scalar ``expf`` calls, which made every softmax,
sigmoid and tanh ten times slower than the arithmetic around it. These versions are
straight-line IR (range reduction, a minimax polynomial in Horner form with
``llvm.fmuladd``, exponent bit tricks), so a vectorized loop stays vectorized. The same
function serves scalars and vectors, so a loop's vector body and its scalar remainder
agree bit for bit.

``VECMATH`` (used by the CPU and the PTX backend). Accuracy (float32, checked against
float64 NumPy in ``tests/test_vecmath.py`` over a dense sweep): ``exp`` and ``log`` within
2 ulp, ``tanh`` within 3 ulp, over the whole float32 range; special values follow IEEE:
``exp(-inf) = 0``, ``exp(inf) = inf``, overflow to inf, underflow through the subnormals to
0; ``log(0) = -inf``, ``log(x < 0) = nan``, ``log(inf) = inf``, subnormal inputs handled;
``tanh(±inf) = ±1``, ``tanh(-0) = -0``; NaN in, NaN out. The polynomial coefficients are the
classical Cephes ones (public domain).

``FALLBACK`` (unary) and ``FALLBACK_BINARY`` (``pow``, ``fmod``): what the PTX backend uses
when CUDA's libdevice is not found; the CPU backend keeps calling libm for these. They use
float64 arithmetic where float32 would lose accuracy (a cost on GPUs with slow float64):

- ``sin``, ``cos``, ``tan``: ``|x| = j pi/2 + r`` by Cody-Waite below 2^17 (pi/2 in three
  float32 parts, in float64) and by a Payne-Hanek reduction above (``x`` times 2/pi held as
  24-bit chunks, each product exact in float64 and reduced mod 4 exactly), both computed
  and one selected; ``sin r``/``cos r`` by Taylor series in float64, one rounding to
  float32. Over every float32 (exhaustive check) the error is at most 0.5000004 ulp:
  correctly rounded but for near-ties, the hardest reductions (``|r| ~ 2^-29``) included.
  ``±inf``, nan -> nan; ``sin(-0) = tan(-0) = -0``.
- ``log2``, ``log10``: ``log``'s reduction and polynomial, the scaling by ``log_b(e)`` and
  ``log_b(2)`` in float32 hi/lo pairs; at most 1.14 ulp (``log2``) and 0.91 ulp
  (``log10``) over every float32; special values as ``log``.
- ``pow``: ``2**(y log2|x|)``, the logarithm (atanh series) and ``2**t`` in float64, one
  rounding to float32 (subnormal results and overflow to inf included); at most 0.5 ulp
  on 16M random pairs over the whole range; the special cases of C's ``powf``:
  ``pow(x, ±0) = 1`` and ``pow(1, y) = 1`` even for nan, ``pow(-1, ±inf) = 1``, the sign
  from an odd integer ``y``, nan for a finite negative ``x`` and a non-integer ``y``,
  ``pow(±0, y < 0) = inf``, ``pow(-inf, y)``...
- ``fmod``: C's ``fmodf``, exact for every input (integer-significand arithmetic in float64,
  the exponent difference brought in 28 bits at a time); ``fmod(x, 0)``, ``fmod(±inf, y)``
  are nan, ``fmod(x, ±inf) = x``.

Each function is emitted once per module and type as an internal ``alwaysinline``
function named ``tex.<op>.<type>`` (``tex.exp.v8f32``), so the IR stays readable.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import llvmlite.ir as ir

__all__ = ["VECMATH", "FALLBACK", "FALLBACK_BINARY", "vecmath_function",
           "fallback_function"]


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
    """Helpers over one builder for a float32 or float64 scalar or vector type."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type) -> None:
        self.b = b
        self.t = t
        self.lanes = t.count if isinstance(t, ir.VectorType) else 0
        self.ft = t.element if self.lanes else t
        self.bits = 64 if isinstance(self.ft, ir.DoubleType) else 32
        ity = ir.IntType(self.bits)
        self.it = ir.VectorType(ity, self.lanes) if self.lanes else ity
        self.mod = b.module

    def like(self, ft: ir.Type) -> _Emit:
        """The same builder over elements of type ``ft`` (as many lanes)."""
        return _Emit(self.b, ir.VectorType(ft, self.lanes) if self.lanes else ft)

    def c(self, v: float) -> ir.Constant:
        if self.lanes:
            return ir.Constant(self.t, [ir.Constant(self.ft, v)] * self.lanes)
        return ir.Constant(self.ft, v)

    def ci(self, v: int) -> ir.Constant:
        ity = ir.IntType(self.bits)
        if self.lanes:
            return ir.Constant(self.it, [ir.Constant(ity, v)] * self.lanes)
        return ir.Constant(ity, v)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        suffix = f"v{self.lanes}f{self.bits}" if self.lanes else f"f{self.bits}"
        full = f"{name}.{suffix}"
        fn = self.mod.globals.get(full)
        if fn is None:
            fn = ir.Function(self.mod, ir.FunctionType(self.t, [self.t] * len(args)), full)
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, x: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("llvm.fmuladd", a, x, c)

    def fma_exact(self, a: ir.Value, x: ir.Value, c: ir.Value) -> ir.Value:
        """``a * x + c`` rounded once (``llvm.fma``; ``fmuladd`` may be two roundings)."""
        return self.intrinsic("llvm.fma", a, x, c)

    def horner(self, x: ir.Value, coefs: tuple[float, ...]) -> ir.Value:
        acc = self.c(coefs[0])
        for k in coefs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def scale2(self, x: ir.Value, n: ir.Value) -> ir.Value:
        """float32 ``x * 2**n`` for integer-valued ``n`` in [-252, 254], in two exact steps so
        both exponents stay normal (results may still round into the subnormals or
        overflow)."""
        b = self.b
        n1 = b.ashr(n, self.ci(1))
        n2 = b.sub(n, n1)
        p1 = b.bitcast(b.shl(b.add(n1, self.ci(127)), self.ci(23)), self.t)
        p2 = b.bitcast(b.shl(b.add(n2, self.ci(127)), self.ci(23)), self.t)
        return b.fmul(b.fmul(x, p1), p2)

    def pow2(self, n: ir.Value) -> ir.Value:
        """``2**n`` for an integer ``n`` (of type ``it``) in the normal exponent range."""
        bias, mant = (1023, 52) if self.bits == 64 else (127, 23)
        return self.b.bitcast(self.b.shl(self.b.add(n, self.ci(bias)), self.ci(mant)), self.t)

    def clamp_int(self, n: ir.Value, lo: int, hi: int) -> ir.Value:
        """Integer ``n`` clamped to [lo, hi] (signed)."""
        b = self.b
        n = b.select(b.icmp_signed("<", n, self.ci(lo)), self.ci(lo), n)
        return b.select(b.icmp_signed(">", n, self.ci(hi)), self.ci(hi), n)


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


def _log_reduce(e: _Emit, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """``x = 2**ef * (1 + f)`` with ``sqrt(1/2) <= 1 + f < sqrt(2)`` (``f`` exact), ``z = f*f``
    and ``p = f**3 * P(f)``, so that ``log(1 + f) ~ f - z/2 + p``."""
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
    return ef, m, z, y


def _log_special(e: _Emit, x: ir.Value, out: ir.Value) -> ir.Value:
    """IEEE special cases of every logarithm: ``(+inf) = inf``, ``(±0) = -inf``,
    ``(x < 0) = nan``, nan -> nan."""
    b = e.b
    inf = e.c(float("inf"))
    out = b.select(b.fcmp_ordered("==", x, inf), inf, out)
    out = b.select(b.fcmp_ordered("==", x, e.c(0.0)), e.c(float("-inf")), out)
    return b.select(b.fcmp_unordered("<", x, e.c(0.0)), e.c(float("nan")), out)


def _log_body(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    ef, m, z, y = _log_reduce(e, x)
    y = e.fma(ef, e.c(_LN2_LO), y)
    y = e.fma(z, e.c(-0.5), y)
    out = b.fadd(m, y)
    out = e.fma(ef, e.c(_LN2_HI), out)
    return _log_special(e, x, out)


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


# --------------------------------------------------------------------------------------
# PTX fallbacks (without libdevice): sin, cos, tan, log2, log10, pow, fmod
# --------------------------------------------------------------------------------------

# sin/cos/tan: |x| = j pi/2 + r, |r| <= pi/4 (a little more when x * 2/pi rounds up).
# Cody-Waite below _CW_LIMIT, in float64: pi/2 = _PIO2[0] + _PIO2[1] + _PIO2[2], 24-bit
# parts, so j * part is exact (j < 2^17) and only the last step rounds; the 2^-76 left of
# pi/2 times j is 2^-31 of the smallest |r| of a float32 in range (2^-27.8, x ~ 252.9).
_CW_LIMIT = 131072.0
_TWO_OVER_PI = 0.636619772367581343
_PIO2 = (float.fromhex("0x1.921fb6p+0"), float.fromhex("-0x1.777a5cp-25"),
         float.fromhex("-0x1.ee59dap-50"))
# Payne-Hanek above: 2/pi = sum_k c_k 2^(-24 k), eight 24-bit chunks (192 bits; the float32
# worst case |r| ~ 2^-29.2 at x = 16367173 * 2^72 needs about 2^-60 absolute in x * 2/pi)
_TWO_OVER_PI_24 = (0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C,
                   0x439041)
_PIO2_F64 = 1.57079632679489661923
# the reduced terms are split at 2^-30: the high parts add exactly, the low parts (below
# 2^-31 each) round at about 2^-84, far below what the smallest fraction needs
_SPLIT_2M30 = 1.5 * 2.0 ** 22
# sin/cos of r in float64 by their Taylor series (to r^13 and r^14: relative error below
# 2^-44 for |r| <= 0.8), then one rounding to float32
_SIN_SERIES = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(6, 0, -1))
_COS_SERIES = tuple((-1.0) ** k / math.factorial(2 * k) for k in range(7, 1, -1))

# log2/log10 = ef * log_b(2) + log(1 + f) * log_b(e) with log_b(e), log_b(2) as float32
# hi + lo pairs: the leading product's rounding error (exact by fma) and the lo parts are
# added before the one rounding that matters, the last addition
_LOG2E_HI = float.fromhex("0x1.715476p+0")
_LOG2E_LO = 1.9259630335e-8
_LOG10E_HI = float.fromhex("0x1.bcb7b2p-2")
_LOG10E_LO = -1.0103049952e-8
_LOG10_2 = 0.301029995663981195
_LOG10_2_HI = round(_LOG10_2 * 2.0 ** 17) / 2.0 ** 17  # 16 bits: ef * hi is exact, |ef| < 256
_LOG10_2_LO = _LOG10_2 - _LOG10_2_HI

# pow in float64: log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| < 0.1716, series to s^19
# (relative error < 2^-48); 2^t for |t| <= 1/2 by its Taylor series to t^13 (< 2^-52)
_ATANH_SERIES = tuple(1.0 / k for k in range(19, 0, -2))
_LN2_F64 = 0.693147180559945309417
_LOG2E_F64 = 1.44269504088896340736
_EXP2_SERIES = tuple(_LN2_F64 ** k / math.factorial(k) for k in range(13, -1, -1))

# fmod: R = (A * 2**d) mod B on 24-bit integer significands, 28 bits of d at a time (R < 2^24,
# so R * 2^28 and every q * B stay below 2^52, exact in float64); d <= 104 + 149
_FMOD_CHUNK = 28
_FMOD_STEPS = 10


def _trig_reduce(e: _Emit, ax: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``ax = j pi/2 + r`` for float32 ``ax >= 0``: ``(r, j mod 4)`` with ``r`` in float64
    (``e`` over float32); both reductions are computed and the right one selected (inf and
    nan give a finite garbage ``r``, replaced by the caller)."""
    b = e.b
    e64 = e.like(ir.DoubleType())
    # Cody-Waite; zero outside its range, so fptosi never overflows. In float64 the first
    # two steps are exact (j < 2^17 times 24-bit parts), the third rounds once.
    small = b.fcmp_ordered("<", ax, e.c(_CW_LIMIT))
    xs = b.fpext(b.select(small, ax, e.c(0.0)), e64.t)
    j = e64.intrinsic("llvm.roundeven", b.fmul(xs, e64.c(_TWO_OVER_PI)))
    r = xs
    for part in _PIO2:
        r = e64.fma_exact(j, e64.c(-part), r)
    # Payne-Hanek: x * c_k 2^-24k is exact (24 x 24 bits), and so is its reduction mod 4
    finite = b.fcmp_ordered("<", ax, e.c(float("inf")))
    xd = b.fpext(b.select(finite, ax, e.c(0.0)), e64.t)
    hi: ir.Value = e64.c(0.0)
    lo: ir.Value = e64.c(0.0)
    for k, chunk in enumerate(_TWO_OVER_PI_24, 1):
        t = b.fmul(xd, e64.c(math.ldexp(chunk, -24 * k)))
        t = b.fsub(t, b.fmul(e64.intrinsic("llvm.floor", b.fmul(t, e64.c(0.25))), e64.c(4.0)))
        t_hi = b.fsub(b.fadd(t, e64.c(_SPLIT_2M30)), e64.c(_SPLIT_2M30))
        hi = b.fadd(hi, t_hi)
        lo = b.fadd(lo, b.fsub(t, t_hi))
    j_big = e64.intrinsic("llvm.roundeven", hi)
    r_big = b.fmul(b.fadd(b.fsub(hi, j_big), lo), e64.c(_PIO2_F64))
    r = b.select(small, r, r_big)
    q = b.fptosi(b.select(small, j, j_big), e.it)
    return r, b.and_(q, e.ci(3))


def _sin_cos_f64(e: _Emit, r: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``sin(r)``, ``cos(r)`` for ``|r| <~ pi/4`` in float64 (``e`` over float64)."""
    b = e.b
    z = b.fmul(r, r)
    s = e.fma(b.fmul(r, z), e.horner(z, _SIN_SERIES), r)
    c = e.fma(z, e.fma(z, e.horner(z, _COS_SERIES), e.c(-0.5)), e.c(1.0))
    return s, c


def _trig_finish(e: _Emit, x: ir.Value, out: ir.Value, negate: ir.Value | None,
                 odd: bool) -> ir.Value:
    """float64 ``out`` rounded to float32, negated where ``negate``, and by the sign of
    ``x`` for an odd function; nan for infinite or nan ``x``."""
    b = e.b
    sign = e.ci(-0x80000000)
    flip = e.ci(0) if negate is None else b.select(negate, sign, e.ci(0))
    if odd:
        flip = b.xor(flip, b.and_(b.bitcast(x, e.it), sign))
    out = b.bitcast(b.xor(b.bitcast(b.fptrunc(out, e.t), e.it), flip), e.t)
    bad = b.fcmp_unordered("==", e.intrinsic("llvm.fabs", x), e.c(float("inf")))
    return b.select(bad, e.c(float("nan")), out)


def _sin_cos(e: _Emit, x: ir.Value, cosine: bool) -> ir.Value:
    """sin(x), or cos(x) = sin(x + pi/2): the same code one quadrant on."""
    b = e.b
    r, q = _trig_reduce(e, e.intrinsic("llvm.fabs", x))
    if cosine:
        q = b.add(q, e.ci(1))
    s, c = _sin_cos_f64(e.like(ir.DoubleType()), r)
    odd_q = b.icmp_signed("!=", b.and_(q, e.ci(1)), e.ci(0))
    negate = b.icmp_signed("!=", b.and_(q, e.ci(2)), e.ci(0))
    return _trig_finish(e, x, b.select(odd_q, c, s), negate, odd=not cosine)


def _sin_body(e: _Emit, x: ir.Value) -> ir.Value:
    return _sin_cos(e, x, cosine=False)


def _cos_body(e: _Emit, x: ir.Value) -> ir.Value:
    return _sin_cos(e, x, cosine=True)


def _tan_body(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    r, q = _trig_reduce(e, e.intrinsic("llvm.fabs", x))
    s, c = _sin_cos_f64(e.like(ir.DoubleType()), r)
    odd_q = b.icmp_signed("!=", b.and_(q, e.ci(1)), e.ci(0))
    # tan(r + pi/2) = -cos(r) / sin(r); sin(r) != 0 there (r = 0 only for x = 0)
    out = b.fdiv(b.select(odd_q, c, s), b.select(odd_q, s, c))
    return _trig_finish(e, x, out, odd_q, odd=True)


def _log_base_body(e: _Emit, x: ir.Value, of_e: tuple[float, float],
                   of_2: tuple[float, float]) -> ir.Value:
    """``log_b(x) = ef log_b(2) + log(1 + f) log_b(e)``, with ``log_b(e) = of_e[0] + of_e[1]``
    and ``log_b(2) = of_2[0] + of_2[1]`` (``ef * of_2[0]`` exact)."""
    b = e.b
    ef, f, z, y = _log_reduce(e, x)
    y = e.fma(z, e.c(-0.5), y)  # log(1 + f) = f + y, |y| < |f| / 2
    a = b.fmul(ef, e.c(of_2[0]))
    p = b.fmul(f, e.c(of_e[0]))
    p_err = e.fma_exact(f, e.c(of_e[0]), b.fneg(p))  # f * hi - p, exact
    s = b.fadd(a, p)  # |a| >= |p| or a = 0: the rounding error below is exact
    s_err = b.fadd(b.fsub(a, s), p)
    tail = b.fadd(b.fadd(s_err, p_err), b.fmul(ef, e.c(of_2[1])))
    tail = e.fma(y, e.c(of_e[0]), e.fma(f, e.c(of_e[1]), tail))
    return _log_special(e, x, b.fadd(s, tail))


def _log2_body(e: _Emit, x: ir.Value) -> ir.Value:
    return _log_base_body(e, x, (_LOG2E_HI, _LOG2E_LO), (1.0, 0.0))


def _log10_body(e: _Emit, x: ir.Value) -> ir.Value:
    return _log_base_body(e, x, (_LOG10E_HI, _LOG10E_LO), (_LOG10_2_HI, _LOG10_2_LO))


def _log2_f64(e: _Emit, ax: ir.Value) -> ir.Value:
    """``log2(ax)`` in float64 (``e`` over float64) for a positive finite ``ax`` that is a
    float32 value (so normal in float64); 0 and inf are the caller's."""
    b = e.b
    bits = b.bitcast(ax, e.it)
    ex = b.sub(b.and_(b.lshr(bits, e.ci(52)), e.ci(0x7FF)), e.ci(1022))
    m = b.bitcast(b.or_(b.and_(bits, e.ci(0x800FFFFFFFFFFFFF)), e.ci(0x3FE0000000000000)),
                  e.t)  # [0.5, 1)
    small = b.fcmp_ordered("<", m, e.c(_SQRTHF))
    ex = b.select(small, b.sub(ex, e.ci(1)), ex)
    f = b.select(small, b.fsub(b.fadd(m, m), e.c(1.0)), b.fsub(m, e.c(1.0)))
    s = b.fdiv(f, b.fadd(f, e.c(2.0)))
    ln = b.fmul(b.fadd(s, s), e.horner(b.fmul(s, s), _ATANH_SERIES))
    return e.fma(ln, e.c(_LOG2E_F64), b.sitofp(ex, e.t))


def _pow_body(e: _Emit, x: ir.Value, y: ir.Value) -> ir.Value:
    """C ``powf``: ``2**(y log2|x|)`` with the logarithm and the product in float64, so
    the float32 result is rounded once from a value good to about 2^-45."""
    b = e.b
    e64 = e.like(ir.DoubleType())
    inf = e.c(float("inf"))
    ax = e.intrinsic("llvm.fabs", x)
    ay = e.intrinsic("llvm.fabs", y)
    axd = b.fpext(ax, e64.t)
    lg = _log2_f64(e64, axd)
    lg = b.select(b.fcmp_ordered("==", ax, e.c(0.0)), e64.c(float("-inf")), lg)
    lg = b.select(b.fcmp_ordered("==", ax, inf), e64.c(float("inf")), lg)
    w = b.fmul(b.fpext(y, e64.t), lg)
    # beyond +-400 the result is inf or 0 anyway; minnum/maxnum drop nan (put back below)
    w = e64.intrinsic("llvm.maxnum", e64.intrinsic("llvm.minnum", w, e64.c(400.0)),
                      e64.c(-400.0))
    n = e64.intrinsic("llvm.roundeven", w)
    t = b.fsub(w, n)  # exact, |t| <= 1/2
    p = b.fmul(e64.horner(t, _EXP2_SERIES), e64.pow2(b.fptosi(n, e64.it)))
    out = b.fptrunc(p, e.t)  # the only rounding to float32: subnormals, overflow to inf
    # y integer (inf counts as an even one), odd, and the sign that follows from x
    y_int = b.fcmp_ordered("==", e.intrinsic("llvm.trunc", y), y)
    half = b.fmul(y, e.c(0.5))
    y_odd = b.and_(y_int, b.fcmp_ordered("!=", e.intrinsic("llvm.trunc", half), half))
    out = b.select(y_odd, e.intrinsic("llvm.copysign", out, x), out)
    neg_finite = b.and_(b.fcmp_ordered("<", x, e.c(0.0)),
                        b.fcmp_ordered(">", x, e.c(float("-inf"))))
    out = b.select(b.and_(neg_finite, b.not_(y_int)), e.c(float("nan")), out)
    out = b.select(b.fcmp_unordered("uno", x, y), e.c(float("nan")), out)
    # pow(x, ±0) = 1 and pow(1, y) = 1 even for nan; pow(-1, ±inf) = 1
    one = b.or_(b.fcmp_ordered("==", y, e.c(0.0)), b.fcmp_ordered("==", x, e.c(1.0)))
    one = b.or_(one, b.and_(b.fcmp_ordered("==", ax, e.c(1.0)), b.fcmp_ordered("==", ay, inf)))
    return b.select(one, e.c(1.0), out)


def _fmod_body(e: _Emit, a: ir.Value, bv: ir.Value) -> ir.Value:
    """C ``fmodf``, exact: with ``|a| = A 2^ea``, ``|b| = B 2^eb`` (24-bit integers ``A``,
    ``B``; ``ea >= eb`` whenever ``|a| >= |b|``), ``fmod = ((A 2^(ea-eb)) mod B) 2^eb``, the
    power of two brought in 28 bits at a time by exact float64 integer steps."""
    b = e.b
    e64 = e.like(ir.DoubleType())

    def split(v: ir.Value) -> tuple[ir.Value, ir.Value]:
        bits = b.and_(b.bitcast(v, e.it), e.ci(0x7FFFFFFF))
        field = b.lshr(bits, e.ci(23))
        man = b.and_(bits, e.ci(0x7FFFFF))
        normal = b.icmp_signed("!=", field, e.ci(0))
        sig = b.select(normal, b.or_(man, e.ci(0x800000)), man)
        ex = b.select(normal, b.sub(field, e.ci(150)), e.ci(-149))
        return b.sitofp(sig, e64.t), ex

    big_a, ea = split(a)
    big_b, eb = split(bv)
    inv_b = b.fdiv(e64.c(1.0), big_b)

    def mod_b(v: ir.Value) -> ir.Value:
        # v < 2^52 an integer: the quotient estimate is off by at most one either way
        q = e64.intrinsic("llvm.trunc", b.fmul(v, inv_b))
        r = b.fsub(v, b.fmul(q, big_b))  # exact: integers below 2^53
        r = b.select(b.fcmp_ordered("<", r, e64.c(0.0)), b.fadd(r, big_b), r)
        return b.select(b.fcmp_ordered(">=", r, big_b), b.fsub(r, big_b), r)

    d = b.sub(ea, eb)
    rem = mod_b(big_a)
    for step in range(_FMOD_STEPS):
        k = e.clamp_int(b.sub(d, e.ci(_FMOD_CHUNK * step)), 0, _FMOD_CHUNK)
        rem = mod_b(b.fmul(rem, e64.pow2(b.sext(k, e64.it))))
    out = b.fptrunc(b.fmul(rem, e64.pow2(b.sext(eb, e64.it))), e.t)  # exact
    out = e.intrinsic("llvm.copysign", out, a)
    # |a| < |b| (b = inf included): a itself; fmod(x, 0), fmod(inf, y), nan: nan
    aa = e.intrinsic("llvm.fabs", a)
    ab = e.intrinsic("llvm.fabs", bv)
    out = b.select(b.fcmp_ordered("<", aa, ab), a, out)
    bad = b.or_(b.fcmp_unordered("==", bv, e.c(0.0)),
                b.fcmp_unordered("==", aa, e.c(float("inf"))))
    return b.select(bad, e.c(float("nan")), out)


FALLBACK: dict[str, Callable[[_Emit, ir.Value], ir.Value]] = {
    "sin": _sin_body,
    "cos": _cos_body,
    "tan": _tan_body,
    "log2": _log2_body,
    "log10": _log10_body,
}

FALLBACK_BINARY: dict[str, Callable[[_Emit, ir.Value, ir.Value], ir.Value]] = {
    "pow": _pow_body,
    "fmod": _fmod_body,
}


def _define(module: ir.Module, op: str, t: ir.Type, arity: int,
            body: Callable[..., ir.Value]) -> ir.Function:
    lanes = t.count if isinstance(t, ir.VectorType) else 0
    name = f"tex.{op}.v{lanes}f32" if lanes else f"tex.{op}.f32"
    fn = module.globals.get(name)
    if fn is not None:
        return fn  # type: ignore[no-any-return]
    fn = ir.Function(module, ir.FunctionType(t, [t] * arity), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(body(_Emit(b, t), *fn.args))
    return fn


def vecmath_function(module: ir.Module, op: str, t: ir.Type) -> ir.Function:
    """``@tex.<op>.<type>`` in ``module`` (emitted on first use) for float32 ``t``."""
    return _define(module, op, t, 1, VECMATH[op])


def fallback_function(module: ir.Module, op: str, t: ir.Type) -> ir.Function:
    """``@tex.<op>.<type>`` for an op of ``FALLBACK`` (one argument) or
    ``FALLBACK_BINARY`` (two), float32 ``t``."""
    if op in FALLBACK:
        return _define(module, op, t, 1, FALLBACK[op])
    return _define(module, op, t, 2, FALLBACK_BINARY[op])
