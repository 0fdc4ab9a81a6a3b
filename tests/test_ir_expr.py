"""Expression nodes: interning, promotion, construction-time folding, bool semantics."""
import math

import numpy as np
import pytest

import tex
from tex.ir import (
    BINARY_OPS,
    COMPARE_OPS,
    UNARY_OPS,
    Binary,
    Cast,
    Compare,
    Const,
    Op,
    Select,
    Unary,
    Var,
)
from tex.ir.printer import CALL_NAMES, INFIX
from tex.ir.semantics import NUMPY_BINARY, NUMPY_UNARY


@pytest.fixture
def v():
    return {"i": tex.var("i"), "j": tex.var("j"), "x": tex.var("x", "float32"),
            "d": tex.var("d", "float64"), "b": tex.var("b", "bool")}


def test_interning_and_identity_hash(v):
    i, x = v["i"], v["x"]
    assert (i + 1) is (i + 1)
    assert (x * 2.0) is (x * 2)
    assert tex.const(1.0) is tex.const(1, "float32")
    assert tex.const(0.0) is not tex.const(-0.0)  # keyed by bit pattern
    assert tex.const(1) is not tex.const(1.0)
    assert tex.var("i") is not i  # variables are unique even with equal names
    table = {i + 1: "a"}
    assert table[i + 1] == "a"
    # TVM's spelling of the same test (ObjectRef.same_as), with constants as operands
    assert (i + 1).same_as(i + 1) and not (i + 1).same_as(i + 2)
    assert tex.const(3).same_as(3) is False and tex.const(3).same_as(tex.const(3))
    assert not tex.var("i").same_as(i)


def test_nodes_are_immutable(v):
    e = v["i"] + 1
    with pytest.raises(AttributeError):
        e.a = v["j"]


@pytest.mark.parametrize("expr,dtype", [
    (lambda v: v["x"] + 1, "float32"),
    (lambda v: v["i"] + 1.5, "float32"),
    (lambda v: v["x"] + v["d"], "float64"),
    (lambda v: v["i"] * 2, "int32"),
    (lambda v: v["b"] + v["b"], "int32"),
    (lambda v: v["i"] < v["j"], "bool"),
    (lambda v: v["i"].astype("int64") + v["i"], "int64"),
    (lambda v: tex.exp(v["i"]), "float32"),
    (lambda v: tex.select(v["b"], v["i"], v["x"]), "float32"),
])
def test_result_dtypes(v, expr, dtype):
    assert expr(v).dtype.name == dtype


def test_scalar_takes_expression_dtype(v):
    e = v["d"] * 2.5
    assert e.b.dtype.name == "float64"
    u8 = tex.var("u", "uint8")
    assert (u8 + 3).dtype.name == "uint8"
    with pytest.raises(ValueError, match="300 does not fit in uint8"):
        u8 + 300


@pytest.mark.parametrize("build,text", [
    (lambda v: v["x"] + 0, "x"),
    (lambda v: 0 + v["x"], "x"),
    (lambda v: v["x"] * 1, "x"),
    (lambda v: v["x"] * 0, "0.0"),
    (lambda v: 0.0 / v["x"], "0.0"),
    (lambda v: v["x"] / 1, "x"),
    (lambda v: v["i"] - v["i"], "0"),
    (lambda v: v["x"] - v["x"], "x - x"),  # not folded for floats (inf - inf is nan)
    (lambda v: (v["i"] + 1) + 2, "i + 3"),
    (lambda v: 1 + v["i"], "i + 1"),
    (lambda v: (v["i"] * 2) * 3, "i * 6"),
    (lambda v: v["i"] % 1, "0"),
    (lambda v: v["i"] // 1, "i"),
    (lambda v: v["x"] ** 1, "x"),
    (lambda v: -(-v["x"]), "x"),  # noqa: B002
    (lambda v: tex.floor(v["i"]), "i"),
    (lambda v: tex.max(v["i"], v["i"]), "i"),
    (lambda v: v["i"] == v["i"], "True"),
    (lambda v: v["i"] < v["i"], "False"),
    (lambda v: 3 < v["i"], "i > 3"),
    (lambda v: ~(v["i"] < 3), "i >= 3"),
    (lambda v: ~~v["b"], "b"),
    (lambda v: v["b"] & True, "b"),
    (lambda v: v["b"] | True, "True"),
    (lambda v: tex.select(True, v["i"], v["j"]), "i"),
    (lambda v: tex.select(v["b"], v["i"], v["i"]), "i"),
    (lambda v: v["i"].astype("int32"), "i"),
    (lambda v: v["i"].astype("int64").astype("int32"), "i"),
    (lambda v: v["i"].astype("int8").astype("int32"), "int32(int8(i))"),
    # the two sides of an if_then_else's adjoint: one select, here folding away
    (lambda v: tex.select(v["i"] <= 0, v["x"], 0.0) + tex.select(v["i"] > 0, v["x"], 0.0),
     "x"),
    (lambda v: tex.select(v["b"], v["x"], 1.0) + tex.select(~v["b"], 2.0, v["x"] * 3.0),
     "select(b, x + x * 3.0, 3.0)"),
    (lambda v: tex.select(v["i"] > 0, v["x"], 1.0) + tex.select(v["i"] > 0, 2.0, v["x"]),
     "select(i > 0, x + 2.0, x + 1.0)"),
    (lambda v: tex.select(v["i"] > 0, v["x"], 1.0) + tex.select(v["i"] > 1, 2.0, v["x"]),
     "select(i > 0, x, 1.0) + select(i > 1, 2.0, x)"),  # other conditions: kept
])
def test_local_rules(v, build, text):
    assert str(build(v)) == text


@pytest.mark.parametrize("build,value", [
    (lambda: tex.const(7) // -2, -4),
    (lambda: tex.const(7) % -2, -1),
    (lambda: tex.const(-7) // 2, -4),
    (lambda: tex.const(-7) % 2, 1),
    (lambda: tex.const(-7) / 2, -3),  # integer / truncates, as in C
    (lambda: tex.const(7) / 2, 3),
    (lambda: tex.const(7.0) / 2, 3.5),
    (lambda: tex.const(2) ** 10, 1024),
    (lambda: tex.exp(tex.const(0.0)), 1.0),
    (lambda: tex.sqrt(4), 2.0),
    (lambda: tex.round(tex.const(2.5)), 2.0),  # half to even
    (lambda: tex.trunc(tex.const(-2.7)), -2.0),
    (lambda: tex.const(2.7).astype("int32"), 2),
    (lambda: tex.const(-2.7).astype("int32"), -2),
    (lambda: tex.const(127, "int8") + 1, -128),  # wraps like the compiled code
    (lambda: tex.max(tex.const(3), 5), 5),
    (lambda: tex.sigmoid(tex.const(0.0)), 0.5),
])
def test_constant_folding(build, value):
    e = build()
    assert isinstance(e, Const)
    assert e.value == value


def test_folding_float32_rounds_to_dtype():
    e = tex.const(0.1) + tex.const(0.2)
    assert e.value == float(np.float32(0.1) + np.float32(0.2))


def test_constant_integer_division_by_zero():
    with pytest.raises(ValueError, match="division by zero"):
        tex.const(1) // 0


def test_float_division_by_zero_folds_to_inf():
    assert math.isinf((tex.const(1.0) / 0.0).value)


def test_bool_of_expressions(v):
    i, j = v["i"], v["j"]
    assert bool(i == i)
    assert not bool(i == j)
    assert bool(i != j)
    with pytest.raises(ValueError, match="tex.all"):
        bool(i < j)
    with pytest.raises(ValueError, match="tex.all"):
        if i + 1:
            pass
    with pytest.raises(ValueError, match="as a Python bool"):
        bool(tex.const(3))


def test_logical_ops_need_bools(v):
    with pytest.raises(TypeError, match="boolean operands"):
        v["i"] & v["j"]
    with pytest.raises(TypeError, match="boolean"):
        ~v["i"]
    with pytest.raises(TypeError, match="condition"):
        tex.if_then_else(v["i"], 1, 2)


def test_all_any(v):
    i = v["i"]
    assert str(tex.all(i > 0, i < 5, i != 2)) == "i > 0 && i < 5 && i != 2"
    assert str(tex.any(i < 0, i >= 5)) == "i < 0 || i >= 5"
    assert tex.all(True, i > 0) is (i > 0)
    with pytest.raises(ValueError, match="at least one"):
        tex.all()


def test_raw_constructors_do_not_fold(v):
    x = v["x"]
    e = Binary(Op.MUL, x, tex.const(0.0))
    assert str(e) == "x * 0.0"
    assert e.children() == (x, tex.const(0.0))
    assert e.with_children([x, tex.const(0.0)]) is e


def test_every_op_has_semantics_and_printing():
    all_ops = set(Op)
    assert UNARY_OPS | BINARY_OPS | COMPARE_OPS == all_ops
    assert set(NUMPY_UNARY) == UNARY_OPS
    assert set(NUMPY_BINARY) == BINARY_OPS | COMPARE_OPS
    assert set(INFIX) | set(CALL_NAMES) == all_ops


def test_node_kinds(v):
    i, x, b = v["i"], v["x"], v["b"]
    assert isinstance(i, Var)
    assert isinstance(-x, Unary)
    assert isinstance(i < 3, Compare)
    assert isinstance(tex.select(b, x, 1.0), Select)
    assert isinstance(i.astype("float32"), Cast)


def test_tensor_in_scalar_context():
    A = tex.placeholder((3,), name="A")
    with pytest.raises(TypeError, match="tensor 'A'.*index it"):
        tex.select(tex.var("i") > 0, A, 0.0)
    with pytest.raises(TypeError, match="topi.maximum"):
        tex.max(A, 1)
    with pytest.raises(TypeError, match="topi.exp"):
        tex.exp(A)


def test_deep_expression_does_not_recurse():
    x = tex.var("x", "float32")
    e = x
    for _ in range(5000):
        e = tex.exp(e)
    text = str(e)
    assert text.count("exp(") == 5000


def test_numpy_scalars_on_either_side():
    A = tex.placeholder((3,), name="A", dtype="float32")
    i = tex.var("i")
    assert str(np.float64(2) * A[i]) == "A[i] * 2.0"  # a NumPy scalar is weak, like Python's
    assert (np.float64(2) * A[i]).dtype.name == "float32"
    assert str(np.int64(3) - i) == "3 - i"
    assert str(np.float32(1) / A) == "T_divide[i] = 1.0 / A[i]"
    assert str(A * np.float32(2)) == "T_multiply[i] = A[i] * 2.0"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32",
                                   "int64", "uint8"])
def test_max_min_value(dtype):
    info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
    hi, lo = tex.max_value(dtype), tex.min_value(dtype)
    assert hi.dtype.name == lo.dtype.name == dtype
    assert hi.value == info.max and lo.value == info.min
    assert tex.max_value("bool").value is True and tex.min_value("bool").value is False
