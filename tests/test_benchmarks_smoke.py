"""Smoke runs of the benchmark scripts at tiny shapes: ``differentiate.py --quick`` checks the
gradients against NumPy's hand-written ones, ``run.py --quick`` builds and checks the
compiled forward and gradient functions."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("dense", "conv2d", "maxpool2d", "softmax", "layernorm", "elementwise",
             "batch_matmul", "sumsq", "conv2d_strided")


def test_differentiate_quick(tmp_path: Path) -> None:
    out = tmp_path / "differentiate.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/differentiate.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for name in WORKLOADS:
        assert f"| {name} |" in proc.stdout, f"{name} missing from:\n{proc.stdout}"
    assert "ERROR" not in proc.stdout
    assert out.exists()


def test_run_quick(tmp_path: Path) -> None:
    """benchmarks/run.py --quick builds every workload's forward and gradient (default and
    hand schedules) at tiny shapes and checks them against NumPy; nothing is timed."""
    import json

    out = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--quick", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "ERROR" not in proc.stdout
    rows = {r["name"]: r for r in json.loads(out.read_text())["workloads"]}
    assert set(rows) == set(WORKLOADS)
    assert all(r["check"] == "ok" for r in rows.values())
    assert "compile_s_hand" in rows["dense"] and "compile_s_hand" in rows["conv2d"]
