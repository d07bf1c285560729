"""The real Triton kernels, run on the CPU through TRITON_INTERPRET=1, against NumPy.

The interpreter must be switched on before the kernels are defined, so they run in a child
process (this pytest process, and every other test, keeps the normal Triton). The child writes
its outputs to an .npz file; the references are computed here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch")
pytestmark = pytest.mark.skipif(not HAVE, reason="triton and torch are not installed")

C = np.sqrt(2.0 / np.pi)

# (M, K, N) with every dimension ragged against the 64x64x32 (and 16x16x16) blocks, K=1, 1-wide.
GEMM_CASES = [(1, 1, 1), (37, 45, 29), (70, 33, 65), (16, 16, 16), (5, 100, 1), (3, 0, 4)]
GELU_CASES = [(1, 1), (19, 300), (33, 257), (16, 256)]


def inputs(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 2).astype(np.float32) for s in shapes]


def gelu64(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    return 0.5 * y * (1.0 + np.tanh(C * (y + 0.044715 * y**3)))


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from tinytorch.extensions import triton_kernels as tk
    sys.path.insert(0, sys.argv[2])
    from test_ext_triton import GEMM_CASES, GELU_CASES, inputs

    ok, why = tk.available()
    assert ok and tk.INTERPRET == (sys.argv[3] == "interpreter"), why
    out = {}
    for i, (m, k, n) in enumerate(GEMM_CASES):
        a, b, bias = inputs(i, (m, k), (k, n), (n,))
        out[f"mm_{i}"] = tk.matmul(a, b)
        out[f"mmg_{i}"] = tk.matmul_bias_gelu(a, b, bias)
        out[f"mmg_small_{i}"] = tk.matmul_bias_gelu(a, b, bias, block_m=16, block_n=16, block_k=16)
    for i, (m, n) in enumerate(GELU_CASES):
        x, bias = inputs(100 + i, (m, n), (n,))
        out[f"g_{i}"] = tk.fused_bias_gelu(x, bias)
    x = np.array([[-np.inf, np.inf, -3e38, 3e38, -100.0, 100.0, 0.0]], np.float32)
    out["special"] = tk.fused_bias_gelu(x, np.zeros(7, np.float32))
    import torch
    dev = "cpu" if tk.INTERPRET else "cuda"
    t = tk.fused_bias_gelu(torch.from_numpy(x).to(dev), torch.zeros(7, device=dev))
    out["tensor_in_tensor_out"] = np.array([isinstance(t, torch.Tensor)])
    for bad, name in [((np.ones((2, 3)), np.ones((4, 2))), "inner"), ((np.ones(3), np.ones(3)), "a")]:
        try:
            tk.matmul(*bad)
        except ValueError as exc:
            out["err_" + name] = np.array([str(exc)])
    np.savez(sys.argv[1], **out)
    """
)


def _cuda_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# The same kernels twice: through the interpreter on the CPU (everywhere), and compiled for a real
# CUDA GPU where one is present (skipped, saying so, elsewhere).
@pytest.fixture(scope="module", params=["interpreter", "cuda"])
def child_outputs(request, tmp_path_factory) -> dict[str, np.ndarray]:
    mode = request.param
    if mode == "cuda" and not _cuda_gpu():
        pytest.skip("no CUDA GPU: the compiled Triton kernels are checked only on a GPU machine")
    path = tmp_path_factory.mktemp("triton") / "out.npz"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if mode == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    here = os.path.dirname(__file__)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), here, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(GEMM_CASES)))
def test_triton_gemm_and_fused_epilogue_match_numpy(child_outputs, i: int) -> None:
    m, k, n = GEMM_CASES[i]
    a, b, bias = inputs(i, (m, k), (k, n), (n,))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 * max(k, 1) * 8 + 1e-6
    np.testing.assert_allclose(child_outputs[f"mm_{i}"], ref, atol=tol, rtol=0)
    np.testing.assert_allclose(child_outputs[f"mmg_{i}"], gelu64(ref + bias), atol=tol, rtol=0)
    np.testing.assert_allclose(child_outputs[f"mmg_small_{i}"], gelu64(ref + bias), atol=tol)


@pytest.mark.parametrize("i", range(len(GELU_CASES)))
def test_triton_bias_gelu_matches_the_float64_formula(child_outputs, i: int) -> None:
    m, n = GELU_CASES[i]
    x, bias = inputs(100 + i, (m, n), (n,))
    got = child_outputs[f"g_{i}"]
    assert got.shape == (m, n) and got.dtype == np.float32
    assert np.abs(got - gelu64(x + bias)).max() <= 2e-6


def test_triton_gelu_handles_inf_and_huge_values(child_outputs) -> None:
    got = child_outputs["special"][0]
    assert got[0] == 0.0 and got[1] == np.inf
    np.testing.assert_allclose(got[2:], gelu64([-3e38, 3e38, -100.0, 100.0, 0.0]), atol=1e-6)


def test_triton_returns_tensors_for_tensors_and_names_bad_arguments(child_outputs) -> None:
    assert child_outputs["tensor_in_tensor_out"][0]
    assert "inner dimensions" in str(child_outputs["err_inner"][0])
    assert str(child_outputs["err_a"][0]).startswith("a must be 2-D")


@pytest.mark.slow
def test_without_gpu_or_interpreter_available_says_why() -> None:
    code = (
        "from tinytorch.extensions import triton_kernels as tk\n"
        "ok, why = tk.available()\n"
        "print(ok, why)\n"
        "try:\n"
        "    tk.fused_bias_gelu([[1.0]], [0.0])\n"
        "except RuntimeError as exc:\n"
        "    print('raised', exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("True"):
        pytest.skip("a CUDA GPU is present: the no-GPU path does not apply")
    assert "no CUDA GPU" in out.stdout and "raised" in out.stdout
