"""TVM's ``tir`` namespace over tex's expression nodes: constructors, operators and classes
for ``isinstance``, so that code written against ``tvm.tir`` ports by changing the import.

Every name builds or recognizes tex's own nodes (``tex.ir.expr``); nothing here is a node
type of its own. The node "classes" (``PrimExpr``, ``Var``, ``IntImm``, ``Add``, ``Call``,
...) are views: calling one builds the tex node TVM's constructor would
(``tir.Add(a, b)`` is ``a + b``, ``tir.IntImm("int32", 3)`` is ``tex.const(3, "int32")``),
and ``isinstance(e, tir.IntImm)`` asks whether ``e`` is the tex node that stands for it
(an integer or bool ``Const``). Where tex folds as it builds (``tir.Add(1, 2)`` is the
constant 3), so do these constructors.

TVM has no truncated modulo node in tex: ``truncmod(a, b)`` builds ``a - truncdiv(a, b) * b``
(``tir.Mod`` recognizes nothing). ``call_pure_extern`` / ``call_extern`` / ``call_intrin``
accept the C math library's names (``expf``, ``__expf``, ``sqrt``...) and TVM's intrinsic
names (``tir.exp``) of the functions tex has, and raise ``ValueError`` naming any other.

A ``tvm.tir`` name tex lacks raises an ``AttributeError`` that says what to use instead
(``tex.tvm_names``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import te
from .dtype import as_dtype
from .ir import expr as _e
from .ir import fold
from .ir.ops import UNARY_OPS, Op
from .ir.tensor import Tensor
from .te.extern import call_packed
from .tvm_names import missing

__all__ = [
    "PrimExpr", "Var", "SizeVar", "IntImm", "FloatImm", "Cast", "Select", "Add", "Sub",
    "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT",
    "GE", "And", "Or", "Not", "Call", "ProducerLoad", "Reduce", "IterVar", "CommReducer",
    "StringImm",
    "const", "indexdiv", "indexmod", "floordiv", "floormod", "truncdiv", "truncmod", "div",
    "all", "any", "if_then_else", "max_value", "min_value", "exp", "exp2", "exp10", "log",
    "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "abs",
    "fabs", "floor", "ceil", "round", "nearbyint", "trunc", "power", "pow", "min", "max",
    "call_pure_extern", "call_extern", "call_intrin", "call_packed",
]


class _View(type):
    """The metaclass of the node views: ``isinstance`` asks ``_matches``, a call ``_make``."""

    _matches: Callable[[Any], bool]
    _make: Callable[..., Any]

    def __instancecheck__(cls, obj: Any) -> bool:
        return bool(cls._matches(obj))

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._make(*args, **kwargs)


def _view(name: str, matches: Callable[[Any], bool], make: Callable[..., Any],
          doc: str) -> type:
    """A view class: ``isinstance(x, view)`` is ``matches(x)``, ``view(...)`` is ``make``."""
    return _View(name, (), {"_matches": staticmethod(matches), "_make": staticmethod(make),
                            "__doc__": doc, "__module__": __name__})


def _no_make(name: str) -> Callable[..., Any]:
    def make(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"tex.tir.{name} is for isinstance checks; build the node with "
                        "tex's operators and functions")
    return make


def _is_binary(op: Op) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, _e.Binary) and x.op is op


def _is_compare(op: Op) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, _e.Compare) and x.op is op


def _binary(op: Op) -> Callable[[Any, Any], _e.Expr]:
    return lambda a, b, span=None: fold.binary(op, a, b)


def _compare(op: Op) -> Callable[[Any, Any], _e.Expr]:
    return lambda a, b, span=None: fold.compare(op, a, b)


def _is_int_const(x: Any) -> bool:
    return isinstance(x, _e.Const) and x.dtype.is_integral


def _is_float_const(x: Any) -> bool:
    return isinstance(x, _e.Const) and x.dtype.is_float


def _imm(dtype: Any, value: Any, span: Any = None) -> _e.Const:
    return fold.const(value, dtype)


def _var(name: str = "v", dtype: Any = "int32", span: Any = None) -> _e.Var:
    return te.var(name, dtype)


def _size_var(name: str = "size", dtype: Any = "int32", span: Any = None) -> _e.Var:
    return te.size_var(name, dtype)


def _cast(dtype: Any, value: Any, span: Any = None) -> _e.Expr:
    return fold.cast(as_dtype(dtype, "tir.Cast"), value)


def _select(condition: Any, true_value: Any, false_value: Any, span: Any = None) -> _e.Expr:
    return te.select(condition, true_value, false_value)


def _not(a: Any, span: Any = None) -> _e.Expr:
    return fold.unary(Op.NOT, a)


# intrinsic calls: every Unary but the operators, and power
_CALL_OPS = UNARY_OPS - {Op.NEG, Op.NOT}

PrimExpr = _view("PrimExpr", lambda x: isinstance(x, _e.Expr), _no_make("PrimExpr"),
                 "Any scalar expression (tex.Expr).")
Var = _view("Var", lambda x: isinstance(x, _e.Var), _var,
            "A scalar variable: tir.Var(name, dtype) is tex.var(name, dtype).")
SizeVar = _view("SizeVar", lambda x: isinstance(x, _e.Var) and x.kind == "size", _size_var,
                "A variable known to be >= 0: tir.SizeVar(name, dtype) is "
                "tex.size_var(name, dtype).")
IntImm = _view("IntImm", _is_int_const, _imm,
               "An integer or bool constant: tir.IntImm(dtype, value).")
FloatImm = _view("FloatImm", _is_float_const, _imm,
                 "A float constant: tir.FloatImm(dtype, value).")
Cast = _view("Cast", lambda x: isinstance(x, _e.Cast), _cast,
             "A conversion: tir.Cast(dtype, value).")
Select = _view("Select", lambda x: isinstance(x, _e.Select), _select,
               "select(cond, a, b): both sides evaluated, as in TVM.")
Add = _view("Add", _is_binary(Op.ADD), _binary(Op.ADD), "a + b")
Sub = _view("Sub", _is_binary(Op.SUB), _binary(Op.SUB), "a - b")
Mul = _view("Mul", _is_binary(Op.MUL), _binary(Op.MUL), "a * b")
Div = _view("Div", _is_binary(Op.DIV), _binary(Op.DIV),
            "a / b (truncating on integers, as in C)")
Mod = _view("Mod", lambda x: False, lambda a, b, span=None: truncmod(a, b),
            "Truncated modulo: built as a - truncdiv(a, b) * b (no node of its own).")
FloorDiv = _view("FloorDiv", _is_binary(Op.FLOORDIV), _binary(Op.FLOORDIV), "a // b")
FloorMod = _view("FloorMod", _is_binary(Op.FLOORMOD), _binary(Op.FLOORMOD), "a % b")
Min = _view("Min", _is_binary(Op.MIN), _binary(Op.MIN), "min(a, b)")
Max = _view("Max", _is_binary(Op.MAX), _binary(Op.MAX), "max(a, b)")
EQ = _view("EQ", _is_compare(Op.EQ), _compare(Op.EQ), "a == b")
NE = _view("NE", _is_compare(Op.NE), _compare(Op.NE), "a != b")
LT = _view("LT", _is_compare(Op.LT), _compare(Op.LT), "a < b")
LE = _view("LE", _is_compare(Op.LE), _compare(Op.LE), "a <= b")
GT = _view("GT", _is_compare(Op.GT), _compare(Op.GT), "a > b")
GE = _view("GE", _is_compare(Op.GE), _compare(Op.GE), "a >= b")
And = _view("And", _is_binary(Op.AND), _binary(Op.AND), "a and b (bool operands)")
Or = _view("Or", _is_binary(Op.OR), _binary(Op.OR), "a or b (bool operands)")
Not = _view("Not", lambda x: isinstance(x, _e.Unary) and x.op is Op.NOT, _not, "not a")
Call = _view("Call", lambda x: (isinstance(x, _e.Unary) and x.op in _CALL_OPS)
             or (isinstance(x, _e.Binary) and x.op is Op.POW),
             lambda dtype, op, args, span=None: call_intrin(dtype, op, *args),
             "An intrinsic call (exp, log, sqrt, power, ...).")
ProducerLoad = _view("ProducerLoad", lambda x: isinstance(x, _e.TensorRead),
                     lambda producer, indices, span=None: producer[tuple(indices)],
                     "A read of a tensor element: tir.ProducerLoad(tensor, indices).")
Reduce = _view("Reduce", lambda x: isinstance(x, _e.Reduce), _no_make("Reduce"),
               "A reduction (tex.sum, tex.max, ... or a comm_reducer's result).")
IterVar = _view("IterVar", lambda x: isinstance(x, _e.IterVar), _no_make("IterVar"),
                "An iteration variable (a compute's axis or a reduce_axis).")
CommReducer = _view("CommReducer", lambda x: isinstance(x, (_e.CommReducer, te.Reducer)),
                    _no_make("CommReducer"), "A commutative reducer (tex.comm_reducer).")


class StringImm(str):
    """TVM's string constant: a ``str`` with TVM's ``.value`` (pragma keys and values)."""

    @property
    def value(self) -> str:
        return str.__str__(self)


def const(value: Any, dtype: Any = None, span: Any = None) -> _e.Const:
    """A constant; ``dtype`` defaults as TVM's: int32 for ints, float32 for floats, bool."""
    return fold.const(value, dtype)


floordiv = te.floordiv
floormod = te.floormod
indexdiv = te.floordiv
indexmod = te.floormod
truncdiv = te.truncdiv
div = te.truncdiv


def truncmod(a: Any, b: Any, span: Any = None) -> _e.Expr:
    """The remainder of ``truncdiv`` (the sign of ``a``, as C's ``%``)."""
    return a - te.truncdiv(a, b) * b


def all(*args: Any, span: Any = None) -> _e.Expr:  # noqa: A001 - TVM's name
    """All conditions hold (``tir.all(a, b, c)``)."""
    return te.all(*args)


def any(*args: Any, span: Any = None) -> _e.Expr:  # noqa: A001 - TVM's name
    """Some condition holds (``tir.any(a, b, c)``)."""
    return te.any(*args)


def min(a: Any, b: Any, span: Any = None) -> _e.Expr:  # noqa: A001 - TVM's name
    """The smaller of two expressions."""
    return fold.binary(Op.MIN, a, b)


def max(a: Any, b: Any, span: Any = None) -> _e.Expr:  # noqa: A001 - TVM's name
    """The larger of two expressions."""
    return fold.binary(Op.MAX, a, b)


if_then_else = te.if_then_else
max_value = te.max_value
min_value = te.min_value
exp = te.exp
log = te.log
log2 = te.log2
log10 = te.log10
sqrt = te.sqrt
rsqrt = te.rsqrt
sin = te.sin
cos = te.cos
tan = te.tan
tanh = te.tanh
sigmoid = te.sigmoid
erf = te.erf
abs = te.abs  # noqa: A001 - TVM's name
fabs = te.abs
floor = te.floor
ceil = te.ceil
round = te.round  # noqa: A001 - TVM's name
nearbyint = te.round
trunc = te.trunc
power = te.power
pow = te.power  # noqa: A001 - TVM's name


def exp2(x: Any) -> _e.Expr:
    """2 ** x."""
    return te.power(fold.const(2.0, _float_of(x)), x)


def exp10(x: Any) -> _e.Expr:
    """10 ** x."""
    return te.power(fold.const(10.0, _float_of(x)), x)


def _float_of(x: Any) -> Any:
    e = _e.as_expr(x)
    return e.dtype if e.dtype.is_float else "float32"


# the C math library's names (float and double spellings, CUDA's fast ones) and TVM's
# intrinsic names -> tex's function; one argument unless noted
_EXTERN: dict[str, Callable[..., _e.Expr]] = {}
for _names, _fn in (
        (("exp", "expf", "__expf", "tir.exp"), te.exp),
        (("exp2", "exp2f", "tir.exp2"), exp2),
        (("exp10", "exp10f", "__exp10f", "tir.exp10"), exp10),
        (("log", "logf", "__logf", "tir.log"), te.log),
        (("log2", "log2f", "__log2f", "tir.log2"), te.log2),
        (("log10", "log10f", "__log10f", "tir.log10"), te.log10),
        (("sqrt", "sqrtf", "tir.sqrt"), te.sqrt),
        (("rsqrt", "rsqrtf", "tir.rsqrt"), te.rsqrt),
        (("sin", "sinf", "__sinf", "tir.sin"), te.sin),
        (("cos", "cosf", "__cosf", "tir.cos"), te.cos),
        (("tan", "tanf", "__tanf", "tir.tan"), te.tan),
        (("tanh", "tanhf", "tir.tanh"), te.tanh),
        (("erf", "erff", "tir.erf"), te.erf),
        (("fabs", "fabsf", "abs", "tir.fabs", "tir.abs"), te.abs),
        (("floor", "floorf", "tir.floor"), te.floor),
        (("ceil", "ceilf", "tir.ceil"), te.ceil),
        (("round", "roundf", "rint", "rintf", "nearbyint", "nearbyintf", "tir.round",
          "tir.nearbyint"), te.round),
        (("trunc", "truncf", "tir.trunc"), te.trunc),
        (("sigmoid", "tir.sigmoid"), te.sigmoid),
        (("pow", "powf", "__powf", "tir.pow"), te.power),
        (("fmin", "fminf"), min),
        (("fmax", "fmaxf"), max)):
    for _n in _names:
        _EXTERN[_n] = _fn


def call_pure_extern(dtype: Any, func_name: str, *args: Any, span: Any = None) -> _e.Expr:
    """A call of the C math function ``func_name`` (``"expf"``, ``"__expf"``, ``"sqrt"``,
    ...) as tex's intrinsic of that function, converted to ``dtype``.

    Raises ``ValueError`` for a function tex does not have (tex links no external
    functions into kernels; ``te.extern`` runs arbitrary code between stages)."""
    fn = _EXTERN.get(func_name)
    if fn is None:
        known = sorted(n for n in _EXTERN if not n.startswith("tir."))
        raise ValueError(f"call_pure_extern: tex has no function '{func_name}'; it maps "
                         f"these C math names to its intrinsics: {', '.join(known)}")
    if any_tensor := [a for a in args if isinstance(a, Tensor)]:
        raise TypeError(f"call_pure_extern('{func_name}') takes scalar expressions, not the "
                        f"tensor '{any_tensor[0].name}' (index it: A[i])")
    d = as_dtype(dtype, f"call_pure_extern('{func_name}')")
    try:
        result = fn(*args)
    except TypeError:
        raise TypeError(f"call_pure_extern('{func_name}'): wrong number of arguments "
                        f"({len(args)})") from None
    return fold.cast(d, result) if result.dtype is not d else result


call_extern = call_pure_extern


def call_intrin(dtype: Any, func_name: Any, *args: Any, span: Any = None) -> _e.Expr:
    """An intrinsic by TVM's name (``"tir.exp"``) or the C name; as ``call_pure_extern``."""
    name = getattr(func_name, "name", func_name)
    return call_pure_extern(dtype, str(name), *args)


# TVM's statement classes, for isinstance on what tex.lower returns: tex.lower's own
# (a lower layer, imported at first use)
_STMTS = {"For": "For", "IfThenElse": "IfThenElse", "Allocate": "Allocate",
          "LetStmt": "LetStmt", "SeqStmt": "Seq", "BufferStore": "Store", "Stmt": "Stmt"}


def __getattr__(name: str) -> Any:
    """``tir.stmt`` (tex.lower.stmt) and TVM's statement class names; the rest missing."""
    if name == "stmt" or name in _STMTS:
        from .lower import stmt
        return stmt if name == "stmt" else getattr(stmt, _STMTS[name])
    raise missing("tex.tir", name, [*__all__, "stmt", *_STMTS])
