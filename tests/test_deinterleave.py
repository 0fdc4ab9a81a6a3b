"""De-interleaved strided reads (``tex.schedule.phase.deinterleave``): a strided sum whose
vector axis reads its input at a stride (a stride-2 convolution's ``X[.., 2*w + rx]``)
reads a copy of the input split by phase instead, contiguous along the vector, with the
same results; a sum that reads each input element only once or twice (a pooling window)
keeps its gathers."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.schedule import auto_schedule
from tex.testing import evaluate


def _run(outs: list[tex.Tensor], ins: list[tex.Tensor], seed: int = 0) -> str:
    """Build ``outs`` auto-scheduled, check them against the interpreter, return the
    lowered text."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(tuple(int(d) for d in t.shape)).astype(np.float32)
              for t in ins]
    s = auto_schedule(outs)
    f = tex.build(s, [*ins, *outs])
    got = [np.zeros(tuple(int(d) for d in t.shape), np.float32) for t in outs]
    f(*arrays, *got)
    want = evaluate(outs, dict(zip(ins, arrays)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    return str(tex.lower(s, [*ins, *outs]))


@pytest.mark.parametrize("stride, kernel, pad", [(2, 5, 2), (2, 3, 1), (3, 3, 0), (2, 4, 1)])
def test_strided_convolution_reads_a_copy_by_phase(stride: int, kernel: int, pad: int
                                                   ) -> None:
    x = tex.placeholder((4, 8, 40, 40), name="x")
    w = tex.placeholder((16, 8, kernel, kernel), name="w")
    y = topi.nn.conv2d(x, w, stride, pad)
    text = _run([y], [x, w])
    assert ".deint" in text
    # the vector loop reads the copy at unit stride (no "w * 2" in any index)
    assert f"w * {stride}]" not in text and f"w * {stride} +" not in text


def test_its_gradient_matches() -> None:
    x = tex.placeholder((2, 4, 24, 24), name="x")
    w = tex.placeholder((8, 4, 5, 5), name="w")
    y = topi.nn.conv2d(x, w, 2, 2)
    loss = topi.sum(y * y)
    _run([loss, *tex.differentiate(loss, [x, w])], [x, w])


def test_pooling_windows_keep_their_reads() -> None:
    """A 2 x 2 max pool of stride 2 reads each element once: a copy would double the
    traffic of a memory-bound stage."""
    x = tex.placeholder((8, 32, 64, 64), name="x")
    y = topi.nn.pool2d(x, (2, 2), (2, 2), 1, 0, pool_type="max")
    assert ".deint" not in _run([y], [x])


def test_a_one_by_one_strided_convolution_is_left_alone() -> None:
    """No tap along the row (``X[.., 2*w]``): nothing to split by phase."""
    x = tex.placeholder((4, 16, 32, 32), name="x")
    w = tex.placeholder((32, 16, 1, 1), name="w")
    assert ".deint" not in _run([topi.nn.conv2d(x, w, 2, 0)], [x, w])
