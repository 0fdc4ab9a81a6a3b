"""Malformed uses of the public API (API.md section 1, "Semantics fixed here").

Every user mistake raises ``TypeError`` or ``ValueError`` (or a subclass) whose message
names the culprit: the tensor, stage or argument, the bad value, or what was expected.
Nothing internal may leak out (``AttributeError``, ``KeyError``, ``IndexError``,
``AssertionError``, ``RecursionError``, ``ZeroDivisionError``, a bare ``RuntimeError``,
or an exception class of sympy, llvmlite or NumPy). A schedule primitive's refusal is a
``tex.error.ScheduleError``: a ``ValueError`` that is also TVM's ``TVMError`` (a
``RuntimeError``), so TVM's ``pytest.raises(RuntimeError)`` holds too.

The corpus is a table per area: ``(id, thunk, exception type, regex)``. Each thunk builds
what it needs from the tiny tensors below; built functions are compiled once, on first use.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tex
from tex import topi
from tex.topi import nn

Case = tuple[str, Callable[[], Any], type[Exception], str]

# exception types that mean "tex broke", whatever the message says
INTERNAL_ERRORS = (AttributeError, KeyError, IndexError, AssertionError, RecursionError,
                   ZeroDivisionError, NotImplementedError, RuntimeError)
FOREIGN_MODULES = ("sympy", "llvmlite", "numpy", "networkx", "torch")


def raises_user_error(thunk: Callable[[], Any], exc: type[Exception], match: str) -> Exception:
    """Run ``thunk``; it must raise ``exc`` matching ``match``, and the error must be a
    TypeError/ValueError of Python or of tex, not an internal or third-party one."""
    with pytest.raises(exc, match=match) as info:
        thunk()
    err = info.value
    assert isinstance(err, (TypeError, ValueError)), f"{type(err).__name__} is no user error"
    tvm_style = isinstance(err, tex.error.TVMError) and isinstance(err, ValueError)
    assert tvm_style or not isinstance(err, INTERNAL_ERRORS), \
        f"internal {type(err).__name__} leaked: {err}"
    module = type(err).__module__.split(".")[0]
    assert module in ("builtins", "tex"), f"{type(err).__module__}.{type(err).__name__} leaked"
    return err


def _ids(cases: list[Case]) -> list[str]:
    return [c[0] for c in cases]


# --------------------------------------------------------------------------------------
# tiny tensors shared by the cases (building them compiles nothing)
# --------------------------------------------------------------------------------------

A = tex.placeholder((2, 3), name="A")
B = tex.placeholder((4,), name="B")
M = tex.placeholder((3, 4), name="M")
N = tex.placeholder((5, 2), name="N")
I = tex.placeholder((3,), dtype="int32", name="I")  # noqa: E741
F = tex.placeholder((3,), name="F")
S0 = tex.placeholder((), name="S0")
D = tex.placeholder((1, 3, 5, 5), name="D")
K1 = tex.placeholder((2, 1, 3, 3), name="K1")
K4 = tex.placeholder((2, 4, 3, 3), name="K4")
k = tex.reduce_axis((0, 3), name="k")

# a small graph for schedules, lowering and building: C = 2A' + B', R = sum_j C
X = tex.placeholder((4, 8), name="X")
Y = tex.placeholder((4, 8), name="Y")
C = tex.compute((4, 8), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="C")
kr = tex.reduce_axis((0, 8), name="kr")
R = tex.compute((4,), lambda i: tex.sum(C[i, kr], axis=kr), name="R")
kb = tex.reduce_axis((0, 5), name="kb")
E = tex.compute((4, 8), lambda i, j: X[i, j] + 1.0, name="E")  # not read by R
nvar = tex.var("n")
SV = tex.compute((4,), lambda i: X[i, 0] * nvar.astype("float32"), name="SV")

# a differentiable graph: Q = A @ M, L = sum(Q)
kq = tex.reduce_axis((0, 3), name="kq")
Q = tex.compute((2, 4), lambda i, j: tex.sum(A[i, kq] * M[kq, j], axis=kq), name="Q")
L = topi.sum(Q)
IL = topi.sum(I)  # an integer output


def sched() -> tex.schedule.Schedule:
    return tex.create_schedule(R.op)


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


@functools.cache
def built() -> Any:
    """f(X, Y, out C)."""
    return tex.build(tex.create_schedule(C.op), [X, Y, C], name="addmul")


@functools.cache
def built_scalar() -> Any:
    """g(X, n: int32, out SV)."""
    return tex.build(tex.create_schedule(SV.op), [X, nvar, SV], name="scaled")


@functools.cache
def program() -> Any:
    return tex.autodiff.grad_program(L, wrt=[A, M], tapes="all")


@functools.cache
def tape() -> dict[str, np.ndarray]:
    return program().forward({A: f32(2, 3), M: f32(3, 4)})[1]


def myreducer(fcombine: Callable[..., Any], fidentity: Callable[..., Any]) -> Any:
    return tex.comm_reducer(fcombine, fidentity, name="myred")


def argmax_like() -> Any:
    return tex.comm_reducer(lambda x, y: (x[0] + y[0],),
                            lambda t0, t1: (tex.const(0, t0), tex.const(0, t1)), name="pair")


# --------------------------------------------------------------------------------------
# builders: placeholder, compute, reduce_axis, indexing, reducers, expressions
# --------------------------------------------------------------------------------------

BUILDERS: list[Case] = [
    ("placeholder-shape-str", lambda: tex.placeholder("ab", name="P"),
     TypeError, r"placeholder 'P': shape must be a tuple of ints, got str"),
    ("placeholder-shape-negative", lambda: tex.placeholder((2, -1), name="P"),
     ValueError, r"placeholder 'P': dimension 1 of shape \(2, -1\) is -1"),
    # (an integral float such as 2.0 is an int extent, as TVM's tutorials write N / bn)
    ("placeholder-shape-float", lambda: tex.placeholder((2.5,), name="P"),
     TypeError, r"placeholder 'P': dimension 0 .* is float 2\.5; expected an int"),
    ("placeholder-shape-beyond-int32", lambda: tex.placeholder((2**31,), name="P"),
     ValueError, r"placeholder 'P': dimension 0 .* 2147483648; extents must fit in int32"),
    ("placeholder-dtype-unknown", lambda: tex.placeholder((2,), dtype="float13", name="P"),
     ValueError, r"placeholder 'P': unknown dtype 'float13'"),
    ("placeholder-dtype-none", lambda: tex.placeholder((2,), dtype=None, name="P"),
     TypeError, r"placeholder 'P': expected a dtype name .* got None"),
    ("placeholder-dtype-int", lambda: tex.placeholder((2,), dtype=5, name="P"),
     TypeError, r"placeholder 'P': expected a dtype name such as 'float32', got 5"),
    ("placeholder-name-int", lambda: tex.placeholder((2,), name=3),
     TypeError, r"placeholder: name must be a non-empty string, got 3"),
    ("compute-arity", lambda: tex.compute((2, 3), lambda i: A[i, 0], name="T"),
     ValueError, r"compute 'T': fcompute takes 1 index argument but shape \(2, 3\) has 2"),
    ("compute-shape-str", lambda: tex.compute("x", lambda i: B[i], name="T"),
     TypeError, r"compute 'T': shape must be a tuple of ints"),
    ("compute-shape-zero", lambda: tex.compute((0,), lambda i: B[i], name="T"),
     ValueError, r"compute 'T': dimension 0 of shape \(0,\) is 0"),
    ("compute-returns-str", lambda: tex.compute((2,), lambda i: "x", name="T"),
     TypeError, r"compute 'T': fcompute result: expected a tex expression .* str 'x'"),
    ("compute-returns-tensor", lambda: tex.compute((2,), lambda i: A, name="T"),
     TypeError, r"compute 'T': fcompute returned the tensor 'A'"),
    ("compute-not-callable", lambda: tex.compute((2,), 3, name="T"),
     TypeError, r"compute 'T': fcompute must be callable, got int"),
    ("compute-empty-tuple", lambda: tex.compute((2,), lambda i: (), name="T"),
     ValueError, r"compute 'T': fcompute returned an empty tuple"),
    ("compute-reduction-nested",
     lambda: tex.compute((2,), lambda i: tex.sum(A[i, k], axis=k) + 1.0, name="T"),
     ValueError, r"compute 'T': a reduction \(sum over k\) is nested inside an expression"),
    ("compute-reduce-axis-outside",
     lambda: tex.compute((2,), lambda i: A[i, k], name="T"),
     ValueError, r"compute 'T': reduce axis 'k' is used outside a reduction"),
    ("reduce-axis-reversed", lambda: tex.reduce_axis((3, 1), name="r"),
     ValueError, r"reduce_axis 'r': empty range \[3, 1\)"),
    ("reduce-axis-float", lambda: tex.reduce_axis((0, 2.5), name="r"),
     TypeError, r"reduce_axis 'r': bounds must be ints, got \(0, 2\.5\)"),
    ("reduce-axis-not-pair", lambda: tex.reduce_axis(5, name="r"),
     TypeError, r"reduce_axis 'r': expected a \(lo, hi\) pair, got 5"),
    ("reduce-axis-beyond-int32", lambda: tex.reduce_axis((0, 2**40), name="r"),
     ValueError, r"reduce_axis 'r': range \[0, 1099511627776\) does not fit in int32"),
    ("index-too-many", lambda: tex.compute((2,), lambda i: A[i, 0, 0], name="T"),
     ValueError, r"tensor 'A' has 2 dimensions \(2, 3\) but was indexed with 3 indices"),
    ("index-float", lambda: tex.compute((2,), lambda i: B[1.5], name="T"),
     TypeError, r"tensor 'B': index 1\.5 in dimension 0 is a float"),
    ("index-float-expr", lambda: tex.compute((2,), lambda i: B[i * 1.5], name="T"),
     TypeError, r"tensor 'B': index .* has dtype float32; indices must be integer"),
    ("index-out-of-bounds", lambda: tex.compute((2,), lambda i: B[7], name="T"),
     ValueError, r"tensor 'B': constant index 7 is out of bounds for dimension 0 of extent 4"),
    ("index-slice", lambda: B[0:2],
     TypeError, r"tensor 'B': slices are not supported"),
    ("reducer-no-axis", lambda: tex.max(A[0, 0]),
     ValueError, r"tex\.max: give axis="),
    ("reducer-axis-list-with-int",
     lambda: tex.compute((2,), lambda i: tex.sum(A[i, k], axis=[k, 3]), name="T"),
     TypeError, r"tex\.sum: axis must be a tex\.reduce_axis IterVar, got int 3"),
    ("reducer-data-axis",
     lambda: tex.compute((2,), lambda i: tex.sum(A[i, 0], axis=E.op.axis[0]), name="T"),
     ValueError, r"tex\.sum: 'i' is a data axis of a compute, not a reduce axis"),
    ("reducer-axis-twice",
     lambda: tex.compute((2,), lambda i: tex.sum(A[i, k], axis=[k, k]), name="T"),
     ValueError, r"compute 'T': reduce axis 'k' is listed twice"),
    ("reducer-where-not-bool",
     lambda: tex.compute((2,), lambda i: tex.sum(A[i, k], axis=k, where=A[i, k]), name="T"),
     TypeError, r"tex\.sum: where=A\[i, k\] must be a boolean condition, got float32"),
    ("reducer-of-tensor", lambda: tex.sum(A, axis=k),
     TypeError, r"tex\.sum: expected an element expression .* got the tensor 'A'"),
    ("comm-reducer-not-callable", lambda: tex.comm_reducer(3, 4),
     TypeError, r"comm_reducer: fcombine and fidentity must be callables"),
    ("comm-reducer-fcombine-arity",
     lambda: tex.compute((2,), lambda i: myreducer(lambda a: a, lambda t: tex.const(0, t))(
         A[i, k], axis=k), name="T"),
     TypeError, r"comm_reducer 'myred': fcombine must take two arguments \(x, y\)"),
    ("comm-reducer-fidentity-arity",
     lambda: tex.compute((2,), lambda i: myreducer(lambda a, b: a + b, lambda: 0.0)(
         A[i, k], axis=k), name="T"),
     TypeError, r"comm_reducer 'myred': fidentity must take 1 dtype name"),
    ("comm-reducer-slot-count",
     lambda: tex.compute((2,), lambda i: argmax_like()((A[i, k], A[i, k]), axis=k), name="T"),
     ValueError, r"comm_reducer 'pair': fcombine returned 1 values for 2 slots"),
    ("if-then-else-float-condition",
     lambda: tex.compute((2,), lambda i: tex.if_then_else(A[i, 0], 1.0, 2.0), name="T"),
     TypeError, r"if_then_else: condition A\[i, 0\] must be boolean, got float32"),
    ("if-then-else-tensor-condition", lambda: tex.if_then_else(A, 1.0, 2.0),
     TypeError, r"tensor 'A' was used where a scalar expression is expected"),
    ("astype-unknown", lambda: A[0, 0].astype("float7"),
     ValueError, r"astype: unknown dtype 'float7'"),
    ("astype-none", lambda: A[0, 0].astype(None),
     TypeError, r"astype: expected a dtype name such as 'float32', got None"),
    ("const-overflow", lambda: tex.const(300, "int8"),
     ValueError, r"constant 300 does not fit in int8"),
    ("const-fraction-for-int", lambda: tex.const(1.5, "int32"),
     ValueError, r"const: 1\.5 is not an integer"),
    ("intrinsic-of-tensor", lambda: tex.exp(A),
     TypeError, r"use topi\.exp on the tensor 'A'"),
    ("and-of-float", lambda: (A[0, 0] > 0) & A[0, 1],
     TypeError, r"'and' needs boolean operands, but the right operand A\[0, 1\] is float32"),
    ("all-of-float", lambda: tex.all(A[0, 0], A[0, 1] > 0),
     TypeError, r"tex\.all: condition A\[0, 0\] is float32, expected bool"),
    ("expr-as-python-bool", lambda: bool(A[0, 0] > 0),
     ValueError, r"cannot use the expression 'A\[0, 0\] > 0\.0' as a Python bool"),
    ("expr-plus-str", lambda: A[0, 0] + "a",
     TypeError, r"add: expected a tex expression or a Python number, got str 'a'"),
    ("tensor-plus-ndarray", lambda: A + np.ones(3),
     TypeError, r"topi\.add: argument 'b' must be a tex Tensor or a scalar"),
    ("tensor-iterated", lambda: list(B),
     TypeError, r"tensor 'B' is not iterable"),
    ("graph-of-int", lambda: tex.graph(3),
     TypeError, r"graph: expected Tensor arguments, got int 3"),
]


# --------------------------------------------------------------------------------------
# topi
# --------------------------------------------------------------------------------------

TOPI: list[Case] = [
    ("add-no-broadcast", lambda: topi.add(A, B),
     ValueError, r"topi\.add: shapes \(2, 3\) and \(4,\) do not broadcast"),
    ("multiply-str", lambda: topi.multiply(A, "x"),
     TypeError, r"topi\.multiply: argument 'b' must be a tex Tensor or a scalar"),
    ("sum-axis-out-of-range", lambda: topi.sum(A, axis=2),
     ValueError, r"topi\.sum: axis 2 is out of range for a tensor with 2 dimensions"),
    ("sum-axis-float", lambda: topi.sum(A, axis=1.0),
     TypeError, r"topi\.sum: axis must be an int, got float 1\.0"),
    ("sum-axis-twice", lambda: topi.sum(A, axis=(1, -1)),
     ValueError, r"topi\.sum: axis \(1, -1\) names an axis twice"),
    ("sum-keepdims-str", lambda: topi.sum(A, axis=1, keepdims="yes"),
     TypeError, r"topi\.sum: keepdims must be a bool, got str 'yes'"),
    ("sum-not-tensor", lambda: topi.sum(3),
     TypeError, r"topi\.sum: argument 'x' must be a tex Tensor, got int 3"),
    ("softmax-axis", lambda: nn.softmax(A, axis=2),
     ValueError, r"topi\.nn\.softmax: axis 2 is out of range"),
    ("softmax-integer", lambda: nn.softmax(I),
     ValueError, r"topi\.nn\.softmax: x 'I' has dtype int32; expected a float dtype"),
    ("concatenate-axis", lambda: topi.concatenate([A, A], axis=2),
     ValueError, r"topi\.concatenate: axis 2 is out of range"),
    ("concatenate-shapes", lambda: topi.concatenate([A, M], axis=0),
     ValueError, r"topi\.concatenate: shapes \(2, 3\), \(3, 4\) differ outside axis 0"),
    ("concatenate-not-list", lambda: topi.concatenate(A, axis=0),
     TypeError, r"topi\.concatenate: tensors must be a list or tuple of Tensors"),
    ("concatenate-non-tensor", lambda: topi.concatenate([A, 3], axis=0),
     TypeError, r"topi\.concatenate: argument 'tensors\[1\]' must be a tex Tensor"),
    ("split-uneven", lambda: topi.split(A, 2, axis=1),
     ValueError, r"topi\.split: 2 sections do not divide axis 1 of 'A'"),
    ("split-axis", lambda: topi.split(A, 1, axis=3),
     ValueError, r"topi\.split: axis 3 is out of range"),
    ("split-points-decreasing", lambda: topi.split(A, [2, 1], axis=1),
     ValueError, r"topi\.split: split points \[2, 1\] must increase strictly"),
    ("transpose-not-permutation", lambda: topi.transpose(A, (0, 0)),
     ValueError, r"topi\.transpose: axes \(0, 0\) are not a permutation of the 2 axes of 'A'"),
    ("transpose-axis-out-of-range", lambda: topi.transpose(A, (0, 2)),
     ValueError, r"topi\.transpose: axis 2 is out of range"),
    ("reshape-size", lambda: topi.reshape(A, (4, 2)),
     ValueError, r"topi\.reshape: cannot reshape 'A' of shape \(2, 3\) \(6 elements\) into "
                 r"\(4, 2\)"),
    ("reshape-two-inferred", lambda: topi.reshape(A, (-1, -1)),
     ValueError, r"topi\.reshape: newshape \(-1, -1\) has more than one -1"),
    ("reshape-float", lambda: topi.reshape(A, (2.0, 3)),
     TypeError, r"topi\.reshape: newshape must be an int or a sequence of ints"),
    ("broadcast-to", lambda: topi.broadcast_to(A, (3, 3)),
     ValueError, r"topi\.broadcast_to: shapes \(2, 3\) and \(3, 3\) do not broadcast"),
    ("squeeze-non-unit", lambda: topi.squeeze(A, axis=0),
     ValueError, r"topi\.squeeze: cannot squeeze axis 0 of 'A' .* its extent is 2"),
    ("expand-dims-axis", lambda: topi.expand_dims(A, 4),
     ValueError, r"topi\.expand_dims: axis 4 is out of range"),
    ("conv2d-channels", lambda: nn.conv2d(D, K4, 1, 0),
     ValueError, r"topi\.nn\.conv2d: data has 3 channels but kernel expects 4"),
    ("conv2d-stride-zero", lambda: nn.conv2d(D, K1, 0, 0),
     ValueError, r"topi\.nn\.conv2d: stride must be positive, got \(0, 0\)"),
    ("conv2d-stride-float", lambda: nn.conv2d(D, K1, 1.5, 0),
     TypeError, r"topi\.nn\.conv2d: stride must contain ints, got 1\.5"),
    ("conv2d-padding-negative", lambda: nn.conv2d(D, K1, 1, -1),
     ValueError, r"topi\.nn\.conv2d: padding must be non-negative, got -1"),
    ("conv2d-padding-3-tuple", lambda: nn.conv2d(D, K1, 1, (1, 1, 1)),
     ValueError, r"topi\.nn\.conv2d: padding must be an int, a pair or a 4-tuple"),
    ("conv2d-padding-str", lambda: nn.conv2d(D, K1, 1, "same"),
     ValueError, r"topi\.nn\.conv2d: padding 'same' is not a padding string; use 'SAME'"),
    ("conv2d-padding-float", lambda: nn.conv2d(D, K1, 1, 0.5),
     TypeError, r"topi\.nn\.conv2d: padding must be ints or one of 'SAME', 'VALID', got 0\.5"),
    ("conv2d-layout", lambda: nn.conv2d(D, K1, 1, 0, layout="NCHW8c"),
     ValueError, r"topi\.nn\.conv2d: layout 'NCHW8c' is not supported"),
    ("conv2d-data-rank", lambda: nn.conv2d(A, K1, 1, 0),
     ValueError, r"topi\.nn\.conv2d: data must be 4-D \(N, C, H, W\), got 'A'"),
    ("pool-kernel-zero", lambda: nn.pool(D, (0, 0), (1, 1), (0, 0), "max"),
     ValueError, r"topi\.nn\.pool2d: kernel must be positive, got \(0, 0\)"),
    ("pool-kernel-too-big", lambda: nn.pool(D, (7, 7), (1, 1), (0, 0), "max"),
     ValueError, r"topi\.nn\.pool2d: the height window spans 7 points"),
    ("pool-type", lambda: nn.pool(D, (2, 2), (1, 1), (0, 0), "median"),
     ValueError, r"topi\.nn\.pool2d: pool_type must be 'max' or 'avg', got 'median'"),
    ("pool-ceil-mode-str",
     lambda: nn.pool2d(D, (2, 2), (1, 1), (1, 1), (0, 0), "avg", ceil_mode="no"),
     TypeError, r"topi\.nn\.pool2d: ceil_mode must be a bool, got str 'no'"),
    ("pool-count-include-pad-str",
     lambda: nn.pool2d(D, (2, 2), (1, 1), (1, 1), (0, 0), "avg", count_include_pad="no"),
     TypeError, r"topi\.nn\.pool2d: count_include_pad must be a bool, got str 'no'"),
    ("take-float-indices", lambda: topi.take(A, F),
     TypeError, r"topi\.take: indices must be integers, got dtype float32"),
    ("take-axis", lambda: topi.take(A, I, axis=3),
     ValueError, r"topi\.take: axis 3 is out of range"),
    ("take-list-indices", lambda: topi.take(A, [0, 1]),
     TypeError, r"topi\.take: indices must be an integer Tensor or an integer, got list"),
    ("take-mode", lambda: topi.take(A, I, axis=1, mode="nope"),
     ValueError, r"topi\.take: mode must be one of 'clip', 'wrap', got 'nope'"),
    ("matmul-inner-dim", lambda: topi.matmul(A, N),
     ValueError, r"topi\.matmul: shapes \(2, 3\) and \(5, 2\) do not match"),
    ("matmul-0d", lambda: topi.matmul(S0, A),
     ValueError, r"topi\.matmul: argument 'a' \('S0'\) is 0-d"),
    ("dense-features", lambda: nn.dense(A, tex.placeholder((4, 4), name="W")),
     ValueError, r"topi\.nn\.dense: data has 3 features but weight expects 4"),
    ("dense-bias", lambda: nn.dense(A, tex.placeholder((4, 3), name="W"),
                                    tex.placeholder((5,), name="bias")),
     ValueError, r"topi\.nn\.dense: bias must have shape \(4,\)"),
    ("batch-matmul-transpose-str",
     lambda: nn.batch_matmul(tex.placeholder((2, 2, 3), name="BA"),
                             tex.placeholder((2, 3, 4), name="BB"), transpose_b="no"),
     TypeError, r"topi\.nn\.batch_matmul: transpose_b must be a bool, got str 'no'"),
    ("einsum-operand-count", lambda: topi.einsum("ij,jk->ik", A),
     ValueError, r"topi\.einsum: subscripts 'ij,jk->ik' name 2 operands, 1 were given"),
    ("einsum-extent-mismatch", lambda: topi.einsum("ij,jk->ik", A, N),
     ValueError, r"topi\.einsum: letter 'j' has extents 3 and 5 \(operand 1, 'N'"),
    ("einsum-bad-char", lambda: topi.einsum("i$,jk->ik", A, M),
     ValueError, r"topi\.einsum: subscripts 'i\$,jk->ik' contain '\$'"),
    ("einsum-unknown-output", lambda: topi.einsum("ij->iz", A),
     ValueError, r"topi\.einsum: output subscript 'z' of 'ij->iz' does not appear"),
    ("einsum-rank", lambda: topi.einsum("ijk->i", A),
     ValueError, r"topi\.einsum: term 'ijk' has 3 letters but operand 0 \('A'\) has 2"),
    ("einsum-not-str", lambda: topi.einsum(3, A),
     TypeError, r"topi\.einsum: subscripts must be a string"),
    ("tensordot-extent", lambda: topi.tensordot(A, N, 1),
     ValueError, r"topi\.tensordot: axis 1 of a \(shape \(2, 3\)\) and axis 0 of b"),
    ("full-dtype", lambda: topi.full((2,), "float99", 1.0),
     ValueError, r"topi\.full: dtype: unknown dtype 'float99'"),
    ("cast-none", lambda: topi.cast(A, None),
     TypeError, r"topi\.cast: dtype: expected a dtype name such as 'float32', got None"),
    ("pad-width-count", lambda: nn.pad(A, (1,)),
     ValueError, r"topi\.nn\.pad: pad_before has 1 entries but data has 2 dimensions"),
    ("layer-norm-gamma", lambda: nn.layer_norm(A, B, F),
     ValueError, r"topi\.nn\.layer_norm: gamma must have shape \(3,\) .* got 'B'"),
    ("leaky-relu-alpha", lambda: nn.leaky_relu(A, "a"),
     TypeError, r"topi\.nn\.leaky_relu: alpha must be a number, got str 'a'"),
    ("cross-entropy-shapes", lambda: nn.cross_entropy(A, M),
     ValueError, r"topi\.nn\.cross_entropy: predictions \(2, 3\) and targets \(3, 4\)"),
]


# --------------------------------------------------------------------------------------
# differentiate, its hooks, Jacobian, jvp, grad_program
# --------------------------------------------------------------------------------------

def _junk_fdiff(out: Any, inp: Any, head: Any) -> Any:
    return tex.placeholder((1,), name="junk")


AUTODIFF: list[Case] = [
    ("differentiate-output-int", lambda: tex.differentiate(3, [A]),
     TypeError, r"differentiate: output must be a tex Tensor, got int 3"),
    ("differentiate-integer-output", lambda: tex.differentiate(IL, [I]),
     TypeError, r"differentiate: output 'I_red' has dtype int32"),
    ("differentiate-inputs-int", lambda: tex.differentiate(L, 3),
     TypeError, r"differentiate: inputs must be a tex Tensor or a list of them, got int 3"),
    ("differentiate-inputs-item", lambda: tex.differentiate(L, [A, "M"]),
     TypeError, r"differentiate: inputs\[1\] must be a tex Tensor, got str 'M'"),
    ("differentiate-head-shape",
     lambda: tex.differentiate(Q, [A], tex.placeholder((4, 2), name="H")),
     ValueError, r"differentiate: head shape \(4, 2\) must end with the output shape "
                 r"\(2, 4\) of 'Q'"),
    ("differentiate-head-dtype",
     lambda: tex.differentiate(Q, [A], tex.placeholder((2, 4), "int32", name="H")),
     TypeError, r"differentiate: head 'H' has dtype int32; it must be a float tensor"),
    ("differentiate-head-ndarray", lambda: tex.differentiate(Q, [A], np.ones((2, 4))),
     TypeError, r"differentiate: head must be a tex Tensor, got ndarray"),
    ("fdiff-not-callable", lambda: tex.differentiate(L, [A], fdiff=3),
     TypeError, r"differentiate: fdiff must be a callable fdiff\(out, inp, head\), got int"),
    ("fdiff-wrong-shape", lambda: tex.differentiate(L, [A], fdiff=_junk_fdiff),
     ValueError, r"differentiate: fdiff returned shape \(1,\) for the adjoint of 'Q', "
                 r"expected \(2, 4\)"),
    ("fdiff-returns-none", lambda: tex.differentiate(L, [A], fdiff=lambda o, i, h: None),
     TypeError, r"differentiate: fdiff result for 'Q' must be a tex Tensor, got NoneType"),
    ("override-not-mapping", lambda: tex.differentiate(L, [A], override=[1, 2]),
     TypeError, r"differentiate: override must be a dict \{tensor: \(deps, fn\)\}, got list"),
    ("override-key-str",
     lambda: tex.differentiate(L, [A], override={"Q": ([A, M], lambda o, d, h: [])}),
     TypeError, r"differentiate: an override key must be a tex Tensor, got str 'Q'"),
    ("override-entry-int", lambda: tex.differentiate(L, [A], override={Q: 3}),
     TypeError, r"differentiate: override of 'Q' must be \(deps, fn\)"),
    ("override-deps-tensor",
     lambda: tex.differentiate(L, [A], override={Q: (A, lambda o, d, h: [h])}),
     TypeError, r"differentiate: override of 'Q' must be \(deps, fn\) with deps a list"),
    ("override-returns-none",
     lambda: tex.differentiate(L, [A], override={Q: ([A, M], lambda o, d, h: None)}),
     TypeError, r"differentiate: the override of 'Q' must return a list of adjoints"),
    ("override-wrong-count",
     lambda: tex.differentiate(L, [A], override={Q: ([A, M], lambda o, d, h: [h])}),
     ValueError, r"differentiate: the override of 'Q' returned 1 adjoints for 2 dependencies"),
    ("override-wrong-shape",
     lambda: tex.differentiate(L, [A], override={Q: ([A, M], lambda o, d, h: [h, h])}),
     ValueError, r"differentiate: the override of 'Q' returned shape \(2, 4\) for the adjoint "
                 r"of 'A', expected \(2, 3\)"),
    ("jacobian-not-direct-input", lambda: tex.autodiff.Jacobian(Q, F),
     ValueError, r"Jacobian: 'F' is not a direct input of 'Q'"),
    ("building-block-head-shape",
     lambda: tex.autodiff.DiffBuildingBlock(Q, A, tex.placeholder((3,), name="H")),
     ValueError, r"DiffBuildingBlock: head shape \(3,\) must end with the shape \(2, 4\) of 'Q'"),
    ("jvp-tangent-shape",
     lambda: tex.autodiff.jvp(Q, [A], [tex.placeholder((3, 2), name="T")]),
     ValueError, r"jvp: tangent 'T' has shape \(3, 2\), input 'A' has shape \(2, 3\)"),
    ("jvp-tangent-dtype",
     lambda: tex.autodiff.jvp(Q, [A], [tex.placeholder((2, 3), "int32", name="T")]),
     TypeError, r"jvp: tangent 'T' has dtype int32; the tangent of the float input 'A'"),
    ("jvp-count", lambda: tex.autodiff.jvp(Q, [A, M], [tex.placeholder((2, 3), name="T")]),
     ValueError, r"jvp: 2 inputs but 1 tangents"),
    ("jvp-tangent-ndarray", lambda: tex.autodiff.jvp(Q, [A], [np.ones((2, 3))]),
     TypeError, r"jvp: tangents\[0\] must be a Tensor, got ndarray"),
    ("jvp-inputs-none", lambda: tex.autodiff.jvp(Q, None, None),
     TypeError, r"jvp: inputs must be a Tensor or a list of Tensors, got NoneType"),
    ("jvp-integer-output", lambda: tex.autodiff.jvp(IL, [I], [I]),
     TypeError, r"jvp: 'I_red' has dtype int32; only float tensors are differentiable"),
    ("grad-program-tapes-word", lambda: tex.autodiff.grad_program(L, wrt=[A], tapes="some"),
     ValueError, r"grad_program: unknown tapes='some'"),
    ("grad-program-tapes-int", lambda: tex.autodiff.grad_program(L, wrt=[A], tapes=3),
     TypeError, r"grad_program: tapes must be 'auto', 'none', 'all' or a list of tensors"),
    ("grad-program-tapes-name", lambda: tex.autodiff.grad_program(L, wrt=[A], tapes=["Q"]),
     TypeError, r"grad_program: tapes\[0\] must be a Tensor, got str 'Q'"),
    ("grad-program-tapes-placeholder",
     lambda: tex.autodiff.grad_program(L, wrt=[A], tapes=[M]),
     ValueError, r"grad_program: tapes\[0\] 'M' is a placeholder, not an intermediate"),
    ("grad-program-wrt-int", lambda: tex.autodiff.grad_program(L, wrt=[3]),
     TypeError, r"grad_program: wrt\[0\] must be a Tensor, got int 3"),
    ("grad-program-integer-loss", lambda: tex.autodiff.grad_program(IL, wrt=[I]),
     TypeError, r"grad_program: loss 'I_red' has dtype int32"),
    ("forward-missing-input", lambda: program().forward({A: f32(2, 3)}),
     ValueError, r"forward: no data for placeholder\(s\) M"),
    ("forward-wrong-shape", lambda: program().forward({A: f32(2, 3), M: f32(4, 3)}),
     ValueError, r"forward: placeholder 'M' has shape \(4, 3\), expected \(3, 4\)"),
    ("forward-wrong-dtype",
     lambda: program().forward({A: f32(2, 3), M: f32(3, 4).astype(np.float64)}),
     TypeError, r"forward: placeholder 'M' has dtype float64, expected float32"),
    ("forward-feed-list", lambda: program().forward([f32(2, 3), f32(3, 4)]),
     TypeError, r"forward: feed must be a mapping \{placeholder: ndarray\}, got list"),
    ("forward-foreign-key", lambda: program().forward({A: f32(2, 3), M: f32(3, 4), F: f32(3)}),
     ValueError, r"forward: feed key 'F' is not an input of the loss"),
    ("backward-empty-tape", lambda: program().backward({}),
     ValueError, r"backward: the tape has no entry 'A', 'M'"),
    ("backward-tape-list", lambda: program().backward([1]),
     TypeError, r"backward: tape must be the dict returned by forward, got list"),
    ("backward-wrong-tape",
     lambda: program().backward({**tape(), "bogus": np.ones(1)}),
     ValueError, r"backward: unexpected tape entry 'bogus'"),
    ("backward-tape-shape",
     lambda: program().backward({name: np.ones(7, np.float32) for name in tape()}),
     ValueError, r"backward: tape entry 'A' has shape \(7,\), expected \(2, 3\)"),
    ("backward-head-shape", lambda: program().backward(tape(), head=f32(2)),
     ValueError, r"backward: head has shape \(2,\), expected the loss '\w+''s shape \(\)"),
    ("backward-head-str", lambda: program().backward(tape(), head="x"),
     TypeError, r"backward: head has dtype <U1, expected float32"),
]


# --------------------------------------------------------------------------------------
# schedules
# --------------------------------------------------------------------------------------

def _s(action: Callable[[tex.schedule.Schedule], Any]) -> Callable[[], Any]:
    """A thunk applying ``action`` to a fresh schedule of R (reading C)."""
    return lambda: action(sched())


def _split_then_fuse_apart(s: Any) -> Any:
    io, _ = s[C].split(C.op.axis[0], factor=2)
    return s[C].fuse(io, C.op.axis[1])


SCHEDULES: list[Case] = [
    ("split-axis-of-other-stage", _s(lambda s: s[R].split(C.op.axis[0], factor=2)),
     ValueError, r"split on stage 'R': axis 'i' is not an axis of this stage"),
    ("split-factor-zero", _s(lambda s: s[R].split(R.op.axis[0], factor=0)),
     ValueError, r"split of 'i' in stage 'R': factor must be positive, got 0"),
    ("split-nparts-negative", _s(lambda s: s[R].split(R.op.axis[0], nparts=-2)),
     ValueError, r"split of 'i' in stage 'R': nparts must be positive, got -2"),
    ("split-factor-float", _s(lambda s: s[R].split(R.op.axis[0], factor=2.0)),
     TypeError, r"split of 'i' in stage 'R': factor must be a positive int, got float 2\.0"),
    ("split-factor-and-nparts", _s(lambda s: s[R].split(R.op.axis[0], factor=2, nparts=2)),
     ValueError, r"split of 'i' in stage 'R': give exactly one of factor= and nparts="),
    ("split-twice", _s(lambda s: [s[C].split(C.op.axis[0], factor=2),
                                  s[C].split(C.op.axis[0], factor=2)]),
     ValueError, r"split on stage 'C': axis 'i' has already been split or fused"),
    ("reorder-duplicate", _s(lambda s: s[C].reorder(C.op.axis[0], C.op.axis[0])),
     ValueError, r"reorder on stage 'C': an axis appears twice in \(i, i\)"),
    ("reorder-foreign", _s(lambda s: s[R].reorder(C.op.axis[1], R.op.axis[0])),
     ValueError, r"reorder on stage 'R': axis 'j' is not an axis of this stage"),
    ("reorder-str", _s(lambda s: s[C].reorder("i")),
     TypeError, r"reorder on stage 'C': expected an IterVar .* got str 'i'"),
    ("fuse-reversed", _s(lambda s: s[C].fuse(C.op.axis[1], C.op.axis[0])),
     ValueError, r"fuse on stage 'C': axes j, i must be adjacent loops, outer first"),
    ("fuse-non-adjacent", _s(_split_then_fuse_apart),
     ValueError, r"fuse on stage 'C': axes i\.outer, j must be adjacent loops"),
    ("fuse-reduce-with-data", _s(lambda s: s[R].fuse(R.op.axis[0], R.op.reduce_axis[0])),
     ValueError, r"fuse on stage 'R': cannot fuse a reduction axis with a data-parallel axis"),
    ("compute-at-non-consumer",
     lambda: (lambda s: s[E].compute_at(s[R], R.op.axis[0]))(
         tex.create_schedule([R.op, E.op])),
     ValueError, r"compute_at: stage 'R' does not read 'E'"),
    ("compute-at-producer", _s(lambda s: s[R].compute_at(s[C], C.op.axis[0])),
     ValueError, r"compute_at: stage 'C' does not read 'R'"),
    ("compute-at-self", _s(lambda s: s[C].compute_at(s[C], C.op.axis[0])),
     ValueError, r"compute_at: stage 'C' cannot be attached to itself"),
    ("compute-at-tensor", _s(lambda s: s[C].compute_at(R, R.op.axis[0])),
     TypeError, r"compute_at on stage 'C': expected a Stage \(s\[T\]\), got Tensor"),
    ("compute-at-wrong-axis", _s(lambda s: s[C].compute_at(s[R], C.op.axis[0])),
     ValueError, r"compute_at of 'C' on stage 'R': axis 'i' is not an axis of this stage"),
    ("compute-inline-output", _s(lambda s: s[R].compute_inline()),
     ValueError, r"compute_inline: 'R' is an output of the schedule"),
    ("vectorize-reduce-axis", _s(lambda s: s[R].vectorize(R.op.reduce_axis[0])),
     ValueError, r"vectorize on stage 'R': 'kr' is a reduction axis"),
    ("parallel-reduce-axis", _s(lambda s: s[R].parallel(R.op.reduce_axis[0])),
     ValueError, r"parallel on stage 'R': 'kr' is a reduction axis"),
    ("vectorize-parallel-axis", _s(lambda s: [s[C].parallel(C.op.axis[0]),
                                              s[C].vectorize(C.op.axis[0])]),
     ValueError, r"vectorize on stage 'C': axis 'i' is already marked parallel"),
    ("unroll-int", _s(lambda s: s[C].unroll(3)),
     TypeError, r"unroll on stage 'C': expected an IterVar .* got int 3"),
    ("bind-str", _s(lambda s: s[C].bind(C.op.axis[0], "blockIdx.x")),
     TypeError, r"bind on stage 'C': expected tex\.thread_axis\(\.\.\.\), got str"),
    ("bind-on-llvm",
     _s(lambda s: [s[C].bind(C.op.axis[0], tex.thread_axis("blockIdx.x")),
                   tex.build(s, [X, Y, R])]),
     ValueError, r"loop 'i' is bound to blockIdx\.x: build with target='cuda'"),
    ("thread-axis-tag", lambda: tex.thread_axis("warp.x"),
     ValueError, r"thread_axis: unknown tag 'warp\.x'"),
    ("cache-read-scope", _s(lambda s: s.cache_read(X, "nowhere", [C])),
     ValueError, r"cache_read of 'X': unknown scope 'nowhere'; expected one of global"),
    ("cache-read-scope-int", _s(lambda s: s.cache_read(X, 3, [C])),
     TypeError, r"cache_read of 'X': scope must be a string .* got int 3"),
    ("cache-read-readers-none", _s(lambda s: s.cache_read(X, "shared", None)),
     TypeError, r"cache_read of 'X': readers must be a list of the tensors that read it"),
    ("cache-read-non-reader", _s(lambda s: s.cache_read(X, "shared", [R])),
     ValueError, r"cache_read: 'R' does not read 'X'"),
    ("cache-write-scope", _s(lambda s: s.cache_write(R, "nowhere")),
     ValueError, r"cache_write of 'R': unknown scope 'nowhere'"),
    ("cache-write-placeholder", _s(lambda s: s.cache_write(X, "local")),
     ValueError, r"schedule: 'X' is a placeholder \(an input\)"),
    ("set-scope", _s(lambda s: s[C].set_scope("texture")),
     ValueError, r"set_scope on stage 'C': unknown scope 'texture'"),
    ("rfactor-data-axis", _s(lambda s: s.rfactor(R, R.op.axis[0])),
     ValueError, r"rfactor on 'R': 'i' is not a reduction axis"),
    ("rfactor-factor-axis", _s(lambda s: s.rfactor(R, R.op.reduce_axis[0], factor_axis=5)),
     ValueError, r"rfactor on 'R': factor_axis must be an int in \[0, 1\], got 5"),
    ("rfactor-not-reduction", _s(lambda s: s.rfactor(C, C.op.axis[0])),
     ValueError, r"rfactor: 'C' is not a reduction"),
    ("schedule-foreign-tensor", _s(lambda s: s[E]),
     ValueError, r"schedule: 'E' is not part of this schedule"),
    ("schedule-key-str", _s(lambda s: s["C"]),
     TypeError, r"schedule\[\.\.\.\] expects a Tensor or an Operation, got str"),
    ("create-schedule-empty", lambda: tex.create_schedule([]),
     ValueError, r"create_schedule: give at least one output operation"),
    ("auto-schedule-target", lambda: tex.schedule.auto_schedule([R], target="tpu"),
     ValueError, r"auto_schedule: unknown target 'tpu'; known targets: cpu, cuda, llvm"),
]


# --------------------------------------------------------------------------------------
# lower and build
# --------------------------------------------------------------------------------------

LOWER_BUILD: list[Case] = [
    ("lower-missing-input", lambda: tex.lower(sched(), [X, R]),
     ValueError, r"lower: 'C' reads the placeholder 'Y', which is not in args"),
    ("lower-non-tensor-arg", lambda: tex.lower(sched(), [X, Y, "R"]),
     TypeError, r"lower: args\[2\] is str 'R'; expected a Tensor or a tex\.var"),
    ("lower-duplicate-arg", lambda: tex.lower(sched(), [X, Y, R, X]),
     ValueError, r"lower: args\[3\] 'X' appears twice in args"),
    ("lower-args-int", lambda: tex.lower(sched(), 3),
     TypeError, r"lower: args must be a list of tensors .* got int"),
    ("lower-schedule-int", lambda: tex.lower(3, [X, Y, R]),
     TypeError, r"lower: expected a Schedule or a list of Tensors, got int 3"),
    ("lower-name-int", lambda: tex.lower(sched(), [X, Y, R], name=3),
     TypeError, r"lower: name must be a string, got int 3"),
    ("lower-name-not-identifier", lambda: tex.lower(sched(), [X, Y, R], name="a b"),
     ValueError, r"lower: name must be an identifier, got 'a b'"),
    ("lower-loop-var-arg", lambda: tex.lower(sched(), [X, Y, R, R.op.axis[0].var]),
     TypeError, r"lower: args\[3\] 'i' is a loop variable, not a tex\.var"),
    ("lower-free-var-missing", lambda: tex.lower(tex.create_schedule(SV.op), [X, SV]),
     ValueError, r"lower: the computation uses the free variable 'n'"),
    ("lower-foreign-output", lambda: tex.lower(sched(), [X, Y, R, E]),
     ValueError, r"lower: 'E' is in args but not computed by this schedule"),
    ("build-unknown-target", lambda: tex.build(sched(), [X, Y, R], target="tpu"),
     ValueError, r"build: unknown target 'tpu'"),
    ("build-target-int", lambda: tex.build(sched(), [X, Y, R], target=3),
     TypeError, r"build: target must be a string such as 'llvm' or a tex.target.Target, "
                r"got int 3"),
    ("build-cuda-arch", lambda: tex.build(sched(), [X, Y, R], target="cuda -arch=sm_xx"),
     ValueError, r"-arch must be sm_50 or newer .* got 'sm_xx'"),
    ("build-missing-placeholder", lambda: tex.build(sched(), [Y, R]),
     ValueError, r"lower: 'C' reads the placeholder 'X', which is not in args"),
    ("build-duplicate-args", lambda: tex.build(sched(), [X, Y, R, R]),
     ValueError, r"lower: args\[3\] 'R' appears twice in args"),
    ("build-args-int", lambda: tex.build(sched(), 3),
     TypeError, r"lower: args must be a list of tensors .* got int"),
    ("build-args-one-output", lambda: tex.build(sched(), R),
     ValueError, r"lower: 'C' reads the placeholder 'X', which is not in args"),
    ("build-schedule-needs-args", lambda: tex.build(sched()),
     TypeError, r"build: a Schedule needs args"),
    ("build-not-schedule", lambda: tex.build(None),
     TypeError, r"build: expected a Schedule \(with args\) or a Tensor / list of Tensors"),
    ("build-read-out-of-bounds",
     lambda: tex.build(tex.compute((4,), lambda i: B[i + 10], name="T")),
     ValueError, r"lower: 'T' reads 'B' out of bounds in dimension 0: the index i \+ 10 "
                 r"ranges over \[10, 13\] but the valid range is \[0, 3\]"),
    ("build-reduction-out-of-bounds",
     lambda: tex.build(tex.compute((1,), lambda i: tex.sum(F[kb], axis=kb), name="T")),
     ValueError, r"reads 'F' out of bounds in dimension 0: the index kb ranges over \[0, 4\]"),
    ("build-bounds-check-str", lambda: tex.build(sched(), [X, Y, R], bounds_check="no"),
     TypeError, r"build: bounds_check must be a bool \(True or False\), got str 'no'"),
    ("build-compute-at-argument-in-parallel",
     lambda: tex.build(*_parallel_overlap_args()),
     ValueError, r"lower: 'C' is an argument .* inside the parallel loop\(s\) 'i'"),
]


def _parallel_overlap_args() -> tuple[tex.schedule.Schedule, list[tex.Tensor]]:
    """C (an argument) attached in a parallel loop of R, whose iterations overlap."""
    R2 = tex.compute((3, 8), lambda i, j: C[i, j] + C[i + 1, j], name="R2")
    s = tex.create_schedule(R2.op)
    s[R2].parallel(R2.op.axis[0])
    s[C].compute_at(s[R2], R2.op.axis[0])
    return s, [X, Y, C, R2]


# --------------------------------------------------------------------------------------
# calling built functions
# --------------------------------------------------------------------------------------

CALLS: list[Case] = [
    ("call-arg-count", lambda: built()(f32(4, 8), f32(4, 8)),
     TypeError, r"addmul\(\) takes 3 arguments \(X: float32\[4, 8\], .*\) but 2 were given"),
    ("call-shape", lambda: built()(f32(4, 8), f32(4, 8), f32(8, 4)),
     ValueError, r"addmul: argument 2 \('C'\) must have shape \(4, 8\), got \(8, 4\)"),
    ("call-dtype", lambda: built()(f32(4, 8), np.ones((4, 8)), f32(4, 8)),
     TypeError, r"addmul: argument 1 \('Y'\) must have dtype float32, got float64"),
    ("call-non-contiguous", lambda: built()(f32(4, 8), f32(8, 4).T, f32(4, 8)),
     ValueError, r"addmul: argument 1 \('Y'\) must be C-contiguous"),
    ("call-read-only-output",
     lambda: built()(f32(4, 8), f32(4, 8), np.frombuffer(bytes(128), np.float32).reshape(4, 8)),
     ValueError, r"addmul: output argument 2 \('C'\) is read-only"),
    ("call-list", lambda: built()(f32(4, 8).tolist(), f32(4, 8), f32(4, 8)),
     TypeError, r"addmul: argument 0 \('X'\) must be a numpy\.ndarray of float32\[4, 8\], "
                r"got builtins\.list"),
    ("call-python-scalar-buffer", lambda: built()(1.0, f32(4, 8), f32(4, 8)),
     TypeError, r"addmul: argument 0 \('X'\) must be a numpy\.ndarray .* got builtins\.float"),
    ("call-none", lambda: built()(f32(4, 8), None, f32(4, 8)),
     TypeError, r"addmul: argument 1 \('Y'\) must be a numpy\.ndarray"),
    ("call-output-aliases-input",
     lambda: (lambda x: built()(x, f32(4, 8), x))(f32(4, 8)),
     ValueError, r"addmul: output argument 2 \('C'\) shares memory with argument 0 \('X'\)"),
    ("call-scalar-float-for-int", lambda: built_scalar()(f32(4, 8), 2.5, f32(4)),
     TypeError, r"argument 1 \('n'\): expected a Python or NumPy integer for int32"),
    ("call-scalar-out-of-range", lambda: built_scalar()(f32(4, 8), 2**40, f32(4)),
     ValueError, r"argument 1 \('n'\): 1099511627776 does not fit in int32"),
    ("call-scalar-str", lambda: built_scalar()(f32(4, 8), "2", f32(4)),
     TypeError, r"argument 1 \('n'\): expected a Python or NumPy integer .* got str '2'"),
    ("get-source-format", lambda: built().get_source("ptx"),
     ValueError, r"get_source: unknown format 'ptx'"),
    ("benchmark-number-str", lambda: built().benchmark(f32(4, 8), f32(4, 8), f32(4, 8),
                                                       number="x"),
     TypeError, r"benchmark: number must be an int >= 1, got str 'x'"),
    ("benchmark-repeat-zero", lambda: built().benchmark(f32(4, 8), f32(4, 8), f32(4, 8),
                                                        repeat=0),
     ValueError, r"benchmark: number and repeat must be >= 1, got 10, 0"),
]


# --------------------------------------------------------------------------------------
# tex.testing: evaluate and check_grad
# --------------------------------------------------------------------------------------

TESTING: list[Case] = [
    ("evaluate-missing-placeholder", lambda: tex.testing.evaluate(C, {X: f32(4, 8)}),
     ValueError, r"evaluate: no data for placeholder 'Y' \(shape \(4, 8\), dtype float32\)"),
    ("evaluate-wrong-shape",
     lambda: tex.testing.evaluate(C, {X: f32(4, 8), Y: f32(3, 3)}),
     ValueError, r"evaluate: placeholder 'Y' expects shape \(4, 8\), got an array of shape "
                 r"\(3, 3\)"),
    ("evaluate-wrong-dtype",
     lambda: tex.testing.evaluate(C, {X: f32(4, 8), Y: np.ones((4, 8), np.int32)}),
     ValueError, r"evaluate: placeholder 'Y' expects dtype float32, got an array of dtype "
                 r"int32"),
    ("evaluate-non-tensor", lambda: tex.testing.evaluate("C", {X: f32(4, 8), Y: f32(4, 8)}),
     TypeError, r"evaluate: expected a Tensor or a list of Tensors, got str 'C'"),
    ("evaluate-list-item", lambda: tex.testing.evaluate([C, 3], {X: f32(4, 8), Y: f32(4, 8)}),
     TypeError, r"evaluate: tensors\[1\] is int 3; expected a Tensor"),
    ("evaluate-feed-list", lambda: tex.testing.evaluate(C, [f32(4, 8), f32(4, 8)]),
     TypeError, r"evaluate: feed must be a mapping \{placeholder: ndarray\}, got list"),
    ("evaluate-value-list", lambda: tex.testing.evaluate(C, {X: [[1.0]], Y: f32(4, 8)}),
     TypeError, r"evaluate: the data for placeholder 'X' must be a numpy\.ndarray"),
    ("evaluate-computed-key",
     lambda: tex.testing.evaluate(R, {X: f32(4, 8), Y: f32(4, 8), C: f32(4, 8)}),
     TypeError, r"evaluate: feed key 'C' is a computed tensor"),
    ("evaluate-free-var", lambda: tex.testing.evaluate(SV, {X: f32(4, 8)}),
     ValueError, r"evaluate: compute 'SV' uses the free variable 'n'"),
    ("check-grad-out-str", lambda: tex.testing.check_grad("x", [A]),
     TypeError, r"check_grad: out must be a Tensor, got str 'x'"),
    ("check-grad-integer-out", lambda: tex.testing.check_grad(IL, [A]),
     TypeError, r"check_grad: out 'I_red' has dtype int32"),
    ("check-grad-input-int", lambda: tex.testing.check_grad(L, [3]),
     TypeError, r"check_grad: inputs\[0\] is int 3"),
    ("check-grad-input-computed", lambda: tex.testing.check_grad(L, [Q]),
     TypeError, r"check_grad: inputs\[0\] is the computed tensor 'Q'"),
    ("check-grad-data-list", lambda: tex.testing.check_grad(L, [A], data=[f32(2, 3)]),
     TypeError, r"check_grad: data must be a mapping \{placeholder: ndarray\}, got list"),
    ("check-grad-data-shape", lambda: tex.testing.check_grad(L, [A], data={A: f32(3, 3)}),
     ValueError, r"placeholder 'A' expects shape \(2, 3\), got an array of shape \(3, 3\)"),
    ("check-grad-head-shape", lambda: tex.testing.check_grad(Q, [A], head=np.ones(3)),
     ValueError, r"check_grad: head has shape \(3,\) but 'Q' has shape \(2, 4\)"),
    ("check-grad-head-str", lambda: tex.testing.check_grad(Q, [A], head="x"),
     TypeError, r"check_grad: head must be a numpy\.ndarray of shape \(2, 4\), got str"),
    ("check-grad-head-placeholder-without-data",
     lambda: tex.testing.check_grad(Q, [A], head=tex.placeholder((2, 4), name="H")),
     ValueError, r"check_grad: head is the placeholder 'H' but data has no array for it"),
    ("check-grad-head-computed", lambda: tex.testing.check_grad(Q, [A], head=Q),
     TypeError, r"check_grad: head must be a numpy\.ndarray or a placeholder .* tensor 'Q'"),
    ("check-grad-rtol-negative", lambda: tex.testing.check_grad(L, [A], rtol=-1),
     ValueError, r"check_grad: rtol must be finite and >= 0, got -1"),
    ("check-grad-atol-str", lambda: tex.testing.check_grad(L, [A], atol="x"),
     TypeError, r"check_grad: atol must be a number, got str 'x'"),
    ("check-grad-eps-zero", lambda: tex.testing.check_grad(L, [A], eps=0),
     ValueError, r"check_grad: eps must be a positive float, got 0"),
]

# --------------------------------------------------------------------------------------
# issue 20: switches, cycles, dtypes, zero divisors, symbolic shapes, targets, settings
# --------------------------------------------------------------------------------------

def _override_int_adjoints(out: Any, deps: Any, head: Any) -> Any:
    return [tex.compute(d.shape, lambda *i: tex.const(1, "int32"), name="int_adj") for d in deps]


def _fdiff_int(out: Any, inp: Any, head: Any) -> Any:
    shape = head.shape[:head.ndim - out.ndim] + inp.shape
    return tex.compute(shape, lambda *i: tex.const(0, "int32"), name="int_adj")


def _dump_into_a_file() -> Any:
    import tempfile
    with tempfile.NamedTemporaryFile() as f, tex.debug.config(dump="all", dump_dir=f.name):
        return tex.lower(sched(), [X, Y, R])


ISSUE20: list[Case] = [
    ("partial-index-times-float", lambda: tex.compute((2,), lambda i: A[i] * 2.0, name="P"),
     TypeError, r"'A\[i\]' indexes 1 of the 2 dimensions of 'A' \(shape \(2, 3\)\): 'A' "
                r"needs 2 indices"),
    ("partial-index-reflected", lambda: tex.compute((2,), lambda i: 1.0 - A[i], name="P"),
     TypeError, r"'A' needs 2 indices to give a value, e\.g\. A\[i, j1\]"),
    ("partial-index-in-expression", lambda: tex.compute((2,), lambda i: B[i] + A[i], name="P"),
     TypeError, r"'A\[i\]' indexes 1 of the 2 dimensions of 'A'"),
    ("partial-index-in-intrinsic", lambda: tex.compute((2,), lambda i: tex.exp(A[i]), name="P"),
     TypeError, r"'A' needs 2 indices"),
    ("int-floordiv-by-constant-zero", lambda: tex.compute((4,), lambda i: i // 0, name="P"),
     ValueError, r"integer floor division by zero: 'i // 0'"),
    ("int-mod-by-constant-zero", lambda: tex.compute((4,), lambda i: I[i] % 0, name="P"),
     ValueError, r"integer modulo by zero: 'I\[i\] % 0'"),
    ("int-truncdiv-by-constant-zero",
     lambda: tex.compute((4,), lambda i: tex.truncdiv(i, 0), name="P"),
     ValueError, r"integer division by zero: 'i / 0'"),
    ("int-floormod-intrinsic-by-zero",
     lambda: tex.compute((4,), lambda i: tex.floormod(i + 1, tex.const(0, "int64")), name="P"),
     ValueError, r"integer modulo by zero"),
    # symbolic extents are integer expressions over tex.var/tex.size_var, nothing else
    ("placeholder-float-var-shape",
     lambda: tex.placeholder((tex.var("f", "float32"), 2), name="P"),
     TypeError, r"placeholder 'P': dimension 0: extent f has dtype float32; extents are "
                r"integers"),
    ("compute-read-in-shape",
     lambda: tex.compute((A[0, 0].astype("int32"),), lambda i: i, name="P"),
     TypeError, r"compute 'P': dimension 0: extent .* reads A\[0, 0\]"),
    ("reduce-axis-index-var-bound",
     lambda: tex.compute((nvar,), lambda i: tex.sum(
         i, axis=tex.reduce_axis((0, i), name="kv")), name="P"),
     TypeError, r"reduce_axis 'kv': upper bound: extent i uses the index variable 'i'"),
    ("override-cycle-self",
     lambda: tex.differentiate(L, [A], override={Q: ([Q], lambda o, d, h: [h])}),
     ValueError, r"differentiate: override forms a cycle: 'Q' -> 'Q'"),
    ("override-cycle-through-consumer",
     lambda: tex.differentiate(L, [A], override={Q: ([A, L], lambda o, d, h: [h, h])}),
     ValueError, r"differentiate: override forms a cycle: 'Q_red' -> 'Q' -> 'Q_red'"),
    ("override-int-adjoint",
     lambda: tex.differentiate(L, [A], override={Q: ([A, M], _override_int_adjoints)}),
     TypeError, r"the override of 'Q' returned dtype int32 for the adjoint of 'A' \(float32\)"),
    ("override-float16-adjoint",
     lambda: tex.differentiate(L, [A], override={Q: ([A, M], lambda o, d, h: [
         tex.compute(x.shape, lambda *i: tex.const(0.5, "float16"), name="h_adj")
         for x in d])}),
     TypeError, r"the override of 'Q' returned dtype float16 for the adjoint of 'A' "
                r"\(float32\); an adjoint must have the dtype of the head of 'Q', float32"),
    ("fdiff-int-adjoint", lambda: tex.differentiate(L, [A], fdiff=_fdiff_int),
     TypeError, r"differentiate: fdiff returned dtype int32 for the adjoint of 'Q'"),
    ("grad-program-wrt-empty", lambda: tex.autodiff.grad_program(L, wrt=[]),
     ValueError, r"grad_program: wrt is empty; .*'A', 'M'"),
    ("jacobian-optimize-str", lambda: tex.autodiff.Jacobian(Q, A, optimize="no"),
     TypeError, r"Jacobian: optimize must be a bool \(True or False\), got str 'no'"),
    ("simplify-use-sympy-str", lambda: tex.arith.simplify(nvar + 0, use_sympy="no"),
     TypeError, r"simplify: use_sympy must be a bool"),
    ("build-fastmath-str", lambda: tex.build(sched(), [X, Y, R], fastmath="no"),
     TypeError, r"build: fastmath must be a bool \(True or False\), got str 'no'"),
    ("build-fastmath-int", lambda: tex.build([C], fastmath=1),
     TypeError, r"build: fastmath must be a bool \(True or False\), got int 1"),
    ("build-lowered-fastmath-str",
     lambda: tex.build.build_lowered(tex.lower(sched(), [X, Y, R]), fastmath="yes"),
     TypeError, r"build: fastmath must be a bool"),
    ("build-cuda-unknown-arch", lambda: tex.build(sched(), [X, Y, R], target="cuda -arch=sm_1000"),
     ValueError, r"-arch must be sm_50 or newer .*sm_80, .*sm_90a.* got 'sm_1000'"),
    ("build-cuda-unknown-arch-55", lambda: tex.build([C], target="cuda -arch=sm_55"),
     ValueError, r"got 'sm_55'"),
    ("dump-dir-is-a-file", _dump_into_a_file,
     ValueError, r"TEX_DUMP_DIR='.*' is not a directory"),
    ("check-grad-precision-unknown", lambda: tex.testing.check_grad(L, [A], precision="double"),
     ValueError, r"check_grad: precision must be one of 'float64', 'native', got 'double'"),
    ("check-grad-precision-none", lambda: tex.testing.check_grad(L, [A], precision=None),
     ValueError, r"check_grad: precision must be one of .* got None"),
    ("config-num-threads-str", lambda: tex.debug.config(num_threads="4").__enter__(),
     ValueError, r"config: num_threads must be a non-negative int"),
]

CORPUS: list[Case] = [*BUILDERS, *TOPI, *AUTODIFF, *SCHEDULES, *LOWER_BUILD, *CALLS, *TESTING,
                      *ISSUE20]


@pytest.mark.parametrize("name,thunk,exc,match", CORPUS, ids=_ids(CORPUS))
def test_malformed_use_raises_user_error(name: str, thunk: Callable[[], Any],
                                         exc: type[Exception], match: str) -> None:
    raises_user_error(thunk, exc, match)


def test_index_data_out_of_range_raises_out_of_bounds_error() -> None:
    """Bad index data is a user error too: ``OutOfBoundsError``, an ``IndexError`` (which
    the corpus above counts as internal) and a ``ValueError``, naming the culprit."""
    f = tex.build(tex.compute((3,), lambda i: B[I[i]], name="G"))
    with pytest.raises(tex.testing.OutOfBoundsError,
                       match=r"main: index 9 in dimension 0 of 'B' is out of bounds "
                             r"\(valid range \[0, 3\]\)") as info:
        f(f32(4), np.array([0, 9, 1], np.int32), f32(3))
    assert isinstance(info.value, ValueError)


def test_corpus_is_large_and_uniquely_named() -> None:
    names = _ids(CORPUS)
    assert len(names) == len(set(names)), "duplicate case ids"
    assert len(names) >= 70
    for area in (BUILDERS, TOPI, AUTODIFF, SCHEDULES, LOWER_BUILD, CALLS, TESTING):
        assert len(area) >= 8


# --------------------------------------------------------------------------------------
# tex.contrib.torch (optional: skipped only where torch is missing)
# --------------------------------------------------------------------------------------

def _torch_cases() -> list[Case]:
    torch = pytest.importorskip("torch")
    from tex.contrib import torch as tt

    T1 = tex.placeholder((2, 3), name="T1")
    T2 = tex.placeholder((2, 3), name="T2")
    out = topi.add(T1, T2)

    @functools.cache
    def fn() -> Any:
        return tt.function(out, [T1, T2])

    ones = torch.ones(2, 3)
    return [
        ("torch-outputs-str", lambda: tt.function("out", [T1, T2]),
         TypeError, r"function: outputs must be a tex Tensor or a list of them, got str"),
        ("torch-outputs-empty", lambda: tt.function([], [T1, T2]),
         ValueError, r"function: outputs is empty"),
        ("torch-input-computed", lambda: tt.function(out, [T1, out]),
         TypeError, r"function: inputs\[1\] 'T_add' is computed, not a placeholder"),
        ("torch-input-twice", lambda: tt.function(out, [T1, T1, T2]),
         ValueError, r"function: placeholder 'T1' appears twice in inputs"),
        ("torch-input-missing", lambda: tt.function(out, [T1]),
         ValueError, r"function: the outputs depend on placeholder 'T2'"),
        ("torch-call-count", lambda: fn()(ones),
         TypeError, r"T_add\(\) takes 2 tensors .* but 1 were given"),
        ("torch-call-numpy", lambda: fn()(ones.numpy(), ones),
         TypeError, r"T_add: argument 0 \('T1'\) must be a torch\.Tensor"),
        ("torch-call-dtype", lambda: fn()(ones.double(), ones),
         TypeError, r"T_add: argument 0 \('T1'\) must have dtype torch\.float32, got "
                    r"torch\.float64"),
        ("torch-call-shape", lambda: fn()(torch.ones(3, 2), ones),
         ValueError, r"T_add: argument 0 \('T1'\) must have shape \(2, 3\), got \(3, 2\)"),
        ("torch-call-device", lambda: fn()(torch.ones(2, 3, device="meta"), ones),
         ValueError, r"T_add: argument 0 \('T1'\) is on device meta"),
    ]


def test_torch_malformed_uses_raise_user_errors() -> None:
    cases = _torch_cases()
    for name, thunk, exc, match in cases:
        try:
            raises_user_error(thunk, exc, match)
        except BaseException as e:  # name the failing case
            raise AssertionError(f"case {name}: {e}") from e


# --------------------------------------------------------------------------------------
# well-formed neighbours of the cases above still work
# --------------------------------------------------------------------------------------

def test_numpy_integers_are_accepted_where_ints_are() -> None:
    s = sched()
    outer, inner = s[R].split(R.op.axis[0], factor=np.int64(2))
    assert (outer.dom.extent, inner.dom.extent) == (2, 2)
    assert tex.placeholder((np.int64(3),), name="P").shape == (3,)


def test_check_grad_takes_a_placeholder_head_from_data() -> None:
    X64 = tex.placeholder((3,), "float64", name="X64")
    H = tex.placeholder((3,), "float64", name="H")
    sq = tex.compute((3,), lambda i: X64[i] * X64[i], name="sq")
    tex.testing.check_grad(sq, [X64], data={H: np.arange(3.0)}, head=H)
    tex.testing.check_grad(sq, [X64], data={"H": np.arange(3.0)}, head=H)


def test_reducer_binary_form_and_generator_args_still_work() -> None:
    assert str(tex.max(A[0, 0], A[0, 1])) == "max(A[0, 0], A[0, 1])"
    f = tex.build(tex.create_schedule(C.op), (t for t in (X, Y, C)), name="gen_args")
    x, y, c = f32(4, 8), f32(4, 8), np.zeros((4, 8), np.float32)
    f(x, y, c)
    np.testing.assert_array_equal(c, 3 * np.ones((4, 8), np.float32))


def test_one_target_parser_for_every_caller() -> None:
    """build, auto_schedule, legalize and cpu_info read target strings with one parser
    (tex.target.target_kind): the same aliases, the same errors naming the caller."""
    from tex.lower.legalize import legalize
    from tex.schedule import auto_schedule
    from tex.target import cpu_info, target_kind

    A = tex.placeholder((4,), name="A")
    B = tex.compute((4,), lambda i: A[i] * 2.0, name="B")
    func = tex.lower(tex.create_schedule(B.op), [A, B])
    callers = {"build": lambda t: tex.build(B, target=t),
               "auto_schedule": lambda t: auto_schedule(B, t),
               "legalize": lambda t: legalize(func, t), "cpu_info": cpu_info}
    for what, call in callers.items():
        with pytest.raises(ValueError, match=rf"^{what}: unknown target 'tpu -x'; known "
                                             r"targets: cpu, cuda, llvm, nvptx"):
            call("tpu -x")
        with pytest.raises(ValueError, match=r"^target 'cuda -arch=sm_7': -arch must be"):
            call("cuda -arch=sm_7")  # a CUDA target's options are checked by the parser
    assert [target_kind(t, "t") for t in ("llvm", " CPU ", "cuda -arch=sm_80", "nvptx")] == \
        ["llvm", "llvm", "cuda", "cuda"]
    assert legalize(func, "cpu").name == func.name and cpu_info("cpu") == cpu_info("llvm")
    with pytest.raises(TypeError, match="^t: target must be a string such as 'llvm' or a "
                                        "tex.target.Target, got int 3"):
        target_kind(3, "t")
