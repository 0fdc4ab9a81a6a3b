"""Smoke run of the benchmark scripts: ``benchmarks/differentiate.py --quick`` differentiates
every workload at tiny shapes and checks the gradients against NumPy's hand-written ones."""
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
