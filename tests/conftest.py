"""Shared fixtures: seeded RNG, golden-file comparison, GPU skip."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


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
    rewrites the file instead (review the diff before committing)."""

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if os.environ.get("TEX_UPDATE_GOLDEN") == "1" or not path.exists():
            if os.environ.get("CI") == "true" and not path.exists():
                pytest.fail(f"golden file {path} is missing")
            path.write_text(text)
        expected = path.read_text()
        assert text == expected, f"output differs from {path}:\n{text}"

    return check
