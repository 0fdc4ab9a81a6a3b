"""The persistent compile cache (``tex.runtime.diskcache``): a second process loads what the
first compiled; damaged entries are rebuilt; the bound evicts the least recently used;
disabled, unwritable and cleared caches never fail a build."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tex
from tex.runtime import jit
from tex.runtime.diskcache import MAGIC, DiskCache, default_directory
from tex.testing import OutOfBoundsError

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import hashlib, json
    import numpy as np
    import tex
    from tex.runtime import disk_cache_stats
    A = tex.placeholder((64,), name="A")
    I = tex.placeholder((8,), "int32", name="I")
    B = tex.compute((64,), lambda i: tex.exp(A[i]) * 2.0 + A[63 - i], name="B")
    G = tex.compute((8,), lambda i: A[I[i]] * 3.0, name="G")
    fb, fg = tex.build([B], name="ew"), tex.build([G], name="gather")
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    b, g = np.empty(64, np.float32), np.empty(8, np.float32)
    fb(a, b)
    fg(a, np.arange(8, dtype=np.int32) * 7, g)
    try:
        fg(a, np.full(8, 99, np.int32), g)
        error = None
    except tex.testing.OutOfBoundsError as err:
        error = str(err)
    texts = {f"{f.name}.{fmt}": hashlib.sha256(f.get_source(fmt).encode()).hexdigest()
             for f in (fb, fg) for fmt in ("ll", "ll.raw", "asm")}
    print(json.dumps({"stats": disk_cache_stats(), "b": b.tolist(), "g": g.tolist(),
                      "error": error, "texts": texts}))
""")


def _start(cache: Path) -> subprocess.Popen:
    env = dict(os.environ, TEX_CACHE_DIR=str(cache), TEX_CACHE_RESULTS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _report(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_processes_share_the_disk_cache(tmp_path: Path) -> None:
    """Two processes compiling at once both write the same entries (atomically); a third
    loads them all from disk, with the same results, sources and bounds-check errors."""
    first = [_start(tmp_path), _start(tmp_path)]
    cold = [_report(p) for p in first]
    entries = sorted(p for p in tmp_path.iterdir() if p.is_file())
    # per function: its kernel and its front entry (the schedule's key -> the kernel's);
    # the object code of the two support modules (the allocator, the math functions); and
    # in results/, per function, its auto_schedule result
    assert len(entries) == 6 and all(p.suffix == ".texc" for p in entries)
    assert sum(_is_front(p) for p in entries) == 2
    assert sum(_has_key(p, "support:") for p in entries) == 2
    results = sorted((tmp_path / "results").iterdir())
    assert len(results) == 2 and all(_has_key(p, "auto_schedule:") for p in results)
    for r in cold:  # one may load what the other finished first
        assert r["stats"]["writes"] + r["stats"]["hits"] >= 6 and r["stats"]["corrupt"] == 0
        results = r["stats"]["results"]
        assert results["writes"] + results["hits"] == 2 and results["corrupt"] == 0
    warm = _report(_start(tmp_path))
    assert warm["stats"]["hits"] == 6 and warm["stats"]["writes"] == 0
    assert warm["stats"]["misses"] == 0 and warm["stats"]["corrupt"] == 0
    assert warm["stats"]["results"]["hits"] == 2 and warm["stats"]["results"]["writes"] == 0
    for key in ("b", "g", "error", "texts"):
        assert warm[key] == cold[0][key] == cold[1][key], key
    assert "index 99" in warm["error"]


def _is_front(path: Path) -> bool:
    """Whether the entry at ``path`` is a front entry (``tex.runtime.jit.FrontCache``)."""
    return b'"front"' in path.read_bytes()[:4096]


def _has_key(path: Path, prefix: str) -> bool:
    """Whether the key of the entry at ``path`` starts with ``prefix`` (``support:``: a
    support module's object code, ``tex.runtime.diskcache.support_engine``;
    ``auto_schedule:``: a schedule, ``tex.ir.saved``)."""
    return f'"key": "{prefix}'.encode() in path.read_bytes()[:4096]


def _elementwise(c: float) -> tex.runtime.BuiltFunction:
    A = tex.placeholder((32,), name="A")
    B = tex.compute((32,), lambda i: A[i] * c + 1.0, name="B")
    return tex.build([B], name="disk_ew")


def _check(f, c: float) -> None:
    a = np.arange(32, dtype=np.float32)
    b = np.empty(32, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(c) + 1)


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DiskCache:
    """A disk cache of its own for the test, in-process cache emptied around it."""
    cache = DiskCache(tmp_path / "cache")
    monkeypatch.setattr(jit, "DISK", cache)
    jit.clear_cache()
    yield cache
    jit.clear_cache()


def test_in_process_reload_and_bounds_checks(disk: DiskCache) -> None:
    W = tex.placeholder((5, 4), name="W")
    I = tex.placeholder((3,), "int32", name="I")  # noqa: E741
    C = tex.compute((3, 4), lambda i, j: W[I[i], j] * 2.0, name="C")
    f = tex.build([C], name="disk_gather")
    jit.clear_cache()
    with tex.debug.timings() as tm:
        g = tex.build([C], name="disk_gather")
    # the front entry and the kernel loaded, not lowered again
    assert disk.stats["writes"] == 2 and disk.stats["hits"] == 2
    assert tm.seconds("lower") == 0 and tm.seconds("build.front_key") > 0
    assert g.lowered == f.lowered and g.args == f.args
    assert g._kernel is not f._kernel
    assert g.get_source("asm") == f.get_source("asm")
    w = np.arange(20, dtype=np.float32).reshape(5, 4)
    out = np.empty((3, 4), np.float32)
    g(w, np.array([4, 0, 2], np.int32), out)
    np.testing.assert_array_equal(out, w[[4, 0, 2]] * 2)
    with pytest.raises(OutOfBoundsError, match="index 7 in dimension 0 of 'W'"):
        g(w, np.array([0, 7, 1], np.int32), out)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip(data: bytes) -> bytes:
    return data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:]


def _wrong_key(data: bytes) -> bytes:
    return data.replace(b'"key": "', b'"key": "0', 1)


def _garbage(data: bytes) -> bytes:
    return b"\0" * len(data)


@pytest.mark.parametrize("kind", ["kernel", "front"])
@pytest.mark.parametrize("damage", [_truncate, _flip, _wrong_key, _garbage, lambda d: b""])
def test_damaged_entry_is_rebuilt(disk: DiskCache, damage, kind: str) -> None:
    """A damaged kernel or front entry is deleted and written again; the build gives the
    right numbers either way."""
    _check(_elementwise(2.5), 2.5)
    (entry,) = [p for p in disk.entries() if _is_front(p) == (kind == "front")]
    good = entry.read_bytes()
    assert good.startswith(MAGIC)
    entry.write_bytes(damage(good))
    jit.clear_cache()
    _check(_elementwise(2.5), 2.5)  # the damaged entry made again, not loaded
    assert disk.stats["corrupt"] == 1
    # a damaged kernel: the front entry is read (then lowered, compiled, both written);
    # a damaged front entry: lowered, the kernel read, the front entry written
    assert (disk.stats["hits"], disk.stats["writes"]) == ((1, 4) if kind == "kernel" else (1, 3))
    assert entry.read_bytes() == good  # the bad entry replaced by a good one
    jit.clear_cache()
    _check(_elementwise(2.5), 2.5)
    assert disk.stats["hits"] == 3


def test_least_recently_used_entries_are_evicted(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    blob = {"x": b"y" * 1000}
    cache.put("a", blob)
    cache.limit = cache.path("a").stat().st_size * 5 // 2  # room for two entries
    cache.put("b", blob)
    os.utime(cache.path("a"), (1_000_000, 1_000_000))
    os.utime(cache.path("b"), (2_000_000, 2_000_000))
    assert cache.get("a") == blob  # a hit: "a" becomes the most recently used
    cache.put("c", blob)
    assert cache.stats["evicted"] == 1
    assert cache.get("b") is None
    assert cache.get("a") == blob and cache.get("c") == blob
    assert len(cache.entries()) == 2


def test_writes_do_not_rescan_the_directory_each_time(tmp_path: Path) -> None:
    """The bound is kept from a running total: one scan on the first write, then one per
    RESCAN_WRITES writes or when the total passes the bound (a scan per write made a
    process's builds quadratic in the number of entries)."""
    from tex.runtime.diskcache import RESCAN_WRITES
    cache = DiskCache(tmp_path)
    blob = {"x": b"y" * 100}
    n = 2 * RESCAN_WRITES + 1
    for i in range(n):
        cache.put(f"k{i}", blob)
    assert cache.stats["writes"] == n
    assert cache.stats["scans"] == 3  # the first write, then every RESCAN_WRITES
    size = cache.path("k0").stat().st_size
    cache.limit = size * (n + 2)  # room for two more, then over
    cache.put("more1", blob)
    cache.put("more2", blob)
    scans = cache.stats["scans"]
    cache.put("more3", blob)  # past the bound: scan and evict the oldest
    assert cache.stats["scans"] == scans + 1 and cache.stats["evicted"] >= 1
    assert len(cache.entries()) <= n + 2


def test_disabled_by_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for value in ("", "none", "None", "  "):
        monkeypatch.setenv("TEX_CACHE_DIR", value)
        assert default_directory() is None
    monkeypatch.setenv("TEX_CACHE_DIR", str(tmp_path))
    assert default_directory() == tmp_path
    monkeypatch.delenv("TEX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "tex"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_directory() == Path.home() / ".cache" / "tex"
    off = DiskCache(None)
    monkeypatch.setattr(jit, "DISK", off)
    jit.clear_cache()
    _check(_elementwise(4.5), 4.5)
    assert not off.enabled and off.stats["writes"] == off.stats["misses"] == 0
    assert DiskCache(tmp_path, limit=0).enabled is False


def test_unwritable_directory_warns_once_and_builds(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = DiskCache(blocker / "cache")
    monkeypatch.setattr(jit, "DISK", cache)
    jit.clear_cache()
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        _check(_elementwise(5.5), 5.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(_elementwise(6.5), 6.5)
    assert not cache.writable and cache.stats["writes"] == 0
    jit.clear_cache()


def test_clear_cache_disk(disk: DiskCache) -> None:
    _elementwise(7.5)
    _elementwise(8.5)
    assert len(disk.entries()) == 4  # two kernels and their front entries
    jit.clear_cache()
    assert len(disk.entries()) == 4  # the default keeps the disk cache
    tex.runtime.clear_cache(disk=True)
    assert disk.entries() == []
    _check(_elementwise(7.5), 7.5)
    assert disk.stats["writes"] == 6


def test_size_bound_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tex import diskstore as diskcache

    monkeypatch.delenv("TEX_CACHE_SIZE", raising=False)
    assert diskcache._limit_from_env() == diskcache.DEFAULT_LIMIT_MB << 20 == 512 << 20
    monkeypatch.setenv("TEX_CACHE_SIZE", " 8 ")
    assert diskcache._limit_from_env() == 8 << 20
    for value in ("-1", "lots"):
        monkeypatch.setenv("TEX_CACHE_SIZE", value)
        with pytest.warns(RuntimeWarning, match="TEX_CACHE_SIZE"):
            assert diskcache._limit_from_env() == 512 << 20


def test_the_source_fingerprint_follows_every_source_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry written by other tex sources must never load: the fingerprint changes with
    any .py file's contents or name, in any subpackage, and ignores __pycache__."""
    from tex import diskstore
    (tmp_path / "sub" / "__pycache__").mkdir(parents=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    monkeypatch.setattr(diskstore, "_PACKAGE", tmp_path)

    def fingerprint() -> str:
        monkeypatch.setattr(diskstore, "_fingerprint", None)
        return diskstore.source_fingerprint()

    first = fingerprint()
    assert fingerprint() == first
    (tmp_path / "sub" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\0")
    assert fingerprint() == first
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    second = fingerprint()
    assert second != first
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")
    assert fingerprint() not in (first, second)
