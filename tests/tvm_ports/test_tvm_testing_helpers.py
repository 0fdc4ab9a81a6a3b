"""TVM's ``tvm.testing`` helpers as ``tex.testing`` has them (``tex/testing/tvm.py``), the ones
the ports in this folder call: what passes, what fails and what the failures say."""
from __future__ import annotations

import numpy as np
import pytest

import tex
import tex.testing


def _cubic(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum(x.astype(np.float64) ** 3 * y))


def test_check_numerical_grads_accepts_right_gradients(rng: np.random.Generator) -> None:
    x = rng.uniform(-2, 2, (4, 5)).astype(np.float32)
    y = rng.uniform(-2, 2, (4, 5)).astype(np.float32)
    tex.testing.check_numerical_grads(_cubic, [x, y], [3 * x**2 * y, x**3])
    # dict form, and a subset of the inputs checked
    tex.testing.check_numerical_grads(lambda a, b: _cubic(a, b), {"a": x, "b": y},
                                      {"b": x**3})
    # fewer gradients than inputs: the trailing integer input is held fixed (TVM's ports
    # pass index arrays that way)
    idx = np.array([0, 3, 1], dtype=np.int32)
    tex.testing.check_numerical_grads(lambda a, i: float(np.sum(a[i] ** 2)), [x, idx],
                                      [np.bincount(idx, minlength=4)[:, None] * 2 * x])


def test_check_numerical_grads_names_the_input_and_worst_element(
        rng: np.random.Generator) -> None:
    x = rng.uniform(1, 2, (3, 4))
    y = rng.uniform(1, 2, (3, 4))
    wrong = 3 * x**2 * y
    wrong[2, 1] += 50.0
    with pytest.raises(AssertionError, match=r"input 0 .*worst at \(2, 1\)") as err:
        tex.testing.check_numerical_grads(_cubic, [x, y], [wrong, x**3])
    assert "1 of 12 elements disagree" in str(err.value)
    with pytest.raises(AssertionError, match=r"input 'b'.*worst at \(0, 0\)"):
        bad = x**3
        bad[0, 0] = -100.0
        tex.testing.check_numerical_grads(lambda a, b: _cubic(a, b), {"a": x, "b": y},
                                          {"b": bad})


def test_check_numerical_grads_uses_tvms_norm_criterion() -> None:
    """TVM's test is over the whole gradient, ||num - grad|| <= atol*sqrt(n) +
    rtol*||num||: one element off by more than its own tolerance still passes when the
    gradient as a whole is close enough."""
    x = np.linspace(-1, 1, 100).reshape(10, 10)
    grad = 2 * x
    grad[4, 4] += 0.05  # 0.05 > atol + rtol*|num| there, but 0.05 < 0.01 * sqrt(100)
    tex.testing.check_numerical_grads(lambda a: float(np.sum(a**2)), [x], [grad])
    grad[4, 4] += 5.0
    with pytest.raises(AssertionError, match=r"worst at \(4, 4\)"):
        tex.testing.check_numerical_grads(lambda a: float(np.sum(a**2)), [x], [grad])


def test_check_numerical_grads_refuses_bad_arguments() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(AssertionError, match=r"input 0 has shape \(3, 2\), expected \(2, 3\)"):
        tex.testing.check_numerical_grads(lambda a: float(a.sum()), [x], [np.ones((3, 2))])
    with pytest.raises(ValueError, match="numerical gradient of input 0 is not finite"):
        tex.testing.check_numerical_grads(lambda a: float("nan"), [x], [np.zeros((2, 3))])
    with pytest.raises(TypeError, match="input 0 has dtype int32"):
        tex.testing.check_numerical_grads(lambda a: float(a.sum()), [x.astype(np.int32)],
                                          [np.ones((2, 3))])
    with pytest.raises(ValueError, match="must return a scalar"):
        tex.testing.check_numerical_grads(lambda a: a * 2, [x], [np.ones((2, 3))])


def test_check_numerical_grads_float32_step_is_the_step_taken() -> None:
    """At a float32 point the step 1e-3 rounds; dividing by the step actually taken keeps
    a linear function's derivative exact."""
    x = np.full((5,), 1000.5, np.float32)  # ulp there is 6e-5: 1e-3 is 16.4 ulps
    tex.testing.check_numerical_grads(lambda a: float(np.sum(a.astype(np.float64) * 7)),
                                      [x], [np.full((5,), 7.0)], atol=1e-6, rtol=1e-6)


def test_device_enabled_and_enabled_targets() -> None:
    assert tex.testing.device_enabled("llvm")
    assert tex.testing.device_enabled("cpu")
    assert tex.testing.device_enabled("llvm -mcpu=native")
    for other in ("opencl", "metal", "rocm", "vulkan -from_device=0", "hexagon", ""):
        assert not tex.testing.device_enabled(other), other
    assert tex.testing.device_enabled("cuda") == tex.cuda(0).exist
    assert tex.testing.device_enabled("nvptx") == tex.testing.device_enabled("cuda")
    with pytest.raises(TypeError, match="target string"):
        tex.testing.device_enabled(tex.cpu(0))
    targets = tex.testing.enabled_targets()
    assert targets[0] == ("llvm", tex.cpu(0))
    assert [t for t, _ in targets[1:]] == (["cuda"] if tex.cuda(0).exist else [])


def test_gpu_marks() -> None:
    def f() -> None: ...

    assert tex.testing.uses_gpu(f) is f  # runs everywhere (TVM: on CPU nodes too)
    marked = tex.testing.requires_cuda(f)
    names = {m.name: m for m in marked.pytestmark}
    assert set(names) == {"gpu", "skipif"}
    assert names["skipif"].args == (not tex.testing.device_enabled("cuda"),)
    assert "CUDA" in names["skipif"].kwargs["reason"]

    def g() -> None: ...

    assert {m.name for m in tex.testing.requires_gpu(g).pytestmark} == {"gpu", "skipif"}


def test_assert_allclose_has_tvms_defaults() -> None:
    tex.testing.assert_allclose(np.float32(1.0), 1.0 + 5e-8)
    with pytest.raises(AssertionError):
        tex.testing.assert_allclose([1.0], [1.0 + 1e-6])
    with pytest.raises(AssertionError, match=r"shape \(2, 1\).*shape \(2,\)"):
        tex.testing.assert_allclose(np.zeros((2, 1)), np.zeros(2))  # no broadcasting
    tex.testing.assert_allclose([1.0, 2.0], [1.1, 2.2], rtol=0.1)
