"""Shared libraries of built functions: ``export_library`` writes one, ``load_module``
loads it back (in any process, without compiling), ``save`` writes one format of the code.

A library holds the function's code as position-independent objects made from the
optimized IR the build kept (``tex.codegen.export``), the kernels' allocator (its own copy:
``workspace.library_ir``), the half-precision conversions when the code calls them, and a
description: a function ``tex_module_info`` returning JSON with the entry's name, every
argument (name, buffer or scalar, dtype, shape, whether it is written), whether the code
writes its error record, the run-time bounds checks, the host CPU and features the code was
made for, and the two IR texts (compressed) for ``get_source``. The system C compiler
(``$CC``, else ``cc``) links them with ``-shared``, and with the libgomp tex uses when the
code has parallel loops.

``load_module(path)`` opens the library (``ctypes.CDLL``), reads the description, refuses
code made for CPU features this host lacks (it would die on an illegal instruction), and
returns a ``BuiltFunction`` with the same argument checks as the one exported: ``f.args``
are new placeholders (and ``tex.var``s) of the exported names, shapes and dtypes. A loaded
function with parallel loops cannot run in a child forked after OpenMP started (the exported
code has no serial variant): there it raises ``RuntimeError`` instead of waiting forever.
"""
from __future__ import annotations

import base64
import ctypes
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..codegen.export import pic_linked_object, pic_objects, string_constant_ir
from ..codegen.host import host_target
from ..codegen.llvm import CompiledModule
from ..debug import env
from ..ir.codec import IR_CODECS, decode, encode
from ..ir.tensor import Tensor
from ..te import placeholder, var
from . import workspace
from .externs import ExternSpec
from .jit import SUPPORT_SYMBOLS, Kernel, checks_of, checks_record, support_ir
from .module import BuiltFunction
from .openmp import load_openmp

__all__ = ["FORMAT", "INFO_SYMBOL", "c_compiler", "export_library", "link_shared",
           "load_module", "save"]

FORMAT = 1  # the description's version: a library of another version is refused
INFO_SYMBOL = "tex_module_info"
_LINK_TIMEOUT_S = 120


def export_library(fn: BuiltFunction, path: str | os.PathLike[str]) -> None:
    """Write ``fn`` (a CPU build) as a shared library at ``path``.

    Raises
    ------
    TypeError
        ``fn`` is not a CPU ``BuiltFunction``.
    ValueError
        ``fn`` has an extern call of a function that is not registered by name (another
        process could not find it; a registered name is looked up when the library runs).
    RuntimeError
        No C compiler to link with, or linking failed (its message included).
    """
    if not isinstance(fn, BuiltFunction):
        raise TypeError(f"export_library: expected a function built for the CPU, got "
                        f"{type(fn).__name__}")
    for spec in fn.extern_specs:
        try:
            spec.as_record()
        except ValueError as err:
            raise ValueError(f"export_library: {err}") from None
    src = fn.compiled
    texts = _library_texts(fn)
    libs = ["-lm"]
    if src.uses_openmp:
        gomp = load_openmp()
        libs = [gomp] + libs if gomp and os.path.isabs(gomp) else libs + ["-lgomp"]
    link_shared(path, pic_objects(texts), libs, "export_library")


def _library_texts(fn: BuiltFunction) -> list[str]:
    """The IR modules of ``fn``'s library: its code, the allocator, the support routines
    it calls, its description."""
    src = fn.compiled
    texts = list(src.parts_opt or (src.llvm_ir_opt,))
    texts.append(workspace.library_ir())
    if any(s in src.externals for s in SUPPORT_SYMBOLS):
        texts.append(support_ir())
    texts.append(string_constant_ir(INFO_SYMBOL, json.dumps(_describe(fn, src))))
    return texts


def link_shared(path: str | os.PathLike[str], objects: Sequence[bytes | str],
                libs: Sequence[str] = ("-lm",), who: str = "link_shared",
                options: Sequence[str] = (), cc: Sequence[str] | None = None) -> None:
    """Link object files (their bytes, or paths) into the shared library ``path`` with the
    system C compiler (``$CC``, else ``cc``/``gcc``/``clang``; ``cc``: this one).

    Raises
    ------
    RuntimeError
        No C compiler, or linking failed (its message included).
    """
    compiler = list(cc) if cc else c_compiler()
    out = Path(path)
    with tempfile.TemporaryDirectory(prefix="tex-link-") as tmp:
        files = []
        for k, obj in enumerate(objects):
            if isinstance(obj, bytes):
                f = Path(tmp) / f"part{k}.o"
                f.write_bytes(obj)
                files.append(str(f))
            else:
                files.append(str(obj))
        partial = Path(tmp) / "lib.so"
        cmd = [*compiler, "-shared", "-o", str(partial), *files, *options, *libs]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=_LINK_TIMEOUT_S,
                                 check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RuntimeError(f"{who}: linking with {' '.join(compiler)} failed: {err}"
                               ) from None
        if run.returncode != 0:
            raise RuntimeError(f"{who}: linking with {' '.join(compiler)} failed "
                               f"(exit {run.returncode}):\n{run.stderr.strip()}")
        shutil.copyfile(partial, out)


def c_compiler() -> list[str]:
    """The C compiler that links: ``$CC`` (may carry flags), else ``cc``/``gcc``/``clang``."""
    named = env("CC")
    if named:
        return shlex.split(named)
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    raise RuntimeError("export_library: no C compiler to link the shared library with "
                       "(set CC, or install cc/gcc/clang); f.save(path) writes the object "
                       "code without one")


def _pack(text: str) -> str:
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode()


def _unpack(data: str) -> str:
    return zlib.decompress(base64.b64decode(data)).decode()


def _describe(fn: BuiltFunction, src: CompiledModule) -> dict[str, Any]:
    """The library's description (module docstring)."""
    host = host_target()
    args = [{"name": s.name, "buffer": s.is_buffer, "output": s.is_output,
             "dtype": s.dtype.name,
             "shape": [d if isinstance(d, int) else str(d) for d in s.shape]}
            for s in fn.specs]
    # symbolic shapes: the shapes and scalar arguments as IR records, so that arguments
    # sharing a shape variable share it again when loaded
    symbolic = [tuple(a.shape) if isinstance(a, Tensor) else a for a in fn.args]
    ir = encode(symbolic, IR_CODECS) if any(
        not isinstance(d, int) for a in fn.args if isinstance(a, Tensor) for d in a.shape) \
        else None
    return {"format": FORMAT, "entry": fn.name, "args": args, "errors": src.errors,
            "symbolic": None if ir is None else {"records": ir.records, "value": ir.value},
            "externs": [spec.as_record() for spec in fn.extern_specs],
            "checks": checks_record(src.bounds_checks), "openmp": src.uses_openmp,
            "notes": list(src.notes),
            "triple": host.triple, "cpu": host.cpu, "features": host.features,
            "lowered": fn.lowered, "ll": _pack(src.llvm_ir_opt), "ll.raw": _pack(src.llvm_ir)}


def load_module(path: str | os.PathLike[str]) -> BuiltFunction:
    """The function a library written by ``export_library`` holds, ready to call.

    Raises
    ------
    OSError
        The file cannot be opened as a shared library.
    ValueError
        It is not a tex library, or of another format version.
    RuntimeError
        Its code needs CPU features this host lacks.
    """
    where = Path(path)
    # (a bare soname such as "libfoo.so" is looked up by the dynamic loader)
    name_or_path = str(where.resolve()) if where.exists() else str(path)
    try:
        lib = ctypes.CDLL(name_or_path)
    except OSError as err:
        if "GOMP" not in str(err):
            raise
        # linked without libgomp (tex.contrib.cc.create_shared of a saved object): the
        # OpenMP runtime tex loads globally provides its symbols
        load_openmp()
        lib = ctypes.CDLL(name_or_path)
    try:
        info = ctypes.CFUNCTYPE(ctypes.c_char_p)((INFO_SYMBOL, lib))
    except AttributeError:
        raise ValueError(f"load_module: {path} is not a library written by tex's "
                         "export_library (no module description)") from None
    try:
        meta = json.loads(info().decode())
        if meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format')!r}, this tex reads {FORMAT}")
        _check_host(meta, path)
        specs = meta["args"]
        symbolic = meta.get("symbolic")
        if symbolic is None:
            signature = tuple(
                (placeholder(tuple(a["shape"]), a["dtype"], a["name"]), bool(a["output"]))
                if a["buffer"] else (var(a["name"], a["dtype"]), False) for a in specs)
        else:  # shapes over shape variables: one Var per variable, shared again
            made, _ = decode(symbolic["records"], symbolic["value"], IR_CODECS)
            signature = tuple(
                (placeholder(tuple(m), a["dtype"], a["name"]), bool(a["output"]))
                if a["buffer"] else (m, False) for a, m in zip(specs, made))
        checks = checks_of(meta["checks"])
        externs = [ExternSpec.from_record(r) for r in meta.get("externs", [])]
        compiled = CompiledModule(meta["entry"], _unpack(meta["ll.raw"]),
                                  _unpack(meta["ll"]), bool(meta["errors"]),
                                  tuple(meta["notes"]), checks, openmp=bool(meta["openmp"]))
        address = ctypes.cast(lib[meta["entry"]], ctypes.c_void_p).value
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError, zlib.error) as err:
        raise ValueError(f"load_module: {path} has a damaged description ({err})") from None
    limit = ctypes.c_int64.in_dll(lib, workspace.LIBRARY_LIMIT)
    limit.value = workspace.limit_bytes()
    kernel = Kernel(meta["entry"], int(address or 0), compiled, lib)
    name = meta["entry"]

    def serial() -> Kernel:
        raise RuntimeError(f"{name}: loaded from {path}, its parallel loops cannot run in a "
                           "process forked after OpenMP started (a library holds no serial "
                           "variant); load or build it in this process instead")

    return BuiltFunction(name, signature, meta["lowered"], kernel, "llvm", serial, externs)


def _check_host(meta: dict[str, Any], path: Any) -> None:
    """Refuse code made for another triple, or for CPU features this host lacks."""
    host = host_target()
    if meta["triple"] != host.triple:
        raise RuntimeError(f"load_module: {path} was made for {meta['triple']}, this host "
                           f"is {host.triple}")
    have = {f[1:] for f in host.features.split(",") if f.startswith("+")}
    need = {f[1:] for f in meta["features"].split(",") if f.startswith("+")}
    missing = sorted(need - have)
    if missing:
        raise RuntimeError(f"load_module: {path} was made for a {meta['cpu']} and uses CPU "
                           f"features this host lacks ({', '.join(missing[:8])}); export it "
                           "again on this machine")


def save(fn: Any, path: str | os.PathLike[str], fmt: str = "") -> None:
    """Write ``fn``'s code at ``path``: ``fmt`` (default: from the suffix) ``"o"``/``"obj"``
    (a position-independent object file of the function), ``"ll"`` (optimized LLVM IR),
    ``"s"``/``"asm"`` (assembly), or a CUDA function's ``"ptx"``."""
    out = Path(path)
    kind = (fmt or out.suffix.lstrip(".")).lower()
    if kind in ("o", "obj"):
        if not isinstance(fn, BuiltFunction):
            raise ValueError("save: object code is written for CPU functions; save a CUDA "
                             "function's 'ptx'")
        # one object holding the library's modules, linked by LLVM: a shared library
        # linked from it alone (tex.contrib.cc.create_shared) loads with load_module
        out.write_bytes(pic_linked_object(_library_texts(fn)))
        return
    formats = {"ll": "ll", "s": "asm", "asm": "asm", "ptx": "ptx"}
    if kind not in formats:
        raise ValueError(f"save: unknown format {kind!r} for {out.name}; expected 'o', "
                         "'ll', 's' or (CUDA) 'ptx'")
    out.write_text(fn.get_source(formats[kind]))
