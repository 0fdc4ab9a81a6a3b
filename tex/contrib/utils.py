"""TVM's ``tvm.contrib.utils``: a temporary directory for the files a tutorial writes."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

__all__ = ["TempDirectory", "tempdir"]


class TempDirectory:
    """A directory removed by ``remove()`` (or on leaving a ``with`` block, or when
    collected), unless ``keep_for_debug``."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False) -> None:
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="tex-")
        self._keep = keep_for_debug

    @property
    def path(self) -> str:
        return self.temp_dir

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the files in the directory."""
        return sorted(os.listdir(self.temp_dir))

    def remove(self) -> None:
        """Delete the directory and what it holds (unless kept for debugging)."""
        if not self._keep and self.temp_dir and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __del__(self) -> None:
        self.remove()


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    """A new temporary directory (TVM's ``utils.tempdir()``)."""
    return TempDirectory(custom_path, keep_for_debug)
