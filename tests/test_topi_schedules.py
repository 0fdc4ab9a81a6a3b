"""TVM's per-target topi schedules (``tex.topi.generic``, ``.x86``, ``.cuda``): each is
``tex.schedule.auto_schedule(outs, target)`` for its namespace's target
(``tex/schedule/topi_schedules.py``); names tex lacks say to use ``auto_schedule``."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tex
import tex.testing
from tex import te, topi
from tex.schedule.key import schedule_text
from tex.schedule.topi_schedules import COMMON, EXTRA, TopiTargetModule
from tex.target import Target

nn = topi.nn
Program = tuple[list[tex.Tensor], list[tex.Tensor]]  # (inputs, outputs)


def _injective() -> Program:
    A, B = te.placeholder((4, 6), name="A"), te.placeholder((6,), name="B")
    return [A, B], [topi.exp(topi.add(A, B))]


def _reduce() -> Program:
    A = te.placeholder((5, 7), name="A")
    return [A], [topi.sum(topi.multiply(A, A), axis=1)]


def _softmax() -> Program:
    A = te.placeholder((3, 9), name="A")
    return [A], [nn.softmax(A)]


def _pool(pool_type: str = "max", kernel: int = 2) -> Callable[[], Program]:
    def program() -> Program:
        X = te.placeholder((1, 2, 6, 6), name="X")
        return [X], [nn.pool2d(X, kernel, kernel, 1, 0, pool_type)]
    return program


def _pool_grad() -> Program:
    X = te.placeholder((1, 2, 4, 4), name="X")
    P = nn.pool2d(X, 2, 2, 1, 0, "max")
    (dX,) = tex.differentiate(topi.sum(P), [X])
    return [X], [dX]


def _dense() -> Program:
    X, W, B = (te.placeholder(s, name=n) for s, n in (((4, 8), "X"), ((5, 8), "W"),
                                                        ((5,), "B")))
    return [X, W, B], [nn.relu(nn.dense(X, W, B))]


def _batch_matmul() -> Program:
    X, Y = te.placeholder((2, 3, 4), name="X"), te.placeholder((2, 5, 4), name="Y")
    return [X, Y], [nn.batch_matmul(X, Y)]


def _conv(layout: str) -> Callable[[], Program]:
    def program() -> Program:
        if layout == "NCHW":
            X, K = te.placeholder((1, 2, 5, 5), name="X"), te.placeholder((3, 2, 3, 3), name="K")
            C = nn.conv2d_nchw(X, K, 1, 1, 1)
        elif layout == "NHWC":
            X, K = te.placeholder((1, 5, 5, 2), name="X"), te.placeholder((3, 3, 2, 3), name="K")
            C = nn.conv2d_nhwc(X, K, 1, 1, 1)
        else:  # TVM's tutorial: topi.generic.schedule_conv2d_hwcn([t_relu])
            X, K = te.placeholder((5, 5, 2, 1), name="X"), te.placeholder((3, 3, 2, 3), name="K")
            C = nn.conv2d_hwcn(X, K, 1, 1, 1)
        return [X, K], [nn.relu(C)]
    return program


def _depthwise(layout: str) -> Callable[[], Program]:
    def program() -> Program:
        r = te.reduce_axis((0, 3), name="r")
        s = te.reduce_axis((0, 3), name="s")
        if layout == "NCHW":
            X, K = te.placeholder((1, 2, 6, 6), name="X"), te.placeholder((2, 3, 3), name="K")
            D = te.compute((1, 2, 4, 4), lambda n, c, h, w: te.sum(
                X[n, c, h + r, w + s] * K[c, r, s], axis=[r, s]), name="D")
        else:
            X, K = te.placeholder((1, 6, 6, 2), name="X"), te.placeholder((3, 3, 2), name="K")
            D = te.compute((1, 4, 4, 2), lambda n, h, w, c: te.sum(
                X[n, h + r, w + s, c] * K[r, s, c], axis=[r, s]), name="D")
        return [X, K], [D]
    return program


def _concatenate() -> Program:
    A, B = te.placeholder((2, 3), name="A"), te.placeholder((4, 3), name="B")
    return [A, B], [topi.concatenate([A, topi.negative(B)], axis=0)]


PROGRAMS: dict[str, Callable[[], Program]] = {
    "schedule_injective": _injective,
    "schedule_elemwise": _injective,
    "schedule_broadcast": _injective,
    "schedule_reduce": _reduce,
    "schedule_softmax": _softmax,
    "schedule_pool": _pool(),
    "schedule_adaptive_pool": _pool("avg", 3),  # a 6x6 -> 2x2 adaptive average pool
    "schedule_pool_grad": _pool_grad,
    "schedule_dense": _dense,
    "schedule_dense_nopack": _dense,
    "schedule_dense_pack": _dense,
    "schedule_batch_matmul": _batch_matmul,
    "schedule_conv2d_nchw": _conv("NCHW"),
    "schedule_conv2d_nhwc": _conv("NHWC"),
    "schedule_conv2d_hwcn": _conv("HWCN"),
    "schedule_depthwise_conv2d_nchw": _depthwise("NCHW"),
    "schedule_depthwise_conv2d_nhwc": _depthwise("NHWC"),
    "schedule_extern": _injective,
    "schedule_concatenate": _concatenate,
    "schedule_concatenate_cpu": _concatenate,
}
NAMESPACES = {"generic": topi.generic, "x86": topi.x86, "cuda": topi.cuda}


def _call(fn: Callable[..., tex.schedule.Schedule], outs: list[tex.Tensor]
          ) -> tex.schedule.Schedule:
    """``fn`` called as TVM's code calls it (the pools with a layout)."""
    if fn.__name__ in ("schedule_pool", "schedule_adaptive_pool"):
        return fn(outs, "NCHW")
    return fn(outs[0] if len(outs) == 1 else outs)


def test_every_schedule_has_a_program() -> None:
    names = {*COMMON, *(n for extra in EXTRA.values() for n in extra)}
    assert names == set(PROGRAMS)
    for short, ns in NAMESPACES.items():
        assert isinstance(ns, TopiTargetModule) and ns.__name__ == f"tex.topi.{short}"
        assert set(COMMON) | set(EXTRA[short]) <= set(dir(ns))
    assert topi.generic.default.default_schedule is topi.generic.default_schedule


@pytest.mark.parametrize("name", sorted(set(COMMON) | set(EXTRA["generic"])))
def test_generic_schedule_builds_and_matches_the_interpreter(name: str,
                                                             rng: np.random.Generator
                                                             ) -> None:
    inputs, outs = PROGRAMS[name]()
    s = _call(getattr(topi.generic, name), outs)
    assert isinstance(s, tex.schedule.Schedule)
    f = tex.build(s, [*inputs, *outs])
    feed = {t: rng.standard_normal(t.shape).astype(t.dtype) for t in inputs}
    got = [np.zeros(o.shape, o.dtype) for o in outs]
    f(*feed.values(), *got)
    want = tex.testing.evaluate(outs, feed)
    for g, w in zip(got, want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("short, name", [
    (short, name) for short in NAMESPACES for name in sorted({*COMMON, *EXTRA[short]})])
def test_schedules_are_auto_schedule_for_their_target(short: str, name: str) -> None:
    """Every schedule of every namespace is ``auto_schedule`` for its target (outside any
    ``with Target``: ``llvm`` for generic and x86, ``cuda`` for cuda)."""
    inputs, outs = PROGRAMS[name]()
    s = _call(getattr(NAMESPACES[short], name), outs)
    want = tex.schedule.auto_schedule(outs, "cuda" if short == "cuda" else "llvm")
    args = [*inputs, *outs]
    assert schedule_text(s, args) == schedule_text(want, args)


def test_cuda_schedule_inside_a_cuda_target_builds_ptx_and_simulates() -> None:
    A, B = te.placeholder((6, 5), name="A"), te.placeholder((5,), name="B")
    C = topi.add(A, B)
    with tex.target.Target("cuda"):
        s = topi.cuda.schedule_injective(C)
    assert {t.tag for t in s[C].bindings.values()} >= {"blockIdx.x", "threadIdx.x"}
    f = tex.build(s, [A, B, C], target="cuda")
    assert ".entry" in f.get_source("ptx")
    a = np.arange(30, dtype="float32").reshape(6, 5)
    b = np.arange(5, dtype="float32")
    c = np.zeros((6, 5), "float32")
    f.simulate(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_cuda_takes_the_cuda_target_in_scope_and_ignores_a_cpu_one() -> None:
    inputs, outs = _softmax()
    args = [*inputs, *outs]
    sm90 = schedule_text(tex.schedule.auto_schedule(outs, "cuda -arch=sm_90"), args)
    with Target("cuda -arch=sm_90"):
        assert schedule_text(topi.cuda.schedule_softmax(outs), args) == sm90
    default = schedule_text(tex.schedule.auto_schedule(outs, "cuda"), args)
    with Target("llvm"):
        assert schedule_text(topi.cuda.schedule_softmax(outs), args) == default


def test_generic_follows_the_target_in_scope() -> None:
    inputs, outs = _injective()
    args = [*inputs, *outs]
    with Target("cuda"):
        s = topi.generic.schedule_injective(outs)
        d = topi.generic.default_schedule(outs, True)
    want = schedule_text(tex.schedule.auto_schedule(outs, "cuda"), args)
    assert schedule_text(s, args) == schedule_text(d, args) == want
    assert schedule_text(topi.generic.default_schedule(outs), args) == schedule_text(
        tex.schedule.auto_schedule(outs, "llvm"), args)


def test_x86_refuses_a_cuda_target_in_scope() -> None:
    _, outs = _reduce()
    with Target("cuda -arch=sm_90"):
        with pytest.raises(ValueError, match=r"tex\.topi\.x86\.schedule_reduce: the target "
                                             r"in scope is 'cuda -arch=sm_90'.*"
                                             r"tex\.topi\.cuda\.schedule_reduce"):
            topi.x86.schedule_reduce(outs)
    with Target("llvm"):
        assert isinstance(topi.x86.schedule_reduce(outs), tex.schedule.Schedule)


def test_bad_arguments_name_the_function() -> None:
    _, outs = _pool()()
    with pytest.raises(TypeError, match=r"tex\.topi\.cuda\.schedule_dense: outs must be a "
                                        r"Tensor or a non-empty list of Tensors, got list"):
        topi.cuda.schedule_dense([])
    with pytest.raises(TypeError, match=r"tex\.topi\.generic\.schedule_pool: layout must "
                                        r"be a string"):
        topi.generic.schedule_pool(outs, 4)


@pytest.mark.parametrize("ns, name, match", [
    (topi.cuda, "schedule_conv2d_NCHWc",
     r"tex\.topi\.cuda has no 'schedule_conv2d_NCHWc' \(a TVM name\); use "
     r"tex\.schedule\.auto_schedule\(outs, target\).*blocked layouts"),
    (topi.generic, "schedule_conv2d_winograd_without_weight_transform",
     r"use tex\.schedule\.auto_schedule.*Winograd"),
    (topi.x86, "schedule_dense_mkl", r"use tex\.schedule\.auto_schedule.*vendor library"),
    (topi.generic, "schedule_lrn", r"tex has no lrn operator"),
    (topi.cuda, "schedule_dense_small_batch", r"use schedule_dense\(outs\)"),
    (topi.x86, "schedule_injective_from_existing", r"use tex\.schedule\.auto_schedule"),
    (topi.cuda, "schedule_x",
     r"module 'tex\.topi\.cuda' has no attribute 'schedule_x'; use "
     r"tex\.schedule\.auto_schedule\(outs, target\), which schedules any DAG"),
    (topi.x86, "schedule_injectiv", r"auto_schedule.*did you mean schedule_injective"),
    (topi.cuda, "not_a_schedule", r"module 'tex\.topi\.cuda' has no attribute "
                                  r"'not_a_schedule'$"),
    (topi, "gpu", r"tex\.topi has no 'gpu' \(a TVM name\); use "
                  r"tex\.schedule\.auto_schedule\(outputs, 'cuda'\)"),
    (topi, "arm_cpu", r"use tex\.schedule\.auto_schedule\(outputs, 'llvm'\)"),
])
def test_missing_schedule_names_say_to_use_auto_schedule(ns: object, name: str,
                                                         match: str) -> None:
    with pytest.raises(AttributeError, match=match):
        getattr(ns, name)
    assert not hasattr(ns, name)


def test_the_namespaces_are_topi_attributes() -> None:
    from tex.topi import cuda, generic, x86

    assert (generic, x86, cuda) == (topi.generic, topi.x86, topi.cuda)
    assert topi.cuda.schedule_injective.__name__ == "schedule_injective"
    assert "auto_schedule" in (topi.x86.schedule_dense.__doc__ or "")
