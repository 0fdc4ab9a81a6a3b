"""The package layout: imports flow one way, and third-party libraries stay with their owner.

Rows, top to bottom (README "Layout", STYLE.md §1). A module may import from its own row and the
rows above it, with two exceptions: tex.autodiff and tex.schedule (same row) may not import each
other, and tex.testing may import ir, arith, te, topi and autodiff but never schedule, lower,
codegen, runtime or build. tex/__init__.py, tex/__main__.py and tex/demo.py drive everything and
are exempt from the rows (not from third-party ownership). Imports under `if TYPE_CHECKING:` are
exempt from both checks, and so are the few upward imports listed in LAZY_IMPORTS, each made at
first use inside one named function, never at import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tex"

ROWS: list[tuple[str, ...]] = [
    ("tex.dtype", "tex.debug", "tex.error", "tex.target", "tex.diskstore", "tex.tvm_names"),
    ("tex.ir", "tex.viz"),
    ("tex.arith",),
    ("tex.te", "tex.tir"),
    ("tex.topi",),
    ("tex.autodiff", "tex.schedule"),
    ("tex.lower",),
    ("tex.codegen",),
    ("tex.runtime",),
    ("tex.build",),
    ("tex.program",),
    ("tex.testing",),
    ("tex.contrib",),
]
ROW_OF: dict[str, int] = {owner: r for r, owners in enumerate(ROWS) for owner in owners}

# Same row or above, minus the exceptions.
FORBIDDEN_PAIRS: dict[str, set[str]] = {
    "tex.autodiff": {"tex.schedule"},
    "tex.schedule": {"tex.autodiff"},
    "tex.testing": {"tex.schedule", "tex.lower", "tex.codegen", "tex.runtime", "tex.build",
                    "tex.program"},
}
# The sanctioned upward references, (importing module, its module-level function) -> the
# modules that function may import; each runs at first use, never at import:
# - API.md places ``grad_program`` in ``tex.autodiff``, but it compiles, so it lives in
#   ``tex.program`` (below build); ``tex/autodiff/__init__.py`` reaches it only inside its
#   module ``__getattr__`` (PEP 562).
# - ``tex.target.cpu_info("llvm")`` describes the host as LLVM sees it (its features decide
#   the vector width the code generator targets), and llvmlite belongs to ``tex.codegen``:
#   ``tex/target.py`` imports the probe ``tex.codegen.host`` inside ``_host_cpu_info``, so
#   the answer never depends on what was imported before.
# - TVM's ``te`` module has ``create_schedule``, ``thread_axis`` and ``gradient``, so ported
#   code calls them as ``te.X``; ``tex/te/__init__.py`` reaches ``tex.schedule`` and
#   ``tex.autodiff`` for them only inside its module ``__getattr__``; likewise ``tex.tir``
#   reaches ``tex.lower.stmt`` for TVM's ``tir.stmt.For``-style isinstance checks, and
#   ``tex.topi.testing`` reaches the per-target schedules for TVM's ``get_*_schedule``.
# - TVM's ``topi.generic``/``topi.x86``/``topi.cuda`` schedules return
#   ``tex.schedule.auto_schedule``; ``tex/topi/__init__.py`` reaches them
#   (``tex.schedule.topi_schedules``) only inside its module ``__getattr__``.
# - TVM's ``tvm.testing.device_enabled("cuda")`` asks whether a CUDA device is usable, which
#   only the runtime's driver can say; ``tex/testing/tvm.py`` imports ``tex.runtime.ndarray``
#   inside ``device_enabled``, at its first probe (``enabled_targets`` reuses the devices it
#   probed), so nothing in ``tex.testing`` imports the runtime at import time.
# - An extern call (``te.extern``) hands its function TVM's ``NDArray`` views in compiled
#   code; ``tex.testing.evaluate`` hands it the same, importing ``tex.runtime.ndarray``
#   inside ``_evaluate_extern``, at the first extern call it evaluates.
LAZY_IMPORTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("tex.autodiff", "__getattr__"): ("tex.program",),
    ("tex.te", "__getattr__"): ("tex.schedule", "tex.autodiff"),
    ("tex.tir", "__getattr__"): ("tex.lower",),
    ("tex.topi.testing", "__getattr__"): ("tex.schedule.topi_schedules",),
    ("tex.topi", "__getattr__"): ("tex.schedule.topi_schedules",),
    ("tex.target", "_host_cpu_info"): ("tex.codegen.host",),
    ("tex.testing.tvm", "device_enabled"): ("tex.runtime.ndarray",),
    ("tex.testing.interpreter", "_evaluate_extern"): ("tex.runtime.ndarray",),
}
ALLOWED: dict[str, set[str]] = {
    owner: {o for o, r in ROW_OF.items() if r <= ROW_OF[owner]} - FORBIDDEN_PAIRS.get(owner, set())
    for owner in ROW_OF
}

# Drivers that re-export or run everything; nothing in the rows may import them.
EXEMPT = ("tex", "tex.__main__", "tex.demo")

# Third-party top-level package -> files (relative to the repository root, POSIX) or folders
# (ending in "/") that alone may import it.
THIRD_PARTY_OWNERS: dict[str, tuple[str, ...]] = {
    "sympy": ("tex/arith/sympy_bridge.py", "tex/arith/sympy_float.py"),
    "networkx": ("tex/ir/graph.py",),
    "llvmlite": ("tex/codegen/", "tex/runtime/"),
}

INIT_ALLOWED_NAMES = {"__all__", "__version__"}


@dataclass(frozen=True)
class ImportEdge:
    file: str  # path relative to the repository root
    line: int
    source: str  # the import statement as written (unparsed)
    target: str  # absolute dotted name; for `from m import a` this is "m.a" ("m" for `*`)
    absolute: bool  # False for relative imports (never third-party)
    function: str = ""  # the module-level function the import is in ("": runs at import)

    @property
    def lazy(self) -> bool:
        """Inside a module-level ``def __getattr__`` (runs at first use of a name)."""
        return self.function == "__getattr__"


def _require_package() -> list[Path]:
    assert PKG.is_dir(), (
        f"package directory {PKG} does not exist: tests/test_layout.py checks the layout of tex/ "
        "and cannot run without it"
    )
    files = sorted(PKG.rglob("*.py"))
    assert files, f"no Python files found under {PKG}"
    return files


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _ImportCollector(ast.NodeVisitor):
    """Collect import statements, skipping the body of `if TYPE_CHECKING:` blocks."""

    def __init__(self) -> None:
        self.nodes: list[ast.Import | ast.ImportFrom] = []
        self.function: dict[int, str] = {}  # node id -> the module-level function it is in
        self.depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        top = self.depth == 0
        before = len(self.nodes)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        if top:
            self.function.update((id(n), node.name) for n in self.nodes[before:])

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.nodes.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.nodes.append(node)


def _parse(path: Path, source: str | None = None) -> ast.Module:
    text = path.read_text(encoding="utf-8") if source is None else source
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise AssertionError(f"{path}:{e.lineno}: cannot parse: {e.msg}") from e


def imports_of(path: Path, source: str | None = None, root: Path = ROOT) -> list[ImportEdge]:
    """Every import in one file, relative imports resolved to absolute module names."""
    rel = path.relative_to(root).as_posix()
    module = _module_name(path, root)
    # The package that `from . import x` refers to.
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    collector = _ImportCollector()
    collector.visit(_parse(path, source))
    edges: list[ImportEdge] = []
    for node in collector.nodes:
        text = ast.unparse(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                edges.append(ImportEdge(rel, node.lineno, text, alias.name, True,
                                        collector.function.get(id(node), "")))
            continue
        if node.level:
            parts = package.split(".") if package else []
            if node.level - 1 >= len(parts):
                raise AssertionError(
                    f"{rel}:{node.lineno}: `{text}` goes {node.level} levels up, "
                    f"above the top-level package of {module}"
                )
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        for alias in node.names:
            target = base if alias.name == "*" else f"{base}.{alias.name}"
            edges.append(ImportEdge(rel, node.lineno, text, target, node.level == 0,
                                    collector.function.get(id(node), "")))
    return edges


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def owner_of(name: str) -> str | None:
    """The row owner (e.g. "tex.ir") or exempt driver a dotted name under tex belongs to."""
    for owner in (*ROW_OF, *EXEMPT[1:]):
        if _within(name, owner):
            return owner
    return "tex" if name == "tex" else None


def _describe(owner: str) -> str:
    return f"{owner} (row {ROW_OF[owner]})"


def layer_violations(edges: list[ImportEdge], importer: str) -> list[str]:
    """Messages for imports of `importer` (a module name) that break the row order."""
    src_owner = owner_of(importer)
    if src_owner is None or src_owner in EXEMPT:
        return []
    allowed = ALLOWED[src_owner]
    errors = []
    for e in edges:
        if not _within(e.target, "tex"):
            continue
        where = f"{e.file}:{e.line}: `{e.source}`"
        dst_owner = owner_of(e.target)
        if any(_within(e.target, t) for t in LAZY_IMPORTS.get((importer, e.function), ())):
            continue  # a sanctioned import at first use (see LAZY_IMPORTS)
        if dst_owner is None:
            errors.append(
                f"{where} imports {e.target}, which has no row in the layout table "
                "(add its package to ROWS in tests/test_layout.py and to the README's Layout)"
            )
        elif dst_owner in EXEMPT:
            errors.append(
                f"{where} imports {e.target}: the driver {dst_owner} re-exports everything; "
                f"import from the module that owns the name instead"
            )
        elif dst_owner not in allowed:
            errors.append(
                f"{where} imports {e.target} from {_describe(dst_owner)}, but "
                f"{_describe(src_owner)} may import only from: {', '.join(sorted(allowed))}"
            )
    return errors


def third_party_violations(edges: list[ImportEdge]) -> list[str]:
    """Messages for sympy/networkx/llvmlite imports outside their owning files."""
    errors = []
    for e in edges:
        if not e.absolute:
            continue
        top = e.target.split(".")[0]
        owners = THIRD_PARTY_OWNERS.get(top)
        if owners is None:
            continue
        if not any(e.file == o or (o.endswith("/") and e.file.startswith(o)) for o in owners):
            errors.append(
                f"{e.file}:{e.line}: `{e.source}` imports {top}, which only "
                f"{' and '.join(owners)} may import; go through that module"
            )
    return errors


def _report(errors: list[str], what: str) -> str:
    return f"{len(errors)} {what}:\n  " + "\n  ".join(errors)


# --------------------------------------------------------------------------------------------
# The checks on tex/


def test_package_exists() -> None:
    _require_package()
    assert (PKG / "__init__.py").is_file(), f"{PKG / '__init__.py'} is missing"


def test_every_module_has_a_row() -> None:
    errors = [
        f"{p.relative_to(ROOT).as_posix()}: module {_module_name(p)} has no row in the layout "
        "table (add it to ROWS in tests/test_layout.py and to the README's Layout)"
        for p in _require_package()
        if owner_of(_module_name(p)) is None
    ]
    assert not errors, _report(errors, "modules outside the layout")


def test_imports_follow_rows() -> None:
    errors: list[str] = []
    for path in _require_package():
        errors += layer_violations(imports_of(path), _module_name(path))
    assert not errors, _report(errors, "imports against the layout order")


def test_third_party_imports_stay_with_their_owner() -> None:
    errors: list[str] = []
    for path in _require_package():
        errors += third_party_violations(imports_of(path))
    assert not errors, _report(errors, "third-party imports outside their owner")


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Messages for ``from <tex module> import _name``: a module's underscore names are its
    own (what another module needs is public API of its owner)."""
    rel = path.relative_to(root).as_posix()
    errors = []
    for node in ast.walk(_parse(path)):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        if node.level == 0 and not (node.module or "").startswith("tex"):
            continue  # third-party and standard library modules are not tex's to judge
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                errors.append(f"{rel}:{node.lineno}: imports the private name "
                              f"{alias.name!r} of {'.' * node.level}{node.module or ''}")
    return errors


def test_no_module_imports_another_modules_private_names() -> None:
    errors: list[str] = []
    for path in _require_package():
        errors += private_imports(path)
    assert not errors, _report(errors, "imports of another module's private names")


def test_private_import_check_catches_one(tmp_path: Path) -> None:
    bad = tmp_path / "tex" / "lower" / "x.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from __future__ import annotations\nfrom ..ir.expr import _helper, Op\n"
                   "from os import _exit\nfrom tex.arith.rules import _private\n")
    errors = private_imports(bad, root=tmp_path)
    assert len(errors) == 2 and "'_helper' of ..ir.expr" in errors[0] and \
        "'_private' of tex.arith.rules" in errors[1], errors


def test_environment_is_read_in_debug_only() -> None:
    """Every environment variable is read through ``tex.debug.env`` and listed, with its
    meaning, in ``tex.debug.ENVIRONMENT``: no module reads ``os.environ`` itself."""
    from tex.debug import ENVIRONMENT

    errors: list[str] = []
    for path in _require_package():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os" and \
                    rel != "tex/debug.py":
                errors.append(f"{rel}:{node.lineno}: reads os.{node.attr} (use tex.debug.env)")
            if isinstance(node, ast.Call) and getattr(node.func, "attr",
                                                      getattr(node.func, "id", None)) == "env":
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Constant) and arg.value in ENVIRONMENT):
                    errors.append(f"{rel}:{node.lineno}: env() of a variable not listed in "
                                  "tex.debug.ENVIRONMENT")
    assert not errors, _report(errors, "environment reads outside tex.debug")


def test_init_only_reexports() -> None:
    _require_package()
    init = PKG / "__init__.py"
    assert init.is_file(), f"{init} is missing"
    rel = init.relative_to(ROOT).as_posix()
    tree = _parse(init)
    errors = [
        f"{rel}:{n.lineno}: defines {type(n).__name__} {n.name!r}; "
        "tex/__init__.py only re-exports (define it in its owning module)"
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    for i, stmt in enumerate(tree.body):
        if isinstance(
            stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            continue  # definitions are reported above
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # module docstring
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        else:
            targets = []
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if targets and len(names) == len(targets) and names <= INIT_ALLOWED_NAMES:
            continue
        errors.append(
            f"{rel}:{stmt.lineno}: `{ast.unparse(stmt).splitlines()[0]}`: tex/__init__.py may "
            "contain only imports, __all__ and __version__"
        )
    assert not errors, _report(errors, "problems in tex/__init__.py")


# --------------------------------------------------------------------------------------------
# The checker itself, on small made-up files (independent of the state of tex/)


def _edges(tmp_path: Path, rel: str, source: str) -> list[ImportEdge]:
    path = tmp_path / rel
    return imports_of(path, source, root=tmp_path)


def test_checker_resolves_relative_imports(tmp_path: Path) -> None:
    src = (
        "from . import rules\n"
        "from .. import ir\n"
        "from ..ir.expr import Const, Var\n"
        "import tex.dtype as dt\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..schedule import Schedule\n"
        "    import sympy\n"
        "else:\n"
        "    from ..topi import add\n"
        "def f():\n"
        "    from ..lower import stmt\n"
    )
    targets = [e.target for e in _edges(tmp_path, "tex/arith/solve.py", src)]
    assert targets == [
        "tex.arith.rules",
        "tex.ir",
        "tex.ir.expr.Const",
        "tex.ir.expr.Var",
        "tex.dtype",
        "typing.TYPE_CHECKING",
        "tex.topi.add",
        "tex.lower.stmt",
    ]
    init = [e.target for e in _edges(tmp_path, "tex/ir/__init__.py", "from .expr import *\n")]
    assert init == ["tex.ir.expr"]


def test_checker_reports_file_line_and_import(tmp_path: Path) -> None:
    src = "from ..ir import expr\nfrom ..schedule.stage import Stage\nimport networkx as nx\n"
    edges = _edges(tmp_path, "tex/autodiff/adjoint.py", src)
    layer = layer_violations(edges, "tex.autodiff.adjoint")
    assert len(layer) == 1
    assert layer[0].startswith("tex/autodiff/adjoint.py:2: `from ..schedule.stage import Stage`")
    third = third_party_violations(edges)
    assert len(third) == 1 and third[0].startswith("tex/autodiff/adjoint.py:3: `import networkx")

    testing = _edges(
        tmp_path,
        "tex/testing/evaluate.py",
        "from ..autodiff import x\nfrom ..codegen import llvm\nimport tex\n",
    )
    msgs = layer_violations(testing, "tex.testing.evaluate")
    assert [m.split(":")[1] for m in msgs] == ["2", "3"]

    ok = _edges(tmp_path, "tex/codegen/llvm.py", "import llvmlite.ir\nfrom ..lower import stmt\n")
    assert layer_violations(ok, "tex.codegen.llvm") == [] and third_party_violations(ok) == []
    driver = _edges(tmp_path, "tex/__init__.py", "from .build import build\nimport sympy\n")
    assert layer_violations(driver, "tex") == [] and len(third_party_violations(driver)) == 1


def test_checker_allows_only_the_declared_lazy_facade(tmp_path: Path) -> None:
    """``tex.autodiff``'s ``__init__`` may reach ``tex.program`` inside ``__getattr__``, and
    nowhere else: not at module level, not from another module, not another target."""
    facade = (
        "def __getattr__(name):\n"
        "    from ..program import grad_program\n"
        "    return grad_program\n"
    )
    edges = _edges(tmp_path, "tex/autodiff/__init__.py", facade)
    assert [e.lazy for e in edges] == [True]
    assert layer_violations(edges, "tex.autodiff") == []
    eager = _edges(tmp_path, "tex/autodiff/__init__.py", "from ..program import grad_program\n")
    assert len(layer_violations(eager, "tex.autodiff")) == 1
    other_module = _edges(tmp_path, "tex/autodiff/reverse.py", facade)
    assert len(layer_violations(other_module, "tex.autodiff.reverse")) == 1
    other_target = facade.replace("..program", "..build")
    assert len(layer_violations(_edges(tmp_path, "tex/autodiff/__init__.py", other_target),
                                "tex.autodiff")) == 1
    nested = "def f():\n    def __getattr__(name):\n        from ..program import g\n"
    assert len(layer_violations(_edges(tmp_path, "tex/autodiff/__init__.py", nested),
                                "tex.autodiff")) == 1


def test_checker_allows_only_the_declared_host_probe(tmp_path: Path) -> None:
    """``tex/target.py`` may import ``tex.codegen.host`` inside ``_host_cpu_info``, and
    nowhere else: not at module level, not in another function, not another module."""
    probe = ("def _host_cpu_info():\n"
             "    from .codegen.host import host_cpu_info\n"
             "    return host_cpu_info()\n")
    edges = _edges(tmp_path, "tex/target.py", probe)
    assert [e.function for e in edges] == ["_host_cpu_info"] and not edges[0].lazy
    assert layer_violations(edges, "tex.target") == []
    eager = _edges(tmp_path, "tex/target.py", "from .codegen.host import host_cpu_info\n")
    assert len(layer_violations(eager, "tex.target")) == 1
    other_function = probe.replace("def _host_cpu_info", "def cpu_info")
    assert len(layer_violations(_edges(tmp_path, "tex/target.py", other_function),
                                "tex.target")) == 1
    other_module = probe.replace(".codegen.host", ".codegen.llvm")
    assert len(layer_violations(_edges(tmp_path, "tex/target.py", other_module),
                                "tex.target")) == 1
    other_importer = _edges(tmp_path, "tex/dtype.py", probe)
    assert len(layer_violations(other_importer, "tex.dtype")) == 1
