"""The dtype table and the promotion rules documented in tex/dtype.py."""
import ctypes

import numpy as np
import pytest

from tex.dtype import DTYPES, arith_dtype, as_dtype, promote


@pytest.mark.parametrize("a,b,expected", [
    ("float32", "float32", "float32"),
    ("int32", "float16", "float16"),
    ("float32", "float64", "float64"),
    ("int8", "int64", "int64"),
    ("int8", "uint8", "int16"),
    ("int32", "uint8", "int32"),
    ("bool", "int8", "int8"),
    ("bool", "float16", "float16"),
    ("uint8", "uint8", "uint8"),
    ("bool", "bool", "bool"),
])
def test_promote(a, b, expected):
    assert promote(as_dtype(a), as_dtype(b)).name == expected
    assert promote(as_dtype(b), as_dtype(a)).name == expected


def test_arith_on_bools_is_int32():
    assert arith_dtype(as_dtype("bool"), as_dtype("bool")).name == "int32"


def test_table_matches_numpy():
    for name, d in DTYPES.items():
        assert d.numpy == np.dtype(name)
        assert d.itemsize == np.dtype(name).itemsize


def test_ctypes_pass_scalars_at_their_size():
    """The ctypes column: a scalar argument as wide as an element (bool a byte, float16 its
    16 bits, as the code generator's ABI takes them)."""
    for d in DTYPES.values():
        assert ctypes.sizeof(d.ctype) == d.itemsize
    assert DTYPES["bool"].ctype is ctypes.c_uint8 and DTYPES["float16"].ctype is ctypes.c_uint16
    assert DTYPES["float32"].ctype is ctypes.c_float and DTYPES["int8"].ctype is ctypes.c_int8


@pytest.mark.parametrize("value,name", [("float32", "float32"), (np.float64, "float64"),
                                        (np.dtype("int8"), "int8"), ("float", "float32"),
                                        (bool, "bool")])
def test_as_dtype_accepts(value, name):
    assert as_dtype(value).name == name


def test_unknown_dtype():
    with pytest.raises(ValueError, match="unknown dtype 'float128x'"):
        as_dtype("float128x")
    with pytest.raises(ValueError, match="complex64"):
        as_dtype("complex64")
    with pytest.raises(TypeError, match="dtype"):
        as_dtype(3.5)
