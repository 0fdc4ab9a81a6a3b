"""The TVM names tex lacks, and what to use instead: the ``AttributeError`` a TVM user gets.

``missing(module, name, names)`` is the error a module's ``__getattr__`` raises for
``name``: for a name TVM has there (``INSTEAD``), it says what tex offers instead (or why
there is nothing); for any other, it lists the names the module has that look alike
(``difflib``). ``tex``, ``tex.te``, ``tex.tir`` and ``tex.topi`` use it, so
``tex.relay``, ``te.hybrid`` or ``tir.Let`` never end in a bare "module has no attribute".
``tex`` itself takes ``tex_getattr`` (its ``__init__`` holds imports only).
"""
from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["INSTEAD", "missing", "tex_getattr"]

_NO_BITS = "nothing: tex has no bitwise integer operators"

_AUTO = "tex.schedule.auto_schedule(outs, target) on the DAG tex builds instead"
# TVM's per-target schedules tex.topi.generic/x86/cuda lack: the operators, layouts and
# libraries tex does not have (the names they have: tex.schedule.topi_schedules)
_MISSING_SCHEDULES: dict[str, str] = {
    **{f"schedule_{op}": f"{_AUTO} (tex has no blocked layouts: topi.nn.conv2d in 'NCHW' "
                         "or 'NHWC')"
       for op in ("conv2d_NCHWc", "conv2d_NCHWc_int8", "depthwise_conv2d_NCHWc",
                  "conv2d_nhwc_pack")},
    **{f"schedule_{op}": f"{_AUTO} (tex has no Winograd convolution: topi.nn.conv2d)"
       for op in ("conv2d_winograd_weight_transform",
                  "conv2d_winograd_without_weight_transform",
                  "conv2d_winograd_nnpack_weight_transform", "conv2d_nchw_winograd",
                  "conv2d_nchw_winograd_without_weight_transform",
                  "conv2d_nhwc_winograd_direct", "conv2d_nhwc_winograd_tensorcore",
                  "conv3d_winograd_weight_transform", "conv2d_gemm_weight_transform")},
    **{f"schedule_{op}": f"{_AUTO} (tex calls no vendor library: cuBLAS, cuDNN, BLAS, "
                         "MKL, oneDNN)"
       for op in ("dense_cublas", "matmul_cublas", "batch_matmul_cublas", "conv2d_cudnn",
                  "softmax_cudnn", "log_softmax_cudnn", "dense_cblas", "dense_mkl",
                  "dense_mkldnn", "dense_dnnl", "matmul_cblas", "matmul_mkl",
                  "matmul_mkldnn", "batch_matmul_cblas", "batch_matmul_mkl")},
    **{f"schedule_{op}": f"{_AUTO} (tex has no tensor-core or dp4a int8 kernels)"
       for op in ("dense_int8", "batch_matmul_int8", "conv2d_nchw_int8",
                  "conv2d_nhwc_tensorcore", "conv2d_hwnc_tensorcore", "dense_tensorcore",
                  "batch_matmul_tensorcore", "conv3d_ndhwc_tensorcore")},
    **{f"schedule_{op}": f"{_AUTO} (tex has no {op} operator)"
       for op in ("group_conv2d_nchw", "group_conv2d_nhwc", "conv1d_ncw", "conv1d_nwc",
                  "conv3d_ncdhw", "conv3d_ndhwc", "conv2d_transpose_nchw",
                  "conv1d_transpose_ncw", "conv3d_transpose_ncdhw", "deformable_conv2d_nchw",
                  "bitserial_conv2d_nchw", "bitserial_conv2d_nhwc", "bitserial_dense",
                  "binarize_pack", "binary_dense", "bitpack", "lrn", "sparse_dense",
                  "sparse_transpose", "correlation_nchw", "nms", "sort", "topk", "argsort",
                  "scatter", "multibox_detection", "roi_align", "roi_pool")},
    **{f"schedule_dense_{size}_batch": "schedule_dense(outs) (TVM's topi.gpu names)"
       for size in ("small", "large")},
    "schedule_injective_from_existing": "tex.schedule.auto_schedule(outs, target) for the "
                                        "whole DAG, then edit the stages of the Schedule it "
                                        "returns",
}

# tex module -> TVM name -> what to use instead (a phrase after "use "), or "nothing: " and
# why there is no equivalent
INSTEAD: dict[str, dict[str, str]] = {
    "tex": {
        "relay": "nothing: tex compiles tensor expressions (tex.compute, tex.topi); there "
                 "is no graph-level IR",
        "auto_scheduler": "tex.schedule.auto_schedule(outputs, target)",
        "autotvm": "tex.schedule.auto_schedule(outputs, target)",
        "meta_schedule": "tex.schedule.auto_schedule(outputs, target)",
        "transform": "build()'s keywords (fastmath=, bounds_check=); tex has no pass "
                     "context",
        "IRModule": "tex.lower(s, args) (a LoweredFunc)",
        "rpc": "nothing: tex runs on this machine (its GPU through the CUDA driver)",
        "micro": "nothing: tex targets the host CPU and NVIDIA GPUs",
        "opencl": "tex.cuda() (tex targets the host CPU and NVIDIA GPUs only)",
        "vulkan": "tex.cuda() (tex targets the host CPU and NVIDIA GPUs only)",
        "metal": "tex.cuda() (tex targets the host CPU and NVIDIA GPUs only)",
        "rocm": "tex.cuda() (tex targets the host CPU and NVIDIA GPUs only)",
        "convert": "tex.const(value) for a scalar; Python lists stay lists",
        "hybrid": "tex.compute",
        "parser": "tex.compute (tex has no TVMScript)",
        "script": "tex.compute (tex has no TVMScript)",
    },
    "tex.te": {
        "hybrid": "te.compute",
        "decl_tensor_intrin": "nothing: tensorize and custom intrinsics are not supported",
        "tag_scope": "the tag= argument of te.compute",
        "create_prim_func": "tex.lower(s, args)",
        "SpecializedCondition": "nothing: functions are built for fixed shapes",
        "schedule": "tex.schedule (create_schedule is te.create_schedule)",
    },
    "tex.tir": {
        "Mod": "tex.tir.truncmod (tex has no truncated-modulo node)",
        "Let": "a Python variable holding the expression (expressions are values)",
        "Broadcast": "a scalar expression (the code generator vectorizes)",
        "Ramp": "a vectorized loop: s[T].vectorize(axis)",
        "Shuffle": "a vectorized loop: s[T].vectorize(axis)",
        "BufferLoad": "tensor indexing, A[i, j]",
        "decl_buffer": "tex.placeholder",
        "PrimFunc": "tex.lower(s, args) (a LoweredFunc)",
        "isnan": "x != x",
        "isinf": "tex.abs(x) == float('inf')",
        "log1p": "tex.log(1 + x) (not as accurate near 0)",
        "popcount": _NO_BITS,
        "bitwise_and": _NO_BITS,
        "bitwise_or": _NO_BITS,
        "bitwise_xor": _NO_BITS,
        "bitwise_not": _NO_BITS,
        "shift_left": "x * 2**k",
        "shift_right": "tex.floordiv(x, 2**k)",
        "Evaluate": "tex.compute",
        "ir_builder": "tex.compute",
        "stmt_functor": "tex.ir.rewrite / tex.ir.post_order over tex's nodes",
        "transform": "tex.lower's passes (not a public pass API)",
        "register_intrin_lowering": "nothing: custom intrinsic lowering rules are not "
                                    "supported (call_pure_extern maps the C math names)",
    },
    "tex.topi": {
        # per-target schedule libraries (topi.generic, topi.x86 and topi.cuda exist:
        # tex.schedule.topi_schedules)
        **{target: f"tex.schedule.auto_schedule(outputs, {kind!r}) (tex has per-target "
                   "topi schedules for generic, x86 and cuda only)"
           for target, kind in (("gpu", "cuda"), ("arm_cpu", "llvm"), ("rocm", "llvm"),
                                ("mali", "llvm"), ("bifrost", "llvm"),
                                ("intel_graphics", "llvm"), ("adreno", "llvm"),
                                ("hexagon", "llvm"), ("hls", "llvm"))},
        "cpp": "nothing: tex's topi is Python over tex.te, with no C++ library",
        "util": "tex.topi.utils (TVM's later name)",
        "image": "nothing: tex has no image operators (resize, crop, grid_sample)",
        "vision": "nothing: tex has no vision operators (NMS, ROI pooling)",
        "sparse": "nothing: tex has no sparse tensors",
        "random": "nothing: tex has no random-number operators; feed NumPy's random arrays",
        "get_const_tuple": "tex.topi.utils.get_const_tuple",
        "get_const_int": "tex.topi.utils.get_const_int",
        "identity": "the tensor itself (tensors are values)",
        "fast_exp": "topi.exp",
        "fast_tanh": "topi.tanh",
        "fast_erf": "topi.erf",
        "isnan": "topi.not_equal(x, x)",
        "sign": "topi.where(topi.greater(x, 0), 1.0, topi.where(topi.less(x, 0), -1.0, 0.0))",
        "layout_transform": "topi.transpose(x, axes) (tex has no blocked layouts)",
        "strided_slice": "tex.compute reading x at offset indices "
                         "(tex.compute((n,), lambda i: x[begin + i * stride]))",
        "tile": "topi.expand_dims, topi.broadcast_to and topi.reshape",
        "repeat": "topi.expand_dims, topi.broadcast_to and topi.reshape",
        "gather": "topi.take (along one axis), or tex.compute reading x at indices held in "
                  "a tensor",
        "gather_nd": "tex.compute reading x at indices held in a tensor",
        "arange": "tex.compute((n,), lambda i: start + i * step)",
        "sort": "nothing: tex has no sorting operators",
        "argsort": "nothing: tex has no sorting operators",
        "topk": "nothing: tex has no sorting operators",
        "cumsum": "tex.compute((n,), lambda i: tex.sum(x[k], axis=k, where=k <= i)) with "
                  "k = tex.reduce_axis((0, n))",
        "reinterpret": "nothing: tex has no bit casts (topi.cast converts values)",
        **{name: _NO_BITS for name in ("bitwise_and", "bitwise_or", "bitwise_xor",
                                       "bitwise_not", "left_shift", "right_shift")},
        **{name: "nothing: tex's intrinsics are exp log log2 log10 sqrt rsqrt sin cos tan "
                 "tanh sigmoid erf abs floor ceil round trunc power"
           for name in ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
                        "atan2", "exp2")},
    },
    "tex.topi.nn": {
        "conv2d_NCHWc": "topi.nn.conv2d with layout 'NCHW' or 'NHWC' (tex has no blocked "
                        "layouts)",
        "conv2d_NCHWc_int8": "topi.nn.conv2d with layout 'NCHW' or 'NHWC' (tex has no "
                             "blocked layouts)",
        **{name: "topi.nn.conv2d (tex has no Winograd convolution)"
           for name in ("conv2d_winograd_nchw", "conv2d_winograd_nhwc",
                        "conv2d_winograd_without_weight_transform")},
        **{name: "topi.nn.conv2d per group: topi.split the channels, topi.concatenate the "
                 "outputs (tex has no grouped convolution yet)"
           for name in ("group_conv2d_nchw", "group_conv2d_nhwc", "depthwise_conv2d_nchw",
                        "depthwise_conv2d_nhwc")},
        **{name: "tex.differentiate of topi.nn.conv2d (the data gradient of a convolution "
                 "is its transposed convolution)"
           for name in ("conv2d_transpose_nchw", "conv1d_transpose_ncw")},
        **{name: "topi.nn.conv2d on data with a height of 1 (topi.expand_dims)"
           for name in ("conv1d", "conv1d_ncw", "conv1d_nwc")},
        **{name: "nothing: tex has 2-D convolutions only (topi.nn.conv2d)"
           for name in ("conv3d_ncdhw", "conv3d_ndhwc", "conv")},
        "pool1d": "topi.nn.pool2d on data with a height of 1 and kernel (1, k)",
        "pool3d": "nothing: tex pools over 2-D windows only (topi.nn.pool2d)",
        "global_pool": "topi.max or topi.mean over the H and W axes with keepdims=True",
        "adaptive_pool": "topi.nn.pool2d with kernel = stride = input size // output size "
                         "(when it divides; tex has no adaptive pooling)",
        "pool_grad": "tex.differentiate of topi.nn.pool2d",
        "fast_softmax": "topi.nn.softmax",
        "matmul": "topi.matmul (NumPy's semantics) or topi.nn.dense (x times w transposed)",
        "bias_add": "topi.add with broadcasting (a bias of shape (C, 1, 1) for NCHW)",
        "scale_shift_nchw": "topi.multiply and topi.add with broadcasting",
        "prelu": "topi.where(topi.greater(x, 0), x, topi.multiply(alpha, x))",
        "nll_loss": "topi.nn.cross_entropy (with one-hot targets)",
        "depth_to_space": "topi.reshape and topi.transpose",
        "space_to_depth": "topi.reshape and topi.transpose",
        "get_pad_tuple": "tex.topi.nn.utils.get_pad_tuple",
        **{name: "nothing: tex's normalizations are topi.nn.layer_norm and "
                 "topi.nn.batch_norm"
           for name in ("lrn", "l2_normalize", "instance_norm", "group_norm", "rms_norm")},
        **{name: "nothing: tex has no sparse tensors"
           for name in ("sparse_dense", "sparse_transpose", "sparse_add")},
    },
    **{module: _MISSING_SCHEDULES
       for module in ("tex.topi.generic", "tex.topi.x86", "tex.topi.cuda")},
    "tex.topi.testing": {
        "compare_numpy_tvm": "numpy.testing.assert_allclose on the arrays the built "
                             "function writes",
        "pool1d_ncw_python": "poolnd_python (any number of spatial dimensions)",
        "pool3d_ncdhw_python": "poolnd_python (any number of spatial dimensions)",
    },
}


def missing(module: str, name: str, names: Iterable[str]) -> AttributeError:
    """The error for ``module.name`` (``names``: what the module has)."""
    instead = INSTEAD.get(module, {}).get(name)
    if instead is not None:
        what, _, why = instead.partition("nothing: ")
        advice = f"there is no equivalent: {why}" if not what and why else f"use {instead}"
        return AttributeError(f"{module} has no '{name}' (a TVM name); {advice}")
    public = sorted(n for n in names if not n.startswith("_"))
    close = difflib.get_close_matches(name, public, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return AttributeError(f"module '{module}' has no attribute '{name}'{hint}")


def tex_getattr(name: str) -> Any:
    """``tex.__getattr__``: every name ``tex`` lacks is ``missing``."""
    raise missing("tex", name, dir(sys.modules.get("tex")))
