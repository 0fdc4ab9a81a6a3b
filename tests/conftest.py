"""Shared fixtures: seeded RNG, golden-file comparison, GPU skip."""
from __future__ import annotations

import atexit
import difflib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"

# The disk compile cache of the whole session (and of the subprocesses tests start, which
# inherit the environment) lives in a temporary directory, never the user's: set before any
# test module imports tex (tex.runtime.diskcache reads TEX_CACHE_DIR at import).
_CACHE_DIR = tempfile.mkdtemp(prefix="tex-test-cache-")
os.environ["TEX_CACHE_DIR"] = _CACHE_DIR
# differentiate and auto_schedule run in every test, not found in the session's cache by a
# test that built the same program before (tests/test_saved_results.py turns it on)
os.environ["TEX_CACHE_RESULTS"] = "0"
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


def _has_gpu() -> bool:
    """An NVIDIA driver is present (nvidia-smi answers); CI has none."""
    return shutil.which("nvidia-smi") is not None and os.environ.get("CI") != "true"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    """A NumPy generator with a fixed seed, fresh for every test."""
    return np.random.default_rng(1234)


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(name, text)`` compares text with tests/golden/<name>; TEX_UPDATE_GOLDEN=1
    rewrites the file instead (review the diff before committing). A file missing outside
    CI is written; in CI (``CI=true``) it is a failure."""

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if os.environ.get("TEX_UPDATE_GOLDEN") == "1" or not path.exists():
            if os.environ.get("CI") == "true" and not path.exists():
                pytest.fail(f"golden file {path} is missing")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        expected = path.read_text()
        if text != expected:
            diff = difflib.unified_diff(expected.splitlines(), text.splitlines(),
                                        f"{path} (golden)", "this run", lineterm="")
            lines = list(diff)
            shown = "\n".join(lines[:120]) + (f"\n... {len(lines) - 120} more diff lines"
                                               if len(lines) > 120 else "")
            pytest.fail(f"output differs from {path} (TEX_UPDATE_GOLDEN=1 rewrites it if "
                        f"the change is meant):\n{shown}", pytrace=False)

    return check
