"""TVM's gallery tutorials, ported to tex (``tutorials/*.py``: TVM's code with the imports
renamed, each under TVM's license header), run as they are; then what each one made is
checked here, so that a port that runs but computes something else still fails."""
from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent / "tutorials"


def _run(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """Run tutorial ``name`` as a script; its globals and what it printed."""
    scope = runpy.run_path(str(HERE / f"{name}.py"), run_name="__main__")
    return scope, capsys.readouterr().out


def _dot_nodes(text: str) -> set[str]:
    return set(re.findall(r'^\s*"?([\w.]+)"?\s*\[', text, re.M))


def test_tedd(capsys: pytest.CaptureFixture[str]) -> None:
    scope, _ = _run("tedd", capsys)
    s = scope["s"]
    assert [st.name for st in s.stages][-1] == "T_relu"
    dfg = Path("/tmp/dfg.dot").read_text()
    for name in ("A", "W", "bias", "conv2d_hwcn", "T_add", "T_relu"):
        assert name in dfg, name
    tree = Path("/tmp/scheduletree2.dot").read_text()
    assert "ROOT" in tree and "T_relu" in tree
    itervars = Path("/tmp/itervar.dot").read_text()
    assert itervars.count("{") == itervars.count("}") and "subgraph" in itervars
    assert _dot_nodes(dfg)


def test_opt_gemm(capsys: pytest.CaptureFixture[str]) -> None:
    # 1024**3 as TVM's: every schedule's result is checked against numpy.dot in the script
    _, out = _run("opt_gemm", capsys)
    times = {m.group(1): float(m.group(2))
             for m in re.finditer(r"^(Baseline|Opt\d): ([\d.]+)$", out, re.M)}
    assert set(times) == {"Baseline", *(f"Opt{k}" for k in range(1, 7))}
    # what the tutorial teaches: each step keeps or improves the time, blocking and
    # parallelism by a wide margin
    assert times["Opt6"] < times["Opt3"] < times["Opt1"] < times["Baseline"] / 4
    assert out.count("func main(") == 7  # tex.lower(..., simple_mode=True) printed


def test_extern_op(capsys: pytest.CaptureFixture[str]) -> None:
    import tex

    try:
        scope, out = _run("extern_op", capsys)
    finally:
        tex.remove_global_func("tvm.contrib.my_tvm_addone")
    # the Python hook ran once, on TVM's array type
    assert out.count("my_tvm_addone signatures:") == 1
    assert "NDArray" in out
    # the contrib wrapper built the same extern call as the hand-written one
    C = scope["C"]
    assert C.op.call.func_name == "tex.contrib.cblas.matmul" and C.shape == (1024, 235)


def test_autodiff_2019(capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    import tex

    scope, out = _run("autodiff_2019", capsys)
    assert "dY_dW.shape (32, 10, 10, 100)" in out
    # the dense layer's gradient is the hand-written one, the max pool's a gather of the
    # head at the argmax: no Jacobian, no mask over the window
    assert "W_grad_matmul[p, q] = sum(H1[i, p] * X[i, q], i in [0, 32))" in out
    assert "X1_grad_pool_max" in out and "argsel_max" in out
    X, W, B, L = scope["X"], scope["W"], scope["B"], scope["L"]
    rng = np.random.default_rng(2019)
    feed = {t: rng.standard_normal(t.shape).astype("float32") for t in (X, W, B)}
    want = tex.testing.evaluate(list(tex.differentiate(L, [X, W, B])), feed)
    # the override blocks X and differentiates W and B without zero elimination
    res = scope["res"]  # (differentiated with respect to every placeholder, in order)
    assert len(res) == 3
    got = tex.testing.evaluate(list(res), feed)
    assert not got[0].any()
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4)
    # the naive fdiff (a tensordot with the literal Jacobian) agrees with the default
    naive = tex.differentiate(L, [W], fdiff=scope["custom_fdiff"])
    np.testing.assert_allclose(tex.testing.evaluate(naive[0], feed), want[1], rtol=1e-4)
