"""Symbolic against concrete builds of the WORKLOADS.md programs (``run.py --symbolic``).

For each workload the batch (leading) extent becomes a ``tex.size_var`` ``n``: the forward
and the gradient function (the loss and every gradient) are differentiated, auto-scheduled
with ``hint={n: B}`` (B: the workload's own batch) and built once. At B and at two other
batches (B/4, a size no tile divides: 3B/4 + 1) the same programs are also built for that
concrete batch; both builds run on the same arrays, are checked against each other, and
are timed interleaved (medians of ``--repeat`` rounds). The ratio symbolic / concrete is
the price of one build serving every batch (issue 25 asks for at most 1.25).

    python benchmarks/run.py --symbolic                  # every workload
    python benchmarks/run.py --symbolic --only dense softmax --repeat 7
    python benchmarks/symbolic.py --quick                # tiny shapes, checks only
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tex
from tex.schedule import auto_schedule

from workloads import WORKLOADS, Workload, write_results

DEFAULT_OUTPUT = HERE / "results" / "symbolic.json"
RTOL, ATOL = 2e-3, 2e-3


def _batch(w: Workload) -> int:
    return int(w.forward.shape[0])


def sizes_of(batch: int) -> list[int]:
    """The batches timed: the hint, a quarter of it, and one no tile divides."""
    return list(dict.fromkeys([batch, max(1, batch // 4), 3 * batch // 4 + 1]))


class _Program:
    """A workload's forward and gradient functions, built for one batch or symbolic."""

    def __init__(self, w: Workload, hint: dict[tex.tir.Var, int] | None) -> None:
        self.w = w
        grads = list(tex.differentiate(w.loss, w.wrt))
        t0 = time.perf_counter()
        self.fwd_outputs = [w.forward]
        self.grad_outputs = [w.loss, *grads]
        self.fwd = tex.build(auto_schedule(self.fwd_outputs, hint=hint),
                             [*w.inputs, *self.fwd_outputs], name=f"{w.name}_fwd")
        self.grad = tex.build(auto_schedule(self.grad_outputs, hint=hint),
                              [*w.placeholders, *self.grad_outputs], name=f"{w.name}_grad")
        self.compile_s = time.perf_counter() - t0

    def calls(self, arrays: dict[str, np.ndarray], batch: int
              ) -> tuple[list[Any], list[Any], list[np.ndarray], list[np.ndarray]]:
        """The arguments of both functions at ``arrays`` (outputs fresh)."""
        def concrete(t: tex.Tensor) -> tuple[int, ...]:
            return tuple(batch if not isinstance(d, int) else d for d in t.shape)

        fwd_out = [np.zeros(concrete(t), t.dtype.numpy) for t in self.fwd_outputs]
        grad_out = [np.zeros(concrete(t), t.dtype.numpy) for t in self.grad_outputs]
        fwd_args = [arrays[t.name] for t in self.w.inputs] + fwd_out
        grad_args = [arrays[t.name] for t in self.w.placeholders] + grad_out
        return fwd_args, grad_args, fwd_out, grad_out


def _arrays(w: Workload, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in w.placeholders:
        shape = tuple(batch if not isinstance(d, int) else d for d in t.shape)
        out[t.name] = rng.standard_normal(shape).astype(t.dtype.numpy)
    return out


def bench(name: str, small: bool, repeat: int, min_time: float, timed: bool
          ) -> list[dict[str, Any]]:
    """One workload's rows: per batch, the concrete and symbolic times of both functions."""
    hint_batch = _batch(WORKLOADS[name](small=small))
    n = tex.size_var("n")
    sym = _Program(WORKLOADS[name](small=small, batch=n), {n: hint_batch})
    rows = []
    for batch in sizes_of(hint_batch):
        con = _Program(WORKLOADS[name](small=small, batch=batch), None)
        arrays = _arrays(con.w, batch, seed=batch)
        c_fwd, c_grad, c_fo, c_go = con.calls(arrays, batch)
        s_fwd, s_grad, s_fo, s_go = sym.calls(arrays, batch)
        con.fwd(*c_fwd)
        con.grad(*c_grad)
        sym.fwd(*s_fwd)
        sym.grad(*s_grad)
        for t, a, b in zip([*con.fwd_outputs, *con.grad_outputs], [*c_fo, *c_go],
                           [*s_fo, *s_go]):
            scale = max(1.0, float(np.abs(a).max()))
            np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL * scale,
                                       err_msg=f"{name} at batch {batch}: {t.name}")
        row: dict[str, Any] = {"name": name, "batch": batch, "hint": hint_batch,
                               "compile_s": {"concrete": con.compile_s,
                                             "symbolic": sym.compile_s}}
        if timed:
            times: dict[str, list[float]] = {k: [] for k in
                                             ("fwd_c", "fwd_s", "grad_c", "grad_s")}
            variants = {"fwd_c": (con.fwd, c_fwd), "fwd_s": (sym.fwd, s_fwd),
                        "grad_c": (con.grad, c_grad), "grad_s": (sym.grad, s_grad)}
            for _ in range(repeat):  # interleaved: a slow period hits every variant
                for key, (fn, fargs) in variants.items():
                    times[key].append(mean_call_time(functools.partial(fn, *fargs),
                                                     min_time))
            row.update({k: statistics.median(v) for k, v in times.items()})
        rows.append(row)
        print(f"  {name} at batch {batch}: checked", flush=True)
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table of timed rows."""
    lines = ["| workload | batch | fwd concrete ms | fwd symbolic ms | ratio | "
             "grad concrete ms | grad symbolic ms | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "fwd_c" not in r:
            continue
        hint = " (hint)" if r["batch"] == r["hint"] else ""
        lines.append(
            f"| {r['name']} | {r['batch']}{hint} | {r['fwd_c'] * 1e3:.3f} | "
            f"{r['fwd_s'] * 1e3:.3f} | {r['fwd_s'] / r['fwd_c']:.2f} | "
            f"{r['grad_c'] * 1e3:.3f} | {r['grad_s'] * 1e3:.3f} | "
            f"{r['grad_s'] / r['grad_c']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, checks only")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds, median")
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds per timing of one variant")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), metavar="NAME")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for name in args.only or list(WORKLOADS):
        rows += bench(name, args.quick, args.repeat, args.min_time, not args.quick)
    if not args.quick:
        print("\nsymbolic (one build, batch a tex.size_var, hint = the workload's batch) "
              f"against concrete builds, medians of {args.repeat} interleaved rounds\n")
        print(table(rows))
    write_results(args.output, "symbolic", {"quick": args.quick, "repeat": args.repeat,
                                            "min_time": args.min_time}, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
