"""The cost of run-time bounds checks: each workload built with ``bounds_check=True`` (the
default) and ``False``, checked against NumPy, then timed interleaved.

Workloads (all read through indices computed from data, the reads the checks guard):

- ``embedding``: ``E[i, j] = W[I[i], j]`` (an unclipped embedding lookup: a checked read),
  ``loss = sum(E * H)`` and its gradient in ``W`` (a scatter over ``I``), one function;
- ``take``: the same through ``topi.take`` (``mode="clip"``: proven in bounds, no check);
- ``maxpool2d``: ``workloads.maxpool2d``'s forward and gradient (argmax-selected);
- ``unpool``: ``Y[n, c, h, w] = X[n, c, 2h + K // 2, 2w + K % 2]`` with ``K`` a stored
  argmax (a max-pool gradient's read through computed indices: two checked dimensions).

Columns: the number of checks left in the function, the fastest of ``--repeat`` repetitions
(each the mean over at least ``--min-time`` seconds of calls) with and without checks, the
overhead between those, and the overhead between the medians. On a shared machine the
fastest repetition is the least disturbed: ``take`` (identical code both ways) shows the
noise left. ``--quick``: tiny shapes, checks only.

    python benchmarks/bounds_check.py
    python benchmarks/bounds_check.py --quick

Prints a markdown table and writes ``benchmarks/results/bounds_check.json`` (``--output``).
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tex
from tex import topi
from tex.lower.bounds_check import report_ops

from workloads import maxpool2d, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "bounds_check.json"

Case = tuple[list[tex.Tensor], list[tex.Tensor], dict[str, np.ndarray],
             Callable[[dict[str, np.ndarray]], list[np.ndarray]]]


def embedding(quick: bool, clipped: bool) -> Case:
    v, d, n = (50, 8, 32) if quick else (30000, 64, 16384)
    W = tex.placeholder((v, d), name="W")
    I = tex.placeholder((n,), "int32", name="I")
    H = tex.placeholder((n, d), name="H")
    E = topi.take(W, I, axis=0) if clipped else \
        tex.compute((n, d), lambda i, j: W[I[i], j], name="E")
    loss = topi.sum(E * H)
    (gW,) = tex.differentiate(loss, [W])
    rng = np.random.default_rng(0)
    feed = {"W": rng.standard_normal((v, d)).astype(np.float32),
            "I": rng.integers(0, v, n).astype(np.int32),
            "H": rng.standard_normal((n, d)).astype(np.float32)}

    def ref(a: dict[str, np.ndarray]) -> list[np.ndarray]:
        g = np.zeros((v, d), np.float64)
        np.add.at(g, a["I"], a["H"])
        return [np.sum(a["W"][a["I"]] * a["H"], dtype=np.float64), g]

    return [W, I, H], [loss, gW], feed, ref


def pooling(quick: bool) -> Case:
    w = maxpool2d(small=quick)
    grads = tex.differentiate(w.loss, w.wrt)
    arrays = random_arrays(w, 0)

    def ref(a: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.sum(w.numpy_forward(a) * a["H"], dtype=np.float64), *w.numpy_grad(a)]

    return [*w.inputs, w.head], [w.loss, *grads], arrays, ref


def unpool(quick: bool) -> Case:
    n, c, h = (1, 2, 4) if quick else (16, 64, 56)
    X = tex.placeholder((n, c, 2 * h, 2 * h), name="X")
    K = tex.placeholder((n, c, h, h), "int32", name="K")
    Y = tex.compute((n, c, h, h), lambda a, b, y, x: X[a, b, 2 * y + K[a, b, y, x] // 2,
                                                       2 * x + K[a, b, y, x] % 2], name="Y")
    rng = np.random.default_rng(1)
    feed = {"X": rng.standard_normal((n, c, 2 * h, 2 * h)).astype(np.float32),
            "K": rng.integers(0, 4, (n, c, h, h)).astype(np.int32)}

    def ref(a: dict[str, np.ndarray]) -> list[np.ndarray]:
        x, k = a["X"], a["K"]
        win = x.reshape(n, c, h, 2, h, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, h, 4)
        return [np.take_along_axis(win, k[..., None], axis=-1)[..., 0]]

    return [X, K], [Y], feed, ref


CASES: dict[str, Callable[[bool], Case]] = {
    "embedding": lambda q: embedding(q, clipped=False),
    "take": lambda q: embedding(q, clipped=True),
    "maxpool2d": pooling,
    "unpool": unpool,
}


def _runner(f: tex.runtime.module.BuiltFunction, feed: dict[str, np.ndarray]
            ) -> tuple[Callable[[], None], list[np.ndarray]]:
    arrays: list[Any] = []
    outs: list[np.ndarray] = []
    for t in f.args:
        if t.name in feed:
            arrays.append(feed[t.name])
        else:
            out = np.zeros(t.shape, t.dtype.numpy)
            arrays.append(out)
            outs.append(out)
    return (lambda: f(*arrays)), outs


def run(name: str, quick: bool, repeat: int, min_time: float) -> dict[str, Any]:
    inputs, outputs, feed, ref = CASES[name](quick)
    fns = {flag: tex.build(outputs, [*inputs, *outputs], bounds_check=flag)
           for flag in (True, False)}
    checks = len(report_ops(tex.lower(outputs, [*inputs, *outputs])))
    calls = {}
    for flag, f in fns.items():
        call, outs = _runner(f, feed)
        call()
        for got, want in zip(outs, ref(feed)):
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * scale,
                                       err_msg=f"{name} (bounds_check={flag})")
        calls[flag] = call
    row: dict[str, Any] = {"workload": name, "checks": checks}
    if quick:
        return row
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeat):
        for flag in (True, False):  # interleaved: drifts hit both alike
            times[flag].append(mean_call_time(calls[flag], min_time))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    # on a shared machine the fastest repetition is the least disturbed one: the overhead
    # is computed from the minima (the medians are recorded too)
    best_on, best_off = min(times[True]), min(times[False])
    row.update(checked_ms=best_on * 1e3, unchecked_ms=best_off * 1e3,
               checked_median_ms=on * 1e3, unchecked_median_ms=off * 1e3,
               overhead_pct=(best_on / best_off - 1) * 100,
               overhead_median_pct=(on / off - 1) * 100)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, checks only")
    parser.add_argument("--only", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    rows = [run(name, args.quick, args.repeat, args.min_time) for name in args.only]
    print("| workload | checks | checked (ms) | unchecked (ms) | overhead | overhead of "
          "medians |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if args.quick:
            print(f"| {r['workload']} | {r['checks']} | - | - | - | - |")
        else:
            print(f"| {r['workload']} | {r['checks']} | {r['checked_ms']:.3f} | "
                  f"{r['unchecked_ms']:.3f} | {r['overhead_pct']:+.1f}% | "
                  f"{r['overhead_median_pct']:+.1f}% |")
    write_results(args.output, "bounds_check", {"quick": args.quick, "repeat": args.repeat,
                                                "min_time": args.min_time}, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
