"""The WORKLOADS.md programs with a symbolic batch: forward and gradients differentiated once,
auto-scheduled once and built once, then called at batch 1, 7, 64 and 1,000 and compared
with the reference interpreter; gradients also pass check_grad at two batch sizes."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tex
from tex.schedule import auto_schedule
from tex.testing import check_grad, evaluate

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import workloads  # noqa: E402  (benchmarks/ is not a package)

BATCHES = (1, 7, 64, 1000)


def _arrays(w: workloads.Workload, batch: int, n: tex.tir.Var, seed: int
            ) -> dict[tex.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t: rng.standard_normal(tuple(batch if d is n else d for d in t.shape))
            .astype(t.dtype.numpy) for t in w.placeholders}


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_built_once_called_at_any_batch(name: str) -> None:
    n = tex.size_var("n")
    w = workloads.WORKLOADS[name](small=True, batch=n)
    grads = tex.differentiate(w.loss, w.wrt)
    outputs = [w.forward, w.loss, *grads]
    args = [*w.placeholders, *outputs]
    f = tex.build(auto_schedule(outputs, hint={n: 16}), args)
    for k, batch in enumerate(BATCHES):
        if name in ("conv2d", "conv2d_strided", "maxpool2d") and batch == 1000:
            batch = 100  # (the interpreter's reference is the slow part at 1,000 images)
        feed = _arrays(w, batch, n, seed=k)
        want = evaluate(outputs, feed)
        got = [np.zeros_like(a) for a in want]
        f(*feed.values(), *got)
        for t, g, e in zip(outputs, got, want):
            scale = max(1.0, float(np.abs(e).max()))
            np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-3 * scale,
                                       err_msg=f"{name} at batch {batch}: {t.name}")


@pytest.mark.parametrize("name", ["dense", "softmax", "layernorm", "conv2d_strided"])
def test_symbolic_gradients_pass_check_grad(name: str) -> None:
    n = tex.size_var("n")
    w = workloads.WORKLOADS[name](small=True, batch=n)
    for batch in (1, 3):
        check_grad(w.forward, w.wrt, data={n: batch}, precision="float64")
