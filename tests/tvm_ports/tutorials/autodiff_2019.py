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
# Port for tex of the 2019 tutorial "Automatic Differentiation of Tensor Expressions" (Sergei
# Grechanik, TVM pull request 2498, tutorials/autodiff): the imports renamed (tvm -> tex,
# topi -> tex.topi); the code is the tutorial's. Its prose is shortened to the section titles.
"""
Automatic Differentiation of Tensor Expressions
===============================================
"""
from __future__ import absolute_import, print_function
import tex
from tex import topi

######################################################################
# How to use automatic differentiation
# ------------------------------------

# inputs
X = tex.placeholder((32, 100), name='X')
W = tex.placeholder((10, 100), name='W')
B = tex.placeholder((10,), name='B')

# forward computation, basically topi.nn.dense(X, W, B)
k = tex.reduce_axis((0, 100))
T = tex.compute((32, 10), lambda i, j: tex.sum(X[i, k]*W[j, k], k))
Y = topi.add(T, B)
L = topi.sum(Y)

# gradients
[dL_dW, dL_dB] = tex.differentiate(L, [W, B])

######################################################################
# Full Jacobians and heads

[dY_dW] = tex.differentiate(Y, [W])
print("Y.shape", Y.shape)
print("W.shape", W.shape)
print("dY_dW.shape", dY_dW.shape)

[dL_dW] = tex.differentiate(Y, [W], topi.full_like(Y, 1.0))

######################################################################
# Every intermediate adjoint

res = tex.differentiate(L)
dL_dX = res.adjoints[X]
dL_dT = res.adjoints[T]
dL_dY = res.adjoints[Y]

######################################################################
# Examples of generated gradients
# -------------------------------

T1 = tex.compute((32, 10), lambda i, j: tex.sum(X[i, k]*W[j, k], k), name='matmul')
H1 = tex.placeholder(T1.shape, name='H1')

[dW] = tex.differentiate(T1, [W], H1)
print(tex.PrintTensorRecursively(dW))

######################################################################
# Max pooling

X1 = tex.placeholder((64, 32, 28, 28), name='X1')
W1 = tex.placeholder((64, 64, 3, 3), name='W1')
Y1 = topi.nn.pool(X1, [2, 2], [2, 2], [0, 0, 0, 0], 'max')
H1 = tex.placeholder(Y1.shape, name='H1')

[dX1] = tex.differentiate(Y1, [X1], H1)
print(tex.PrintTensorRecursively(dX1))

######################################################################
# Overriding the differentiation function
# ---------------------------------------

def custom_fdiff(out, inp, head):
    return topi.tensordot(head, tex.autodiff.Jacobian(out, inp, False), len(out.shape))

res = tex.differentiate(L, fdiff=custom_fdiff)

def custom_fdiff_2(out, inputs, head):
    assert out == Y
    assert inputs == [X, W, B]
    # block gradients to X
    dX = topi.full(head.shape[:-len(out.shape)] + list(X.shape), head.dtype, 0)
    # use the custom unoptimized differentiation function for the rest
    return [dX] + list(tex.differentiate(out, [W, B], head, fdiff=custom_fdiff))

res = tex.differentiate(L, override={Y: ([X, W, B], custom_fdiff_2)})
