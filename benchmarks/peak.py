"""The machine's measured float32 peak, with a kernel that tex itself builds.

``measure_peak(threads)`` times a compute-bound tex function whose arithmetic is nothing but
register-resident fused multiply-adds, and returns its best GFLOP/s on that many threads.
``run.py`` measures it once per run and reports every workload's GFLOP/s as a percentage of
it (the JSON keeps the figures).

The kernel: ``T[r, v] = f(A[r, v])`` where ``f`` is ``STAGES * STEPS`` steps of
``x = x * a + b``, with ``a`` and ``b`` read from a small array at run time (so LLVM cannot
fold the chain of constants). The steps are ``STAGES`` compute stages of ``STEPS`` steps
each, every stage but the last ``compute_at`` the last one's row-tile loop: a tile is
``ROWS`` rows (unrolled) of ``2 x`` the vector width (vectorized), so each step of a stage is
``2 * ROWS`` independent vector FMAs, enough to hide the FMA latency on both FMA pipes, and
the tile (``2 * ROWS`` vector registers plus ``a`` and ``b``) never leaves the registers.
The row tiles run in parallel on ``threads`` threads. It is built with ``fastmath=True`` so
that LLVM contracts each multiply and add into one FMA (checked in the assembly: exactly
``2 * ROWS * STAGES * STEPS`` ``vfmadd`` instructions per tile), and its result is checked
against NumPy. One FMA counts as two floating-point operations.

The theoretical peak printed beside it is ``cores x FMA pipes (2) x lanes x 2 x GHz``, the
clock estimated from the latency of a chain of dependent scalar float additions (a tex
reduction built without fast-math: 3 cycles per addition on AMD Zen and Intel Haswell /
Broadwell, 4 on Intel Skylake and later), so it is an estimate of the clock the chip runs
at under load, turbo included.

    python benchmarks/peak.py                 # 1 thread and all cores
    python benchmarks/peak.py --threads 1 2 4
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import tex  # noqa: E402
from tex.codegen import host_target  # noqa: E402
from tex.schedule import create_schedule  # noqa: E402

__all__ = ["PeakKernel", "build_peak_kernel", "measure_peak", "estimate_ghz",
           "theoretical_peak", "peak_report", "FMA_PIPES"]

STAGES = 4  # compute stages, each computed at the row tiles of the last
STEPS = 32  # x = x * a + b steps per stage
ROWS = 4  # rows per tile (unrolled): 2 * ROWS independent vector FMA chains
SCALING = 0.8  # measure_peak retries below this fraction of linear scaling
FMA_PIPES = 2  # FMA units per core on the x86 cores of interest (Zen 2/3/4, Intel Haswell+)


def _lanes() -> int:
    """float32 lanes of the host's widest vector register."""
    return host_target().vector_bits // 32


def _has_fma() -> bool:
    return "+fma" in host_target().features.split(",")


@dataclass
class PeakKernel:
    """A built peak kernel with its buffers: ``run()`` calls it once."""

    func: Any
    a: np.ndarray
    params: np.ndarray
    out: np.ndarray
    flops: int
    fmas_per_tile: int

    def run(self) -> None:
        self.func(self.a, self.params, self.out)

    def check(self) -> None:
        """The result against NumPy (float64), and the FMAs in the assembly."""
        self.run()
        want = self.a.astype(np.float64)
        a, b = (float(v) for v in self.params)
        for _ in range(STAGES * STEPS):
            want = want * a + b
        np.testing.assert_allclose(self.out, want, rtol=1e-4, atol=1e-5,
                                   err_msg="peak kernel result")
        if _has_fma():
            asm = self.func.get_source("asm")
            n = asm.count("vfmadd")
            if n < self.fmas_per_tile:
                raise AssertionError(f"peak kernel: {n} vfmadd instructions in the assembly, "
                                     f"expected {self.fmas_per_tile} (FMA contraction failed)")


def build_peak_kernel(threads: int, rows: int | None = None) -> PeakKernel:
    """Build the FMA kernel (see the module docstring) for ``threads`` threads.

    ``rows`` (a multiple of ``ROWS``; default: 4096 per thread) sets the work per call."""
    lanes = 2 * _lanes()
    rows = rows or 4096 * max(1, threads)
    rows -= rows % ROWS
    A = tex.placeholder((rows, lanes), name="A")
    P = tex.placeholder((2,), name="P")

    def stage(src: tex.Tensor, k: int) -> tex.Tensor:
        def body(r: Any, v: Any) -> Any:
            x = src[r, v]
            for _ in range(STEPS):
                x = x * P[0] + P[1]
            return x
        return tex.compute((rows, lanes), body, name=f"fma{k}")

    stages = [A]
    for k in range(STAGES):
        stages.append(stage(stages[-1], k))
    T = stages[-1]
    s = create_schedule(T.op)
    r, v = T.op.axis
    ro, ri = s[T].split(r, factor=ROWS)
    s[T].parallel(ro)
    s[T].unroll(ri)
    s[T].vectorize(v)
    for t in reversed(stages[1:-1]):  # consumers first: each attaches to a reader
        s[t].compute_at(s[T], ro)
        tr, tv = t.op.axis
        s[t].unroll(tr)
        s[t].vectorize(tv)
    with tex.debug.config(num_threads=threads):
        f = tex.build(s, [A, P, T], name=f"peak_fma_{threads}t", fastmath=True)
    rng = np.random.default_rng(0)
    a = rng.random((rows, lanes), dtype=np.float32)
    params = np.array([0.999, 0.001], np.float32)  # fixed point 1: values stay in [0, 1]
    out = np.empty_like(a)
    flops = 2 * rows * lanes * STAGES * STEPS
    return PeakKernel(f, a, params, out, flops, 2 * ROWS * STAGES * STEPS)


def _best_rate(run: Any, flops: int, repeat: int, min_time: float) -> float:
    """Best GFLOP/s over ``repeat`` timings of at least ``min_time`` seconds each."""
    run()  # warm-up
    best = 0.0
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            run()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = max(best, flops * n / elapsed / 1e9)
    return best


def measure_peak(threads: int, repeat: int = 7, min_time: float = 0.05,
                 patience: float = 10.0) -> float:
    """The best GFLOP/s of the FMA kernel on ``threads`` threads (built, checked, timed).

    The best of ``repeat`` timings, not the median: a peak is what the machine can do, and
    another process taking a core for a while only ever lowers it. On more than one thread,
    when the rate is below ``SCALING`` x threads x the one-thread rate (a core was taken
    away: a parallel loop then waits a whole time slice for it), it is measured again for
    up to ``patience`` seconds and the best is kept."""
    k = build_peak_kernel(threads)
    k.check()
    best = _best_rate(k.run, k.flops, repeat, min_time)
    if threads > 1 and patience > 0:
        one = build_peak_kernel(1)
        single = _best_rate(one.run, one.flops, 3, min_time)
        deadline = time.perf_counter() + patience
        while best < SCALING * threads * single and time.perf_counter() < deadline:
            time.sleep(0.2)
            best = max(best, _best_rate(k.run, k.flops, repeat, min_time))
    return best


def _add_latency_cycles(cpu: str) -> int:
    """Cycles of a dependent scalar float32 addition on ``cpu`` (LLVM's name)."""
    if cpu.startswith(("znver", "haswell", "broadwell", "bdver")):
        return 3
    return 4  # Intel Skylake and later (and a guess elsewhere)


def estimate_ghz(repeat: int = 7) -> float | None:
    """The clock under load, from a latency-bound chain of scalar float additions (a tex
    reduction, no fast-math, so LLVM keeps the additions in order), or None off x86."""
    cpu = host_target().cpu
    if not host_target().triple.startswith(("x86_64", "i686", "i386")):
        return None
    n = 1 << 18
    A = tex.placeholder((n,), name="A")
    k = tex.reduce_axis((0, n), name="k")
    T = tex.compute((1,), lambda i: tex.sum(A[k], axis=k), name="chain")
    s = create_schedule(T.op)
    f = tex.build(s, [A, T], name="add_chain")
    a = np.ones(n, np.float32)
    out = np.empty(1, np.float32)
    # "flops" = additions: additions per second / (additions per cycle) = cycles per second
    rate = _best_rate(lambda: f(a, out), n, repeat, 0.02)  # G additions / s
    return rate * _add_latency_cycles(cpu)


def theoretical_peak(ghz: float, threads: int) -> float:
    """``threads x FMA_PIPES x lanes x 2 flops x ghz`` GFLOP/s (one thread per core)."""
    lanes = _lanes() if _has_fma() else 0
    per_cycle = FMA_PIPES * lanes * 2 if lanes else 2 * _lanes()  # no FMA: add + mul pipes
    return threads * per_cycle * ghz


def peak_report(thread_counts: list[int], repeat: int = 7) -> dict[str, Any]:
    """Measured peak per thread count, the estimated clock and theoretical peaks."""
    host = host_target()
    t0 = time.perf_counter()
    measured = {str(n): measure_peak(n, repeat=repeat) for n in thread_counts}
    one = measured.get("1") or measure_peak(1, repeat=repeat)
    # where another process kept a core busy all along, the multi-thread measurement is
    # meaningless: the peak used for percentages is then threads x the one-thread peak
    collapsed = [n for n in thread_counts if measured[str(n)] < SCALING * n * one]
    peak = {str(n): n * one if n in collapsed else measured[str(n)] for n in thread_counts}
    ghz = estimate_ghz()
    report: dict[str, Any] = {
        "gflops": measured, "peak_gflops": peak, "scaling_collapsed": collapsed,
        "cpu": host.cpu, "vector_bits": host.vector_bits,
        "fma": _has_fma(), "ghz_estimate": ghz,
        "theoretical_gflops": ({str(n): theoretical_peak(ghz, n) for n in thread_counts}
                               if ghz else None),
        "kernel": {"stages": STAGES, "steps": STEPS, "rows_per_tile": ROWS,
                   "lanes": 2 * _lanes(), "fastmath": True},
        "seconds": time.perf_counter() - t0,
    }
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"float32 peak on {report['cpu']} ({report['vector_bits']}-bit vectors, "
             f"FMA {'yes' if report['fma'] else 'no'}), tex FMA kernel "
             f"({report['kernel']['stages']} x {report['kernel']['steps']} steps, "
             f"{report['kernel']['rows_per_tile']} x {report['kernel']['lanes']} tile)"]
    ghz = report.get("ghz_estimate")
    if ghz:
        lines.append(f"clock estimated from a dependent float-add chain: {ghz:.2f} GHz")
    for n, g in report["gflops"].items():
        theo = (report.get("theoretical_gflops") or {}).get(n)
        extra = f"  (theoretical {theo:.1f} = {100 * g / theo:.0f}%)" if theo else ""
        lines.append(f"  {n} thread{'s' if n != '1' else ''}: {g:8.1f} GFLOP/s{extra}")
        if int(n) in report.get("scaling_collapsed", []):
            lines.append(f"    (a core stayed busy: scaling collapsed; {n} x the one-thread "
                         f"peak, {report['peak_gflops'][n]:.1f} GFLOP/s, is used instead)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+",
                        default=sorted({1, os.cpu_count() or 1}))
    parser.add_argument("--repeat", type=int, default=7, help="timings (best is kept)")
    args = parser.parse_args(argv)
    report = peak_report(args.threads, args.repeat)
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
