"""C++ SIMD kernels against plain NumPy/float64 references, on ragged shapes, and fuzzed arguments."""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tinytorch.extensions import build, simd

OK, REASON = simd.available()
pytestmark = pytest.mark.skipif(not OK, reason=f"C++ kernels unavailable: {REASON}")

C = np.sqrt(2.0 / np.pi)


def gelu64(y: np.ndarray) -> np.ndarray:
    """The float64 tanh-form GELU, written the textbook way (0.5 y (1 + tanh u))."""
    y = np.asarray(y, dtype=np.float64)
    return 0.5 * y * (1.0 + np.tanh(C * (y + 0.044715 * y * y * y)))


def gemm_tol(a: np.ndarray, b: np.ndarray) -> float:
    """float32 accumulation error bound for a K-long dot product, scaled by |a| |b|."""
    k = max(a.shape[1], 1)
    scale = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))).max(initial=0.0)
    return 4 * k * np.finfo(np.float32).eps * scale + 1e-6


# Shapes smaller than, equal to, and straddling the 6x16 register tile and the KC/MC/NC blocks.
RAGGED = [
    (1, 1, 1),
    (1, 7, 1),
    (5, 3, 17),
    (6, 1, 16),
    (7, 9, 33),
    (13, 513, 15),
    (73, 520, 31),
    (130, 1030, 70),
    (200, 37, 3100),
    (7, 1030, 3090),  # two K blocks x two N panels
    (31, 0, 5),
]


@pytest.mark.parametrize("m,k,n", RAGGED)
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_matches_numpy_on_ragged_shapes(m: int, k: int, n: int, threads: int) -> None:
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = simd.matmul(a, b, threads=threads)
    assert out.shape == (m, n) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=0, atol=gemm_tol(a, b))


@pytest.mark.parametrize("m,k,n", RAGGED)
def test_matmul_bias_gelu_matches_unfused_reference(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(7 + m + k * 3 + n * 5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ref = gelu64(a.astype(np.float64) @ b.astype(np.float64) + bias)
    out = simd.matmul_bias_gelu(a, b, bias, threads=2)
    np.testing.assert_allclose(out, ref, rtol=0, atol=gemm_tol(a, b) * 1.2 + 1e-6)


def test_fused_bias_gelu_error_below_1e6_for_abs_x_up_to_20() -> None:
    x = np.linspace(-20, 20, 400_003, dtype=np.float32).reshape(1, -1)
    out = simd.fused_bias_gelu(x, np.zeros(x.shape[1], np.float32))
    assert np.abs(out.astype(np.float64) - gelu64(x)).max() <= 1e-6


def test_fused_bias_gelu_adds_bias_per_column_on_ragged_widths() -> None:
    rng = np.random.default_rng(3)
    for cols in (1, 7, 8, 9, 15, 16, 17, 31, 1000, 20_001):  # vector tails, several col tiles
        x = (rng.standard_normal((5, cols)) * 4).astype(np.float32)
        bias = rng.standard_normal(cols).astype(np.float32)
        ref = gelu64((x + bias).astype(np.float64))  # the float32 sum is what the kernel sees
        out = simd.fused_bias_gelu(x, bias, threads=2)
        assert np.abs(out - ref).max() <= 1e-6, cols


def test_fused_bias_gelu_has_no_nan_for_finite_input_and_handles_inf() -> None:
    big = np.finfo(np.float32).max
    x = np.array([-big, -3e38, -1e20, -100, -9.01, -8.99, -1e-30, 0, 1e-30, 100, 1e20, big],
                 dtype=np.float32)  # fmt: skip
    out = simd.fused_bias_gelu(x[None, :], np.zeros(x.size, np.float32))[0]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, gelu64(x), rtol=1e-6, atol=1e-6)
    inf = simd.fused_bias_gelu(np.array([[-np.inf, np.inf]], np.float32), np.zeros(2, np.float32))
    assert inf[0, 0] == 0.0 and inf[0, 1] == np.inf


def test_nd_input_uses_last_axis_for_bias() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 10)).astype(np.float32)
    bias = rng.standard_normal(10).astype(np.float32)
    out = simd.fused_bias_gelu(x, bias)
    assert out.shape == x.shape
    np.testing.assert_allclose(out, gelu64(x + bias), atol=1e-6)


def test_build_info_records_the_isa_path_that_was_built() -> None:
    info = simd.build_info()
    assert info["built"] is True and info["error"] is None
    kernels = {"avx512f": "14x32 avx512f", "avx2+fma": "6x16 avx2+fma asm",
               "neon": "6x16 neon", "scalar": "6x16 scalar"}  # fmt: skip
    assert kernels[info["isa"]] == info["microkernel"]
    mr, nr = (int(x) for x in info["microkernel"].split()[0].split("x"))
    blocks = info["blocks"]
    assert (blocks["MR"], blocks["NR"]) == (mr, nr)
    assert blocks["MC"] % mr == 0 and blocks["NC"] % nr == 0 and blocks["KC"] >= 1
    for key in ("openmp", "threads", "compiler", "flags", "cache_path", "isa_requested"):
        assert key in info


@pytest.fixture
def small_blocks():
    """KC=16, MC=2 MR, NC=3 NR and 4 KiB packing buffers for one test: many K blocks, M tiles,
    row panels and B panels per GEMM."""
    lib = simd._load()
    lib.tt_set_panel_bytes.restype = ctypes.c_size_t
    lib.tt_set_panel_bytes.argtypes = [ctypes.c_size_t]
    saved = [lib.tt_block(i) for i in range(3)]
    assert lib.tt_set_blocks(16, 2 * lib.tt_mr(), 3 * lib.tt_nr()) == 0
    panel = lib.tt_set_panel_bytes(4096)
    yield
    assert lib.tt_set_blocks(*saved) == 0
    lib.tt_set_panel_bytes(panel)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 35, 17), (29, 100, 97), (100, 37, 200)])
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_and_fused_epilogue_across_many_small_blocks(small_blocks, m, k, n, threads) -> None:
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(simd.matmul(a, b, threads=threads), ref, atol=gemm_tol(a, b))
    fused = simd.matmul_bias_gelu(a, b, bias, threads=threads)
    np.testing.assert_allclose(fused, gelu64(ref + bias), atol=gemm_tol(a, b) * 1.2 + 1e-6)


@given(
    kc=st.integers(1, 40), mc_slivers=st.integers(1, 4), nc_slivers=st.integers(1, 4),
    m=st.integers(1, 60), k=st.integers(1, 90), n=st.integers(1, 140),
    threads=st.sampled_from([1, 2]), fused=st.booleans(), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_matmul_matches_at_drawn_blocks_and_shapes(
    kc, mc_slivers, nc_slivers, m, k, n, threads, fused, seed
) -> None:
    """Blocks drawn with the shape: one thread packs each tile row's A block and each K block's B
    slice into one reused buffer, so a wrong offset or a block packed once too few shows up at
    some boundary of K blocks, tile rows or B panels."""
    lib = simd._load()
    saved = [lib.tt_block(i) for i in range(3)]
    assert lib.tt_set_blocks(kc, mc_slivers * lib.tt_mr(), nc_slivers * lib.tt_nr()) == 0
    try:
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        if fused:
            bias = rng.standard_normal(n).astype(np.float32)
            got = simd.matmul_bias_gelu(a, b, bias, threads=threads)
            np.testing.assert_allclose(got, gelu64(ref + bias), atol=gemm_tol(a, b) * 1.2 + 1e-6)
        else:
            np.testing.assert_allclose(simd.matmul(a, b, threads=threads), ref, atol=gemm_tol(a, b))
    finally:
        assert lib.tt_set_blocks(*saved) == 0


PATH_CHECK = """
import numpy as np
from tinytorch.extensions import simd
ok, why = simd.available()
assert ok, why
c = np.sqrt(2.0 / np.pi)
gelu64 = lambda y: 0.5 * y * (1.0 + np.tanh(c * (y + 0.044715 * y**3)))
rng = np.random.default_rng(0)
for m, k, n in [(1, 1, 1), (7, 9, 33), (15, 300, 65), (130, 1030, 70), (200, 37, 3100)]:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 4 * k * 1.2e-7 * (np.abs(a).astype(np.float64) @ np.abs(b)).max() + 1e-6
    for t in (1, 2):
        assert np.abs(simd.matmul(a, b, threads=t) - ref).max() <= tol, (m, k, n, t)
        err = np.abs(simd.matmul_bias_gelu(a, b, bias, threads=t) - gelu64(ref + bias)).max()
        assert err <= 1.2 * tol + 1e-6, (m, k, n, t, err)
x = np.linspace(-20, 20, 400_003, dtype=np.float32)[None, :]
for t in (1, 2):
    err = np.abs(simd.fused_bias_gelu(x, np.zeros(x.shape[1], np.float32), threads=t) - gelu64(
        x.astype(np.float64))).max()
    assert err <= 1e-6, err
big = np.finfo(np.float32).max
edge = np.array([[-big, -3e38, -1e20, -100, -9.01, -8.99, 0, 100, 1e20, 3e38, big]], np.float32)
wide = np.tile(edge, (3, 7))  # 77 columns: whole vectors and a ragged tail
y = simd.fused_bias_gelu(wide, np.zeros(wide.shape[1], np.float32), threads=2)
assert np.isfinite(y).all() and np.abs(y - gelu64(wide.astype(np.float64))).max() <= 1e-6
print(simd.build_info()["isa"], simd.build_info()["microkernel"])
"""


@pytest.mark.parametrize("isa", ["native", "avx2", "avx512", "scalar"])
def test_every_isa_path_built_here_is_correct(tmp_path, isa: str) -> None:
    """TINYTORCH_SIMD_ISA=isa in a fresh process: ragged GEMM and its fused epilogue on 1 and 2
    threads, GELU error <= 1e-6 for |x| <= 20 and no NaN for any finite input."""
    if isa == "avx2" and not {"avx2", "fma"} <= build.cpu_features():
        pytest.skip("CPU lacks AVX2/FMA")
    if isa == "avx512" and "avx512f" not in build.cpu_features():
        pytest.skip("CPU lacks AVX-512F")
    env = dict(os.environ, TINYTORCH_SIMD_ISA=isa)
    proc = subprocess.run(
        [sys.executable, "-c", PATH_CHECK], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = proc.stdout.split()[0]
    if isa == "scalar":
        assert built == "scalar"
    elif isa == "avx2":
        assert built == "avx2+fma"
    elif isa == "avx512":
        assert built == "avx512f"


# ------------------------------------------------------------------ bad arguments never segfault

dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, bool])


@st.composite
def maybe_strided(draw: st.DrawFn, shape: tuple[int, ...], dtype: object) -> np.ndarray:
    """An array of `shape`, sometimes a transposed or step-2 view instead of a fresh buffer."""
    kind = draw(st.sampled_from(["plain", "transposed", "stepped", "reversed"]))
    if kind == "reversed":
        return (np.arange(int(np.prod(shape))).reshape(shape) % 7).astype(dtype)[::-1]
    if kind == "transposed" and len(shape) == 2:
        return np.zeros(shape[::-1], dtype=dtype).T + np.ones(shape, dtype=dtype)
    if kind == "stepped" and len(shape) >= 1:
        big = np.arange(int(np.prod(shape)) * 2).reshape(*shape[:-1], shape[-1] * 2)
        return (big[..., ::2] % 5).astype(dtype)
    return (np.arange(int(np.prod(shape))).reshape(shape) % 7).astype(dtype)


dims = st.integers(0, 40)


@given(data=st.data(), m=dims, k=dims, n=dims, k2=dims, da=dtypes, db=dtypes)
def test_matmul_fuzzed_arguments_raise_or_match(data, m, k, n, k2, da, db) -> None:
    k2 = data.draw(st.sampled_from([k, k2]))
    a = data.draw(maybe_strided((m, k), da))
    b = data.draw(maybe_strided((k2, n), db))
    threads = data.draw(st.sampled_from([None, 1, 2, 3]))
    if k != k2:
        with pytest.raises(ValueError, match="inner dimensions"):
            simd.matmul(a, b, threads=threads)
        return
    out = simd.matmul(a, b, threads=threads)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3)


@given(data=st.data(), shape=st.lists(st.integers(0, 12), min_size=1, max_size=3), nb=dims,
       dx=dtypes)  # fmt: skip
def test_fused_bias_gelu_fuzzed_arguments_raise_or_match(data, shape, nb, dx) -> None:
    x = data.draw(maybe_strided(tuple(shape), dx))
    nb = data.draw(st.sampled_from([shape[-1], nb]))
    bias = np.linspace(-1, 1, nb).astype(np.float32)
    if nb != shape[-1]:
        with pytest.raises(ValueError, match="bias"):
            simd.fused_bias_gelu(x, bias)
        return
    out = simd.fused_bias_gelu(x, bias)
    np.testing.assert_allclose(out, gelu64(x.astype(np.float32) + bias), atol=1e-6)


@pytest.mark.parametrize(
    "args,name",
    [
        ((np.ones(3), np.ones((3, 2))), "a"),
        ((np.ones((2, 3)), np.ones((3, 2, 1))), "b"),
        ((np.ones((2, 3), complex), np.ones((3, 2))), "a"),
        ((np.ones((2, 3)), np.array([[object()]])), "b"),
        ((np.ones((2, 3)), [[1, 2], [3]]), "b"),
    ],
)
def test_matmul_rejects_bad_arguments_naming_them(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        simd.matmul(*args)


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2", True, 10**6])
def test_bad_thread_counts_are_rejected(threads: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        simd.matmul(np.ones((2, 2)), np.ones((2, 2)), threads=threads)


def test_bias_shape_is_checked_for_the_fused_gemm() -> None:
    with pytest.raises(ValueError, match="bias"):
        simd.matmul_bias_gelu(np.ones((2, 3)), np.ones((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match="bias"):
        simd.matmul_bias_gelu(np.ones((2, 3)), np.ones((3, 4)), np.ones((1, 4)))


def test_inputs_are_not_mutated() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    bias = np.ones(5, np.float32)
    a0, b0, bias0 = a.copy(), b.copy(), bias.copy()
    simd.matmul_bias_gelu(a, b, bias)
    simd.fused_bias_gelu(a, np.ones(4, np.float32))
    assert (a == a0).all() and (b == b0).all() and (bias == bias0).all()


def test_out_buffers_are_filled_and_returned() -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((9, 20)).astype(np.float32)
    b = rng.standard_normal((20, 17)).astype(np.float32)
    bias = rng.standard_normal(17).astype(np.float32)
    out = np.full((9, 17), np.nan, np.float32)
    assert simd.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, atol=gemm_tol(a, b))
    assert simd.matmul_bias_gelu(a, b, bias, out=out) is out
    np.testing.assert_allclose(out, gelu64(a.astype(np.float64) @ b + bias), atol=1e-4)
    x = rng.standard_normal((9, 17)).astype(np.float32)
    ref = gelu64(x + bias)
    assert simd.fused_bias_gelu(x, bias, out=x) is x  # in place
    np.testing.assert_allclose(x, ref, atol=1e-6)


@pytest.mark.parametrize(
    "out,match",
    [
        (np.empty((3, 5), np.float64), "float32"),
        (np.empty((5, 3), np.float32), "shape"),
        (np.empty((3, 10), np.float32)[:, ::2], "contiguous"),
        ([[0.0] * 5] * 3, "ndarray"),
    ],
)
def test_bad_out_buffers_are_rejected(out: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        simd.matmul(np.ones((3, 4)), np.ones((4, 5)), out=out)


def test_out_overlapping_an_input_is_rejected() -> None:
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        simd.matmul(a, np.ones((4, 4), np.float32), out=a)
    x = np.ones((8, 4), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        simd.fused_bias_gelu(x[:4], np.ones(4, np.float32), out=x[2:6])  # partial overlap


def test_large_outputs_take_the_streaming_store_path_correctly() -> None:
    # >= 32 MiB of output switches to non-temporal stores; odd widths misalign every row start.
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4099, 2051)) * 3).astype(np.float32)
    bias = rng.standard_normal(2051).astype(np.float32)
    out = simd.fused_bias_gelu(x, bias, threads=2)
    sample = rng.integers(0, x.shape[0], 200)  # the float64 reference on a row sample is enough
    np.testing.assert_allclose(out[sample], gelu64(x[sample] + bias), atol=1e-6)
    big = rng.standard_normal(9_000_001).astype(np.float32)
    for start in (0, 1, 3):
        assert np.array_equal(simd.copy(big[start:], threads=2), big[start:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rows", "cols", "shift"),
    [(2_100_001, 5, 0), (524_289, 16, 1), (8_200, 1_024, 3), (4_097, 2_064, 0)],
)
def test_streaming_bias_gelu_wraps_the_bias_at_every_row_end(
    rows: int, cols: int, shift: int
) -> None:
    """The streaming loop runs whole 64-byte lines of Y over the flat index: a row narrower than a
    line (5), rows of exactly one line (16), and Y shifted off its 64-byte boundary by `shift`
    floats, so lines cross every row end at a different column."""
    rng = np.random.default_rng(rows)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)  # (rows, cols): >= 32 MiB
    bias = rng.standard_normal(cols).astype(np.float32)  # (cols,)
    buf = np.empty(rows * cols + 16, dtype=np.float32)
    out = buf[shift : shift + rows * cols].reshape(rows, cols)  # Y misaligned by `shift` floats
    simd.fused_bias_gelu(x, bias, threads=2, out=out)
    np.testing.assert_allclose(out, gelu64(x + bias), atol=1e-6)


def test_the_micro_kernel_alone_reports_a_rate_and_rejects_bad_slivers() -> None:
    """tito bench's 'micro-kernel alone' line: a positive, finite rate of the kernel the GEMM
    calls, on one thread; far under the FMA peak it would be a broken measurement."""
    rate = simd.ukernel_gflops(slivers=1, flops=2e8)
    assert math.isfinite(rate) and rate > 0
    assert simd.ukernel_gflops(slivers=21, flops=2e8) > 0
    with pytest.raises(ValueError, match="slivers must be an int >= 1"):
        simd.ukernel_gflops(slivers=0)
