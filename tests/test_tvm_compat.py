"""TVM spellings (API.md §8, issue 24): code written for TVM's ``te``/``tir`` runs on tex
after changing the imports. One test group per item of the issue."""
from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

import tex
from tex import te, tir, topi
from tex.error import ScheduleError


def _vector_add(n: int = 10):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


# -- 1. dtype is a str -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "float32", "float64", "int8", "int16", "int32",
                                  "int64", "uint8", "bool"])
def test_dtype_is_its_name(name):
    A = te.placeholder((3,), name="A", dtype=name)
    assert isinstance(A.dtype, str)
    assert A.dtype == name and name == A.dtype and A.dtype != "no" + name
    assert str(A.dtype) == name and type(str(A.dtype)) is str
    assert f"{A.dtype}" == name and repr(A.dtype) == repr(name)
    assert hash(A.dtype) == hash(name) and {name: 1}[A.dtype] == 1
    assert A[0].dtype == name  # Expr.dtype too
    # NumPy takes it wherever it takes a dtype
    assert np.zeros(2, dtype=A.dtype).dtype == np.dtype(name)
    assert np.ones(2).astype(A.dtype).dtype == np.dtype(name)
    assert np.dtype(A.dtype) == np.dtype(name)
    assert np.empty((1,), A.dtype).dtype.name == name
    # the table's row is still behind it
    assert A.dtype.numpy == np.dtype(name) and A.dtype.name == name
    assert A.dtype.itemsize == np.dtype(name).itemsize


def test_dtype_is_immutable_and_canonical():
    d = te.placeholder((3,), name="A").dtype
    with pytest.raises(AttributeError, match="immutable"):
        d.bits = 64
    assert pickle.loads(pickle.dumps(d)) is d
    assert copy.copy(d) is d and copy.deepcopy(d) is d
    assert json.dumps({"dtype": d}) == '{"dtype": "float32"}'
    assert tex.dtype.as_dtype("float32") is d and tex.dtype.as_dtype(np.float32) is d


def test_dtype_in_tutorial_idioms():
    A, B, C = _vector_add(10)
    f = tex.build(te.create_schedule(C.op), [A, B, C])
    a = np.random.default_rng(0).uniform(size=10).astype(A.dtype)
    b = np.random.default_rng(1).uniform(size=10).astype(B.dtype)
    c = np.zeros(10, dtype=C.dtype)
    f(a, b, c)
    np.testing.assert_allclose(c, a + b)
    assert C.dtype == "float32" and (A[0] + 1).dtype == "float32"
    assert te.placeholder((2,), dtype="int64", name="I").dtype in ("int32", "int64")


# -- 2. the tir namespace ----------------------------------------------------------------
def test_tir_constructors_build_tex_nodes():
    i, j = te.var("i"), tir.Var("j", "int32")
    assert isinstance(j, tir.Var) and j.dtype == "int32"
    assert tir.const(3).dtype == "int32" and tir.const(2.5).dtype == "float32"
    assert tir.const(1, "int64").dtype == "int64" and tir.const(True).dtype == "bool"
    assert isinstance(tir.IntImm("int32", 4), tir.IntImm)
    assert isinstance(tir.FloatImm("float32", 0.5), tir.FloatImm)
    assert not isinstance(tir.FloatImm("float32", 0.5), tir.IntImm)
    assert isinstance(tir.Add(i, j), tir.Add) and isinstance(i + j, tir.PrimExpr)
    assert isinstance(i * j, tir.Mul) and not isinstance(i * j, tir.Add)
    assert isinstance(tir.Select(i > 0, i, j), tir.Select)
    assert isinstance(tir.Cast("float32", i), tir.Cast)
    assert isinstance(i < j, tir.LT) and isinstance(tir.all(i < j, j > 0), tir.And)
    assert isinstance(tex.exp(tir.Cast("float32", i)), tir.Call)
    A = te.placeholder((4,), name="A")
    assert isinstance(A[i], tir.ProducerLoad) and not isinstance(3, tir.PrimExpr)


@pytest.mark.parametrize("a", [-7, -6, -1, 0, 5, 7])
@pytest.mark.parametrize("b", [-3, 2, 3])
def test_tir_integer_divisions(a, b):
    x, y = te.var("x"), te.var("y")
    cases = {"indexdiv": (tir.indexdiv, a // b), "indexmod": (tir.indexmod, a % b),
             "floordiv": (tir.floordiv, a // b), "floormod": (tir.floormod, a % b),
             "truncdiv": (tir.truncdiv, int(a / b)), "truncmod": (tir.truncmod, int(np.fmod(a, b))),
             "div": (tir.div, int(a / b))}
    for name, (fn, want) in cases.items():
        out = te.compute((1,), lambda _, fn=fn: fn(x, y), name=name)
        f = tex.build(te.create_schedule(out.op), [x, y, out])
        res = np.zeros(1, "int32")
        f(a, b, res)
        assert res[0] == want, (name, a, b)


def test_tir_intrinsics_and_externs():
    A = te.placeholder((8,), name="A")
    names = {"exp": np.exp, "expf": np.exp, "__expf": np.exp, "log": np.log,
             "sqrtf": np.sqrt, "tanhf": np.tanh, "fabsf": np.abs, "floorf": np.floor,
             "exp2f": np.exp2, "exp10f": lambda v: 10.0 ** v, "log2f": np.log2}
    a = np.linspace(0.25, 3.0, 8).astype("float32")
    for name, ref in names.items():
        B = te.compute(A.shape, lambda i, n=name: tir.call_pure_extern("float32", n, A[i]),
                       name="B")
        b = tex.testing.evaluate(B, {A: a})
        np.testing.assert_allclose(b, ref(a), rtol=2e-6, err_msg=name)
    C = te.compute(A.shape, lambda i: tir.call_intrin("float32", "tir.exp", A[i]), name="C")
    np.testing.assert_allclose(tex.testing.evaluate(C, {A: a}), np.exp(a), rtol=2e-6)
    D = te.compute(A.shape, lambda i: tir.exp(A[i]) + tir.sigmoid(A[i]) * tir.power(A[i], 2.0),
                   name="D")
    np.testing.assert_allclose(tex.testing.evaluate(D, {A: a}),
                               np.exp(a) + a * a / (1 + np.exp(-a)), rtol=1e-5)
    with pytest.raises(ValueError, match="tex has no function 'mylog'"):
        tir.call_pure_extern("float32", "mylog", A[0])
    with pytest.raises(TypeError, match="tensor 'A'"):
        tir.call_pure_extern("float32", "expf", A)


def test_tir_missing_names_say_what_to_use():
    with pytest.raises(AttributeError, match=r"tex.tir has no 'Let'.*Python variable"):
        tir.Let  # noqa: B018
    with pytest.raises(AttributeError, match=r"'tex.tir' has no attribute 'nosuchthing'$"):
        tir.nosuchthing  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute 'indexmd'; did you mean indexmod"):
        tir.indexmd  # noqa: B018
    with pytest.raises(TypeError, match="isinstance"):
        tir.PrimExpr()


# -- 3. size variables (shapes of them: issue 25) ------------------------------------------
def test_size_var_is_a_non_negative_scalar():
    n, m = tex.size_var("n"), tex.var("m")
    assert te.size_var is tex.size_var and n.kind == "size"
    assert isinstance(n, tir.SizeVar) and not isinstance(m, tir.SizeVar)
    assert tir.SizeVar("k", "int64").dtype == "int64" and isinstance(n, tir.Var)
    # the simplifier knows a size is never negative (a plain var proves nothing)
    assert tex.arith.can_prove(n >= 0) and not tex.arith.can_prove(m >= 0)
    assert tex.arith.simplify(tex.max(n, 0)) is n
    assert tex.arith.can_prove(n // 4 + n % 4 >= 0)
    with pytest.raises(TypeError, match="a size is an integer"):
        tex.size_var("f", "float32")
    # a built function takes it as a scalar argument and refuses a negative size
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * n.astype("float32"), name="B")
    f = tex.build(te.create_schedule(B.op), [A, B, n])
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    f(a, b, 3)
    np.testing.assert_allclose(b, a * 3)
    with pytest.raises(ValueError, match="does not fit in a size"):
        f(a, b, -1)


# -- 4. lower's keywords -----------------------------------------------------------------
def test_lower_takes_tvm_keywords():
    A, B, C = _vector_add(16)
    s = te.create_schedule(C.op)
    text = str(tex.lower(s, [A, B, C], simple_mode=True))
    assert "C[i] = A[i] + B[i]" in text
    assert str(tex.lower(s, [A, B, C], name="vadd", binds=None)).startswith("func vadd(")
    with pytest.raises(ValueError, match="binds="):
        tex.lower(s, [A, B, C], binds={A: object()})


# -- 6. schedules ------------------------------------------------------------------------
@pytest.mark.parametrize("extent,nparts,inner", [(100, 32, 4), (100, 3, 34), (10, 32, 1),
                                                 (64, 8, 8), (7, 7, 1)])
def test_split_nparts_is_exact(extent, nparts, inner):
    A = te.placeholder((extent,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], nparts=nparts)
    assert (xo.dom.extent, xi.dom.extent) == (nparts, inner)
    s[B].parallel(xo)
    a = np.arange(extent, dtype="float32")
    b = np.full(extent, -1.0, "float32")
    tex.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, 2 * a)


# -- 8. te.gradient ----------------------------------------------------------------------
def test_te_gradient_is_differentiate():
    X = te.placeholder((4, 5), name="X")
    W = te.placeholder((3, 5), name="W")
    k = te.reduce_axis((0, 5), name="k")
    Y = te.compute((4, 3), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="Y")
    L = topi.sum(Y * Y)
    grads = te.gradient(L, [X, W])
    assert isinstance(grads, list) and [g.shape for g in grads] == [X.shape, W.shape]
    assert tex.gradient is te.gradient
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype("float32")
    w = rng.standard_normal((3, 5)).astype("float32")
    dx, dw = tex.testing.evaluate(grads, {X: x, W: w})
    y = x @ w.T
    np.testing.assert_allclose(dx, 2 * y @ w, rtol=1e-5)
    np.testing.assert_allclose(dw, 2 * y.T @ x, rtol=1e-5)
    H = te.placeholder((4, 3), name="H")
    (jx,) = te.gradient(Y, [X], head=H)
    h = rng.standard_normal((4, 3)).astype("float32")
    np.testing.assert_allclose(tex.testing.evaluate(jx, {X: x, W: w, H: h}), h @ w, rtol=1e-5)


def test_te_has_schedule_names():
    assert te.create_schedule is tex.create_schedule
    assert te.thread_axis is tex.thread_axis
    assert {"create_schedule", "thread_axis", "gradient"} <= set(dir(te))


def test_set_store_predicate_guards_only_the_stages_own_stores():
    n, m = 16, 64
    A = te.placeholder((n, m), name="A")
    C = te.compute((n,), lambda i: A[i, 0] * 2, name="C")
    s = te.create_schedule(C.op)
    s[C].set_store_predicate(C.op.axis[0] < 5)
    a = np.random.default_rng(6).standard_normal((n, m)).astype("float32")
    c = np.full(n, -1.0, "float32")
    tex.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c[:5], a[:5, 0] * 2, rtol=1e-6)
    assert (c[5:] == -1.0).all()
    with pytest.raises(TypeError, match="must be a condition"):
        s[C].set_store_predicate(C.op.axis[0] + 1)
    # TVM's cross-thread reduction: thread 0 stores, every thread's partial sum counts
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    tx = s[B].op.reduce_axis[0]
    thread_x = te.thread_axis("threadIdx.x")
    s[B].bind(tx, thread_x)
    s[BF].compute_at(s[B], tx)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].set_store_predicate(thread_x.var.equal(0))
    b = np.zeros(n, "float32")
    tex.build(s, [A, B], "cuda").simulate(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    s[B].set_store_predicate(te.thread_axis("threadIdx.y").var.equal(0))
    with pytest.raises(ScheduleError, match="uses threadIdx.y, which no loop of 'B'"):
        tex.lower(s, [A, B])


# -- 9. te.scan and te.extern (tests/test_scan.py and tests/test_extern.py in full) ------
def test_scan_and_extern_as_tvm_spells_them():
    m, n = 8, 5
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tex.te.scan(s_init, s_update, s_state, inputs=[X])
    s = te.create_schedule(s_scan.op)
    f = tex.build(s, [X, s_scan])
    x = np.random.default_rng(9).standard_normal((m, n)).astype(X.dtype)
    out = tex.nd.array(np.zeros((m, n), dtype=s_scan.dtype))
    f(tex.nd.array(x), out)
    np.testing.assert_allclose(out.numpy(), np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)
    # the scan's output through an extern call (a Gram matrix by BLAS)
    G = te.extern((m, m), [s_scan], lambda ins, outs: tir.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[0], outs[0], False, True), name="G")
    g = tex.build(te.create_schedule(G.op), [X, G])
    gram = np.zeros((m, m), "float32")
    g(x, gram)
    c = np.cumsum(x, axis=0)
    np.testing.assert_allclose(gram, c @ c.T, rtol=1e-4, atol=1e-4)
    # a TVM tutorial's registration, by name
    assert tex.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True) is not None


# -- 12. TVM names tex lacks -------------------------------------------------------------
@pytest.mark.parametrize("module,name,says", [
    (tex, "relay", "no graph-level IR"),
    (tex, "autotvm", r"tex.schedule.auto_schedule"),
    (tex, "transform", "fastmath="),
    (te, "hybrid", "te.compute"),
    (te, "decl_tensor_intrin", "tensorize"),
    (tir, "Let", "Python variable"),
    (tir, "isnan", "x != x"),
    (tex, "placeholdr", "did you mean placeholder"),
    (te, "comptue", "did you mean compute"),
])
def test_missing_tvm_names_say_what_to_use(module, name, says):
    with pytest.raises(AttributeError, match=says):
        getattr(module, name)
    assert not hasattr(module, name)


# -- 5. building and timing as TVM does --------------------------------------------------
def test_build_module_api_as_in_the_get_started_tutorial():
    n = 1024
    A, B, C = _vector_add(n)
    s = te.create_schedule(C.op)
    tgt = tex.target.Target(target="llvm", host="llvm")
    fadd = tex.build(s, [A, B, C], tgt, name="myadd")
    dev = tex.device(tgt.kind.name, 0)
    assert dev == tex.cpu(0) and dev.exist and repr(dev) == "cpu(0)"
    rng = np.random.default_rng(0)
    a = tex.nd.array(rng.uniform(size=n).astype(A.dtype), dev)
    b = tex.nd.array(rng.uniform(size=n).astype(B.dtype), dev)
    c = tex.nd.array(np.zeros(n, dtype=C.dtype), dev)
    fadd(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    assert type(c.numpy()) is np.ndarray and c.device == dev and c.dtype == "float32"
    assert fadd.entry_name == "myadd" and fadd["myadd"] is fadd
    assert fadd.get_function("myadd") is fadd and fadd.imported_modules == []
    with pytest.raises(AttributeError, match="no function 'other'"):
        fadd.get_function("other")
    assert "define" in fadd.get_source() and fadd.get_source() == fadd.get_source("ll")
    evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=3, repeat=4)
    result = evaluator(a, b, c)
    assert len(result.results) == 4 and all(t > 0 for t in result.results)
    assert result.min <= result.median <= result.max and result.mean > 0
    assert "mean=" in repr(result)
    slow = fadd.time_evaluator("myadd", dev, number=1, repeat=1, min_repeat_ms=5)(a, b, c)
    assert slow.mean > 0
    with pytest.raises(ValueError, match="number must be >= 1"):
        fadd.time_evaluator("myadd", dev, number=0)


def test_nd_array_helpers():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    a = tex.nd.array(x)
    x[0, 0] = 100  # a copy, as TVM's
    assert a[0, 0] == 0 and a.shape == (2, 3) and a.asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    e = tex.nd.empty((2, 3), "float32", tex.cpu(0))
    e.copyfrom(x)
    np.testing.assert_array_equal(e.numpy(), x)
    out = np.zeros((2, 3), "float32")
    a.copyto(out)
    np.testing.assert_array_equal(out, a.numpy())
    with pytest.raises(ValueError, match="shape"):
        e.copyfrom(np.zeros(4))
    assert tex.nd.array([1, 2], tex.cuda(0)).device == tex.cuda(0) == tex.gpu(0)
    assert tex.device("cuda", 1) == tex.cuda(1) and tex.device("llvm") == tex.cpu()
    assert not tex.device("opencl").exist and not tex.device("vulkan", 1).exist
    with pytest.raises(ValueError, match=r"no array can live on opencl\(0\)"):
        tex.nd.array([1.0], tex.device("opencl"))
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        tex.device("tpu")


def test_cuda_build_has_the_device_module():
    n = 256
    A, B, C = _vector_add(n)
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    tgt = tex.target.Target("cuda", host="llvm")
    fadd = tex.build(s, [A, B, C], target=tgt, name="myadd")
    assert fadd.entry_name == "myadd" and len(fadd.imported_modules) == 1
    ptx = fadd.imported_modules[0].get_source()
    assert ".entry" in ptx and "sm_80" in ptx
    a, b = np.ones(n, "float32"), np.full(n, 2.0, "float32")
    c = np.zeros(n, "float32")
    fadd.simulate(a, b, c)
    np.testing.assert_array_equal(c, 3.0)


# -- 10. targets -------------------------------------------------------------------------
def test_target_objects():
    t = tex.target.Target("cuda -arch=sm_90", host="llvm")
    assert t.kind.name == "cuda" and t.arch == "sm_90" and t.attrs == {"arch": "sm_90"}
    assert t.host == tex.target.Target("llvm") and "gpu" in t.keys
    assert str(t) == "cuda -arch=sm_90" and tex.target.Target(t) == t
    assert tex.target.Target({"kind": "cuda", "arch": "sm_86"}).arch == "sm_86"
    assert tex.target.Target("llvm").host is None and tex.target.Target("llvm").arch is None
    with pytest.raises(ValueError, match="unknown target 'opencl'"):
        tex.target.Target("opencl")
    with pytest.raises(ValueError, match="-arch"):
        tex.target.Target("cuda -arch=sm_1")


def test_target_scope_is_read_by_auto_schedule_and_build():
    A, B, C = _vector_add(64)
    assert tex.target.Target.current() is None
    with tex.target.Target("cuda") as t:
        assert tex.target.Target.current() is t
        f = tex.build([C])
        assert f.target.startswith("cuda") and ".entry" in f.get_source("ptx")
        with tex.target.Target("llvm"):
            assert tex.build([C]).target == "llvm"
        assert tex.target.Target.current() is t
    assert tex.target.Target.current() is None
    with pytest.raises(ValueError, match="no target is in scope"):
        tex.target.Target.current(allow_none=False)
    s = tex.schedule.auto_schedule([C], target=tex.target.Target("llvm"))
    a = np.ones(64, "float32")
    c = np.zeros(64, "float32")
    tex.build(s, [A, B, C], tex.target.Target("llvm"))(a, a, c)
    np.testing.assert_array_equal(c, 2.0)


# -- 6. schedule primitives as TVM spells them -------------------------------------------
def test_split_nparts_lowers_to_exactly_nparts_iterations():
    A = te.placeholder((100,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], nparts=32)
    text = str(tex.lower(s, [A, B]))
    assert "for (i.outer, 0, 32)" in text and "for (i.inner, 0, 4)" in text
    assert "< 100" in text  # the outer iterations past the end are guarded off


def test_fuse_without_axes_makes_a_singleton():
    A = te.placeholder((), name="A")
    T = te.compute((), lambda: A() + 1, name="T")
    s = te.create_schedule(T.op)
    fused = s[T].fuse()
    assert any(isinstance(x, tex.schedule.Singleton) for x in s[T].relations)
    assert tuple(s[T].leaf_iter_vars) == (fused,) and fused.dom.extent == 1
    t = np.zeros((), "float32")
    tex.build(s, [A, T])(np.array(2.0, "float32"), t)
    assert t == 3.0


def test_iter_var_attrs_and_pragmas():
    B = te.placeholder((64, 64), name="B")
    C = te.compute((64, 64), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op).normalize()
    xo, xi = s[C].split(C.op.axis[0], 8)
    s[C].unroll(xi)
    s[C].vectorize(C.op.axis[1])
    s[C].parallel(xo)
    s[C].pragma(xo, "parallel_launch_point")
    s[C].pragma(xo, "auto_unroll_max_step", 16)
    attrs = s[C].iter_var_attrs
    IterVar = tex.schedule.IterVar
    assert attrs[xi].iter_type == IterVar.Unrolled
    assert attrs[C.op.axis[1]].iter_type == IterVar.Vectorized
    assert attrs[xo].iter_type == IterVar.Parallelized
    assert attrs[xo].pragma_keys == ("parallel_launch_point", "auto_unroll_max_step")
    assert attrs[xo].pragma_values == (None, 16)
    b = np.random.default_rng(0).standard_normal((64, 64)).astype("float32")
    c = np.zeros((64, 64), "float32")
    tex.build(s, [B, C])(b, c)
    np.testing.assert_array_equal(c, 2 * b)
    with pytest.raises(ValueError, match="external code"):
        s[C].pragma(xo, "import_llvm", "...")


def test_thread_axis_with_a_domain_and_a_name():
    tx = te.thread_axis((0, 64), "threadIdx.x", name="tx")
    assert (tx.tag, tx.extent, tx.name) == ("threadIdx.x", 64, "tx")
    assert te.thread_axis(tag="blockIdx.x").tag == "blockIdx.x"
    A, B, C = _vector_add(256)
    s = te.create_schedule(C.op)
    bx, x = s[C].split(C.op.axis[0], factor=128)
    with pytest.raises(ValueError, match="more than the 64 of thread axis threadIdx.x"):
        s[C].bind(x, tx)
    with pytest.raises(ValueError, match=r"dom must be \(0, n\)"):
        te.thread_axis((1, 64), "threadIdx.x")


def test_integral_float_extents_as_in_tvm_tutorials():
    N, bn = 64, 16
    B = te.placeholder((N, N), name="B")
    packed = te.compute((N / bn, N, bn), lambda x, k, y: B[k, x * bn + y], name="packedB")
    assert packed.shape == (4, 64, 16) and all(type(d) is int for d in packed.shape)
    k = te.reduce_axis((0, N / 2), name="k")
    assert k.dom.extent == 32
    with pytest.raises(TypeError, match="expected an int"):
        te.placeholder((N / 3,), name="A")


# -- 10. shared libraries ----------------------------------------------------------------
def _dense_grad(name="dense_grad"):
    X = te.placeholder((24, 16), name="X")
    W = te.placeholder((8, 16), name="W")
    L = topi.sum(topi.nn.dense(X, W) ** 2)
    dX, dW = tex.differentiate(L, [X, W])
    return [X, W, L, dX, dW], tex.build([L, dX, dW], name=name)


def _outputs(f):
    return [np.zeros(s.shape, s.dtype) for s in f.specs if s.is_output]


def test_export_library_and_load_module(tmp_path):
    (X, W, *_), f = _dense_grad()
    path = tmp_path / "dense_grad.so"
    f.export_library(path)
    g = tex.runtime.load_module(path)
    assert g.name == "dense_grad" and [a.name for a in g.args] == [a.name for a in f.args]
    assert [a.shape for a in g.args] == [a.shape for a in f.args]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((24, 16)).astype("float32")
    w = rng.standard_normal((8, 16)).astype("float32")
    want, got = _outputs(f), _outputs(g)
    f(x, w, *want)
    g(x, w, *got)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    assert "define" in g.get_source("ll") and "define" in g.get_source("ll.raw")
    with pytest.raises(ValueError, match="must have shape"):  # the same argument checks
        g(x[:4], w, *got)
    # and in a process that never built it
    import subprocess
    import sys
    code = ("import numpy as np, tex\n"
            f"g = tex.runtime.load_module({str(path)!r})\n"
            "x = np.ones((24, 16), 'float32'); w = np.ones((8, 16), 'float32')\n"
            "outs = [np.zeros(s.shape, s.dtype) for s in g.specs if s.is_output]\n"
            "g(x, w, *outs); print(float(outs[0]))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.strip()) == 24 * 8 * 16.0 ** 2


def test_loaded_library_keeps_scalars_bounds_checks_and_half_precision(tmp_path):
    T = te.placeholder((6,), name="T", dtype="float16")
    Ix = te.placeholder((4,), name="I", dtype="int32")
    s = te.var("s", "float32")
    G = te.compute((4,), lambda i: (T[Ix[i]].astype("float32") * s).astype("float16"),
                   name="G")
    f = tex.build(te.create_schedule(G.op), [T, Ix, s, G], name="gather_half")
    f.export_library(tmp_path / "g.so")
    g = tex.runtime.load_module(tmp_path / "g.so")
    t = np.arange(6, dtype="float16") / 3
    out_f, out_g = np.zeros(4, "float16"), np.zeros(4, "float16")
    f(t, np.array([0, 5, 2, 1], "int32"), 1.5, out_f)
    g(t, np.array([0, 5, 2, 1], "int32"), 1.5, out_g)
    np.testing.assert_array_equal(out_f, out_g)
    with pytest.raises(tex.testing.OutOfBoundsError, match="T"):
        g(t, np.array([0, 6, 2, 1], "int32"), 1.5, out_g)
    with pytest.raises(TypeError, match="scalar"):
        g(t, np.array([0, 1, 2, 1], "int32"), "x", out_g)


def test_load_module_refuses_what_it_cannot_run(tmp_path, monkeypatch):
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if libm:
        with pytest.raises(ValueError, match="not a library written by tex"):
            tex.runtime.load_module(libm)
    _, f = _dense_grad("features")
    f.export_library(tmp_path / "f.so")
    from tex.runtime import library
    host = library.host_target()
    poorer = type(host)(host.triple, "generic", "-avx,-avx2,-fma", host.data_layout, 128)
    monkeypatch.setattr(library, "host_target", lambda: poorer)
    if "+avx" in host.features.split(","):
        with pytest.raises(RuntimeError, match="features this host lacks"):
            tex.runtime.load_module(tmp_path / "f.so")
    monkeypatch.undo()
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(RuntimeError, match="linking with .*no-such-cc failed"):
        f.export_library(tmp_path / "g.so")


def test_save_writes_each_format(tmp_path):
    _, f = _dense_grad("saved")
    f.save(tmp_path / "f.ll")
    assert (tmp_path / "f.ll").read_text() == f.get_source("ll")
    f.save(tmp_path / "f.s")
    assert "saved" in (tmp_path / "f.s").read_text()
    f.save(tmp_path / "f.o")
    assert (tmp_path / "f.o").read_bytes()[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match="unknown format 'txt'"):
        f.save(tmp_path / "f.txt")


def test_lower_refuses_a_stage_attached_into_a_cycle():
    """A stage computed at its own loop (attach fields set without compute_at, which refuses
    it) would be computed nowhere: its output never written. lower refuses it."""
    A = te.compute((16, 16), lambda i, j: 1.0, name="A")
    C = te.compute((16, 16), lambda i, j: A[i, j] + 2.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(tex.error.ScheduleError, match="cannot be attached to itself"):
        s[C].compute_at(s[C], C.op.axis[0])
    s[A].compute_at(s[C], C.op.axis[0])
    s[C].attach_type, s[C].attach_stage, s[C].attach_ivar = "scope", s[A], A.op.axis[0]
    with pytest.raises(RuntimeError, match=r"computed at a loop of a stage computed inside "
                                           r"it \(A -> C -> A\)"):
        tex.lower(s, [C])


def test_schedule_errors_are_value_and_runtime_errors():
    A, B, C = _vector_add(16)
    s = te.create_schedule(C.op)
    with pytest.raises(tex.error.ScheduleError) as info:
        s[C].reorder(C.op.axis[0], C.op.axis[0])
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    assert isinstance(info.value, tex.TVMError)


@pytest.mark.parametrize("n", [50, 37])
def test_rfactor_names_and_orders_axes_as_tvm(n):
    """TVM's test_rfactor at concrete sizes: untouched root reduction axes stay the same
    objects, first; split leaves keep their variables; all_iter_vars has no stale axes."""
    k1 = te.reduce_axis((0, n), name="k1")
    k2 = te.reduce_axis((0, n), name="k2")
    A = te.placeholder((n, n, n), name="A")
    B = te.compute((n,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    BF = s.rfactor(B, k1)
    assert tuple(BF.shape) == (n, n) and set(BF.op.body[0].axis) == {k2}
    assert s[B].op.body[0].axis[0].dom.extent == n and len(s[B].all_iter_vars) == 2
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k1, factor=4)
    s[B].split(B.op.axis[0], factor=8)
    BF = s.rfactor(B, ki)
    assert BF.shape == (4, n) and BF.op.body[0].axis[0] is k2
    assert BF.op.body[0].axis[1].var is ko.var and s[B].op.body[0].axis[0].dom.extent == 4
    a = np.random.default_rng(n).standard_normal((n, n, n)).astype("float32")
    b = np.zeros(n, "float32")
    tex.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(axis=(1, 2)), rtol=2e-5, atol=2e-4)
    s = te.create_schedule(B.op)
    BF = s.rfactor(B, k1, 1)
    assert BF.shape == (n, n) and len(s[B].all_iter_vars) == 2
