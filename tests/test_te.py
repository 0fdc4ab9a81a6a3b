"""The user builders: placeholder, compute, reduce_axis, reducers, and their errors."""
import pytest

import tex
from tex.ir import ComputeOp, PlaceholderOp, Reduce


@pytest.fixture
def XW():
    X = tex.placeholder((32, 100), name="X")
    W = tex.placeholder((10, 100), name="W")
    return X, W


def test_placeholder():
    X = tex.placeholder((2, 3), name="X", dtype="float64")
    assert X.shape == (2, 3) and X.ndim == 2 and X.dtype.name == "float64"
    assert isinstance(X.op, PlaceholderOp) and X.op.output(0) is X
    assert X.value_index == 0 and X.name == "X"
    assert tex.placeholder((), name="s").shape == ()
    assert tex.placeholder(5).shape == (5,)
    assert tex.placeholder((2,)).dtype.name == "float32"


def test_compute_dense(XW):
    X, W = XW
    k = tex.reduce_axis((0, 100), name="k")
    T = tex.compute((32, 10), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    assert isinstance(T.op, ComputeOp)
    assert T.shape == (32, 10)
    assert [iv.name for iv in T.op.axis] == ["i", "j"]
    assert T.op.reduce_axis == (k,)
    assert T.op.input_tensors == [X, W]
    assert isinstance(T.op.body[0], Reduce)
    assert str(T) == "T[i, j] = sum(X[i, k] * W[j, k], k in [0, 100))"
    assert k.dom.min == 0 and k.dom.extent == 100 and k.var.name == "k" and k.name == "k"


def test_reduce_axis_shared_by_two_computes(XW):
    X, W = XW
    k = tex.reduce_axis((0, 100), name="k")
    a = tex.compute((32,), lambda i: tex.sum(X[i, k], axis=k), name="a")
    b = tex.compute((10,), lambda i: tex.max(W[i, k], axis=k), name="b")
    assert a.op.reduce_axis == b.op.reduce_axis == (k,)


def test_reducers_where_init(XW):
    X, _ = XW
    k = tex.reduce_axis((0, 100), name="k")
    m = tex.compute((32,), lambda i: tex.max(X[i, k], axis=k, where=k < i, init=0.0), name="m")
    assert str(m) == "m[i] = max(X[i, k], k in [0, 100), where=k < i, init=0.0)"
    p = tex.compute((32,), lambda i: tex.prod(X[i, k] + 1.0, axis=[k]), name="p")
    assert str(p) == "p[i] = prod(X[i, k] + 1.0, k in [0, 100))"


def test_binary_form_of_reducers():
    i = tex.var("i")
    assert str(tex.max(i, 3)) == "max(i, 3)"
    assert str(tex.min(i + 1, 9)) == "min(i + 1, 9)"
    assert str(tex.sum(i, 2)) == "i + 2"


def argmax_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tex.select(keep, x[0], y[0]), tex.select(keep, x[1], y[1])

    def fidentity(t0, t1):
        return tex.const(-1, t0), tex.min_value(t1)

    return tex.comm_reducer(fcombine, fidentity, name="argmax")


def test_tuple_reducer_multi_output(XW):
    X, _ = XW
    argmax = argmax_reducer()
    r = tex.reduce_axis((0, 100), name="r")
    idx, val = tex.compute((32,), lambda i: argmax((r.var, X[i, r]), axis=r), name="am")
    assert idx.op is val.op and idx.op.num_outputs == 2
    assert (idx.value_index, val.value_index) == (0, 1)
    assert (idx.name, val.name) == ("am.v0", "am.v1")
    assert (idx.dtype.name, val.dtype.name) == ("int32", "float32")
    body = idx.op.body
    assert body[0].combiner is body[1].combiner
    assert str(idx) == "am.v0[i] = argmax((r, X[i, r]), r in [0, 100))[0]"


def test_multi_output_elementwise():
    A = tex.placeholder((4,), name="A")
    s, c = tex.compute((4,), lambda i: (tex.sin(A[i]), tex.cos(A[i])), name="sc")
    assert s.op is c.op and str(c) == "sc.v1[i] = cos(A[i])"


def test_slicing_by_leading_index():
    A = tex.placeholder((3, 4, 5), name="A")
    B = tex.compute((3, 4, 5), lambda i, j, k: A[i][j][k] + A[i, j][k], name="B")
    # both spellings build the same interned read, which x + x folds to x * 2
    assert str(B) == "B[i, j, k] = A[i, j, k] * 2.0"


def test_varargs_fcompute():
    A = tex.placeholder((3, 4), name="A")
    B = tex.compute((3, 4), lambda *idx: A[idx] * 2.0, name="B")
    assert str(B) == "B[ax0, ax1] = A[ax0, ax1] * 2.0"


def test_zero_dim_compute():
    A = tex.placeholder((3,), name="A")
    k = tex.reduce_axis((0, 3), name="k")
    s = tex.compute((), lambda: tex.sum(A[k], axis=k), name="s")
    assert s.shape == () and str(s) == "s[] = sum(A[k], k in [0, 3))"


# ---- bad input: each a clear exception naming the culprit --------------------------------

def test_wrong_number_of_indices():
    A = tex.placeholder((3, 4), name="A")
    with pytest.raises(ValueError, match=r"tensor 'A' has 2 dimensions \(3, 4\) but was "
                                         r"indexed with 3 indices"):
        tex.compute((3,), lambda i: A[i, i, i])
    with pytest.raises(ValueError, match="'A'"):
        tex.compute((3, 4), lambda i, j: A(i))


def test_float_index():
    A = tex.placeholder((3,), name="A")
    with pytest.raises(TypeError, match="tensor 'A'.*float"):
        A[1.5]
    x = tex.var("x", "float32")
    with pytest.raises(TypeError, match="tensor 'A': index x .* float32"):
        A[x]


def test_constant_index_out_of_bounds():
    A = tex.placeholder((3,), name="A")
    with pytest.raises(ValueError, match="constant index 3 is out of bounds .* extent 3"):
        A[3]


def test_reduce_axis_outside_reduction():
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="compute 'B': reduce axis 'k' is used outside"):
        tex.compute((3,), lambda i: A[i, k] * 2.0, name="B")


def test_nested_reductions():
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    j = tex.reduce_axis((0, 3), name="j")
    with pytest.raises(ValueError, match="nested reductions|nested inside"):
        tex.compute((), lambda: tex.sum(tex.sum(A[j, k], axis=k), axis=j), name="B")
    with pytest.raises(ValueError, match="listed twice"):
        tex.compute((3,), lambda i: tex.sum(A[i, k], axis=[k, k]), name="C")


def test_reduction_nested_in_arithmetic():
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="compute 'mean': a reduction .* nested inside an "
                                         "expression"):
        tex.compute((3,), lambda i: tex.sum(A[i, k], axis=k) / 4.0, name="mean")


def test_fcompute_arity():
    with pytest.raises(ValueError, match=r"compute 'T': fcompute takes 3 index arguments but "
                                         r"shape \(32, 10\) has 2 dimensions"):
        tex.compute((32, 10), lambda i, j, k: i + j + k, name="T")
    with pytest.raises(ValueError, match="takes 1 index argument but"):
        tex.compute((32, 10), lambda i: i, name="T")


def test_unknown_dtype():
    with pytest.raises(ValueError, match="placeholder 'X': unknown dtype 'float8'"):
        tex.placeholder((2,), dtype="float8", name="X")
    with pytest.raises(ValueError, match="unknown dtype"):
        tex.var("n", dtype="int128")


@pytest.mark.parametrize("shape", [(0, 3), (3, -1), -2])
def test_bad_shape(shape):
    with pytest.raises(ValueError, match="placeholder 'X': dimension .* extents must be "
                                         "positive"):
        tex.placeholder(shape, name="X")
    with pytest.raises(ValueError, match="compute 'C': dimension"):
        tex.compute(shape, lambda *i: 0.0, name="C")


@pytest.mark.parametrize("shape", [(2.5,), ("3",), (True, 2), "abc", None])
def test_shape_of_wrong_type(shape):
    with pytest.raises(TypeError, match="placeholder 'X'"):
        tex.placeholder(shape, name="X")


def test_axis_of_another_compute():
    A = tex.placeholder((3,), name="A")
    leaked = []
    tex.compute((3,), lambda i: leaked.append(i) or A[i], name="B")
    with pytest.raises(ValueError, match="variable 'i' is an axis of another compute"):
        tex.compute((3,), lambda j: A[leaked[0]], name="C")


def test_reducer_argument_errors():
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="give axis="):
        tex.sum(A[0, k])
    with pytest.raises(TypeError, match="axis 'k' is a variable"):
        tex.sum(A[0, k], axis=k.var)
    with pytest.raises(TypeError, match="must be a boolean condition"):
        tex.compute((3,), lambda i: tex.sum(A[i, k], axis=k, where=k + 1))
    with pytest.raises(ValueError, match="not a reduce axis"):
        tex.compute((3,), lambda i: tex.sum(A[i, 0], axis=[tex.reduce_axis((0, 2)), *[]])
                    if False else tex.sum(A[i, 0], axis=_data_axis(i)))
    with pytest.raises(ValueError, match="empty range"):
        tex.reduce_axis((3, 3), name="e")
    with pytest.raises(TypeError, match="pair"):
        tex.reduce_axis(5, name="e")


def _data_axis(i):
    B = tex.placeholder((2,), name="B")
    return tex.compute((2,), lambda j: B[j]).op.axis[0]


def test_comm_reducer_errors():
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    bad = tex.comm_reducer(lambda x, y: (x, y), lambda t: tex.const(0, t), name="bad")
    with pytest.raises(ValueError, match="comm_reducer 'bad': fcombine returned 2 values"):
        tex.compute((3,), lambda i: bad(A[i, k], axis=k))
    with pytest.raises(TypeError, match="callables"):
        tex.comm_reducer(1, 2)


def test_tensor_not_iterable_and_compute_returning_tensor():
    A = tex.placeholder((3,), name="A")
    with pytest.raises(TypeError, match="not iterable"):
        list(A)
    with pytest.raises(TypeError, match="returned the tensor 'A'"):
        tex.compute((3,), lambda i: A, name="B")


def test_default_arguments_are_not_indices():
    A = tex.placeholder((3,), name="A")
    B = tex.compute((3,), lambda i, a=A: a[i] * 2.0, name="B")
    assert str(B) == "B[i] = A[i] * 2.0"


def test_tuple_reduction_slots_must_share_init():
    from tex.ir import Reduce
    from tex.ir.verify import check_compute_body
    A = tex.placeholder((3, 4), name="A")
    k = tex.reduce_axis((0, 4), name="k")
    r0, r1 = argmax_reducer()((k.var, A[0, k]), axis=k, init=(tex.const(0), tex.const(0.0)))
    r1b = Reduce(r1.combiner, r1.source, r1.axis, r1.condition, (tex.const(5), tex.const(9.0)), 1)
    with pytest.raises(ValueError, match="reductions differ"):
        check_compute_body("T", [], [r0, r1b])
