"""One-hot gather sums over data-dependent indices (``take``'s and a max's gradients): the
scatter form (``tex.ir.scatter``), its iteration count, and its scatter lowering, which
must give the gather lowering's numbers bit for bit."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tex
from tex import topi
from tex.autodiff import iteration_count
from tex.ir.scatter import scatter_form
from tex.testing import check_grad, evaluate

Array = np.ndarray
DTYPES = ["float32", "float64"]


# -- programs -----------------------------------------------------------------------------

def _take_grad(shape: tuple[int, ...], n: int, axis: int | None, dtype: str = "float32",
               mode: str = "clip", index_dtype: str = "int32"
               ) -> tuple[tex.Tensor, tex.Tensor, tex.Tensor, tex.Tensor]:
    """(gradient of take w.r.t. its data, indices, head, data)."""
    A = tex.placeholder(shape, dtype, name="A")
    index = tex.placeholder((n,), index_dtype, name="I")
    out = topi.take(A, index, axis=axis, mode=mode)
    head = tex.placeholder(out.shape, dtype, name="H")
    (grad,) = tex.differentiate(out, [A], head)
    return grad, index, head, A


def _max_product(n: int = 10, dtype: str = "float32") -> tuple[tex.Tensor, tex.Tensor]:
    """``B[i, j] = max_k A[i, k] * A[k, j]`` and its ``A``."""
    A = tex.placeholder((n, n), dtype, name="A")
    k = tex.reduce_axis((0, n), name="k")
    B = tex.compute((n, n), lambda i, j: tex.max(A[i, k] * A[k, j], axis=k), name="B")
    return B, A


def _feed(rng: np.random.Generator, index: tex.Tensor, head: tex.Tensor, extent: int
          ) -> dict[tex.Tensor, Array]:
    """Indices with repeats and out-of-range values (clipped), a random head."""
    n = index.shape[0]
    ix = rng.integers(-3, extent + 3, size=n)
    ix[: n // 2] = ix[0]  # repeated
    return {index: ix.astype(index.dtype.numpy),
            head: rng.standard_normal(head.shape).astype(head.dtype.numpy)}


def _run(s: tex.schedule.Schedule | None, grad: tex.Tensor, args: list[tex.Tensor],
         feed: dict[tex.Tensor, Array]) -> Array:
    f = tex.build([grad], args) if s is None else tex.build(s, args)
    out = np.full(grad.shape, np.nan, grad.dtype.numpy)
    f(*[feed[a] for a in args[:-1]], out)
    return out


def _gather_schedule(grad: tex.Tensor) -> tex.schedule.Schedule:
    """A schedule that splits the scatter axis with the rows outside the chunks (not a row
    partition): lowering falls back to the gather nest."""
    s = tex.create_schedule(grad.op)
    form = scatter_form(grad.op)
    assert form is not None
    po, pi = s[grad].split(form.axes[0], factor=2)
    s[grad].reorder(pi, po)
    return s


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 0}


# -- the recognizer -----------------------------------------------------------------------

def test_take_gradient_has_a_scatter_form() -> None:
    grad, index, _, _ = _take_grad((10, 6), 5, axis=0)
    form = scatter_form(grad.op)
    assert form is not None
    p, q = grad.op.axis
    assert form.axes == (p,) and form.free_axes == (q,)
    assert any(r.tensor is index for r in tex.ir.collect_reads(form.indices[0]))
    assert tex.ir.is_const(form.condition, True)
    assert form.index_of(p) is form.indices[0]


def test_flat_take_gradient_has_two_scatter_axes() -> None:
    grad, _, _, _ = _take_grad((4, 5), 7, axis=None)
    form = scatter_form(grad.op)
    assert form is not None
    assert form.axes == tuple(grad.op.axis) and form.free_axes == ()


def test_int64_indices_pin_a_widened_axis() -> None:
    grad, _, _, _ = _take_grad((10, 6), 5, axis=0, index_dtype="int64")
    form = scatter_form(grad.op)
    assert form is not None and form.axes == (grad.op.axis[0],)
    assert form.indices[0].dtype.name == "int64"


def test_max_gradient_parts_have_scatter_forms() -> None:
    B, A = _max_product()
    head = tex.placeholder(B.shape, name="HB")
    parts = {op.name: op for op in tex.ir.topo_sort_ops(list(tex.differentiate(B, [A], head)))}
    one, two = parts.pop("A_grad_B_1"), parts.pop("A_grad_B_2")
    f1, f2 = scatter_form(one), scatter_form(two)
    assert f1 is not None and f1.axes == (one.axis[0],) and f1.free_axes == (one.axis[1],)
    assert f2 is not None and f2.axes == (two.axis[1],) and f2.free_axes == (two.axis[0],)
    for name, op in parts.items():  # the forward max, its argsel, the sum of the parts
        assert scatter_form(op) is None, name


def test_recognizer_positive_cases() -> None:
    H = tex.placeholder((7, 3), name="H")
    W = tex.placeholder((8,), name="W")
    index = tex.placeholder((7,), "int32", name="I")
    i = tex.reduce_axis((0, 7), name="i")
    # the pinned axis on the right, a remaining condition that mentions it
    C = tex.compute((8, 3), lambda p, q: tex.sum(H[i, q] * W[p], axis=i,
                                                 where=tex.all(index[i] == p, p % 2 == 0)))
    form = scatter_form(C.op)
    assert form is not None and form.axes == (C.op.axis[0],)
    assert str(form.condition) == "p % 2 == 0"
    # g may read at a free axis; an axis pinned to an expression of another scatter axis
    # stays a condition
    J = tex.placeholder((3,), "int32", name="J")
    D = tex.compute((8, 3), lambda p, q: tex.sum(H[i, q], axis=i,
                                                 where=tex.all(p == J[q], q == index[i])))
    form = scatter_form(D.op)
    assert form is not None and form.axes == (D.op.axis[0],)
    assert form.free_axes == (D.op.axis[1],) and "q == I[i]" in str(form.condition)
    # an axis offset by a constant is pinned to the index minus the offset (a padded max
    # pool's gradient: r + 1 == h + argsel // 3 % 3)
    E = tex.compute((8, 3), lambda p, q: tex.sum(H[i, q], axis=i, where=p + 2 == index[i]))
    form = scatter_form(E.op)
    assert form is not None and form.axes == (E.op.axis[0],)
    assert str(form.indices[0]) == "I[i] - 2"
    data = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    idx = np.array([2, 9, 4, 2, 0, 5, 3], np.int32)
    want = np.zeros((8, 3), np.float32)
    for ii in range(7):
        if 0 <= idx[ii] - 2 < 8:
            want[idx[ii] - 2] += data[ii]
    f = tex.build(tex.create_schedule(E.op), [H, index, E])
    got = np.empty((8, 3), np.float32)
    f(data, idx, got)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(evaluate(E, {H: data, index: idx}), want, rtol=1e-6)


def test_recognizer_negative_cases() -> None:
    H = tex.placeholder((7, 3), name="H")
    X = tex.placeholder((8,), name="X")
    index = tex.placeholder((8,), "int32", name="I")
    i = tex.reduce_axis((0, 7), name="i")
    cases = {
        "affine": lambda p, q: tex.sum(H[i, q], axis=i, where=p == i + 1),
        "max": lambda p, q: tex.max(H[i, q], axis=i, where=p == index[i]),
        "mentions p": lambda p, q: tex.sum(H[i, q], axis=i, where=p == index[p] + i),
        "disjunction": lambda p, q: tex.sum(H[i, q], axis=i,
                                            where=tex.any(p == index[i], q == 0)),
        "not equal": lambda p, q: tex.sum(H[i, q], axis=i, where=p != index[i]),
        "float": lambda p, q: tex.sum(H[i, q], axis=i,
                                      where=p.astype("float32") == X[i]),
        "no where": lambda p, q: tex.sum(H[i, q], axis=i),
    }
    for name, body in cases.items():
        C = tex.compute((8, 3), body, name=name.replace(" ", "_"))
        assert scatter_form(C.op) is None, name
    k = tex.reduce_axis((0, 8), name="k")
    R = tex.compute((7,), lambda j: tex.sum(X[k], axis=k, where=k == index[j]), name="R")
    assert scatter_form(R.op) is None  # the pinned variable is a reduction axis
    E = tex.compute((8,), lambda p: X[p] * 2.0, name="E")
    assert scatter_form(E.op) is None
    assert scatter_form(index.op) is None  # a placeholder


# -- iteration counts ---------------------------------------------------------------------

def test_iteration_count_of_take_gradients() -> None:
    grad, _, _, _ = _take_grad((10,), 7, axis=0)
    assert iteration_count(grad) == 10 + 7  # init, then one pass over the indices
    grad, _, _, _ = _take_grad((10, 6), 5, axis=0)
    assert iteration_count(grad) == 60 + 6 * 5
    grad, _, _, _ = _take_grad((4, 5), 7, axis=None)
    assert iteration_count(grad) == 20 + 7


def test_iteration_count_of_max_gradient() -> None:
    B, A = _max_product()
    head = tex.placeholder(B.shape, name="HB")
    (grad,) = tex.differentiate(B, [A], head)
    ops = tex.ir.topo_sort_ops([grad])
    parts = {op.name: op.output(0) for op in ops}
    # the forward the parts read: the max's argsel (and the max, when computed apart)
    forward = iteration_count(*[op.output(0) for op in ops if not op.name.startswith("A_grad")])
    assert forward in (1000, 1000 + 1000)
    assert iteration_count(parts["A_grad_B_1"]) - forward == 100 + 10 * 10
    assert iteration_count(parts["A_grad_B_2"]) - forward == 100 + 10 * 10
    # the forward, the two scatters (init + one pass each), their sum
    assert iteration_count(grad) == forward + 200 + 200 + 100


# -- lowering -----------------------------------------------------------------------------

def _update_loops(text: str, axis: str) -> int:
    return len(re.findall(rf"for \({re.escape(axis)}, ", text))


def test_lowered_scatter_nest_reads_naturally() -> None:
    grad, index, head, _ = _take_grad((10, 6), 5, axis=0)
    text = str(tex.lower([grad]))
    assert "let p = max(min(I[i], 9), 0)" in text
    assert _update_loops(text, "p") == 1  # the init's loop; the update computes p
    assert re.search(r"for \(q, 0, 6\) \{\s+for \(i, 0, 5\) \{\s+let p", text)
    assert "if (p" not in text  # clipped indices are in range: no guard


def test_lowered_argsel_scatter_is_guarded() -> None:
    B, A = _max_product()
    head = tex.placeholder(B.shape, name="HB")
    (grad,) = tex.differentiate(B, [A], head)
    text = str(tex.lower([grad]))
    # argsel is 2**31 - 1 where no point was selected (NaN): out of range, skipped
    assert re.search(r"let p = B_argsel\S*\[i \* 10 \+ q\]", text)
    assert re.search(r"let q = B_argsel\S*\[j \+ p \* 10\]", text)
    assert "if (p >= 0 && p < 10)" in text and "if (q >= 0 && q < 10)" in text


def test_split_scatter_axis_falls_back_to_gather(rng: np.random.Generator) -> None:
    grad, index, head, _ = _take_grad((10, 6), 9, axis=0)
    s = _gather_schedule(grad)
    args = [index, head, grad]
    text = str(tex.lower(s, args))
    assert "let p" not in text and "== max(min(I[i], 9), 0)" in text
    feed = _feed(rng, index, head, 10)
    gathered = _run(s, grad, args, feed)
    np.testing.assert_allclose(gathered, evaluate(grad, feed), **_tol("float32"))
    scattered = _run(tex.create_schedule(grad.op), grad, args, feed)
    np.testing.assert_array_equal(scattered, gathered)  # bit for bit


@pytest.mark.parametrize("factor", [1, 3, 4, 12])
@pytest.mark.parametrize("parallel", [False, True])
def test_rows_split_into_chunks_scatter(factor: int, parallel: bool, rng: np.random.Generator
                                        ) -> None:
    """The scatter axis split into chunks of rows (outer loop first, serial or parallel):
    each chunk fills its rows then keeps the indices that fall in them; the same bits as
    the unsplit scatter and the gather, out-of-range (clipped) and repeated indices
    included, whether or not the chunk divides the rows."""
    grad, index, head, _ = _take_grad((10, 6), 9, axis=0)
    args = [index, head, grad]
    feed = _feed(rng, index, head, 10)
    s = tex.create_schedule(grad.op)
    po, pi = s[grad].split(grad.op.axis[0], factor=factor)
    if parallel:
        s[grad].parallel(po)
    text = str(tex.lower(s, args))
    assert "let p" in text
    # (one chunk of all the rows needs no check)
    assert bool(re.search(r"if \(p (>=|==) p\.outer", text)) == (factor < 10)
    got = _run(s, grad, args, feed)
    np.testing.assert_array_equal(got, _run(tex.create_schedule(grad.op), grad, args, feed))
    np.testing.assert_array_equal(got, _run(_gather_schedule(grad), grad, args, feed))


def test_annotated_or_attached_scatter_axis_falls_back(rng: np.random.Generator) -> None:
    grad, index, head, _ = _take_grad((10, 6), 9, axis=0)
    args = [index, head, grad]
    feed = _feed(rng, index, head, 10)
    want = _run(_gather_schedule(grad), grad, args, feed)
    s = tex.create_schedule(grad.op)
    s[grad].parallel(grad.op.axis[0])
    assert "let p" not in str(tex.lower(s, args))
    np.testing.assert_array_equal(_run(s, grad, args, feed), want)
    s = tex.create_schedule(grad.op)
    local = s.cache_write(grad, "local")
    s[local].compute_at(s[grad], grad.op.axis[0])
    assert "let p" not in str(tex.lower(s, args))
    np.testing.assert_array_equal(_run(s, grad, args, feed), want)


# -- built results --------------------------------------------------------------------------

def _schedules(grad: tex.Tensor) -> dict[str, tex.schedule.Schedule]:
    """Default, auto and a hand schedule that parallelizes (and vectorizes) a free axis."""
    out = {"default": tex.create_schedule(grad.op),
           "auto": tex.schedule.auto_schedule([grad])}
    form = scatter_form(grad.op)
    assert form is not None
    if form.free_axes:
        s = tex.create_schedule(grad.op)
        q = form.free_axes[-1]
        qo, qi = s[grad].split(q, factor=4)
        s[grad].reorder(qo, *form.axes, *grad.op.reduce_axis, qi)
        s[grad].parallel(qo)
        s[grad].vectorize(qi)
        out["hand"] = s
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, n, axis", [((10,), 7, 0), ((10, 6), 5, 0), ((10, 37), 40, 0),
                                            ((5, 9), 6, 1), ((4, 5), 7, None)],
                         ids=["1d", "axis0", "axis0-wide", "axis1", "flat"])
def test_take_gradient_equals_reference(shape: tuple[int, ...], n: int, axis: int | None,
                                        dtype: str, rng: np.random.Generator) -> None:
    grad, index, head, A = _take_grad(shape, n, axis, dtype)
    extent = A.shape[axis] if axis is not None else int(np.prod(shape))
    feed = _feed(rng, index, head, extent)
    want = evaluate(grad, feed)
    args = [index, head, grad]
    gathered = _run(_gather_schedule(grad), grad, args, feed)
    for name, s in _schedules(grad).items():
        assert "let " in str(tex.lower(s, args)), name
        got = _run(s, grad, args, feed)
        np.testing.assert_allclose(got, want, **_tol(dtype), err_msg=name)
        np.testing.assert_array_equal(got, gathered, err_msg=name)  # same sums, same order
        np.testing.assert_array_equal(_run(s, grad, args, feed), got, err_msg=name)


def test_integer_valued_sums_equal_the_reference_exactly(rng: np.random.Generator) -> None:
    grad, index, head, _ = _take_grad((10, 6), 30, axis=0, dtype="float64")
    feed = _feed(rng, index, head, 10)
    feed[head] = rng.integers(-50, 50, size=head.shape).astype(np.float64)
    np.testing.assert_array_equal(_run(None, grad, [index, head, grad], feed),
                                  evaluate(grad, feed))


def test_wrap_mode_and_int64_indices(rng: np.random.Generator) -> None:
    for mode, index_dtype in (("wrap", "int32"), ("clip", "int64")):
        grad, index, head, _ = _take_grad((9, 4), 12, axis=0, mode=mode,
                                          index_dtype=index_dtype)
        feed = _feed(rng, index, head, 9)
        feed[index] = rng.integers(-20, 20, size=12).astype(index.dtype.numpy)
        got = _run(None, grad, [index, head, grad], feed)
        np.testing.assert_allclose(got, evaluate(grad, feed), **_tol("float32"))


def test_two_builds_and_calls_are_identical(rng: np.random.Generator) -> None:
    grad, index, head, _ = _take_grad((50, 33), 400, axis=0)
    feed = _feed(rng, index, head, 50)
    args = [index, head, grad]
    first = _run(tex.schedule.auto_schedule([grad]), grad, args, feed)
    second = _run(tex.schedule.auto_schedule([grad]), grad, args, feed)
    np.testing.assert_array_equal(first, second)


def test_condition_and_init_in_the_scatter(rng: np.random.Generator) -> None:
    """A remaining condition and a source that use the pinned axis, an ``init`` read."""
    H = tex.placeholder((7, 3), "float64", name="H")
    W = tex.placeholder((8,), "float64", name="W")
    X = tex.placeholder((8, 3), "float64", name="X")
    index = tex.placeholder((7,), "int32", name="I")
    i = tex.reduce_axis((0, 7), name="i")
    C = tex.compute((8, 3), lambda p, q: tex.sum(
        H[i, q] * W[p], axis=i, where=tex.all(p == index[i], p % 2 == 0), init=X[p, q]),
        name="C")
    text = str(tex.lower([C]))
    assert "let p = I[i]" in text and "p % 2 == 0" in text
    feed = {H: rng.standard_normal((7, 3)), W: rng.standard_normal(8),
            X: rng.standard_normal((8, 3)),
            index: np.array([0, 2, 2, 9, -1, 4, 3], np.int32)}  # 9, -1: out of range
    args = [H, W, X, index, C]
    for s in (tex.create_schedule(C.op), tex.schedule.auto_schedule([C])):
        got = _run(s, C, args, feed)
        np.testing.assert_allclose(got, evaluate(C, feed), rtol=1e-12)


def test_index_depending_on_a_vectorized_axis_runs_serially(rng: np.random.Generator
                                                             ) -> None:
    B, A = _max_product(16, "float64")
    head = tex.placeholder(B.shape, "float64", name="HB")
    (grad,) = tex.differentiate(B, [A], head)
    one = next(op for op in tex.ir.topo_sort_ops([grad]) if op.name == "A_grad_B_1")
    T = one.output(0)
    s = tex.create_schedule(T.op)
    q = T.op.axis[1]
    s[T].reorder(T.op.reduce_axis[0], q)
    s[T].vectorize(q)  # p = B_argsel[i, q]: lanes would scatter
    text = str(tex.lower(s, [A, head, T]))
    assert "let p" in text and text.count("vectorized") == 1  # the init only
    feed = {A: rng.standard_normal((16, 16)), head: rng.standard_normal((16, 16))}
    np.testing.assert_allclose(_run(s, T, [A, head, T], feed), evaluate(T, feed), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_gradient_built_equals_reference(dtype: str, rng: np.random.Generator) -> None:
    B, A = _max_product(12, dtype)
    head = tex.placeholder(B.shape, dtype, name="HB")
    (grad,) = tex.differentiate(B, [A], head)
    feed = {A: rng.standard_normal((12, 12)).astype(dtype),
            head: rng.standard_normal((12, 12)).astype(dtype)}
    want = evaluate(grad, feed)
    args = [A, head, grad]
    for s in (tex.create_schedule(grad.op), tex.schedule.auto_schedule([grad])):
        got = _run(s, grad, args, feed)
        np.testing.assert_allclose(got, want, **_tol(dtype))
        np.testing.assert_array_equal(_run(s, grad, args, feed), got)


def test_max_gradient_matches_finite_differences() -> None:
    B, A = _max_product(6, "float64")
    check_grad(B, [A])


# -- GPU: PTX and the lockstep simulator (no device needed) --------------------------------

def test_gpu_scatter_binds_free_axes_only(rng: np.random.Generator) -> None:
    grad, index, head, _ = _take_grad((10, 40), 7, axis=0)
    args = [index, head, grad]
    feed = _feed(rng, index, head, 10)
    want = evaluate(grad, feed)
    hand = tex.create_schedule(grad.op)
    bx, tx = hand[grad].split(grad.op.axis[1], factor=32)
    hand[grad].bind(bx, tex.thread_axis("blockIdx.x"))
    hand[grad].bind(tx, tex.thread_axis("threadIdx.x"))
    bound_p = tex.create_schedule(grad.op)  # a scatter axis on threads: the gather
    bound_p[grad].bind(grad.op.axis[0], tex.thread_axis("blockIdx.x"))
    bound_p[grad].bind(grad.op.axis[1], tex.thread_axis("threadIdx.x"))
    for name, s, scatter in (("hand", hand, True), ("auto", None, True),
                             ("bound p", bound_p, False)):
        f = tex.build(s, args, target="cuda") if s is not None else \
            tex.build([grad], args, target="cuda")
        assert ".entry" in f.get_source("ptx")
        assert len(f.program.kernels) == 1, name
        assert ("let p" in str(f.program)) is scatter, name
        out = np.full(grad.shape, np.nan, np.float32)
        f.simulate(*[feed[a] for a in args[:-1]], out)
        np.testing.assert_allclose(out, want, **_tol("float32"), err_msg=name)


# -- random schedules: scatter or gather, the numbers stay ------------------------------------

def _random_schedule(rng: np.random.Generator, T: tex.Tensor) -> tex.schedule.Schedule:
    """Random splits (the scatter axes rarely: then the gather), a random loop order,
    and parallel / vectorize / unroll on random free loops."""
    form = scatter_form(T.op)
    assert form is not None
    s = tex.create_schedule(T.op)
    st = s[T]
    leaves: list[tex.ir.IterVar] = []
    for iv in [*T.op.axis, *T.op.reduce_axis]:
        pinned = any(iv is a for a in form.axes)
        if iv.dom.extent > 2 and rng.random() < (0.1 if pinned else 0.5):
            leaves += st.split(iv, factor=int(rng.integers(2, 5)))
        else:
            leaves.append(iv)
    st.reorder(*[leaves[k] for k in rng.permutation(len(leaves))])
    for leaf in st.leaf_iter_vars:
        if leaf.kind == "reduce" or any(leaf is a for a in form.axes):
            continue
        r = rng.random()
        if r < 0.25:
            st.parallel(leaf)
        elif r < 0.5:
            st.vectorize(leaf)
        elif r < 0.6:
            st.unroll(leaf)
    return s


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_schedules_give_the_reference(dtype: str) -> None:
    """Integer-valued data: every sum is exact, in any order, so every schedule must give
    the interpreter's numbers exactly."""
    rng = np.random.default_rng(20240611)
    grad, index, head, _ = _take_grad((9, 11), 23, axis=0, dtype=dtype)
    B, A = _max_product(7, dtype)
    head_b = tex.placeholder(B.shape, dtype, name="HB")
    parts = [op.output(0) for op in tex.ir.topo_sort_ops(list(tex.differentiate(B, [A], head_b)))
             if op.name in ("A_grad_B_1", "A_grad_B_2")]
    programs = [(grad, [index, head, grad]), *((T, [A, head_b, T]) for T in parts)]
    scattered = 0
    for T, args in programs:
        feed = _feed(rng, index, head, 9)
        feed[head] = rng.integers(-9, 9, size=head.shape).astype(dtype)
        feed[A] = rng.integers(-4, 5, size=A.shape).astype(dtype)
        feed[head_b] = rng.integers(-9, 9, size=head_b.shape).astype(dtype)
        want = evaluate(T, feed)
        for _ in range(6):
            s = _random_schedule(rng, T)
            scattered += "let " in str(tex.lower(s, args))
            got = _run(s, T, args, feed)
            np.testing.assert_array_equal(got, want, err_msg=str(tex.lower(s, args)))
    assert scattered >= 9  # most schedules keep the scatter axes plain


def test_flat_take_binds_both_scatter_axes() -> None:
    grad, _, _, _ = _take_grad((4, 5), 7, axis=None)
    text = str(tex.lower([grad]))
    assert "let p = max(min(I[i], 19), 0) // 5" in text
    assert "let q = max(min(I[i], 19), 0) % 5" in text


@pytest.mark.parametrize("cores", [2, 3])
def test_auto_schedule_partitions_rows_of_a_big_scatter(cores: int, rng: np.random.Generator
                                                        ) -> None:
    """A gradient of ``take`` with many rows: each thread zero-fills a contiguous chunk of
    rows and adds the indices that fall in it (no fill inside a loop over column blocks);
    the same bits as the serial scatter, for chunks that divide the rows or not."""
    from tex.target import CPUInfo
    grad, index, head, _ = _take_grad((200, 64), 2100, axis=0)
    args = [index, head, grad]
    s = tex.schedule.auto_schedule(grad, CPUInfo("test", vector_bits=256, cores=cores))
    text = str(tex.lower(s, args))
    assert f"parallel for (p.outer, 0, {cores})" in text
    fill = text.index("= 0.0")
    assert "p.inner" in text[:fill] and "let p" in text[fill:]  # the fill, then the scatter
    feed = _feed(rng, index, head, 200)
    np.testing.assert_array_equal(_run(s, grad, args, feed),
                                  _run(tex.create_schedule(grad.op), grad, args, feed))


def test_scatter_into_inner_axes_keeps_rows_whole(rng: np.random.Generator) -> None:
    """An overlapping max pool's gradient scatters into the image axes, the inner ones: its
    rows are not chunked (the zero fill would stride across channels); the threads share
    the leading free axis instead, and the result is the gather's."""
    from tex.target import CPUInfo
    X = tex.placeholder((8, 64, 32, 32), name="X")
    P = topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    H = tex.placeholder(P.shape, name="H")
    (dX,) = tex.differentiate(P, [X], H)
    s = tex.schedule.auto_schedule(dX, CPUInfo("test", vector_bits=256, cores=2))
    text = str(tex.lower(s, [X, H, dX]))
    # (the argsel before it is vectorized over its own w.outer tiles)
    assert "parallel for (p, 0, 8)" in text and "p.outer" not in text and "q.outer" not in text
    x = rng.standard_normal(X.shape).astype("float32")
    h = rng.standard_normal(H.shape).astype("float32")
    got = np.full(dX.shape, np.nan, "float32")
    tex.build(s, [X, H, dX])(x, h, got)
    np.testing.assert_allclose(got, evaluate(dX, {X: x, H: h}), rtol=1e-5, atol=1e-5)
