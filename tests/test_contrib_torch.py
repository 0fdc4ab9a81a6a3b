"""The PyTorch bridge (``tex.contrib.torch``): forward against torch.nn.functional, first
and second derivatives by torch's own finite-difference checks, no copies, errors.

Float64 with torch's default ``gradcheck`` tolerances (eps 1e-6, atol 1e-5, rtol 1e-3).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tex  # noqa: E402
import tex.contrib.torch as tt  # noqa: E402
from tex import topi  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
f64 = "float64"


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def rand(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float64,
         grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_(grad)


def dense_fn(n: int = 3, k: int = 4, m: int = 2, dtype: str = f64) -> tt.TorchFunction:
    X = tex.placeholder((n, k), dtype, name="X")
    W = tex.placeholder((m, k), dtype, name="W")
    B = tex.placeholder((m,), dtype, name="B")
    return tt.function(topi.nn.dense(X, W, B), [X, W, B], name="dense")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


# --------------------------------------------------------------------------------------
# importing


def test_import_tex_does_not_import_torch() -> None:
    proc = _python("import sys, tex, tex.contrib\n"
                   "assert 'torch' not in sys.modules, 'tex imported torch'\n"
                   "import tex.contrib.torch as t\n"
                   "assert callable(t.function)\nprint('ok')")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_import_without_torch_says_how_to_install() -> None:
    proc = _python("import sys\nsys.modules['torch'] = None  # as if not installed\n"
                   "try:\n    import tex.contrib.torch\n"
                   "except ImportError as e:\n    print(e)\n")
    assert proc.returncode == 0, proc.stderr
    assert "tex.contrib.torch needs PyTorch (pip install torch)" in proc.stdout


# --------------------------------------------------------------------------------------
# the three layers: forward equals torch, first and second derivatives check


def test_dense(gen: torch.Generator) -> None:
    fn = dense_fn()
    x, w, b = rand(gen, 3, 4), rand(gen, 2, 4), rand(gen, 2)
    y = fn(x, w, b)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float64 and y.requires_grad
    torch.testing.assert_close(y, F.linear(x, w, b))
    assert "dense" in type(y.grad_fn).__name__  # the autograd node is named after fn
    assert torch.autograd.gradcheck(fn, (x, w, b))
    assert torch.autograd.gradgradcheck(fn, (x, w, b), gen_non_contig_grad_outputs=True)


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d(gen: torch.Generator, stride: int) -> None:
    D = tex.placeholder((1, 2, 5, 5), f64, name="D")
    K = tex.placeholder((3, 2, 3, 3), f64, name="K")
    fn = tt.function(topi.nn.conv2d(D, K, stride, 1), [D, K])
    d, k = rand(gen, 1, 2, 5, 5), rand(gen, 3, 2, 3, 3)
    torch.testing.assert_close(fn(d, k), F.conv2d(d, k, stride=stride, padding=1))
    assert torch.autograd.gradcheck(fn, (d, k))
    assert torch.autograd.gradgradcheck(fn, (d, k))


def test_softmax(gen: torch.Generator) -> None:
    X = tex.placeholder((3, 5), f64, name="X")
    fn = tt.function(topi.nn.softmax(X), [X])
    x = rand(gen, 3, 5)
    torch.testing.assert_close(fn(x), torch.softmax(x, dim=-1))
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_third_order() -> None:
    X = tex.placeholder((4,), f64, name="X")
    fn = tt.function(topi.tanh(X), [X])
    x = torch.linspace(-1.5, 1.5, 4, dtype=torch.float64, requires_grad=True)
    (g1,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), x)
    t = torch.tanh(x.detach())
    torch.testing.assert_close(g1, 1 - t**2)
    torch.testing.assert_close(g2, -2 * t * (1 - t**2))
    torch.testing.assert_close(g3, (1 - t**2) * (6 * t**2 - 2))
    # each order is a bridged function of (inputs..., heads...), built when first needed;
    # the heads of .sum() need no gradient, so only x's is built at every order
    g = fn.gradients[(True,)]
    gg = g.gradients[(True, False)]
    assert list(gg.gradients) == [(True, False, False)]


def test_float32(gen: torch.Generator) -> None:
    fn = dense_fn(dtype="float32")
    x, w, b = (rand(gen, *s, dtype=torch.float32) for s in ((3, 4), (2, 4), (2,)))
    y = fn(x, w, b)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, F.linear(x, w, b))
    (y * y).sum().backward()
    refs = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    (F.linear(*refs) ** 2).sum().backward()
    for got, ref in zip((x, w, b), refs):
        assert got.grad is not None and got.grad.dtype == torch.float32
        torch.testing.assert_close(got.grad, ref.grad)


# --------------------------------------------------------------------------------------
# several outputs, integer inputs and outputs


def test_multi_output(gen: torch.Generator) -> None:
    X = tex.placeholder((3, 4), f64, name="X")
    W = tex.placeholder((2, 4), f64, name="W")
    Y = topi.nn.dense(X, W)
    Z = topi.tanh(Y)  # shares Y: one reverse sweep serves both heads
    S = topi.sum(Z, axis=1)
    fn = tt.function([Y, Z, S], [X, W])
    x, w = rand(gen, 3, 4), rand(gen, 2, 4)
    y, z, s = fn(x, w)
    ry = x @ w.T
    torch.testing.assert_close(y, ry)
    torch.testing.assert_close(z, torch.tanh(ry))
    torch.testing.assert_close(s, torch.tanh(ry).sum(1))
    assert torch.autograd.gradcheck(fn, (x, w))
    assert torch.autograd.gradgradcheck(fn, (x, w))
    # one output used alone: torch passes zero heads for the others
    (gx,) = torch.autograd.grad(fn(x, w)[2].sum(), x)
    (rx,) = torch.autograd.grad(torch.tanh(x @ w.T).sum(), x)
    torch.testing.assert_close(gx, rx)


def test_passthrough_and_repeated_outputs(gen: torch.Generator) -> None:
    """An input returned as is and a tensor returned twice get buffers of their own."""
    X = tex.placeholder((3,), f64, name="X")
    E = topi.exp(X)
    fn = tt.function([X, E, E], [X])
    x = rand(gen, 3)
    a, e1, e2 = fn(x)
    assert a.data_ptr() != x.data_ptr() and e1.data_ptr() != e2.data_ptr()
    torch.testing.assert_close(a, x)
    torch.testing.assert_close(e1, torch.exp(x))
    torch.testing.assert_close(e2, torch.exp(x))
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_integer_input_and_output(gen: torch.Generator) -> None:
    X = tex.placeholder((2, 3), f64, name="X")
    N = tex.placeholder((3,), "int32", name="N")
    Y = tex.compute((2, 3), lambda i, j: X[i, j] * N[j].astype(f64), name="Y")
    C = topi.argmax(X, axis=1)
    fn = tt.function([Y, C], [X, N])
    x, n = rand(gen, 2, 3), torch.tensor([1, 2, 3], dtype=torch.int32)
    y, c = fn(x, n)
    torch.testing.assert_close(y, x * n)
    assert c.dtype == tt.TORCH_DTYPES[C.dtype.name] and not c.requires_grad
    torch.testing.assert_close(c, torch.argmax(x, 1).to(c.dtype))
    y.sum().backward()
    torch.testing.assert_close(x.grad, n.to(torch.float64).expand(2, 3))
    assert fn.gradients.keys() == {(True, False)}
    assert torch.autograd.gradcheck(lambda t: fn(t, n)[0], (x,))



# --------------------------------------------------------------------------------------
# no copies


class _Spy:
    """Wraps a built kernel and records the data pointers it is called with."""

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel
        self.pointers: list[list[int]] = []

    def __call__(self, *arrays: np.ndarray) -> None:
        self.pointers.append([a.__array_interface__["data"][0] for a in arrays])
        self.kernel(*arrays)  # type: ignore[operator]


def test_no_copies(gen: torch.Generator) -> None:
    fn = dense_fn()
    spy = fn.kernel = _Spy(fn.kernel)
    x, w, b = rand(gen, 3, 4), rand(gen, 2, 4), rand(gen, 2)
    y = fn(x, w, b)
    # the kernel read the tensors' own memory and wrote into the tensor returned
    assert spy.pointers == [[x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr()]]
    # a non-contiguous input is made contiguous (the one copy), with the same result
    wt = rand(gen, 4, 2, grad=False).T
    assert not wt.is_contiguous()
    y2 = fn(x, wt, b)
    assert spy.pointers[-1][1] != wt.data_ptr()
    torch.testing.assert_close(y2, F.linear(x, wt, b))
    # gradients are written into the tensors torch receives, too
    grad = fn.gradient([True, True, True])
    gspy = grad.kernel = _Spy(grad.kernel)
    head = torch.ones(3, 2, dtype=torch.float64)
    gx, gw, gb = torch.autograd.grad(fn(x, w, b), (x, w, b), head)
    assert gspy.pointers[0][:4] == [x.data_ptr(), w.data_ptr(), b.data_ptr(), head.data_ptr()]
    assert gspy.pointers[0][4:] == [gx.data_ptr(), gw.data_ptr(), gb.data_ptr()]


# --------------------------------------------------------------------------------------
# gradient functions: built per needs_input_grad pattern, once


def test_only_requested_gradients_are_built(gen: torch.Generator) -> None:
    fn = dense_fn()
    x, w, b = rand(gen, 3, 4, grad=False), rand(gen, 2, 4), rand(gen, 2, grad=False)
    assert fn.gradients == {}  # nothing built before a backward needs it
    fn(x, w, b).sum().backward()
    assert x.grad is None and b.grad is None and w.grad is not None
    assert list(fn.gradients) == [(False, True, False)]
    (grad,) = fn.gradients.values()
    assert len(grad.outputs) == 1 and grad.outputs[0].shape == (2, 4)
    torch.testing.assert_close(w.grad, x.sum(0).expand(2, 4))
    fn(x, w, b).sum().backward()  # served from the cache
    assert fn.gradients == {(False, True, False): grad}
    assert grad.gradients == {}  # no double backward asked for


def test_no_grad_and_detached_inputs(gen: torch.Generator) -> None:
    fn = dense_fn()
    x, w, b = rand(gen, 3, 4), rand(gen, 2, 4), rand(gen, 2)
    with torch.no_grad():
        y = fn(x, w, b)
    assert not y.requires_grad
    assert not fn(x.detach(), w.detach(), b.detach()).requires_grad
    assert fn.gradients == {}


# --------------------------------------------------------------------------------------
# torch.nn


class TexLinearTanh(torch.nn.Module):
    """``tanh(x W^T + b)`` computed by one tex function."""

    def __init__(self, n: int, k: int, m: int) -> None:
        super().__init__()
        X = tex.placeholder((n, k), f64, name="X")
        W = tex.placeholder((m, k), f64, name="W")
        B = tex.placeholder((m,), f64, name="B")
        self.fn = tt.function(topi.tanh(topi.nn.dense(X, W, B)), [X, W, B], name="lin_tanh")
        self.weight = torch.nn.Parameter(torch.randn(m, k, dtype=torch.float64) * 0.3)
        self.bias = torch.nn.Parameter(torch.zeros(m, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, self.weight, self.bias)  # type: ignore[return-value]


def test_module_trains(gen: torch.Generator) -> None:
    torch.manual_seed(0)
    model = TexLinearTanh(16, 5, 3)
    x = torch.randn(16, 5, generator=gen, dtype=torch.float64)
    target = torch.tanh(x @ torch.randn(3, 5, generator=gen, dtype=torch.float64).T)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    assert model.fn.gradients.keys() == {(False, True, True)}  # x needs no gradient


# --------------------------------------------------------------------------------------
# errors name the culprit


def test_bad_arguments(gen: torch.Generator) -> None:
    fn = dense_fn()
    x, w, b = rand(gen, 3, 4), rand(gen, 2, 4), rand(gen, 2)
    with pytest.raises(TypeError, match=r"dense\(\) takes 3 tensors .*X: torch.float64"
                                        r"\[3, 4\].* but 2 were given"):
        fn(x, w)
    with pytest.raises(ValueError, match=r"argument 1 \('W'\) must have shape \(2, 4\), "
                                         r"got \(4, 2\)"):
        fn(x, w.T, b)
    with pytest.raises(TypeError, match=r"argument 2 \('B'\) must have dtype torch.float64, "
                                        r"got torch.float32"):
        fn(x, w, b.float())
    with pytest.raises(TypeError, match=r"argument 0 \('X'\) must be a torch.Tensor.*ndarray"):
        fn(x.detach().numpy(), w, b)
    with pytest.raises(ValueError, match=r"argument 0 \('X'\) is on device meta.*'llvm'"):
        fn(torch.empty(3, 4, dtype=torch.float64, device="meta"), w, b)


def test_bad_definitions() -> None:
    X = tex.placeholder((3, 4), f64, name="X")
    W = tex.placeholder((2, 4), f64, name="W")
    B = tex.placeholder((2,), f64, name="B")
    Y = topi.nn.dense(X, W, B)
    with pytest.raises(ValueError, match=r"depend on placeholder 'B', which is not among "
                                         r"inputs \['X', 'W'\]"):
        tt.function(Y, [X, W])
    with pytest.raises(TypeError, match=r"inputs\[1\] 'T_dense' is computed"):
        tt.function(Y, [X, Y.op.input_tensors[0], B])
    with pytest.raises(ValueError, match="'X' appears twice"):
        tt.function(Y, [X, W, B, X])
    with pytest.raises(TypeError, match=r"outputs must be a tex Tensor"):
        tt.function("Y", [X, W, B])  # type: ignore[arg-type]
    fn = tt.function(Y, [X, W, B])
    with pytest.raises(ValueError, match="mask has 2 entries for 3 inputs"):
        fn.gradient([True, True])
    N = tex.placeholder((2,), "int32", name="N")
    gi = tt.function(topi.add(Y, N.astype(f64)), [X, W, B, N])
    with pytest.raises(ValueError, match="input 'N' has dtype int32"):
        gi.gradient([False, False, False, True])


def test_cuda_target_builds_ptx() -> None:
    """target='cuda' compiles without a GPU; running it needs one (and CUDA tensors)."""
    X = tex.placeholder((64,), "float32", name="X")
    fn = tt.function(topi.exp(X), [X], target="cuda")
    assert ".entry" in fn.kernel.get_source("ptx")
    if torch.cuda.is_available():  # pragma: no cover - GPU machines only
        x = torch.randn(64, device="cuda", requires_grad=True)
        y = fn(x)
        assert y.is_cuda
        torch.testing.assert_close(y, torch.exp(x))
        y.sum().backward()
        torch.testing.assert_close(x.grad, torch.exp(x.detach()))
