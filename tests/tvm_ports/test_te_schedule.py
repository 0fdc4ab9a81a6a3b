# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
# Port for tex of TVM's tests/python/unittest/test_te_schedule.py: tvm, tvm.te -> tex, te -> tex.te
"""TVM's test_te_schedule.py (v0.14) on tex, changed only by the renames above. Left out:

- JSON and pickle of schedules, and test_tensor_intrin(_scalar_params) (tensorize): tex
  does not have them (README, "Coming from TVM"); each place says so;
- the ten tests that declare te.size_var dimensions (test_schedule_create, test_reorder,
  test_split, test_tile, test_fuse, test_fuse_with_split, the two
  test_fuse_with_out_of_order_axis tests, test_vectorize, test_rfactor): they come with
  symbolic shapes (issue 25); tests/test_schedule.py and tests/test_tvm_compat.py (its
  test_rfactor at concrete sizes) check the same primitives meanwhile;
- test_compute_at: tex refuses a stage attached to itself or into a cycle in compute_at
  itself, where TVM waits for lower (a deliberate difference, README).
"""
import pytest

import tex
from tex import te


def test_singleton():
    A = te.placeholder((), name="A")
    T = te.compute((), lambda: A() + 1)
    s = te.create_schedule(T.op)
    fused = s[T].fuse()
    assert any(isinstance(x, tex.schedule.Singleton) for x in s[T].relations)
    assert tuple(s[T].leaf_iter_vars) == (fused,)
    # pickle unpickle: left out (tex operations refuse to be pickled: TypeError "tex
    # operations cannot be pickled")


def test_vectorize_commreduce():
    V = te.placeholder((128,), name="V")
    ax = te.reduce_axis((0, 128), name="ax")
    O = te.compute((1,), lambda _: te.sum(V[ax], axis=[ax]))
    s = te.create_schedule(O.op)
    with pytest.raises(RuntimeError):
        s[O].vectorize(ax)  # should throw here


def test_pragma():
    m = 100
    A = te.placeholder((m,), name="A")
    T = te.compute((m,), lambda i: A[i])

    s = te.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].pragma(xo, "pragma1")
    s[T].pragma(xi, "vectorize")
    VECTORIZE = tex.schedule.IterVar.Vectorized
    assert s[T].iter_var_attrs[xo].pragma_keys[0].value == "pragma1"
    assert s[T].iter_var_attrs[xi].iter_type == VECTORIZE


# test_tensor_intrin and test_tensor_intrin_scalar_params: left out (tex has no
# te.decl_tensor_intrin, Stage.tensorize, tir.call_packed or buffers; the second also uses
# size_var dimensions)


def test_legalize_invalid_attach():
    A = te.compute((10, 10), lambda i, j: 1.0, name="A")
    B = te.compute((10, 10), lambda i, j: A[i][j], name="B")

    # Case 1: Split an axis which is the target of a compute_at
    s = te.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    s[B].split(B.op.axis[1], 2)

    stmt = tex.lower(s, [A, B], simple_mode=True)["main"].body
    assert isinstance(stmt.body.body, tex.tir.stmt.For)

    # Case 2: Fuse an axis which is the target of a compute_at
    s = te.create_schedule([B.op])
    s[A].compute_at(s[B], B.op.axis[1])
    s[B].fuse(B.op.axis[0], B.op.axis[1])
    stmt = tex.lower(s, [A, B], simple_mode=True)["main"].body
    assert isinstance(stmt, tex.tir.stmt.For)


if __name__ == "__main__":
    test_singleton()
    test_pragma()
    test_vectorize_commreduce()
    test_legalize_invalid_attach()
