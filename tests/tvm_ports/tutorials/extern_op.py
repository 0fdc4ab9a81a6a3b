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
# Port for tex of TVM v0.14's gallery/how_to/work_with_schedules/extern_op.py: the imports
# renamed (tvm -> tex); the code is TVM's. Its prose is shortened to the section titles.
"""
External Tensor Functions
=========================
"""
from __future__ import absolute_import, print_function


import tex
from tex import te
import numpy as np
from tex.contrib import cblas
import tex.testing

if not tex.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True):
    raise Exception("Not compiled with cblas support; can't build this tutorial")

######################################################################
# Use Extern Tensor Function
# --------------------------
n = 1024
l = 128
m = 235
bias = te.var("bias", dtype="float32")
A = te.placeholder((n, l), name="A")
B = te.placeholder((l, m), name="B")
C = te.extern(
    (n, m),
    [A, B],
    lambda ins, outs: tex.tir.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False
    ),
    name="C",
)
D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
s = te.create_schedule(D.op)

######################################################################
# Verify the Result
# -----------------
dev = tex.cpu(0)
f = tex.build(s, [A, B, D, bias], "llvm")
a = tex.nd.array(np.random.uniform(size=(n, l)).astype(A.dtype), dev)
b = tex.nd.array(np.random.uniform(size=(l, m)).astype(B.dtype), dev)
d = tex.nd.array(np.zeros((n, m), dtype=D.dtype), dev)
bb = 10.0
f(a, b, d, bb)
tex.testing.assert_allclose(d.numpy(), np.dot(a.numpy(), b.numpy()) + 10, rtol=1e-5)

######################################################################
# Extern Contrib Wrappers
# -----------------------
from tex.contrib import cblas

C = cblas.matmul(A, B)
D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
s = te.create_schedule(D.op)

######################################################################
# Hook Python Function as Extern
# ------------------------------
@tex.register_func("tvm.contrib.my_tvm_addone")
def my_tvm_addone(x, y):
    print("my_tvm_addone signatures: %s, %s" % (type(x), type(y)))
    tex.nd.array(x.numpy() + 1).copyto(y)


A = te.placeholder((n,), name="A")
B = te.extern(
    A.shape,
    [A],
    lambda ins, outs: tex.tir.call_packed("tvm.contrib.my_tvm_addone", ins[0], outs[0]),
    name="C",
)
s = te.create_schedule(B.op)
f = tex.build(s, [A, B], "llvm")
a = tex.nd.array(np.random.uniform(size=(n,)).astype(A.dtype), dev)
b = tex.nd.array(np.random.uniform(size=(n,)).astype(B.dtype), dev)
f(a, b)
tex.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-5)

######################################################################
# Summary
# -------
