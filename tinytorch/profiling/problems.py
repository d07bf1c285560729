"""Module 14: the benchmark problems, defined once: inputs, float64 reference, flops, bytes.

Napkin math (float32, 4 bytes an element):
  GEMM M x K x N:   2 M K N flops; compulsory bytes read A (MK) and B (KN), write C (MN).
  bias+GELU M x N:  ~10 flops an element; reads x (MN) and bias (N), writes y (MN).
  GELU M x N:       ~9 flops an element; reads x (MN), writes y (MN).
GELU in tanh form: gelu(y) = 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3))).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BYTES = 4  # float32
C = float(np.sqrt(2.0 / np.pi))
GELU_FLOPS = 9  # x^3 (2), * 0.044715, + x, * C, tanh as 1, 1 +, * x, * 0.5
KINDS = ("gemm", "bias_gelu", "gelu")


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: its name, kind and dims, and the work one call does."""

    kind: str  # "gemm" (dims M, K, N) | "bias_gelu" (M, N) | "gelu" (M, N)
    dims: tuple[int, ...]
    flops: float
    bytes: float  # compulsory traffic: every input read once, the output written once

    @property
    def name(self) -> str:
        label = {"gemm": "gemm", "bias_gelu": "bias+gelu", "gelu": "gelu"}[self.kind]
        return f"{label} {'x'.join(map(str, self.dims))}"

    @property
    def intensity(self) -> float:
        """FLOP per byte of compulsory traffic (the roofline's x axis)."""
        return self.flops / self.bytes

    def inputs(self, seed: int = 0) -> tuple[np.ndarray, ...]:
        """Fresh float32 inputs: (A, B) for gemm, (x, bias) for bias_gelu, (x,) for gelu."""
        rng = np.random.default_rng([seed, *self.dims])
        if self.kind == "gemm":
            m, k, n = self.dims
            return (
                rng.standard_normal((m, k), dtype=np.float32),  # (M, K)
                rng.standard_normal((k, n), dtype=np.float32),  # (K, N)
            )
        m, n = self.dims
        x = (2.0 * rng.standard_normal((m, n))).astype(np.float32)  # (M, N)
        if self.kind == "gelu":
            return (x,)
        return x, rng.standard_normal(n).astype(np.float32)  # (M, N), (N,)

    def reference(self, *inputs: np.ndarray) -> np.ndarray:
        """The float64 answer for these inputs."""
        if self.kind == "gemm":
            a, b = inputs
            return a.astype(np.float64) @ b.astype(np.float64)
        y = inputs[0].astype(np.float64)
        if self.kind == "bias_gelu":
            y = y + inputs[1].astype(np.float64)
        return gelu_f64(y)


def gelu_f64(y: np.ndarray) -> np.ndarray:
    """GELU, tanh form, in float64."""
    y = np.asarray(y, dtype=np.float64)
    return 0.5 * y * (1.0 + np.tanh(C * (y + 0.044715 * y**3)))


def _dims(kind: str, dims: tuple[object, ...], count: int) -> tuple[int, ...]:
    if len(dims) != count or any(
        isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims
    ):
        raise ValueError(f"{kind} needs {count} positive int dims, got {dims!r}")
    return tuple(int(d) for d in dims)


def gemm(m: int, k: int | None = None, n: int | None = None) -> Problem:
    """C (M, N) = A (M, K) @ B (K, N); gemm(n) is n x n x n."""
    m, k, n = _dims("gemm", (m, m if k is None else k, m if n is None else n), 3)
    return Problem("gemm", (m, k, n), 2.0 * m * k * n, BYTES * (m * k + k * n + m * n))


def bias_gelu(m: int, n: int) -> Problem:
    """y (M, N) = gelu(x (M, N) + bias (N,))."""
    m, n = _dims("bias_gelu", (m, n), 2)
    return Problem("bias_gelu", (m, n), (GELU_FLOPS + 1.0) * m * n, BYTES * (2 * m * n + n))


def gelu(m: int, n: int) -> Problem:
    """y (M, N) = gelu(x (M, N))."""
    m, n = _dims("gelu", (m, n), 2)
    return Problem("gelu", (m, n), float(GELU_FLOPS * m * n), float(BYTES * 2 * m * n))


def numpy_bias_gelu(
    x: np.ndarray,
    bias: np.ndarray,
    out: np.ndarray | None = None,
    tmp: np.ndarray | None = None,
) -> np.ndarray:
    """The NumPy baseline: gelu(x + bias) with in-place ufuncs into reusable buffers.

    y * sigmoid(2u) = y / (1 + exp(-2u)), u = C (y + 0.044715 y^3): the tanh form rewritten so
    one exp replaces tanh. Nine passes over memory, into the two buffers: the add, then eight
    in-place ufuncs (no temporaries).
    """
    y = np.add(x, bias, out=out)
    t = np.multiply(y, y, out=tmp)
    t *= C * 0.044715
    t += C
    t *= y  # u = C (y + 0.044715 y^3)
    t *= -2.0
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    t += 1.0
    return np.divide(y, t, out=y)  # y * sigmoid(2u)
