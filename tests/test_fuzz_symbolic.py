"""Random programs over a symbolic batch (``fuzz_symbolic.py``): built once, auto-scheduled at a
random hint and with the default schedule, they agree with the interpreter at several
batches; their gradients pass ``check_grad`` at two batches."""
from __future__ import annotations

import os

import numpy as np
from fuzz_symbolic import SymbolicProgram, feed, symbolic_programs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tex
from tex.schedule import auto_schedule
from tex.testing import check_grad, evaluate

EXAMPLES = int(os.environ.get("TEX_FUZZ_EXAMPLES", "150")) // 5

FUZZ = settings(max_examples=max(8, EXAMPLES), derandomize=True, database=None,
                deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])

BATCHES = (1, 2, 5, 13)


def _check_built(f: tex.runtime.BuiltFunction, prog: SymbolicProgram) -> None:
    for k, n in enumerate(BATCHES):
        values = feed(prog, n, seed=k)
        want = evaluate(prog.out, values)
        got = np.full(want.shape, np.nan, prog.dtype)
        f(*(values[p] for p in prog.inputs), got)
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * scale,
                                   err_msg=f"batch {n}")


@FUZZ
@given(symbolic_programs(), st.sampled_from([1, 4, 64, 1000]))
def test_symbolic_builds_match_the_interpreter(prog: SymbolicProgram, hint: int) -> None:
    args = [*prog.inputs, prog.out]
    _check_built(tex.build(auto_schedule(prog.out, hint={prog.n: hint}), args), prog)
    _check_built(tex.build(tex.create_schedule(prog.out.op), args), prog)


@FUZZ
@given(symbolic_programs(max_steps=4))
def test_symbolic_gradients_match_finite_differences(prog: SymbolicProgram) -> None:
    inputs = prog.used_inputs()
    for n in (1, 3):
        check_grad(prog.out, inputs, data=feed(prog, n), rtol=1e-5, atol=1e-7)
