"""The allocator of kernels' large temporaries (``tex.runtime.workspace``): a freed block is
kept and handed back to the next allocation of its size, within a bound; results never
depend on it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tex
from tex.runtime import workspace


def _two_stage(n: int) -> tuple[tex.Tensor, tex.Tensor, tex.Tensor]:
    """``C = (A * 2) + 1`` through a stored temporary of ``n`` floats (> the stack's 64 KB)."""
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((n,), lambda i: B[n - 1 - i] + 1.0, name="C")
    return A, B, C


def _build(n: int):
    A, B, C = _two_stage(n)
    s = tex.create_schedule(C.op)  # B stays a separate stage: a heap temporary
    return tex.build(s, [A, C])


def test_a_freed_temporary_is_kept_and_reused(rng: np.random.Generator) -> None:
    n = 40_000  # 160 KB
    f = _build(n)
    workspace.release()
    a = rng.standard_normal(n).astype("float32")
    out = np.empty(n, "float32")
    f(a, out)
    np.testing.assert_array_equal(out, (a * 2 + 1)[::-1])
    kept = workspace.stats()["kept_bytes"]
    assert kept >= 4 * n
    f(a, out)  # takes the kept block, gives it back
    assert workspace.stats()["kept_bytes"] == kept
    np.testing.assert_array_equal(out, (a * 2 + 1)[::-1])
    workspace.release()
    assert workspace.stats()["kept_bytes"] == 0


def test_nothing_is_kept_beyond_the_limit(rng: np.random.Generator) -> None:
    n = 40_000
    f = _build(n)
    before = workspace.stats()["limit_bytes"]
    try:
        workspace.set_limit(0)
        a = rng.standard_normal(n).astype("float32")
        out = np.empty(n, "float32")
        f(a, out)
        assert workspace.stats()["kept_bytes"] == 0
        np.testing.assert_array_equal(out, (a * 2 + 1)[::-1])
    finally:
        workspace.set_limit(before)
    with pytest.raises(ValueError, match="non-negative"):
        workspace.set_limit(-1)


def test_bad_limit_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEX_WORKSPACE_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="TEX_WORKSPACE_CACHE_MB"):
        workspace.limit_bytes()
    monkeypatch.setenv("TEX_WORKSPACE_CACHE_MB", "3")
    assert workspace.limit_bytes() == 3 << 20


def test_concurrent_calls_and_parallel_regions_share_the_allocator(
        rng: np.random.Generator) -> None:
    """Threads of a parallel loop allocate their own temporaries (> 64 KB each), and two
    Python threads call at once: every result stays exact."""
    rows, n = 8, 20_000
    A = tex.placeholder((rows, n), name="A")
    B = tex.compute((rows, n), lambda r, i: A[r, i] * 3.0, name="B")
    C = tex.compute((rows, n), lambda r, i: B[r, n - 1 - i] - 1.0, name="C")
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].parallel(C.op.axis[0])
    f = tex.build(s, [A, C])
    a = rng.standard_normal((rows, n)).astype("float32")
    want = (a * 3 - 1)[:, ::-1]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                out = np.empty((rows, n), "float32")
                f(a, out)
                np.testing.assert_array_equal(out, want)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
