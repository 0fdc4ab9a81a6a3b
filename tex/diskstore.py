"""The disk store: entries of named byte sections in files, one per key, shared by tex's
persistent caches.

``tex.runtime.diskcache`` keeps object code there (what a second process needs to skip
LLVM and lowering); ``tex.ir.saved`` keeps the results of ``differentiate`` and
``auto_schedule`` (what it needs to skip them; ``TEX_CACHE_RESULTS=0`` turns that off).
Each cache is a ``DiskCache`` over the same directory whose ``fields`` add what its entries
depend on beyond the key (the JIT's: the LLVM version and the host triple); this module
owns the files, the bound and the counters.

Directory: ``TEX_CACHE_DIR`` (read at import); unset: ``$XDG_CACHE_HOME/tex``, else
``~/.cache/tex``; empty or ``none``: no disk cache. Bound: ``TEX_CACHE_SIZE=<MB>``, default
``DEFAULT_LIMIT_MB`` (512 MB; ``0`` disables the disk cache), for compiled code and, in
the subdirectory ``results``, for saved results, each. While a cache's entries total more
than the bound, the least recently used goes: a hit touches its file's mtime, and the
oldest mtime is evicted first. The directory is scanned for this on a cache's first write,
then only when its writes since take the known total past the bound, or every
``RESCAN_WRITES`` writes (for other processes' entries).

The key: the caller's key plus ``FORMAT_VERSION``, a fingerprint of tex's own source files
(a changed tex must never load what an older one stored; entries of older sources stay
until evicted) and the cache's ``fields``. The file is named by the SHA-256 of all of them
and its header repeats them all; a load compares every field, so a name collision never
loads a wrong entry.

File format: ``MAGIC``, a 4-byte little-endian header length, the header (JSON: format,
the key fields, the sections' names and lengths, the SHA-256 of the payload), the payload
(the sections concatenated). A short file, a bad magic, header or checksum, or a key that
differs is counted as ``corrupt``, deleted and reported as a miss: the caller rebuilds and
writes a good entry. Nothing here raises to the caller: an I/O error is a miss, and a
directory that cannot be written warns once (``RuntimeWarning``) and turns writing off for
the process.

Concurrency: a writer writes a temporary file in the cache directory and ``os.replace``-s
it onto the entry's name (atomic on POSIX), so a reader sees a whole old or a whole new
file, never a partial one; two processes writing the same entry write the same bytes, the
last rename wins. Eviction tolerates files another process removed first; temporary files
left by a killed writer are removed after an hour.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from . import debug

__all__ = ["DiskCache", "RESULTS", "DEFAULT_LIMIT_MB", "FORMAT_VERSION", "MAGIC",
           "default_directory", "source_fingerprint"]

MAGIC = b"TEXJITC\n"
FORMAT_VERSION = 1
DEFAULT_LIMIT_MB = 512
SUFFIX = ".texc"
TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 3600.0
RESCAN_WRITES = 64  # writes between two scans of the directory for the size bound
RESULTS_SUBDIRECTORY = "results"  # where RESULTS keeps its entries
_HEADER_LEN = struct.Struct("<I")
_PACKAGE = Path(__file__).resolve().parent

_fingerprint: str | None = None


def source_fingerprint() -> str:
    """SHA-256 of tex's Python sources (paths and contents; computed once per process,
    ~5 ms: every second process pays it before its first cache lookup, so the tree is
    listed with ``os.walk``, not ``Path.rglob``, which took half as long again)."""
    global _fingerprint
    if _fingerprint is None:
        files = []
        for root, dirs, names in os.walk(_PACKAGE):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    full = os.path.join(root, name)
                    files.append((os.path.relpath(full, _PACKAGE).replace(os.sep, "/"), full))
        h = hashlib.sha256()
        for rel, full in sorted(files):
            h.update(rel.encode() + b"\0")
            try:
                with open(full, "rb") as f:
                    h.update(f.read())
            except OSError:
                h.update(b"?")
            h.update(b"\0")
        _fingerprint = h.hexdigest()
    return _fingerprint


def default_directory() -> Path | None:
    """Where entries go: ``TEX_CACHE_DIR``, else ``$XDG_CACHE_HOME/tex`` or ``~/.cache/tex``;
    None when ``TEX_CACHE_DIR`` is empty or ``none``."""
    value = debug.env("TEX_CACHE_DIR")
    if value is not None:
        value = value.strip()
        if not value or value.lower() == "none":
            return None
        return Path(value).expanduser()
    base = (debug.env("XDG_CACHE_HOME") or "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "tex"


def _limit_from_env() -> int:
    """``TEX_CACHE_SIZE`` (megabytes, a non-negative integer) in bytes."""
    return debug.count_setting("TEX_CACHE_SIZE", debug.env("TEX_CACHE_SIZE"),
                               DEFAULT_LIMIT_MB, " (MB)") << 20


class DiskCache:
    """Entries (``dict`` of named byte sections) in files under ``directory``."""

    def __init__(self, directory: Path | str | None, limit: int = DEFAULT_LIMIT_MB << 20,
                 fields: Callable[[], dict[str, str]] | None = None) -> None:
        self.fields = fields  # what the entries depend on beyond the key (None: nothing)
        self.directory = Path(directory) if directory is not None else None
        self.limit = limit  # bytes; 0: disabled
        self.writable = True  # False after a failed write (warned once)
        self.stats = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "evicted": 0,
                      "scans": 0}
        self._lock = threading.Lock()
        # the directory's total as of the last scan plus this process's writes since: a
        # write rescans only when that passes the bound or every RESCAN_WRITES writes
        # (other processes' writes), not every time (a scan per build is quadratic)
        self._total: int | None = None
        self._since_scan = 0

    @classmethod
    def from_env(cls, fields: Callable[[], dict[str, str]] | None = None) -> DiskCache:
        """A cache in the directory and with the bound the environment sets."""
        return cls(default_directory(), _limit_from_env(), fields)

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.limit > 0

    def counters(self) -> dict[str, int]:
        """A copy of this process's counters: hits, misses, writes, corrupt entries
        deleted, entries evicted, directory scans."""
        with self._lock:
            return dict(self.stats)

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.stats[what] += n

    # -- keys ------------------------------------------------------------------------------
    def key_fields(self, key: str) -> dict[str, str]:
        """Everything an entry for the key ``key`` depends on."""
        fields = {"key": key, "format": str(FORMAT_VERSION), "tex": source_fingerprint()}
        if self.fields is not None:
            fields.update(self.fields())
        return fields

    def path(self, key: str) -> Path:
        assert self.directory is not None
        fields = self.key_fields(key)
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        return self.directory / f"{digest}{SUFFIX}"

    # -- reading ---------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, bytes] | None:
        """The sections stored under ``key``, or None (absent, unreadable or corrupt: a
        corrupt file is deleted)."""
        if not self.enabled:
            return None
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self._count("misses")
            return None
        sections = self._parse(data, self.key_fields(key))
        if sections is None:
            self.discard(key)
            self._count("misses")
            return None
        with contextlib.suppress(OSError):  # the LRU clock; best effort
            os.utime(path)
        self._count("hits")
        return sections

    def _parse(self, data: bytes, fields: dict[str, str]) -> dict[str, bytes] | None:
        start = len(MAGIC) + _HEADER_LEN.size
        if len(data) < start or not data.startswith(MAGIC):
            return None
        (n,) = _HEADER_LEN.unpack_from(data, len(MAGIC))
        try:
            header = json.loads(data[start:start + n].decode())
            if not isinstance(header, dict) or header.get("fields") != fields:
                return None
            payload = data[start + n:]
            if hashlib.sha256(payload).hexdigest() != header["sha256"]:
                return None
            sections: dict[str, bytes] = {}
            at = 0
            for name, length in header["sections"]:
                if not isinstance(name, str) or not isinstance(length, int) or length < 0:
                    return None
                sections[name] = payload[at:at + length]
                at += length
            if at != len(payload):
                return None
            return sections
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None

    def discard(self, key: str) -> None:
        """Delete the entry of ``key`` (a corrupt one: counted)."""
        if not self.enabled:
            return
        self._count("corrupt")
        _unlink(str(self.path(key)))

    # -- writing ---------------------------------------------------------------------------
    def put(self, key: str, sections: dict[str, bytes]) -> None:
        """Store ``sections`` under ``key`` (atomically), then evict down to the bound."""
        if not self.enabled or not self.writable:
            return
        assert self.directory is not None
        payload = b"".join(sections.values())
        header = json.dumps({"fields": self.key_fields(key),
                             "sections": [[k, len(v)] for k, v in sections.items()],
                             "sha256": hashlib.sha256(payload).hexdigest()}).encode()
        data = MAGIC + _HEADER_LEN.pack(len(header)) + header + payload
        tmp = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=SUFFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path(key))
            tmp = None
        except OSError as err:
            self.writable = False
            warnings.warn(f"tex: cannot write the compile cache in {self.directory} ({err}); "
                          "nothing is cached on disk in this process (set "
                          "TEX_CACHE_DIR to a writable directory, or to 'none')",
                          RuntimeWarning, stacklevel=2)
            return
        finally:
            if tmp is not None:
                _unlink(tmp)
        self._count("writes")
        with self._lock:
            if self._total is not None:
                self._total += len(data)
                self._since_scan += 1
            due = self._total is None or self._total > self.limit or \
                self._since_scan >= RESCAN_WRITES
        if due:
            self.evict()

    def evict(self) -> None:
        """Delete the least recently used entries while they total more than the bound
        (and temporary files older than an hour)."""
        if self.directory is None:
            return
        entries: list[tuple[float, int, str]] = []
        total = 0
        now = time.time()
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.name.startswith(TEMP_PREFIX):
                        if now - st.st_mtime > STALE_TEMP_SECONDS:
                            _unlink(e.path)
                        continue
                    if e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                        entries.append((st.st_mtime, st.st_size, e.path))
                        total += st.st_size
        except OSError:
            return
        entries.sort()
        evicted = 0
        for _, size, path in entries:
            if total <= self.limit:
                break
            _unlink(path)
            total -= size
            evicted += 1
        with self._lock:
            self._total, self._since_scan = total, 0
            self.stats["scans"] += 1
            self.stats["evicted"] += evicted

    def clear(self) -> None:
        """Delete every entry in the directory."""
        if self.directory is None:
            return
        with contextlib.suppress(OSError):  # no directory: nothing to clear
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                        _unlink(e.path)

    def entries(self) -> list[Path]:
        """The entry files, oldest use first."""
        if self.directory is None or not self.directory.is_dir():
            return []
        files = [p for p in self.directory.iterdir()
                 if p.name.endswith(SUFFIX) and not p.name.startswith(TEMP_PREFIX)]
        return sorted(files, key=lambda p: p.stat().st_mtime)


def _unlink(path: str) -> None:
    """Delete ``path`` if it is there (another process may have removed it first)."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def _results_from_env() -> DiskCache:
    """The cache of results (the subdirectory ``results``), unless ``TEX_CACHE_RESULTS=0``
    turns it off."""
    directory = default_directory()
    if (debug.env("TEX_CACHE_RESULTS") or "").strip() == "0" or directory is None:
        return DiskCache(None)
    return DiskCache(directory / RESULTS_SUBDIRECTORY, _limit_from_env())


# the results of differentiate and auto_schedule (tex.ir.saved)
RESULTS = _results_from_env()
