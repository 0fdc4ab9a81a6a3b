"""Names in generated code: any tensor, axis or function name builds and computes, whatever
its length or characters (LLVM truncates local names to 1,024 characters, so long names that
share a prefix used to collide); ordinary names appear unchanged in the IR."""
from __future__ import annotations

import numpy as np
import pytest

import tex

LONG = "a" * 1100


def _chain(n1: str, n2: str, n3: str, n4: str) -> list[tex.Tensor]:
    """D = (A + 2B)^2 through C."""
    A = tex.placeholder((8, 4), "float32", name=n1)
    B = tex.placeholder((8, 4), "float32", name=n2)
    C = tex.compute((8, 4), lambda i, j: A[i, j] + B[i, j] * 2.0, name=n3)
    D = tex.compute((8, 4), lambda i, j: C[i, j] * C[i, j], name=n4)
    return [A, B, C, D]


NAME_SETS = {
    "over-1023-shared-prefix": (LONG + "X", LONG + "Y", LONG + "C", LONG + "D"),
    "differ-past-char-1000": ("p" * 1001 + "1", "p" * 1001 + "2", "p" * 1001 + "3",
                              "p" * 1001 + "4"),
    "unicode": ("données", "β_poids", "выход", "出力"),
    "odd-characters": ('a "quoted" name', "back\\slash", "with.dots.and-dashes", "new\nline"),
    "long-unicode": ("é" * 700 + "1", "é" * 700 + "2", "é" * 700 + "3", "é" * 700 + "4"),
}


@pytest.mark.parametrize("names", list(NAME_SETS.values()), ids=list(NAME_SETS))
@pytest.mark.parametrize("parallel", [False, True])
def test_any_tensor_names_build_and_compute(names: tuple[str, ...], parallel: bool) -> None:
    A, B, C, D = _chain(*names)
    s = tex.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    if parallel:
        s[D].parallel(D.op.axis[0])
    f = tex.build(s, [A, B, D], name="f")
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal((8, 4)).astype("float32") for _ in range(2))
    d = np.zeros((8, 4), "float32")
    f(a, b, d)
    np.testing.assert_allclose(d, (a + 2 * b) ** 2, rtol=1e-6)


def test_long_axis_and_function_names() -> None:
    A = tex.placeholder((6,), "float32", name="A")
    k1 = tex.reduce_axis((0, 6), name="k" * 1500 + "1")
    k2 = tex.reduce_axis((0, 6), name="k" * 1500 + "2")
    S = tex.compute((6,), lambda i: tex.sum(A[k1] * A[i], axis=k1), name="S")
    T = tex.compute((6,), lambda i: tex.sum(S[k2] + A[i], axis=k2), name="T")
    f = tex.build([T], name="g" * 1200)
    a = np.arange(6, dtype="float32")
    t = np.zeros(6, "float32")
    f(a, t)
    s = a.sum() * a
    np.testing.assert_allclose(t, s.sum() + 6 * a, rtol=1e-6)


def test_ordinary_names_appear_unchanged_in_the_ir() -> None:
    A, B, C, D = _chain("inp_a", "inp_b", "mid", "out")
    s = tex.create_schedule(D.op)
    f = tex.build(s, [A, B, D], name="plain")
    ll = f.get_source("ll.raw")
    for name in ('%"inp_a"', '%"inp_b"', '%"out"', '@"plain"'):
        assert name in ll, name


@pytest.mark.parametrize("fname", ["出力", "f" * 1500, "ünïcode_" + "z" * 400])
def test_function_names_become_ascii_symbols(fname: str) -> None:
    """A unicode function name made the JIT lookup fail (ASCII only) and the NVPTX backend
    abort the process (LLVM ERROR: unsupported characters)."""
    A = tex.placeholder((64,), "float32", name="入力")
    D = tex.compute((64,), lambda i: A[i] * 2.0, name="D")
    s = tex.create_schedule(D.op)
    s[D].parallel(D.op.axis[0])
    f = tex.build(s, [A, D], name=fname)
    assert f.name == fname
    a = np.arange(64, dtype="float32")
    d = np.zeros_like(a)
    f(a, d)
    np.testing.assert_array_equal(d, a * 2)
    g = tex.create_schedule(D.op)
    bx, tx = g[D].split(D.op.axis[0], factor=32)
    g[D].bind(bx, tex.thread_axis("blockIdx.x"))
    g[D].bind(tx, tex.thread_axis("threadIdx.x"))
    ptx = tex.build(g, [A, D], target="cuda", name=fname).get_source("ptx")
    entries = [line.split()[-1].rstrip("(") for line in ptx.splitlines() if ".entry" in line]
    assert entries and all(e.isascii() and len(e) < 256 for e in entries), entries


@pytest.mark.parametrize("names", [NAME_SETS["over-1023-shared-prefix"], NAME_SETS["unicode"]],
                         ids=["long", "unicode"])
def test_outlined_nests_take_any_names(names: tuple[str, ...]) -> None:
    """Past OUTLINE_MIN_NESTS stored stages each nest is an internal function whose
    arguments carry the buffers' names: long or odd names must not collide there either."""
    from tex.codegen.parallel import OUTLINE_MIN_NESTS
    A = tex.placeholder((4,), "float32", name=names[0])
    stages = [A]
    for k in range(OUTLINE_MIN_NESTS + 2):
        prev = stages[-1]
        stages.append(tex.compute((4,), lambda i, p=prev: p[i] + 1.0, name=f"{names[2]}{k}"))
    s = tex.create_schedule(stages[-1].op)  # the default schedule stores every stage
    f = tex.build(s, [A, stages[-1]], name=names[3])
    assert ".nest1(" in f.get_source("ll")  # the nests are outlined
    a = np.arange(4, dtype="float32")
    out = np.zeros(4, "float32")
    f(a, out)
    np.testing.assert_allclose(out, a + OUTLINE_MIN_NESTS + 2)
