"""The shape sweep: auto-scheduled conv2d and matmul at extents that are not powers of two,
against the nearest power of two (issue 23: no shape cliffs).

- ``conv2d``: ``topi.nn.conv2d`` of x(32, 16, W, W) with a (32, 16, 3, 3) kernel, padding
  1, at ``W`` in 7, 12, 13, 14, 20, 28, 56 (ResNet's 56/28/14/7 and odd widths) and the
  powers of two around them (8, 16, 32, 64);
- ``matmul``: ``C = A @ B`` of n x n float32 at ``n`` in 1, 3, 17, 100, 197, 768, 1000,
  3072 (BERT/ViT widths and odd sizes) and the powers of two around them.

Each size is built once (``auto_schedule`` + ``tex.build``), checked against NumPy, then
the sizes of one sweep are timed in turns (interleaved: a slow period of the machine hits
them all) for ``--repeat`` rounds; the table gives the median GFLOP/s and, for the sizes
that are not powers of two, the ratio to the nearest power of two (the larger of two equally
near), which must be at least ``--min-ratio`` (70%): the exit status is 1 otherwise.
Tiny sizes are call-overhead bound on both sides of the ratio.

    python benchmarks/sweep.py                   # both sweeps, 2 threads (all cores)
    TEX_NUM_THREADS=1 python benchmarks/sweep.py --only conv2d
    python benchmarks/sweep.py --quick           # small channel counts, checks only
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import tex
from tex import topi

CONV_W = [7, 8, 12, 13, 14, 16, 20, 28, 32, 56, 64]
MATMUL_N = [1, 2, 3, 4, 16, 17, 64, 100, 128, 197, 256, 512, 768, 1000, 1024, 2048, 3072, 4096]


@dataclass
class Case:
    """One built size: its call, its arithmetic, and the result of each round."""

    sweep: str
    size: int
    flops: int
    call: Callable[[], object]
    times: list[float]


def _nearest_pow2(n: int) -> int:
    lo = 1 << (n.bit_length() - 1)
    hi = lo if lo == n else lo * 2
    return lo if n - lo < hi - n else hi


def conv_case(w: int, quick: bool, rng: np.random.Generator) -> Case:
    c, o = (4, 8) if quick else (16, 32)
    X = tex.placeholder((32, c, w, w), name="X")
    K = tex.placeholder((o, c, 3, 3), name="K")
    Y = topi.nn.conv2d(X, K, 1, 1)
    f = tex.build(tex.schedule.auto_schedule([Y]), [X, K, Y])
    x = rng.standard_normal(X.shape).astype("float32")
    k = rng.standard_normal(K.shape).astype("float32")
    y = np.empty(Y.shape, "float32")
    f(x, k, y)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(y)
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + w, dx:dx + w], k[:, :, dy, dx])
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3)
    return Case("conv2d", w, 2 * 32 * o * c * 9 * w * w, lambda: f(x, k, y), [])


def matmul_case(n: int, quick: bool, rng: np.random.Generator) -> Case:
    A = tex.placeholder((n, n), name="A")
    B = tex.placeholder((n, n), name="B")
    k = tex.reduce_axis((0, n), name="k")
    C = tex.compute((n, n), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k), name="C")
    f = tex.build(tex.schedule.auto_schedule([C]), [A, B, C])
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.empty((n, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * n)
    return Case("matmul", n, 2 * n ** 3, lambda: f(a, b, c), [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=["conv2d", "matmul"],
                    default=["conv2d", "matmul"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per size per round")
    ap.add_argument("--min-ratio", type=float, default=0.7)
    ap.add_argument("--quick", action="store_true", help="small sizes, checks only")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    sweeps: dict[str, list[Case]] = {}
    if "conv2d" in args.only:
        sweeps["conv2d"] = [conv_case(w, args.quick, rng) for w in CONV_W]
    if "matmul" in args.only:
        sizes = [n for n in MATMUL_N if n <= 128] if args.quick else MATMUL_N
        sweeps["matmul"] = [matmul_case(n, args.quick, rng) for n in sizes]
    if args.quick:
        print("checks passed")
        return 0
    for _ in range(args.repeat):
        for cases in sweeps.values():
            for case in cases:
                case.times.append(mean_call_time(case.call, args.min_time))
    failed = False
    out: dict[str, list[dict[str, float]]] = {}
    for name, cases in sweeps.items():
        gflops = {c.size: c.flops / statistics.median(c.times) / 1e9 for c in cases}
        print(f"\n## {name} ({'W' if name == 'conv2d' else 'n'}: GFLOP/s, median of "
              f"{args.repeat})\n")
        print("| size | GFLOP/s | ms | nearest 2^k | ratio |")
        print("|---:|---:|---:|---:|---:|")
        rows = []
        for c in cases:
            p = _nearest_pow2(c.size)
            ratio = gflops[c.size] / gflops[p] if p != c.size and p in gflops else None
            low = ratio is not None and ratio < args.min_ratio
            failed |= low
            print(f"| {c.size} | {gflops[c.size]:.1f} | {statistics.median(c.times) * 1e3:.3f} "
                  f"| {p if ratio is not None else ''} | "
                  f"{'' if ratio is None else f'{ratio:.0%}'}{' (low)' if low else ''} |")
            rows.append({"size": c.size, "gflops": gflops[c.size],
                         "seconds": statistics.median(c.times),
                         "ratio": ratio if ratio is not None else float("nan")})
        out[name] = rows
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "sweep.json").write_text(json.dumps(out, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
