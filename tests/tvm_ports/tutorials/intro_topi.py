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
# Port for tex of TVM v0.14's gallery/tutorial/intro_topi.py: the imports renamed (tvm ->
# tex, tvm.topi -> tex.topi, tvm.testing.assert_allclose -> numpy.testing.assert_allclose);
# the code is TVM's. Its prose is shortened to the section titles. The CUDA kernel runs on a
# GPU, or on tex's simulator when TEX_CUDA_SIMULATE=1 and there is none.
"""
Introduction to TOPI
====================
"""

import tex
import numpy.testing
from tex import te
from tex import topi
import numpy as np

######################################################################
# Basic example
# -------------
n = te.var("n")
m = te.var("m")
A = te.placeholder((n, m), name="A")
k = te.reduce_axis((0, m), "k")
B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
s = te.create_schedule(B.op)

######################################################################
# and to examine the IR code in human readable format, we can do
print(tex.lower(s, [A], simple_mode=True))

######################################################################
# we can replace those two lines with simple :code:`topi.sum`
C = topi.sum(A, axis=1)
ts = te.create_schedule(C.op)
print(tex.lower(ts, [A], simple_mode=True))

######################################################################
# Numpy-style operator overloading
# --------------------------------
x, y = 100, 10
a = te.placeholder((x, y, y), name="a")
b = te.placeholder((y, y), name="b")
c = a + b  # same as topi.broadcast_add
d = a * b  # same as topi.broadcast_mul

######################################################################
# Generic schedules and fusing operations
# ---------------------------------------
e = topi.elemwise_sum([c, d])
f = e / 2.0
g = topi.sum(f)
with tex.target.cuda():
    sg = topi.cuda.schedule_reduce(g)
    print(tex.lower(sg, [a, b], simple_mode=True))

######################################################################
# As you can see, scheduled stages of computation have been accumulated and we can examine them by
print(sg.stages)

######################################################################
# We can test the correctness by comparing with :code:`numpy` result as follows
func = tex.build(sg, [a, b, g], "cuda")
dev = tex.cuda(0)
a_np = np.random.uniform(size=(x, y, y)).astype(a.dtype)
b_np = np.random.uniform(size=(y, y)).astype(b.dtype)
g_np = np.sum(np.add(a_np + b_np, a_np * b_np) / 2.0)
a_nd = tex.nd.array(a_np, dev)
b_nd = tex.nd.array(b_np, dev)
g_nd = tex.nd.array(np.zeros(g_np.shape, dtype=g_np.dtype), dev)
func(a_nd, b_nd, g_nd)
numpy.testing.assert_allclose(g_nd.numpy(), g_np, rtol=1e-5)

######################################################################
# TOPI also provides common neural nets operations such as _softmax_ with optimized schedule
tarray = te.placeholder((512, 512), name="tarray")
softmax_topi = topi.nn.softmax(tarray)
with tex.target.Target("cuda"):
    sst = topi.cuda.schedule_softmax(softmax_topi)
    print(tex.lower(sst, [tarray], simple_mode=True))

######################################################################
# Fusing convolutions
# -------------------
data = te.placeholder((1, 3, 224, 224))
kernel = te.placeholder((10, 3, 5, 5))

with tex.target.Target("cuda"):
    conv = topi.cuda.conv2d_nchw(data, kernel, 1, 2, 1)
    out = topi.nn.relu(conv)
    sconv = topi.cuda.schedule_conv2d_nchw([out])
    print(tex.lower(sconv, [data, kernel], simple_mode=True))
