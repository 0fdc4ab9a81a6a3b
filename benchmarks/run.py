"""Run the WORKLOADS.md benchmarks: tex against NumPy, PyTorch, torch.compile and JAX, in
one process, interleaved.

For every workload, the variants (``fwd`` = the forward; ``grad`` = one call computing the
loss ``sum(forward * H)`` and every gradient of ``wrt``, what ``loss.backward()`` after the
forward or ``jax.value_and_grad`` computes):

* **tex (auto)**: ``tex.build([forward])`` and ``tex.build([loss, *grads])``, scheduled by
  ``tex.schedule.auto_schedule``;
* **tex (hand)**: the hand schedules of ``schedules.HAND`` (dense and conv2d);
* **NumPy**: the forward, and the forward plus the hand-written gradients (``workloads.py``);
* **PyTorch** (CPU autograd), **torch.compile** (inductor; ``torch._dynamo.reset()`` before
  each workload, a compile failure is recorded and the variant skipped) and **JAX**
  (``jax.jit`` of the forward and of ``jax.value_and_grad(loss, argnums)``), each when
  importable (``frameworks.py``).

Every variant's forward, loss and gradients are checked against NumPy in float64 before
anything is timed. Each repetition runs every variant (interleaved, so a slow period of the
machine hits all of them) for ``--min-time`` seconds, after a warm-up; a repetition around
which two-thread scaling collapsed (the second core taken away, checked with a small tex
kernel) is dropped and run again. The tables give medians of ``--repeat`` (>= 5)
repetitions and, per variant:

* gradient / forward time; tex (auto) time / this variant's time (> 1: tex is slower);
* GFLOP/s (``Workload.forward_flops`` / ``gradient_flops``: the useful arithmetic of the
  hand-written programs) and its percentage of the machine's peak, measured once per run
  with a register-resident FMA kernel built by tex (``peak.py``) on tex's thread count;
* compile time: for tex (auto), ``tex.differentiate`` + ``auto_schedule`` + ``tex.build``
  of the gradient on a fresh workload with tex's JIT cache cleared (cold, first build; the
  JSON has each part and the forward's); for tex (hand), differentiate + hand schedule +
  build; for torch.compile and JAX, the first calls of the forward and the gradient
  (tracing, compiling and one run; torch.compile gets a fresh inductor cache directory
  unless ``TORCHINDUCTOR_CACHE_DIR`` is set, so nothing is served from an earlier run).

    python benchmarks/run.py                       # WORKLOADS.md shapes, every variant
    python benchmarks/run.py --quick               # tiny shapes, checks only (CI runs it)
    python benchmarks/run.py --only dense conv2d --repeat 9
    python benchmarks/run.py --no-torch-compile --no-jax --peak 190
    python benchmarks/peak.py                      # the peak alone
    python benchmarks/run.py --symbolic            # a symbolic batch against concrete
                                                   # builds (symbolic.py)

Prints a table per workload and a summary; JSON goes to ``benchmarks/results/run.json``.
Exit status 1 when a workload or a framework's check fails (a torch.compile failure is only
recorded). ``TEX_NUM_THREADS`` sets tex's thread count (default: all cores).
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import frameworks
import numpy as np
import peak
import schedules

import tex
from tex.runtime import jit
from tex.schedule import auto_schedule, create_schedule

from workloads import WORKLOADS, Workload, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "run.json"
RTOL, ATOL = 2e-3, 2e-3
MIN_REPEAT = 5

# implementations, in table order, and their labels
IMPLS = ("tex", "tex_hand", "numpy", "torch", "torch_compile", "jax")
LABELS = {"tex": "tex (auto)", "tex_hand": "tex (hand)", "numpy": "NumPy",
          "torch": "PyTorch", "torch_compile": "torch.compile", "jax": "JAX jit"}
KINDS = ("fwd", "grad")


@dataclass
class Settings:
    small: bool = False
    timed: bool = True
    repeat: int = MIN_REPEAT
    min_time: float = 0.05
    hand: bool = True
    torch: Any = None  # the module, when used
    torch_compile: bool = False
    jax: Any = None
    peak_gflops: float | None = None  # at tex's thread count


@dataclass
class Variant:
    """One timed thing: ``fn()`` runs it once."""

    impl: str
    kind: str
    fn: Callable[[], Any]
    times: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.impl}_{self.kind}"

    def time_once(self, min_time: float) -> None:
        """Run at least once and for ``min_time`` seconds; record the mean time per call."""
        self.times.append(mean_call_time(self.fn, min_time))

    @property
    def median(self) -> float:
        return statistics.median(self.times)


class CoreProbe:
    """Two-thread scaling of a compute-bound tex kernel (WORKLOADS.md: the second core is
    sometimes unavailable for a while; repetitions around which it collapsed are dropped).
    """

    MIN_SCALING = 1.5
    _instance: CoreProbe | None = None

    def __init__(self) -> None:
        A = tex.placeholder((64,), name="A")
        k = tex.reduce_axis((0, 8192), name="k")
        T = tex.compute((64,), lambda i: tex.sum(tex.sin(A[i] + k.astype("float32")), axis=k),
                        name="probe")
        s = create_schedule(T.op)
        s[T].parallel(T.op.axis[0])
        with tex.debug.config(num_threads=1):
            self.one = tex.build(s, [A, T], name="probe1")
        with tex.debug.config(num_threads=2):
            self.two = tex.build(s, [A, T], name="probe2")
        self.a = np.zeros(64, np.float32)
        self.out = np.empty(64, np.float32)

    @classmethod
    def get(cls) -> CoreProbe:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def scaling(self) -> float:
        """Time on one thread / time on two threads (about 2 when both cores are free)."""
        t1 = min(self._time(self.one) for _ in range(6))
        t2 = min(self._time(self.two) for _ in range(6))
        return t1 / t2

    def _time(self, f: Any) -> float:
        start = time.perf_counter()
        f(self.a, self.out)
        return time.perf_counter() - start


def tex_threads() -> int:
    """The threads tex's parallel loops run on."""
    n = tex.debug.current().num_threads
    if n:
        return n
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------------------
# checks


def _close(name: str, got: Any, want: np.ndarray) -> None:
    got = frameworks.to_numpy(got)
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(np.asarray(got, np.float64).reshape(want.shape), want,
                               rtol=RTOL, atol=ATOL * scale,
                               err_msg=f"{name} differs from NumPy")


@dataclass
class Reference:
    forward: np.ndarray
    loss: float
    grads: list[np.ndarray]
    # close(name, got, want) raises AssertionError when they differ
    close: Callable[[str, Any, np.ndarray], None] = _close

    def check_forward(self, label: str, got: Any) -> None:
        self.close(f"{label} forward", got, self.forward)

    def check_grad(self, label: str, w: Workload, loss: Any, grads: Sequence[Any]) -> None:
        self.close(f"{label} loss", loss, np.asarray(self.loss))
        if len(grads) != len(self.grads):
            raise AssertionError(f"{label}: {len(grads)} gradients, expected {len(self.grads)}")
        for t, g, r in zip(w.wrt, grads, self.grads):
            self.close(f"{label} d{t.name}", g, r)


# --------------------------------------------------------------------------------------
# tex


def _bind(f: Any, arrays: dict[str, np.ndarray], outputs: Sequence[tuple[tex.Tensor,
                                                                        np.ndarray]]) -> list:
    """``f``'s arguments in call order: the output buffers (matched by identity) and the
    placeholders' arrays (by name)."""
    args = []
    for a in f.args:
        buf = next((b for t, b in outputs if t is a), None)
        args.append(buf if buf is not None else arrays[a.name])
    return args


def _clear_caches() -> None:
    """Forget compiled kernels, the saved results of differentiate and auto_schedule (on
    disk: they do not depend on the thread count; the kernels on disk do, and each thread
    count's first build misses them), and sympy's memo, so the next compile is cold."""
    jit.clear_cache()
    tex.diskstore.RESULTS.clear()
    if "sympy" in sys.modules:
        from sympy.core.cache import clear_cache

        clear_cache()


def compile_gradient(w: Workload) -> tuple[dict[str, float], list[tex.Tensor]]:
    """Time differentiate + auto_schedule + build of the gradient function (the loss and
    every gradient); returns the times and the gradients."""
    t0 = time.perf_counter()
    grads = list(tex.differentiate(w.loss, w.wrt))
    t1 = time.perf_counter()
    outs = [w.loss, *grads]
    sch = auto_schedule(outs, target="llvm")
    t2 = time.perf_counter()
    tex.build(sch, [*w.placeholders, *outs], name=f"{w.name}_grad")
    t3 = time.perf_counter()
    return {"differentiate_s": t1 - t0, "auto_schedule_s": t2 - t1, "build_s": t3 - t2,
            "total_s": t3 - t0}, grads


def cold_compile(w: Workload) -> tuple[dict[str, Any], list[tex.Tensor]]:
    """Time differentiate + auto_schedule + build (gradient, then forward) on a fresh
    workload with the JIT cache cleared; returns the times and the gradients."""
    _clear_caches()
    kernels = len(jit.CACHE)
    times, grads = compile_gradient(w)
    cold = len(jit.CACHE) > kernels
    t3 = time.perf_counter()
    fsch = auto_schedule([w.forward], target="llvm")
    t4 = time.perf_counter()
    tex.build(fsch, [*w.inputs, w.forward], name=f"{w.name}_fwd")
    t5 = time.perf_counter()
    return {**times, "jit_cache_miss": cold,
            "forward": {"auto_schedule_s": t4 - t3, "build_s": t5 - t4,
                        "total_s": t5 - t3}}, grads


def _hand_gradient(w: Workload) -> tuple[Any, list[tex.Tensor], float]:
    """Differentiate, hand-schedule and build the gradient; returns the function, its
    outputs (loss first) and the compile time."""
    t0 = time.perf_counter()
    grads = list(tex.differentiate(w.loss, w.wrt))
    outs = [w.loss, *grads]
    s = schedules.HAND[w.name].gradient(w, grads)
    f = tex.build(s, [*w.placeholders, *outs], name=f"{w.name}_grad_hand")
    return f, outs, time.perf_counter() - t0


def tex_variants(w: Workload, arrays: dict[str, np.ndarray], ref: Reference,
                 row: dict[str, Any], settings: Settings) -> list[Variant]:
    """tex (auto) and, where a hand schedule exists, tex (hand): built and checked."""
    variants = []
    compile_info, grads = cold_compile(w)
    outs = [w.loss, *grads]
    # the timed functions come from the plain API (served from the JIT cache when the
    # auto-scheduler is deterministic)
    kernels, t0 = len(jit.CACHE), time.perf_counter()
    f_fwd = tex.build([w.forward], name=f"{w.name}_fwd")
    f_grad = tex.build(outs, name=f"{w.name}_grad")
    compile_info["api_rebuild_s"] = time.perf_counter() - t0
    compile_info["api_rebuild_cached"] = len(jit.CACHE) == kernels
    row["compile"] = compile_info

    y = np.empty(w.forward.shape, np.float32)
    fwd_args = _bind(f_fwd, arrays, [(w.forward, y)])
    f_fwd(*fwd_args)
    ref.check_forward("tex (auto)", y)
    variants.append(Variant("tex", "fwd", lambda: f_fwd(*fwd_args)))

    bufs = [np.empty(t.shape, np.float32) for t in outs]
    grad_args = _bind(f_grad, arrays, list(zip(outs, bufs)))
    f_grad(*grad_args)
    ref.check_grad("tex (auto)", w, bufs[0], bufs[1:])
    variants.append(Variant("tex", "grad", lambda: f_grad(*grad_args)))

    if settings.hand and w.name in schedules.HAND:
        t0 = time.perf_counter()
        s = schedules.HAND[w.name].forward(w)
        h_fwd = tex.build(s, [*w.inputs, w.forward], name=f"{w.name}_fwd_hand")
        row["compile_fwd_s_hand"] = time.perf_counter() - t0
        y_h = np.empty(w.forward.shape, np.float32)
        h_fwd_args = [arrays[t.name] for t in w.inputs] + [y_h]
        h_fwd(*h_fwd_args)
        ref.check_forward("tex (hand)", y_h)
        variants.append(Variant("tex_hand", "fwd", lambda: h_fwd(*h_fwd_args)))

        h_grad, h_outs, row["compile_s_hand"] = _hand_gradient(w)
        h_bufs = [np.empty(t.shape, np.float32) for t in h_outs]
        h_grad_args = [arrays[t.name] for t in w.placeholders] + h_bufs
        h_grad(*h_grad_args)
        ref.check_grad("tex (hand)", w, h_bufs[0], h_bufs[1:])
        variants.append(Variant("tex_hand", "grad", lambda: h_grad(*h_grad_args)))
    return variants


# --------------------------------------------------------------------------------------
# NumPy, PyTorch, torch.compile, JAX


def numpy_variants(w: Workload, arrays: dict[str, np.ndarray]) -> list[Variant]:
    return [Variant("numpy", "fwd", lambda: w.numpy_forward(arrays)),
            Variant("numpy", "grad", lambda: (w.numpy_forward(arrays), w.numpy_grad(arrays)))]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]


def framework_variants(impl: str, w: Workload, arrays: dict[str, np.ndarray],
                       ref: Reference, row: dict[str, Any], settings: Settings,
                       torch_build: Callable[[Any, dict], Any] | None = None,
                       jax_fn: Callable[[dict], Any] | None = None) -> list[Variant]:
    """Build ``impl`` (torch, torch_compile or jax) on ``w``, run it once (compiling it),
    check it; on failure record it in ``row`` and return nothing. ``torch_build`` and
    ``jax_fn`` give the forward when ``w`` is not one of ``schedules.TORCH``/``JAX``."""
    label = LABELS[impl]
    graphs = None
    try:
        if impl == "torch_compile":
            settings.torch._dynamo.reset()  # WORKLOADS.md: else the recompile limit is hit
            graphs = frameworks.torch_compiled_graphs()
        if impl == "jax":
            it = frameworks.jax_impl(w, arrays, fn=jax_fn)
        else:
            it = frameworks.torch_impl(w, arrays, compile=impl == "torch_compile",
                                       build=torch_build)
        t0 = time.perf_counter()
        y = it.fwd()
        t1 = time.perf_counter()
        loss, grads = it.grad()
        t2 = time.perf_counter()
        if graphs is not None:
            made = (frameworks.torch_compiled_graphs() or 0) - graphs
            if made < 2:  # one graph for the forward and at least one for the loss
                raise RuntimeError(f"torch.compile made {made} graphs for the forward and the "
                                   "loss (fell back to eager)")
        ref.check_forward(label, y)
        ref.check_grad(label, w, loss, grads)
    except Exception as exc:  # record it, skip the variant, go on
        key = "skipped" if impl == "torch_compile" else "errors"
        row.setdefault(key, {})[impl] = _error(exc)
        print(f"  {w.name}: {label} {'skipped' if key == 'skipped' else 'FAILED'}: "
              f"{_error(exc)}", flush=True)
        return []
    if impl != "torch":
        row.setdefault("first_call_s", {})[impl] = {"fwd": t1 - t0, "grad": t2 - t1}
    return [Variant(impl, "fwd", it.fwd), Variant(impl, "grad", it.grad)]


# --------------------------------------------------------------------------------------
# one workload


def reference(w: Workload, arrays: dict[str, np.ndarray]) -> Reference:
    """NumPy's forward, loss and hand-written gradients of ``w`` on ``arrays``, in float64."""
    wide = {k: v.astype(np.float64) for k, v in arrays.items()}
    ref_fwd = w.numpy_forward(wide)
    return Reference(ref_fwd, float(np.sum(ref_fwd * wide["H"])), w.numpy_grad(wide))


def bench_one(name: str, settings: Settings) -> dict[str, Any]:
    w = WORKLOADS[name](small=settings.small)  # fresh: new placeholders, nothing cached
    arrays = random_arrays(w, seed=0)
    ref = reference(w, arrays)

    row: dict[str, Any] = {"name": name, "shapes": {t.name: list(t.shape) for t in w.inputs},
                           "wrt": [t.name for t in w.wrt],
                           "forward_flops": w.forward_flops,
                           "gradient_flops": w.gradient_flops}
    variants = tex_variants(w, arrays, ref, row, settings)
    variants += numpy_variants(w, arrays)
    for impl, on in (("torch", settings.torch is not None),
                     ("torch_compile", settings.torch is not None and settings.torch_compile),
                     ("jax", settings.jax is not None)):
        if on:
            variants += framework_variants(impl, w, arrays, ref, row, settings)
    row["checked"] = [v.name for v in variants if v.impl != "numpy"]

    if settings.timed:
        _time_interleaved(variants, row, settings)
        _derive(w, row, settings)
    row["check"] = "ok" if not row.get("errors") else "failed"
    return row


def _time_interleaved(variants: list[Variant], row: dict[str, Any],
                      settings: Settings) -> None:
    for v in variants:  # warm-up
        v.time_once(0.0)
    probe = CoreProbe.get()
    dropped = done = 0
    scalings: list[float] = []
    while done < settings.repeat:
        before = probe.scaling()
        for v in variants:
            v.time_once(settings.min_time)
        after = probe.scaling()
        scalings.append(round(min(before, after), 2))
        if min(before, after) < CoreProbe.MIN_SCALING and dropped < 3 * settings.repeat:
            # the second core was taken away around this repetition: drop it
            dropped += 1
            for v in variants:
                v.times.pop()
            time.sleep(0.5)
            continue
        done += 1
    row["median_s"] = {v.name: v.median for v in variants}
    row["all_s"] = {v.name: v.times for v in variants}
    row["dropped_repetitions"] = dropped
    row["unreliable"] = sum(s < CoreProbe.MIN_SCALING for s in scalings) > dropped
    row["two_thread_scaling"] = scalings


def _derive(w: Workload, row: dict[str, Any], settings: Settings) -> None:
    """Ratios, GFLOP/s and % of peak from the medians."""
    m = row["median_s"]
    flops = {"fwd": w.forward_flops, "grad": w.gradient_flops}
    row["gflops"] = {k: flops[k.rsplit("_", 1)[1]] / t / 1e9 for k, t in m.items()}
    if settings.peak_gflops:
        row["pct_peak"] = {k: 100 * g / settings.peak_gflops for k, g in row["gflops"].items()}
    row["grad_over_fwd"] = {impl: m[f"{impl}_grad"] / m[f"{impl}_fwd"] for impl in IMPLS
                            if f"{impl}_grad" in m and f"{impl}_fwd" in m}
    row["tex_over"] = {k: m[f"tex_{k.rsplit('_', 1)[1]}"] / t for k, t in m.items()
                       if k not in ("tex_fwd", "tex_grad")}


# --------------------------------------------------------------------------------------
# tables


def markdown_head(head: Sequence[str]) -> list[str]:
    """The first two lines of a markdown table with columns ``head``."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def error_row(r: dict[str, Any], columns: int) -> str:
    """A table row for a workload that failed (``r["error"]``), ``columns`` wide."""
    return f"| {r['name']} | ERROR: {r['error']} |" + " |" * (columns - 2)


def _ms(t: float | None) -> str:
    return f"{t * 1e3:.3f}" if t else "-"


def _f(x: float | None, fmt: str = ".2f") -> str:
    return format(x, fmt) if x is not None else "-"


def _mflop(n: int) -> str:
    return f"{n / 1e6:.1f} MFLOP" if n >= 1e5 else f"{n} FLOP"


def workload_block(r: dict[str, Any]) -> str:
    """One workload: a line per implementation."""
    if "error" in r:
        return f"{r['name']}: ERROR: {r['error']}"
    shapes = " ".join(f"{k}({', '.join(map(str, v))})" for k, v in r["shapes"].items())
    title = (f"{r['name']}: {shapes}; forward {_mflop(r['forward_flops'])}, gradient "
             f"{_mflop(r['gradient_flops'])}")
    m, g = r.get("median_s", {}), r.get("gflops", {})
    pct, ratio = r.get("pct_peak", {}), r.get("tex_over", {})
    head = ["variant", "fwd ms", "grad ms", "grad/fwd", "tex/this fwd", "tex/this grad",
            "fwd GFLOP/s", "grad GFLOP/s", "fwd %peak", "grad %peak", "compile s"]
    lines = [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for impl in IMPLS:
        keys = [f"{impl}_{k}" for k in KINDS]
        if not any(k in m or k in r.get("checked", []) for k in keys):
            continue
        fwd, grad = (m.get(k) for k in keys)
        cells = [LABELS[impl], _ms(fwd), _ms(grad),
                 _f(r.get("grad_over_fwd", {}).get(impl)),
                 *(_f(ratio.get(k)) if impl != "tex" else "1" if k in m else "-"
                   for k in keys),
                 *(_f(g.get(k), ".1f") for k in keys), *(_f(pct.get(k), ".1f") for k in keys),
                 _compile_cell(r, impl)]
        lines.append("| " + " | ".join(cells) + " |")
    for key in ("skipped", "errors"):
        for impl, msg in r.get(key, {}).items():
            lines.append(f"{LABELS[impl]} {key}: {msg}")
    c = r.get("compile")
    if c:
        lines.append(f"tex (auto) cold compile: gradient {c['total_s']:.2f} s = differentiate "
                     f"{c['differentiate_s']:.2f} + auto_schedule {c['auto_schedule_s']:.2f} + "
                     f"build {c['build_s']:.2f}; forward {c['forward']['total_s']:.2f} s")
    if r.get("dropped_repetitions"):
        lines.append(f"({r['dropped_repetitions']} repetitions dropped and rerun: two-thread "
                     f"scaling collapsed around them; scalings seen "
                     f"{', '.join(map(str, r['two_thread_scaling']))})")
    if r.get("unreliable"):
        lines.append("WARNING: the second core stayed busy; these medians include repetitions "
                     "where two-thread scaling had collapsed")
    return "\n".join(lines)


def _compile_cell(r: dict[str, Any], impl: str) -> str:
    if impl == "tex":
        return _f(r.get("compile", {}).get("total_s"))
    if impl == "tex_hand":
        return _f(r.get("compile_s_hand"))
    first = r.get("first_call_s", {}).get(impl)
    return _f(first["fwd"] + first["grad"]) if first else "-"


def checks(rows: list[dict[str, Any]]) -> str:
    """--quick: what was built and checked, and the (cold) compile times."""
    head = ["workload", "checked against NumPy", "tex compile s (diff + sched + build)",
            "skipped / failed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | ERROR: {r['error']} | | |")
            continue
        c = r.get("compile", {})
        parts = " + ".join(_f(c.get(k)) for k in ("differentiate_s", "auto_schedule_s",
                                                     "build_s"))
        notes = "; ".join(f"{LABELS[i]}: {msg}" for key in ("skipped", "errors")
                          for i, msg in r.get(key, {}).items())
        lines.append(f"| {r['name']} | {' '.join(r.get('checked', []))} ({r['check']}) | "
                     f"{_f(c.get('total_s'))} = {parts} | {notes or '-'} |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    """One line per workload: tex (auto) against the others."""
    head = ["workload", "tex fwd ms", "tex grad ms", "grad/fwd", "tex/numpy grad",
            "tex/torch fwd", "tex/torch grad", "tex/compile fwd", "tex/compile grad",
            "tex/jax fwd", "tex/jax grad", "grad GFLOP/s", "grad %peak", "compile s",
            "checked"]
    lines = markdown_head(head)
    for r in rows:
        if "error" in r:
            lines.append(error_row(r, len(head)))
            continue
        m, ratio = r.get("median_s", {}), r.get("tex_over", {})
        cells = [r["name"], _ms(m.get("tex_fwd")), _ms(m.get("tex_grad")),
                 _f(r.get("grad_over_fwd", {}).get("tex")), _f(ratio.get("numpy_grad")),
                 _f(ratio.get("torch_fwd")), _f(ratio.get("torch_grad")),
                 _f(ratio.get("torch_compile_fwd")), _f(ratio.get("torch_compile_grad")),
                 _f(ratio.get("jax_fwd")), _f(ratio.get("jax_grad")),
                 _f(r.get("gflops", {}).get("tex_grad"), ".1f"),
                 _f(r.get("pct_peak", {}).get("tex_grad"), ".1f"),
                 _f(r.get("compile", {}).get("total_s")),
                 f"{len(r.get('checked', []))} {r.get('check', '')}".strip()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------


def add_timing_arguments(parser: argparse.ArgumentParser, repeat: int,
                         repeat_help: str) -> None:
    """``--repeat`` (default ``repeat``), ``--min-time`` and ``--only``: how run.py and
    contention.py choose their workloads and time them."""
    parser.add_argument("--repeat", type=int, default=repeat, help=repeat_help)
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds per timed repetition of one variant")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), metavar="NAME",
                        help=f"workloads to run (of {', '.join(WORKLOADS)})")


def _measure_peak(args: argparse.Namespace, threads: int) -> dict[str, Any] | None:
    if args.quick:  # build and check the kernel only
        k = peak.build_peak_kernel(1, rows=8 * peak.ROWS)
        k.check()
        return {"checked": True}
    if args.no_peak:
        return None
    if args.peak:
        return {"gflops": {str(threads): args.peak}, "given": True}
    counts = sorted({1, threads})
    print(f"measuring the peak on {' and '.join(map(str, counts))} thread(s)...", flush=True)
    report = peak.peak_report(counts)
    print(peak.format_report(report), flush=True)
    return report


def _temporary_directory(prefix: str) -> str:
    """A new directory, removed when the process exits."""
    import atexit
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--symbolic" in argv:  # symbolic against concrete builds (symbolic.py)
        import symbolic

        return symbolic.main([a for a in argv if a != "--symbolic"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes; build and check every variant, no timing "
                             "(torch.compile off unless --torch-compile)")
    add_timing_arguments(parser, MIN_REPEAT, f"timed repetitions, median (at least "
                                             f"{MIN_REPEAT})")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-hand", action="store_true", help="skip the hand schedules")
    parser.add_argument("--no-torch", action="store_true",
                        help="skip PyTorch (eager and torch.compile)")
    parser.add_argument("--torch-compile", action=argparse.BooleanOptionalAction,
                        default=None, help="torch.compile variants (default: on, except "
                                           "with --quick)")
    parser.add_argument("--no-jax", action="store_true", help="skip JAX")
    parser.add_argument("--peak", type=float, metavar="GFLOPS",
                        help="use this peak (GFLOP/s on tex's threads) instead of measuring")
    parser.add_argument("--no-peak", action="store_true", help="do not measure the peak")
    args = parser.parse_args(argv)
    if not args.quick and args.repeat < MIN_REPEAT:
        parser.error(f"--repeat must be at least {MIN_REPEAT} (medians of >= 5 runs)")

    use_compile = args.torch_compile if args.torch_compile is not None else not args.quick
    fresh_cache = (use_compile and not args.no_torch
                   and "TORCHINDUCTOR_CACHE_DIR" not in os.environ)
    if fresh_cache:
        # a fresh inductor cache: torch.compile's first calls are cold, like tex's builds
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _temporary_directory("tex-bench-inductor-")
    torch = None if args.no_torch else frameworks.torch_module()
    jax = None if args.no_jax else frameworks.jax_module()
    threads = tex_threads()
    settings = Settings(small=args.quick, timed=not args.quick, repeat=args.repeat,
                        min_time=args.min_time, hand=not args.no_hand, torch=torch,
                        torch_compile=use_compile, jax=jax)
    peak_info = _measure_peak(args, threads)
    if peak_info and "gflops" in peak_info:
        settings.peak_gflops = peak_info.get("peak_gflops", peak_info["gflops"]).get(
            str(threads))
        peak_info["threads_used"] = threads

    rows: list[dict[str, Any]] = []
    failed = False
    for name in args.only or list(WORKLOADS):
        try:
            row = bench_one(name, settings)
        except Exception as exc:  # report it and go on with the other workloads
            traceback.print_exc()
            row = {"name": name, "error": _error(exc)}
        failed |= "error" in row or bool(row.get("errors"))
        rows.append(row)
        print(f"  {name}: {'ERROR' if 'error' in row else 'done'}", flush=True)

    others = [n for n, mod in (("NumPy", np), ("PyTorch", torch), ("JAX", jax)) if mod]
    print(f"\ntex vs {', '.join(others)}, float32, tex on {threads} threads"
          + (f", peak {settings.peak_gflops:.1f} GFLOP/s" if settings.peak_gflops else "")
          + (f", medians of {args.repeat} interleaved repetitions\n(tex/this: tex (auto) "
             "time / this variant's time; > 1 means tex is slower)\n" if settings.timed
             else ", checks only (not timed)\n"))
    if settings.timed:
        for r in rows:
            print(workload_block(r) + "\n")
        print("summary (tex auto against the others)\n")
        print(summary(rows))
    else:
        print(checks(rows))
    write_results(args.output, "run", {
        "quick": args.quick, "repeat": args.repeat, "min_time": args.min_time,
        "tex_threads": threads, "torch": frameworks.version_of(torch),
        "torch_compile": settings.torch_compile and torch is not None,
        "torch_compile_fresh_cache": fresh_cache,
        "jax": frameworks.version_of(jax), "peak": peak_info}, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
