"""OpenAI Triton kernels: fused bias+GELU and a tiled GEMM with a bias+GELU epilogue.

They run on a CUDA GPU. With TRITON_INTERPRET=1 set *before this module is imported* the same
kernels run on the CPU through Triton's interpreter (slow, ~3 ms per program instance), which is
how the tests check them. The interpreter wants torch tensors, has no tanh (GELU uses sigmoid) and
needs power-of-two block sizes; every load and store is masked because an unmasked out-of-bounds
access corrupts memory silently there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np

from .probe import NO_GPU, gpu_device_nodes, torch_installed

INTERPRET = os.environ.get("TRITON_INTERPRET", "") == "1"

try:
    import triton
    import triton.language as tl

    _IMPORT_ERROR: str | None = None
except ImportError as exc:  # the kernels below are only defined when triton imports
    triton = None  # type: ignore[assignment]
    tl = None  # type: ignore[assignment]
    _IMPORT_ERROR = f"triton is not installed ({exc}); pip install 'tinytorch-m07[triton]'"

SQRT_2_OVER_PI = 0.7978845608028654
GELU_FLUSH = -9.0  # below this gelu(y) is < 1e-28 in magnitude; also maps -inf to 0, not NaN

if triton is not None:

    @triton.jit
    def _gelu(y):
        """gelu(y) = y * sigmoid(2u), u = sqrt(2/pi) (y + 0.044715 y^3); no cancellation for y < 0."""
        u = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        g = y * tl.sigmoid(2.0 * u)
        return tl.where(y < -9.0, 0.0, g)

    @triton.jit
    def bias_gelu_kernel(
        x_ptr, bias_ptr, y_ptr, rows, cols,
        stride_x, stride_y,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        """Y[i, j] = gelu(X[i, j] + bias[j]) on one BLOCK_M x BLOCK_N tile; reads 2MN + N floats."""
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BN,)
        mask_n = offs_n < cols
        mask = (offs_m[:, None] < rows) & mask_n[None, :]  # (BM, BN)
        x = tl.load(x_ptr + offs_m[:, None] * stride_x + offs_n[None, :], mask=mask, other=0.0)
        b = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0)  # (BN,)
        y = _gelu(x + b[None, :])
        tl.store(y_ptr + offs_m[:, None] * stride_y + offs_n[None, :], y, mask=mask)

    @triton.jit
    def matmul_bias_gelu_kernel(
        a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
        HAS_EPILOGUE: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
    ):  # fmt: skip
        """C tile = [gelu](A[rows, :] @ B[:, cols] [+ bias]).

        for each (BLOCK_M x BLOCK_N) tile of C, one program:       # grouped for L2 reuse
            acc = 0
            for k0 in 0..K step BLOCK_K:                          # masked ragged K
                acc += A[m, k0:k0+BK] @ B[k0:k0+BK, n]             # tl.dot, fp32 accumulate
            C[m, n] = gelu(acc + bias[n]) if HAS_EPILOGUE else acc # epilogue in registers
        """
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BLOCK_M)
        num_n = tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n
        first_m = (pid // group) * GROUP_M
        group_rows = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % group_rows
        pid_n = (pid % group) // group_rows

        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BN,)
        offs_k = tl.arange(0, BLOCK_K)  # (BK,)
        mask_m = offs_m < M
        mask_n = offs_n < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + offs_k
            a = tl.load(
                a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                mask=mask_m[:, None] & (k[None, :] < K),
                other=0.0,
            )  # (BM, BK)
            b = tl.load(
                b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                mask=(k[:, None] < K) & mask_n[None, :],
                other=0.0,
            )  # (BK, BN)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)  # "ieee": true fp32 products
        if HAS_EPILOGUE:
            bias = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0)
            acc = _gelu(acc + bias[None, :])
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


def _torch() -> Any | None:
    if not torch_installed():
        return None
    import torch

    return torch


def _cuda_name() -> str | None:
    """The GPU name if torch sees a CUDA (or ROCm) device, else None.

    torch is not imported into this process just to ask: it brings its own OpenMP runtime, which
    can take the C++ kernels' thread scaling down with it. If torch is not loaded yet, a child
    process asks (and only when GPU device nodes exist at all).
    """
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    if not gpu_device_nodes():
        return None
    code = "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.strip()
    return name or None


def available() -> tuple[bool, str]:
    """(True, "cuda: <gpu>") or (True, "interpreter ...") when the kernels can run, else (False, why)."""
    if _IMPORT_ERROR is not None:
        return False, _IMPORT_ERROR
    if not torch_installed():
        return False, "torch is not installed; Triton kernels take torch tensors"
    # The interpreter runs on the CPU even where a GPU is present (TRITON_INTERPRET=1 is asked
    # for on purpose: the CPU dry runs and tests), so it is checked first.
    if INTERPRET:
        return (
            True,
            f"triton {triton.__version__} interpreter on the CPU (TRITON_INTERPRET=1, slow)",
        )
    gpu = _cuda_name()
    if gpu:
        return True, f"triton {triton.__version__} on cuda ({gpu})"
    return False, NO_GPU.format(version=triton.__version__)


def _torch_and_device() -> tuple[Any, str]:
    """(torch, "cpu") under the interpreter, (torch, "cuda") on a GPU, else RuntimeError(reason)."""
    if _IMPORT_ERROR is not None:
        raise RuntimeError(_IMPORT_ERROR)
    torch = _torch()
    if torch is None:
        raise RuntimeError(available()[1])
    if INTERPRET:  # before the GPU: see available()
        return torch, "cpu"
    if torch.cuda.is_available():
        return torch, "cuda"
    raise RuntimeError(available()[1])


def _to_tensor(x: object, name: str, torch: Any, device: str, ndim: int) -> tuple[Any, bool]:
    """(float32 contiguous tensor on device, was_numpy)."""
    if isinstance(x, torch.Tensor):
        if x.device.type != device:
            raise ValueError(f"{name} is on {x.device}; the Triton kernels need {device} tensors")
        t, was_numpy = x, False
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
        t, was_numpy = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)), True
        t = t.to(device)
    if not t.is_floating_point() or t.dtype != torch.float32:
        t = t.to(torch.float32)
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return t.contiguous(), was_numpy


def fused_bias_gelu(x: object, bias: object, *, block_m: int = 16, block_n: int = 256) -> Any:
    """y = gelu(x + bias), x (M, N), bias (N,). NumPy in -> NumPy out; a tensor in -> tensor out."""
    torch, dev = _torch_and_device()
    xt, was_numpy = _to_tensor(x, "x", torch, dev, ndim=2)  # (M, N)
    bt, _ = _to_tensor(bias, "bias", torch, dev, ndim=1)  # (N,)
    rows, cols = xt.shape
    if bt.shape[0] != cols:
        raise ValueError(f"bias must have length {cols} (columns of x), got {bt.shape[0]}")
    _check_block("block_m", block_m)
    _check_block("block_n", block_n)
    y = torch.empty_like(xt)
    if xt.numel():
        grid = (triton.cdiv(rows, block_m), triton.cdiv(cols, block_n))
        bias_gelu_kernel[grid](xt, bt, y, rows, cols, xt.stride(0), y.stride(0),
                               BLOCK_M=block_m, BLOCK_N=block_n)  # fmt: skip
    return y.cpu().numpy() if was_numpy else y


def matmul_bias_gelu(
    a: object,
    b: object,
    bias: object | None = None,
    *,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    group_m: int = 8,
    precision: str = "ieee",
    num_warps: int = 4,
    num_stages: int = 3,
) -> Any:
    """C = gelu(A @ B + bias), or C = A @ B when bias is None. A (M, K), B (K, N), bias (N,).

    precision "ieee" multiplies in full fp32 (what torch.matmul does unless TF32 is allowed);
    "tf32" uses tensor cores with 10-bit mantissas. num_warps/num_stages only matter on a GPU.
    """
    if precision not in ("ieee", "tf32"):
        raise ValueError(f"precision must be 'ieee' or 'tf32', got {precision!r}")
    torch, dev = _torch_and_device()
    at, was_numpy = _to_tensor(a, "a", torch, dev, ndim=2)
    bt, _ = _to_tensor(b, "b", torch, dev, ndim=2)
    (m, k), (k2, n) = at.shape, bt.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: a is {tuple(at.shape)}, b is {tuple(bt.shape)}")
    biast = None
    if bias is not None:
        biast, _ = _to_tensor(bias, "bias", torch, dev, ndim=1)
        if biast.shape[0] != n:
            raise ValueError(f"bias must have length N={n}, got {biast.shape[0]}")
    for name, val in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        _check_block(name, val, minimum=16)  # tl.dot needs every dimension >= 16
    c = torch.empty((m, n), device=dev, dtype=torch.float32)
    if m and n:
        if k == 0:
            c.zero_()  # an empty sum; the epilogue still applies
            if biast is not None:
                c = fused_bias_gelu(c, biast)
        else:
            grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
            matmul_bias_gelu_kernel[grid](
                at, bt, biast if biast is not None else at, c, m, n, k,
                at.stride(0), at.stride(1), bt.stride(0), bt.stride(1), c.stride(0), c.stride(1),
                HAS_EPILOGUE=biast is not None,
                BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
                PRECISION=precision, num_warps=num_warps, num_stages=num_stages,
            )  # fmt: skip
    return c.cpu().numpy() if was_numpy else c


def matmul(a: object, b: object, **blocks: int) -> Any:
    """C = A @ B through the same tiled kernel without the epilogue."""
    return matmul_bias_gelu(a, b, None, **blocks)


def _check_block(name: str, value: object, minimum: int = 1) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if not ok or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= {minimum}, got {value!r}")
