"""Smoke runs of the benchmark scripts at tiny shapes: ``differentiate.py --quick`` checks the
gradients (workloads, models, TVM's test list) against NumPy's hand-written ones,
``run.py --quick`` builds and checks the compiled forward and gradient functions,
``contention.py --quick`` times one workload with and without a busy core."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("dense", "conv2d", "maxpool2d", "softmax", "layernorm", "elementwise",
             "batch_matmul", "sumsq", "conv2d_strided")
MODELS = ("group_norm", "attention", "cnn", "embedding_bag", "product_pool")


def test_differentiate_quick(tmp_path: Path) -> None:
    """The workloads, the model layers and TVM's test list, differentiated at tiny shapes
    (the TVM rows at their own) and checked against NumPy; every row has its hand-written
    count, and the TVM rows TVM's."""
    import json

    out = tmp_path / "differentiate.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/differentiate.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for name in WORKLOADS + MODELS + ("tvm_transpose_add", "tvm_conv_k3_s2_d1",
                                      "tvm_maxpool_k3_s2", "tvm_conv_net"):
        assert f"| {name} |" in proc.stdout, f"{name} missing from:\n{proc.stdout}"
    assert "ERROR" not in proc.stdout
    assert "| tex / hand | tex / TVM |" in proc.stdout
    rows = json.loads(out.read_text())["workloads"]
    groups = {r["group"] for r in rows}
    assert groups == {"workloads", "models", "tvm"}
    for r in rows:
        assert r["check"] == "ok", r["name"]
        assert r["handwritten_iterations"] > 0 and r["tex_over_hand"] > 0
        if r["group"] == "tvm":
            assert r["tvm_iterations"] > 0 and r["tex_over_tvm"] > 0, r["name"]
        else:
            assert r["tvm_iterations"] is None and r["tex_over_tvm"] is None, r["name"]


def test_run_quick(tmp_path: Path) -> None:
    """benchmarks/run.py --quick builds every workload's forward and gradient (auto-scheduled,
    cold, and hand-scheduled where a hand schedule exists) at tiny shapes and checks them,
    and PyTorch's and JAX's when they are installed, against NumPy; it checks the peak FMA
    kernel too. Nothing is timed, torch.compile is off (slow to compile)."""
    import json

    out = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "ERROR" not in proc.stdout
    result = json.loads(out.read_text())
    assert result["quick"] and result["peak"] == {"checked": True}
    assert result["torch_compile"] is False
    rows = {r["name"]: r for r in result["workloads"]}
    assert set(rows) == set(WORKLOADS)
    expected = ["tex_fwd", "tex_grad"]
    if result["torch"]:  # installed: eager PyTorch is checked too
        expected += ["torch_fwd", "torch_grad"]
    if result["jax"]:
        expected += ["jax_fwd", "jax_grad"]
    for name, r in rows.items():
        assert r["check"] == "ok" and not r.get("errors"), r
        assert set(expected) <= set(r["checked"]), (name, r["checked"])
        assert r["forward_flops"] > 0 and r["gradient_flops"] > r["forward_flops"]
        compile_ = r["compile"]
        assert compile_["jit_cache_miss"], f"{name}: the first build was not cold"
        assert compile_["total_s"] >= compile_["build_s"] > 0
    for name in ("dense", "conv2d"):
        assert "compile_s_hand" in rows[name]
        assert {"tex_hand_fwd", "tex_hand_grad"} <= set(rows[name]["checked"])


def test_contention_quick(tmp_path: Path) -> None:
    """benchmarks/contention.py --quick builds and checks one workload, times it quiet and
    with a busy process on one core (killed afterwards), and reports both slowdowns."""
    import json

    out = tmp_path / "contention.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/contention.py", "--quick", "--only", "elementwise",
         "--output", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    result = json.loads(out.read_text())
    fj = result["forkjoin_s"]
    assert set(fj) == {"quiet", "busy"} and all(t > 0 for d in fj.values() for t in d.values())
    (row,) = result["workloads"]
    expected = {"tex_fwd", "tex_grad"} | ({"torch_fwd", "torch_grad"} if result["torch"]
                                          else set())
    assert set(row["median_s"]) == expected
    assert all(d["slowdown"] > 0 and d["quiet"] > 0 for d in row["median_s"].values())
    assert "| elementwise | grad |" in proc.stdout


def test_gpu_simulated(tmp_path: Path) -> None:
    """benchmarks/gpu.py --simulate builds every workload's CUDA forward and gradient
    (auto-scheduled) at tiny shapes and checks them on the GPU simulator against NumPy."""
    import json

    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--simulate", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = {r["name"]: r for r in json.loads(out.read_text())["workloads"]}
    assert set(rows) == set(WORKLOADS)
    for name, r in rows.items():
        assert r["checked"] == ["tex_fwd", "tex_grad"], (name, r)
        assert r["kernels"]["fwd"] >= 1 and r["kernels"]["grad"] >= 1


def test_tape_quick(tmp_path: Path) -> None:
    """benchmarks/tape.py --quick builds grad_program with every tape policy on layernorm and
    softmax at tiny shapes and checks the gradients."""
    out = tmp_path / "tape.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/tape.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "| layernorm | auto |" in proc.stdout and "| softmax | none |" in proc.stdout
    assert out.exists()


def test_scaling_quick(tmp_path: Path) -> None:
    """benchmarks/scaling.py --quick runs every family (long chains, nested selects, deep
    inlining, stored chains, rotated reads, topi reductions) at two tiny sizes through
    differentiate, auto_schedule, lower and build, and checks the built functions against
    evaluate."""
    import json

    out = tmp_path / "scaling.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/scaling.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "ERROR" not in proc.stdout
    result = json.loads(out.read_text())
    families = {r["name"]: r for r in result["workloads"]}
    assert set(families) == {"chain", "select", "guarded", "leaky", "stored", "attached",
                             "shifted", "topi"}
    quick = {"select": [5, 10], "guarded": [5, 10], "leaky": [5, 10], "topi": [3, 6]}
    for name, r in families.items():
        assert [row["n"] for row in r["rows"]] == quick.get(name, [10, 20]), name
        for row in r["rows"]:
            assert set(row["seconds"]) == {"differentiate", "auto_schedule", "lower", "build"}
            assert row["peak_bytes"] > 0

def test_bounds_check_quick(tmp_path: Path) -> None:
    """benchmarks/bounds_check.py --quick builds each workload with and without run-time
    bounds checks at tiny shapes and checks both against NumPy; the unclipped embedding
    and the unpool keep one check, take and the max-pool gradient none (proven)."""
    import json

    out = tmp_path / "bounds_check.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bounds_check.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    checks = {r["workload"]: r["checks"] for r in json.loads(out.read_text())["workloads"]}
    assert checks == {"embedding": 1, "take": 0, "maxpool2d": 0, "unpool": 1}


def test_probe_runs_and_checks_against_torch() -> None:
    """benchmarks/probe.py builds a case, checks it against PyTorch (forward and autograd)
    and prints its row: the layer norm over 394 rows (it once raised RecursionError) and a
    softmax over short rows, one quick timing round."""
    pytest = __import__("pytest")
    pytest.importorskip("torch")
    proc = subprocess.run(
        [sys.executable, "benchmarks/probe.py", "--only", "layernorm 394", "softmax 4096",
         "--repeat", "1", "--min-time", "0.001"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| layernorm 394x768 |")
            or ln.startswith("| softmax 4096x10 |")]
    assert len(rows) == 2 and all(len(r.split("|")) >= 7 for r in rows), proc.stdout


def test_models_quick(tmp_path: Path) -> None:
    """benchmarks/models.py --quick builds two model layers (an LSTM step and an embedding
    bag) at tiny shapes on one thread, tex and PyTorch eager, and checks them against
    PyTorch in float64; the cold build fills the disk cache and the warm one loads it."""
    import json

    pytest = __import__("pytest")
    pytest.importorskip("torch")
    out = tmp_path / "models.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/models.py", "--quick", "--only", "lstm", "embedding_bag",
         "--threads", "1", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "| lstm | 1 | tex_fwd tex_grad torch_fwd torch_grad | ok |" in proc.stdout
    result = json.loads(out.read_text())
    rows = {r["name"]: r for r in result["workloads"]}
    assert set(rows) == {"lstm", "embedding_bag"}
    for name, r in rows.items():
        sub = r["threads"]["1"]
        assert r["check"] == "ok" and not sub.get("errors"), (name, r)
        assert {"tex_fwd", "tex_grad", "torch_fwd", "torch_grad"} <= set(sub["checked"])
        compile_ = sub["compile"]
        assert compile_["jit_cache_miss"] and compile_["api_rebuild_cached"], name
        # the warm compile is a second process: it reads four entries (the two support
        # modules' code, the schedule's front entry, then the kernel), and finds the
        # results of differentiate and auto_schedule
        assert compile_["warm"]["disk_hits"] == 4, name
        assert compile_["warm"]["result_hits"] == 2, name


def _load_profile(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks/profile_nests.py as a module; the TEX_CACHE_DIR its ``bench_env`` import
    sets is undone after the test."""
    import importlib.util

    monkeypatch.setenv("TEX_CACHE_DIR", os.environ.get("TEX_CACHE_DIR", ""))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("tex_bench_profile",
                                                  ROOT / "benchmarks" / "profile_nests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def _executable_ranges() -> list[tuple[int, int]]:
    """The executable mappings of this process."""
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms = line.split()[:2]
        if "x" in perms:
            lo, hi = (int(a, 16) for a in span.split("-"))
            ranges.append((lo, hi))
    return ranges


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux only")
@pytest.mark.parametrize("split", [False, True], ids=["whole", "split"])
def test_profile_perf_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          split: bool) -> None:
    """benchmarks/profile_nests.py's perf map, without perf, of the sumsq workload's gradient
    (its entry, two parallel loop bodies and their wrappers), whole and split into parts
    (an object file each, loaded at addresses of their own): the entry is where tex calls
    it, and every function lies in executable memory holding its object's code, byte for
    byte where no relocation was applied."""
    import ctypes

    import tex
    from tex.codegen import jobs
    from tex.codegen import llvm as codegen_llvm

    prof = _load_profile(monkeypatch)
    from workloads import WORKLOADS

    # (its IR is about the size where modules begin to be split: chosen either way)
    monkeypatch.setattr(codegen_llvm, "SPLIT_MIN_CHARS", 0 if split else 1 << 40)
    if split:
        monkeypatch.setattr(jobs, "COMPILE_JOBS", 2)
    w = WORKLOADS["sumsq"]()  # full shapes (parallel loops), never run
    # a name of its own: neither cache holds the other variant's code under its key
    f = tex.build([w.loss, *tex.differentiate(w.loss, w.wrt)], name=f"profile_{split}")
    symbols, unplaced = prof.symbol_map(f)
    assert not unplaced
    entry = f._kernel.name
    assert [s.start for s in symbols if s.name == entry] == [f._kernel.address]
    assert any(s.name.startswith(f"{entry}.par") for s in symbols), symbols
    parts = f.get_source("ll").count("; ModuleID")
    assert len({s.part for s in symbols}) == parts and (parts >= 2) == split

    executable = _executable_ranges()
    objects = prof.loaded_objects(f)
    for s in symbols:
        assert any(lo <= s.start and s.start + s.size <= hi for lo, hi in executable), s
        obj = objects[s.part]
        sections = prof.elf_sections(obj)
        (fn,) = [fn for fn in prof.elf_functions(obj)
                 if fn.name == s.name and fn.size == s.size]
        code = sections[fn.section]
        relocated = set()  # the bytes relocations rewrite (at most 8 from each offset)
        for rela in sections:
            if rela.type == 4 and rela.info == fn.section:  # SHT_RELA for this section
                for at in range(rela.offset, rela.offset + rela.size, rela.entsize):
                    (offset,) = struct.unpack_from("<Q", obj, at)
                    relocated.update(range(offset, offset + 8))
        loaded = ctypes.string_at(s.start, s.size)
        original = obj[code.offset + fn.offset:code.offset + fn.offset + fn.size]
        differ = [k for k in range(s.size) if loaded[k] != original[k]
                  and fn.offset + k not in relocated]
        assert not differ, (s, differ[:8])

    path = prof.write_perf_map(symbols, tmp_path / "perf.map")
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(int(a, 16), int(n, 16), name) for a, n, name in lines] == \
        [(s.start, s.size, s.name) for s in symbols]
    assert [int(a, 16) for a, _, name in lines if name == entry] == [f._kernel.address]


def test_profile_counts_runs_of_shared_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parallel body whose nest the entry calls twice (identical loops share one outlined
    function) runs twice a call, and its row says so: its samples are both loops'."""
    prof = _load_profile(monkeypatch)
    raw = "\n".join([
        'define void @"m"(ptr %"x", ptr %"tex.errors")',
        '  call void @"m.nest1"(ptr %"x")', '  call void @"m.nest1"(ptr %"x")',
        '  call void @"m.nest2"(ptr %"x")', "}",
        'define internal void @"m.nest1"(ptr noalias %"a")',
        '  store ptr @"m.par1.body", ptr %"c"', "}",
        'define internal void @"m.par1.body"(ptr noalias %"a", i32 %"lo", i32 %"hi")', "}",
        'define internal void @"m.nest2"(ptr noalias %"b")', "}"])
    rows = prof.function_tensors(raw)
    assert rows == {"m": "x", "m.nest1": "x2 per call: a",
                    "m.par1.body": "x2 per call: (in m.nest1) a", "m.nest2": "b"}
