"""tiled_matmul against a float64 NumPy product, on shapes that break naive tilings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinytorch.core.tensor import Tensor
from tinytorch.perf.acceleration import tiled_matmul

U32 = 2.0**-24  # float32 unit roundoff


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def assert_matches_reference(c: Tensor, a: np.ndarray, b: np.ndarray) -> None:
    """Within the float32 dot-product bound |err| <= (K + 2) u (|A| @ |B|), shape and dtype first."""
    assert isinstance(c, Tensor)
    assert c.shape == (a.shape[0], b.shape[1])
    assert c.dtype == np.float32
    bound = (a.shape[1] + 2) * U32 * (np.abs(a).astype(np.float64) @ np.abs(b))
    err = np.abs(c.data - reference(a, b))
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), f"error {err[worst]:.3g} > bound {bound[worst]:.3g} at {worst}"


def random_pair(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )


@given(
    m=st.integers(1, 70),
    k=st.integers(1, 70),
    n=st.integers(1, 70),
    tile=st.integers(1, 80),
    seed=st.integers(0, 2**16),
)
def test_matches_numpy_on_any_shape_and_tile(m, k, n, tile, seed):
    a, b = random_pair(m, k, n, seed)
    assert_matches_reference(tiled_matmul(a, b, tile), a, b)


@pytest.mark.parametrize(
    "m, k, n, tile",
    [
        (1, 1, 1, 64),  # everything 1
        (1, 130, 1, 64),  # dot product, ragged K
        (130, 1, 67, 64),  # K = 1: a single k-tile, outer product
        (65, 65, 65, 64),  # one element past the tile on every axis
        (63, 129, 31, 64),  # ragged on every axis, different per axis
        (7, 5, 3, 100),  # tile larger than the matrix
        (33, 17, 9, 1),  # tile of 1: scalar products
        (128, 128, 128, 32),  # exact multiples
        (257, 131, 190, 64),  # large enough to be shared among threads, ragged everywhere
        (300, 300, 1, 128),  # N = 1 on the threaded path
    ],
)
def test_named_awkward_shapes(m, k, n, tile):
    a, b = random_pair(m, k, n)
    assert_matches_reference(tiled_matmul(a, b, tile), a, b)


def test_default_tile_size_is_64():
    a, b = random_pair(130, 70, 65)
    assert_matches_reference(tiled_matmul(a, b), a, b)


class MatmulRecorder:
    """Wraps np.matmul and records the shapes of every block product."""

    def __init__(self, original):
        self.original = original
        self.calls: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __call__(self, x, y, *args, **kwargs):
        self.calls.append((np.shape(x), np.shape(y)))
        return self.original(x, y, *args, **kwargs)


@pytest.mark.parametrize(
    "m, k, n, tile",
    [
        (70, 45, 33, 16),  # small: one thread
        (5, 9, 200, 64),
        (64, 64, 64, 64),
        (150, 97, 130, 32),  # enough work for several threads sharing the output tiles
        (300, 20, 301, 100),
    ],
)
def test_is_really_tiled(monkeypatch, m, k, n, tile):
    """Every block product is <= tile on M, N and K, and there is one per (i, j, k) tile triple."""
    recorder = MatmulRecorder(np.matmul)
    monkeypatch.setattr(np, "matmul", recorder)
    a, b = random_pair(m, k, n)
    c = tiled_matmul(a, b, tile)
    monkeypatch.undo()
    assert_matches_reference(c, a, b)
    for shape_a, shape_b in recorder.calls:
        (bm, bk), (bk2, bn) = shape_a, shape_b
        assert bk == bk2
        assert max(bm, bk, bn) <= tile, f"block product {shape_a} @ {shape_b} exceeds tile {tile}"
    tiles = math.ceil(m / tile) * math.ceil(n / tile) * math.ceil(k / tile)
    assert len(recorder.calls) == tiles
    # The block products cover the whole iteration space M x N x K exactly once.
    volume = sum(sa[0] * sa[1] * sb[1] for sa, sb in recorder.calls)
    assert volume == m * n * k


def test_accepts_tensors_lists_and_float64_and_returns_float32():
    a, b = random_pair(9, 7, 5)
    via_tensor = tiled_matmul(Tensor(a), Tensor(b), 4)
    via_list = tiled_matmul(a.tolist(), b.tolist(), 4)
    via_f64 = tiled_matmul(a.astype(np.float64), b.astype(np.float64), 4)
    for c in (via_tensor, via_list, via_f64):
        assert_matches_reference(c, a, b)


def test_non_contiguous_inputs():
    a, b = random_pair(40, 30, 20)
    at = np.asfortranarray(a)  # column-major
    bt = np.ascontiguousarray(b.T).T  # a transposed view
    strided = np.repeat(a, 2, axis=1)[:, ::2]  # every other column
    assert_matches_reference(tiled_matmul(at, bt, 8), a, b)
    assert_matches_reference(tiled_matmul(strided, b, 8), a, b)


def test_inputs_are_not_mutated():
    a, b = random_pair(33, 21, 17)
    a0, b0 = a.copy(), b.copy()
    ta, tb = Tensor(a), Tensor(b)
    tiled_matmul(ta, tb, 8)
    tiled_matmul(a, b, 8)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    np.testing.assert_array_equal(ta.data, a0)
    np.testing.assert_array_equal(tb.data, b0)


def test_result_does_not_alias_inputs():
    a, b = random_pair(8, 8, 8)
    c = tiled_matmul(a, b, 8)
    assert not np.shares_memory(c.data, a) and not np.shares_memory(c.data, b)


@pytest.mark.parametrize(
    "a_shape, b_shape, tile, error, name",
    [
        ((3,), (3, 2), 4, ValueError, "a must be 2-D"),
        ((2, 3, 1), (3, 2), 4, ValueError, "a must be 2-D"),
        ((2, 3), (3,), 4, ValueError, "b must be 2-D"),
        ((2, 3), (4, 2), 4, ValueError, "inner dimensions"),
        ((2, 3), (3, 2), 0, ValueError, "tile_size"),
        ((2, 3), (3, 2), -8, ValueError, "tile_size"),
        ((2, 3), (3, 2), 2.0, ValueError, "tile_size"),
        ((2, 3), (3, 2), True, ValueError, "tile_size"),
        ((2, 3), (3, 2), "64", ValueError, "tile_size"),
        ((2, 3), (3, 2), None, ValueError, "tile_size"),
    ],
)
def test_bad_arguments_raise_clear_errors(a_shape, b_shape, tile, error, name):
    with pytest.raises(error, match=name):
        tiled_matmul(np.ones(a_shape), np.ones(b_shape), tile)


def test_non_numeric_input_names_the_argument():
    with pytest.raises(TypeError, match="tiled_matmul: b"):
        tiled_matmul(np.ones((2, 2)), [["x", "y"], ["z", "w"]])


def test_numpy_integer_tile_size_is_accepted():
    a, b = random_pair(10, 10, 10)
    assert_matches_reference(tiled_matmul(a, b, np.int64(3)), a, b)


def test_concurrent_calls_from_several_threads():
    """Threads calling tiled_matmul at once each get their own correct product."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = [random_pair(120 + i, 90 + 3 * i, 100 - i, seed=i) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ab: tiled_matmul(ab[0], ab[1], 32), pairs))
    for c, (a, b) in zip(results, pairs, strict=True):
        assert_matches_reference(c, a, b)
