"""``te.extern`` (issue 24, item 9): tensors written by a function outside tex, through
schedules, lowering, compiled code, the interpreter and autodiff."""
from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tex
from tex import te, tir
from tex.contrib import cblas
from tex.error import ScheduleError

RNG_SEED = 24


def _data(*shapes, seed=RNG_SEED):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def _add_scaled(x, y, c):
    """y = x + c (a Python packed function)."""
    y[...] = x.numpy() + c


def _check_pipeline(s, A, D):
    """Build ``_pipeline``'s schedule ``s``, check D = A * 2 + 1.5 + 1; (d, a)."""
    f = tex.build(s, [A, D])
    (a,) = _data(A.shape)
    d = np.zeros_like(a)
    f(a, d)
    np.testing.assert_allclose(d, a * 2 + 2.5, rtol=1e-6)
    return d, a


def _pipeline(fn=_add_scaled, n=16, m=8):
    """A -> B (compute) -> C (extern fn(B, C, 1.5)) -> D (compute)."""
    A = te.placeholder((n, m), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2, name="B")
    C = te.extern(B.shape, [B], lambda ins, outs: tir.call_packed(fn, ins[0], outs[0], 1.5),
                  name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + 1, name="D")
    return A, B, C, D


# -- the function table ------------------------------------------------------------------------
def test_register_func_forms_and_lookup():
    name = "test_extern.forms"
    try:
        @tex.register_func(name)
        def f(x):
            return x

        assert tex.get_global_func(name) is f and name in tex.list_global_func_names()
        with pytest.raises(ValueError, match="already registered"):
            tex.register_func(name, lambda x: x)
        g = tex.register_func(name, lambda x: 2 * x, override=True)
        assert tex.get_global_func(name) is g

        @tex.register_func
        def test_extern_bare(x):
            return x

        assert tex.get_global_func("test_extern_bare") is test_extern_bare
    finally:
        tex.remove_global_func(name)
        tex.remove_global_func("test_extern_bare")
    assert tex.get_global_func(name, allow_missing=True) is None
    with pytest.raises(ValueError, match="no function is registered under 'nope.nothing'"):
        tex.get_global_func("nope.nothing")
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        tex.register_func(3, lambda: 0)
    with pytest.raises(TypeError, match="not callable"):
        tex.register_func("test_extern.bad", 5)


def test_builtin_cblas_names_are_registered():
    for k in ("tex", "tvm"):
        assert tex.get_global_func(f"{k}.contrib.cblas.matmul") is not None
        assert tex.get_global_func(f"{k}.contrib.cblas.batch_matmul") is not None


# -- building the operation ---------------------------------------------------------------------
def test_extern_builder_checks_its_arguments():
    A = te.placeholder((4, 3), name="A")
    ok = lambda ins, outs: tir.call_packed("x", ins[0], outs[0])  # noqa: E731
    with pytest.raises(ValueError, match="in_buffers/out_buffers are not supported"):
        te.extern((4, 3), [A], ok, in_buffers=[1])
    with pytest.raises(TypeError, match="input 0 must be a Tensor"):
        te.extern((4, 3), [np.zeros(3)], ok)
    with pytest.raises(TypeError, match="must return tir.call_packed"):
        te.extern((4, 3), [A], lambda ins, outs: None)
    with pytest.raises(ValueError, match="no output buffer"):
        te.extern((4, 3), [A], lambda ins, outs: tir.call_packed("x", ins[0]))
    with pytest.raises(TypeError, match="argument 0 is the tensor 'A'"):
        te.extern((4, 3), [A], lambda ins, outs: tir.call_packed("x", A, outs[0]))
    with pytest.raises(TypeError, match="argument 1 reads the tensor 'A'"):
        te.extern((4, 3), [A], lambda ins, outs: tir.call_packed("x", outs[0], A[0, 0]))
    with pytest.raises(TypeError, match="registered name, a Python callable"):
        tir.call_packed(3.5)
    with pytest.raises(TypeError, match="dimension 0"):
        te.extern(("a", 3), [A], ok)
    other = te.extern((4, 3), [A], ok, name="other")
    with pytest.raises(ValueError, match="buffer 'A' of another extern"):
        te.extern((4, 3), [other],
                  lambda ins, outs: tir.call_packed("x", other.op.in_buffers[0], outs[0]))


def test_extern_outputs_shapes_dtypes_and_printing():
    A = te.placeholder((4, 3), name="A", dtype="float64")
    n = te.var("n")
    X, Y = te.extern([(4, 3), (2,)], [A],
                     lambda ins, outs: tir.call_packed("f.two", ins[0], outs[0], outs[1], n,
                                                       "mode", True),
                     name="XY", dtype=["float64", "int32"])
    assert (X.shape, X.dtype, Y.shape, Y.dtype) == ((4, 3), "float64", (2,), "int32")
    assert X.op is Y.op and X.op.input_tensors == [A]
    assert X.op.input_placeholders[0].shape == (4, 3)  # TVM's names of the buffers
    assert [b.dtype for b in X.op.output_placeholders] == ["float64", "int32"]
    assert str(X) == "XY.v0, XY.v1 = extern f.two(A, XY.v0, XY.v1, n, 'mode', True)"
    # the default dtype is the first input's
    Z = te.extern((2,), [A], lambda ins, outs: tir.call_packed("f", ins[0], outs[0]))
    assert Z.dtype == "float64" and Z.name == "extern"


# -- compiled and interpreted ----------------------------------------------------------------
def test_extern_between_computes_compiles_and_evaluates_alike():
    A, B, C, D = _pipeline()
    s = te.create_schedule(D.op)
    text = str(tex.lower(s, [A, D], simple_mode=True))
    assert "extern _add_scaled(B, C, 1.5)" in text
    assert text.index("B[") < text.index("extern") < text.index("D[")
    d, a = _check_pipeline(s, A, D)
    np.testing.assert_allclose(tex.testing.evaluate(D, {A: a}), d, rtol=1e-6)


def test_extern_tutorial_bias_scalar_and_cblas():
    n, k, m = 64, 32, 47
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    C = te.extern((n, m), [A, B], lambda ins, outs: tir.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False), name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = tex.build(te.create_schedule(D.op), [A, B, D, bias], "llvm")
    a, b = _data((n, k), (k, m))
    d = tex.nd.array(np.zeros((n, m), dtype=D.dtype))
    f(tex.nd.array(a), tex.nd.array(b), d, 10.0)
    np.testing.assert_allclose(d.numpy(), a @ b + 10, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True),
                                           (True, True)])
def test_cblas_matmul_and_batch_matmul(transa, transb):
    a, b = _data((6, 5), (5, 7))
    a_in = a.T.copy() if transa else a
    b_in = b.T.copy() if transb else b
    A = te.placeholder(a_in.shape, name="A")
    B = te.placeholder(b_in.shape, name="B")
    C = cblas.matmul(A, B, transa, transb)
    assert C.shape == (6, 7)
    np.testing.assert_allclose(tex.testing.evaluate(C, {A: a_in, B: b_in}), a @ b, rtol=1e-5)
    x, y = _data((3, 6, 5), (1, 5, 7))
    x_in = np.swapaxes(x, 1, 2).copy() if transa else x
    y_in = np.swapaxes(y, 1, 2).copy() if transb else y
    X = te.placeholder(x_in.shape, name="X")
    Y = te.placeholder(y_in.shape, name="Y")
    Z = cblas.batch_matmul(X, Y, transa, transb)
    assert Z.shape == (3, 6, 7)
    np.testing.assert_allclose(tex.testing.evaluate(Z, {X: x_in, Y: y_in}), x @ y, rtol=1e-5)


def test_cblas_checks_shapes():
    A = te.placeholder((6, 5), name="A")
    with pytest.raises(ValueError, match="reduction extents differ"):
        cblas.matmul(A, A)
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        cblas.batch_matmul(A, A)


def test_extern_argument_kinds_reach_the_function():
    seen = []

    def probe(x, y, i, f, flag, text):
        seen.append((type(x).__name__, x.flags.writeable, y.flags.writeable, i, f, flag,
                     text))
        y[...] = x.numpy()[::-1] * f + i

    A = te.placeholder((5,), name="A")
    k = te.var("k", dtype="int64")
    C = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed(
        probe, ins[0], outs[0], k + 1, 0.25, True, "text"), name="C")
    f = tex.build(te.create_schedule(C.op), [A, C, k])
    (a,) = _data((5,))
    c = np.zeros_like(a)
    f(a, c, 2**40)
    assert seen == [("NDArray", False, True, 2**40 + 1, 0.25, True, "text")]
    np.testing.assert_allclose(c, a[::-1] * 0.25 + 2**40 + 1)


def test_extern_input_is_read_only_in_compiled_code_and_evaluate():
    def writes_input(x, y):
        x[0] = 1.0

    A = te.placeholder((4,), name="A")
    C = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed(writes_input, ins[0],
                                                                   outs[0]), name="C")
    f = tex.build(te.create_schedule(C.op), [A, C])
    a = np.zeros(4, "float32")
    with pytest.raises(ValueError, match="read-only"):
        f(a, np.zeros_like(a))
    assert not a.any()
    with pytest.raises(ValueError, match="read-only"):
        tex.testing.evaluate(C, {A: a})


def test_a_raising_function_stops_the_call_and_frees_heap_buffers():
    calls = []

    def boom(x, y):
        calls.append(1)
        raise KeyError("boom")

    # a temporary larger than the stack limit lives on the heap (freed on the early return)
    n = 40_000
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2, name="B")
    C = te.extern(A.shape, [B], lambda ins, outs: tir.call_packed(boom, ins[0], outs[0]),
                  name="C")
    D = te.compute(A.shape, lambda i: C[i] + 1, name="D")
    f = tex.build(te.create_schedule(D.op), [A, D])
    a = np.ones(n, "float32")
    d = np.full(n, 7.0, "float32")
    tex.runtime.workspace.release()
    for _ in range(3):
        with pytest.raises(KeyError, match="boom") as info:
            f(a, d)
        assert any("extern call of the built function" in note
                   for note in info.value.__notes__)
        # B's and C's blocks came back to the allocator (kept for the next call)
        assert tex.runtime.workspace.stats()["kept_bytes"] >= 2 * n * 4
    assert len(calls) == 3 and (d == 7.0).all()  # D was never written


def test_ctypes_function_gets_data_pointers():
    libc = ctypes.CDLL(None)
    memcpy = libc.memcpy
    memcpy.restype = ctypes.c_void_p
    memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    A = te.placeholder((6, 4), name="A")
    C = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed(memcpy, outs[0], ins[0],
                                                                   6 * 4 * 4), name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] - A[i, j] + 3, name="D")
    f = tex.build(te.create_schedule(D.op), [A, D])
    (a,) = _data((6, 4))
    d = np.zeros_like(a)
    f(a, d)
    np.testing.assert_allclose(d, 3.0)
    np.testing.assert_allclose(tex.testing.evaluate(D, {A: a}), d)


def test_same_code_different_functions_stay_apart():
    """Two programs that differ only in the function called compile to the same kernel (one
    cache entry); each built function still calls its own."""
    def plus(x, y, c):
        y[...] = x.numpy() + c

    def times(x, y, c):
        y[...] = x.numpy() * c

    A1, _, _, D1 = _pipeline(plus)
    A2, _, _, D2 = _pipeline(times)
    f1 = tex.build(te.create_schedule(D1.op), [A1, D1])
    f2 = tex.build(te.create_schedule(D2.op), [A2, D2])
    (a,) = _data((16, 8))
    d1, d2 = np.zeros_like(a), np.zeros_like(a)
    f1(a, d1)
    f2(a, d2)
    np.testing.assert_allclose(d1, a * 2 + 1.5 + 1, rtol=1e-6)
    np.testing.assert_allclose(d2, a * 2 * 1.5 + 1, rtol=1e-6)


def test_registered_name_is_looked_up_at_each_call():
    name = "test_extern.late"
    A, _, _, D = _pipeline(name)
    f = tex.build(te.create_schedule(D.op), [A, D])
    (a,) = _data((16, 8))
    d = np.zeros_like(a)
    with pytest.raises(ValueError, match="no function is registered under 'test_extern.late'"):
        f(a, d)
    try:
        tex.register_func(name, lambda x, y, c: np.copyto(y, x))
        f(a, d)
        np.testing.assert_allclose(d, a * 2 + 1)
        tex.register_func(name, lambda x, y, c: np.copyto(y, -x), override=True)
        f(a, d)
        np.testing.assert_allclose(d, -a * 2 + 1)
    finally:
        tex.remove_global_func(name)


def test_auto_schedule_keeps_extern_inputs_stored_and_parallel_stages_around_it():
    n = 256
    A = te.placeholder((n, 64), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2, name="B")  # cheap: inlined elsewhere
    C = te.extern(A.shape, [B], lambda ins, outs: tir.call_packed(_add_scaled, ins[0],
                                                                   outs[0], 1.5), name="C")
    k = te.reduce_axis((0, 64), name="k")
    D = te.compute((n,), lambda i: te.sum(C[i, k] * B[i, k], axis=k), name="D")
    s = tex.schedule.auto_schedule([D])
    assert s[B].attach_type == "root" and s[C].attach_type == "root"
    f = tex.build(s, [A, D])
    (a,) = _data((n, 64))
    d = np.zeros(n, "float32")
    f(a, d)
    np.testing.assert_allclose(d, ((a * 2 + 1.5) * (a * 2)).sum(1), rtol=1e-4)
    g = tex.build([D])
    d2 = np.zeros_like(d)
    g(a, d2)
    np.testing.assert_allclose(d2, d, rtol=1e-5)


# -- schedules ----------------------------------------------------------------------------------
def test_schedule_primitives_refuse_an_extern_stage():
    A, B, C, D = _pipeline()
    s = te.create_schedule(D.op)
    assert s[C].leaf_iter_vars == [] and s[C].all_iter_vars == []
    with pytest.raises(ScheduleError, match="'C' is an extern call"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match="'C' is an extern call"):
        s[C].compute_at(s[D], D.op.axis[0])
    with pytest.raises(ScheduleError, match="'C' is an extern call"):
        s[C].fuse()
    with pytest.raises(ScheduleError, match="'C' is an extern call"):
        s[C].parallel(D.op.axis[0])
    with pytest.raises(ScheduleError, match="read by the extern call 'C'"):
        s[B].compute_inline()
    with pytest.raises(ScheduleError, match="read by the extern call 'C'"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_a_cache_read_copy_for_an_extern_stays_stored():
    A, B, C, D = _pipeline()
    s = te.create_schedule(D.op)
    BB = s.cache_read(B, "local", [C])
    with pytest.raises(ScheduleError, match="'B.local' is read by the extern call 'C'"):
        s[BB].compute_inline()
    s[B].compute_inline()  # B itself may go: the copy reads it
    _check_pipeline(s, A, D)


def test_extern_reads_a_cache_read_copy():
    A, B, C, D = _pipeline()
    s = te.create_schedule(D.op)
    BB = s.cache_read(B, "global", [C])
    assert BB.name in str(tex.lower(s, [A, D]))
    _check_pipeline(s, A, D)


def test_cuda_builds_refuse_extern_calls():
    A, B, C, D = _pipeline()
    s = tex.schedule.auto_schedule([D], "cuda")
    with pytest.raises(ValueError, match="'C' is an extern call .* runs on the host CPU"):
        tex.build(s, [A, D], "cuda")


def test_graph_and_dot_show_the_extern():
    A, B, C, D = _pipeline()
    g = tex.graph(D)
    assert g.nodes[C.op]["kind"] == "extern" and g.has_edge(B.op, C.op)
    assert "box3d" in tex.to_dot(D)
    dot = tex.contrib.tedd.viz_dataflow_graph(te.create_schedule(D.op),
                                              output_dot_string=True)
    assert "extern" in dot and "C" in dot


# -- export -------------------------------------------------------------------------------------
def test_export_library_with_a_registered_extern(tmp_path):
    A = te.placeholder((12, 5), name="A")
    B = te.placeholder((5, 3), name="B")
    C = cblas.matmul(A, B)
    D = te.compute(C.shape, lambda i, j: C[i, j] * 2, name="D")
    f = tex.build(te.create_schedule(D.op), [A, B, D])
    a, b = _data((12, 5), (5, 3))
    lib = tmp_path / "mm.so"
    if not (os.environ.get("CC") or any(shutil.which(c) for c in ("cc", "gcc", "clang"))):
        pytest.skip("no C compiler on this machine to link a shared library with")
    f.export_library(str(lib))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = (f"import numpy as np, tex\ng = tex.runtime.load_module({str(lib)!r})\n"
            f"a = np.load({str(tmp_path / 'a.npy')!r}); b = np.load({str(tmp_path / 'b.npy')!r})\n"
            "d = np.zeros((12, 3), 'float32'); g(a, b, d)\n"
            "np.testing.assert_allclose(d, 2 * a @ b, rtol=1e-5); print('ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.strip() == "ok", run.stderr


def test_export_library_refuses_an_unregistered_function(tmp_path):
    A, _, _, D = _pipeline(lambda x, y, c: np.copyto(y, x))
    f = tex.build(te.create_schedule(D.op), [A, D])
    with pytest.raises(ValueError, match="register it"):
        f.export_library(str(tmp_path / "x.so"))


# -- autodiff -------------------------------------------------------------------------------------
def _matmul_loss():
    A = te.placeholder((8, 6), name="A")
    B = te.placeholder((6, 5), name="B")
    C = cblas.matmul(A, B)
    Sq = te.compute(C.shape, lambda i, j: C[i, j] * C[i, j], name="Sq")
    k1, k2 = te.reduce_axis((0, 8), "k1"), te.reduce_axis((0, 5), "k2")
    L = te.compute((), lambda: te.sum(Sq[k1, k2], axis=[k1, k2]), name="L")
    return A, B, C, L


def _matmul_vjp(out, inputs, head):
    """dA = head @ B^T, dB = A^T @ head, themselves extern calls."""
    A, B = inputs
    return [cblas.matmul(head, B, transb=True, name="dA"),
            cblas.matmul(A, head, transa=True, name="dB")]


def test_differentiate_needs_the_derivative_of_an_extern():
    A, B, C, L = _matmul_loss()
    with pytest.raises(tex.autodiff.DifferentiationError,
                       match=r"'C' is an extern call .* override=\{C: \(\[A, B\], fn\)\}"):
        tex.differentiate(L, [A, B])
    with pytest.raises(tex.autodiff.DifferentiationError, match="forward mode cannot"):
        tex.autodiff.jvp(C, [A], [te.placeholder(A.shape, name="T")])


def test_gradient_through_an_extern_override_checks_and_compiles():
    A, B, C, L = _matmul_loss()
    override = {C: ([A, B], _matmul_vjp)}
    tex.testing.check_grad(L, [A, B], override=override)
    dA, dB = tex.differentiate(L, [A, B], override=override)
    a, b = _data((8, 6), (6, 5))
    want_a, want_b = 2 * (a @ b) @ b.T, a.T @ (2 * (a @ b))
    ea, eb = tex.testing.evaluate([dA, dB], {A: a, B: b})
    np.testing.assert_allclose(ea, want_a, rtol=1e-5)
    np.testing.assert_allclose(eb, want_b, rtol=1e-5)
    f = tex.build([dA, dB])
    ga, gb = np.zeros_like(a), np.zeros_like(b)
    f(a, b, ga, gb)
    np.testing.assert_allclose(ga, want_a, rtol=1e-5)
    np.testing.assert_allclose(gb, want_b, rtol=1e-5)
    prog = tex.autodiff.grad_program(L, [A, B], override=override)
    assert prog.plan.row("C").status == "saved"
    out, tape = prog.forward({A: a, B: b})
    np.testing.assert_allclose(out, ((a @ b) ** 2).sum(), rtol=1e-5)
    pa, pb = prog.backward(tape)
    np.testing.assert_allclose(pa, want_a, rtol=1e-5)
    np.testing.assert_allclose(pb, want_b, rtol=1e-5)
    assert tex.autodiff.iteration_count(C) == 8 * 5


def test_no_zero_is_proved_through_an_extern():
    """The zero proofs must not see an extern's output as independent of its inputs: a
    broadcast max read only through an extern keeps its adjoint."""
    X = te.placeholder((4, 6), name="X")
    k = te.reduce_axis((0, 6), name="k")
    M = te.compute((4,), lambda i: te.max(X[i, k], axis=k), name="M")
    E = te.compute(X.shape, lambda i, j: X[i, j] - M[i], name="E")
    C = te.extern(E.shape, [E], lambda ins, outs: tir.call_packed(
        lambda x, y: np.copyto(y, np.asarray(x) ** 2), ins[0], outs[0]), name="C")
    k1, k2 = te.reduce_axis((0, 4), name="k1"), te.reduce_axis((0, 6), name="k2")
    L = te.compute((), lambda: te.sum(C[k1, k2], axis=[k1, k2]), name="L")

    def square_vjp(out, inputs, head):
        (e,) = inputs
        return [te.compute(e.shape, lambda i, j: 2 * e[i, j] * head[i, j], name="dE")]

    res = tex.differentiate(L, [X], override={C: ([E], square_vjp)})
    assert M in res.adjoints
    x = np.array(np.random.default_rng(3).permutation(24).reshape(4, 6), "float32")
    tex.testing.check_grad(L, [X], data={X: x}, override={C: ([E], square_vjp)})
    gc.collect()


def test_two_extern_stages_in_one_function_keep_their_own_calls():
    seen = []

    def first(x, y, k):
        seen.append(("first", k))
        y[...] = x.numpy() + k

    def second(x, y, scale, flag):
        seen.append(("second", scale, flag))
        y[...] = x.numpy() * scale if flag else x.numpy()

    A = te.placeholder((6,), name="A", dtype="float64")
    k = te.var("k", dtype="int64")
    C1 = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed(first, ins[0], outs[0], k),
                   name="C1")
    M = te.compute(A.shape, lambda i: C1[i] * 2.0, name="M")
    C2 = te.extern(A.shape, [M], lambda ins, outs: tir.call_packed(
        second, ins[0], outs[0], tex.const(0.5, "float64"), False), name="C2")
    D = te.compute(A.shape, lambda i: C2[i] + C1[i], name="D")
    f = tex.build(te.create_schedule(D.op), [A, D, k])
    assert [s.name for s in f.extern_specs] == ["C1", "C2"]
    a = np.arange(6, dtype="float64")
    d = np.zeros(6)
    f(a, d, 2**35)
    assert seen == [("first", 2**35), ("second", 0.5, False)]
    np.testing.assert_allclose(d, (a + 2**35) * 3)
