"""The Part A registry: the 30 gate cases of Milestone 07, as data.

The CLI, the notebook, the headless grader and the tests all read `CASES`; none keeps its own copy.
Shapes are built from the tile size T so that "ragged" means ragged for every tile tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinytorch.compare import ELEMENTWISE_TOL, GEMM_TOL  # the float32 tolerances

FUNCTIONS = ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
# The autograd node whose apply(x, weight, bias, stride=, padding=) the backward check grades:
# the course's differentiable path (its im2col_conv2d is inference only).
CONV_FUNCTION = "Im2colConv2dFunction"
GRADED_NAMES = frozenset((*FUNCTIONS, CONV_FUNCTION))  # what a file must define to be graded
DEFAULT_IMPL = "tinytorch.perf.acceleration"  # the module graded when none is named: the reference
GROUPS = ("tiled_matmul", "fused_gelu", "im2col_conv2d", "col2im")


GROUP_INTRO = {
    "tiled_matmul": (
        "C = A @ B computed tile by tile: every block product is at most tile_size on M, K and N, "
        "the ragged last tile on each axis is covered, and the k-tiles accumulate into C."
    ),
    "fused_gelu": (
        "GELU, tanh approximation, 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), against the "
        "same formula in float64; finite for every finite float32."
    ),
    "im2col_conv2d": (
        "Convolution lowered to one GEMM: im2col(x) @ weight.reshape(F, -1).T + bias, against a "
        "direct float64 sliding-window convolution, with stride, padding and non-square inputs."
    ),
    "col2im": (
        "col2im(g) is the adjoint of im2col: <im2col(x), g> = <x, col2im(g)> for every x, so it "
        "scatter-ADDS each patch back to the pixels it came from, then crops the padding."
    ),
}

LESSONS = {
    "ragged": (
        "Cover the ragged last tile on every axis: loop `for i0 in range(0, M, tile_size)` and clip "
        "the end with `i1 = min(i0 + tile_size, M)` (same for N and K)."
    ),
    "accumulate": (
        "Accumulate the k-tiles: C[i0:i1, j0:j1] += A[i0:i1, k0:k1] @ B[k0:k1, j0:j1] "
        "(`+=`, not `=`), starting from zeros."
    ),
    "one_wide": (
        "1-wide matrices are still 2-D: keep shapes (1, K) and (K, 1); do not squeeze or assume "
        "M, N > 1."
    ),
    "k_one": "K=1 is an outer product: the loop over k must run once, with a tile of width 1.",
    "small": (
        "A matrix smaller than one tile is a single ragged tile: clip every tile end with min(...)."
    ),
    "gelu": (
        "Use the tanh approximation in float32 or float64: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + "
        "0.044715*x**3))), not the erf form, not float16."
    ),
    "gelu_range": (
        "Keep GELU finite for large |x|: np.tanh saturates safely; a hand-written tanh through "
        "exp(2u) overflows to inf/inf = NaN."
    ),
    "gelu_zero": "GELU(0) is exactly 0: no division by x, no log.",
    "conv": (
        "im2col columns are ordered (channel, kernel row, kernel col) to match "
        "weight.reshape(F, -1); rows (image, out row, out col); add the bias to every position."
    ),
    "conv_stride": (
        "With stride s the window for output (i, j) starts at (i*s, j*s): step the slices by s, "
        "and oh = (H + 2p - k) // s + 1."
    ),
    "conv_padding": "Pad both sides of H and W by `padding` before extracting windows.",
    "col2im": (
        "col2im scatter-ADDS (+=) each column back to its window, because windows overlap; then "
        "crops the padding to return (N, C, H, W)."
    ),
}


@dataclass(frozen=True)
class Case:
    """One gate case; `params` is JSON-serialisable and fully determines the inputs with a seed."""

    name: str
    group: str
    title: str
    lesson: str
    params: dict[str, Any]
    rtol: float = field(default=1e-4)
    atol: float = field(default=1e-3)
    label: str = ""  # its short name within the group ("ragged_all_axes"), for compact reports


def _matmul_cases() -> list[Case]:
    # (label, title, lesson, (m, k, n) as a function of the tile T)
    shapes = (
        ("multiple", "a multiple of the tile", "accumulate", lambda t: (2 * t, 3 * t, t)),
        ("ragged_all_axes", "ragged on M, K and N", "ragged", lambda t: (2 * t + 3, t + 5, t + 1)),
        ("m1_n1", "M=1 and N=1 (row @ column)", "one_wide", lambda t: (1, 2 * t + 3, 1)),
        ("k1", "K=1 (an outer product)", "k_one", lambda t: (2 * t + 3, 1, t + 2)),
        (
            "smaller_than_tile",
            "smaller than one tile",
            "small",
            lambda t: (t - 1, t // 2 + 1, t - 3),
        ),
        (
            "over_two_tiles",
            "more than two tiles on every axis, ragged remainders",
            "ragged",
            lambda t: (3 * t + 1, 2 * t + 5, 2 * t + 3),
        ),
    )
    cases = []
    for label, title, lesson, shape in shapes:
        for tile in (64, 16, 7):
            m, k, n = shape(tile)
            cases.append(
                Case(
                    name=f"tiled_matmul/{label}/tile{tile}",
                    group="tiled_matmul",
                    title=f"{title} ({m}x{k} @ {k}x{n}), tile {tile}",
                    lesson=LESSONS[lesson],
                    params={"m": m, "k": k, "n": n, "tile_size": tile},
                    rtol=GEMM_TOL[0],
                    atol=GEMM_TOL[1],
                    label=label,
                )
            )
    return cases


def _gelu_cases() -> list[Case]:
    specs = (
        (
            "normal_1d",
            "N(0, 1), 1-D, 1000 values",
            "gelu",
            {"dist": "normal", "scale": 1.0, "shape": [1000]},
        ),
        (
            "normal3_ragged_2d",
            "N(0, 3), ragged 2-D 37x129",
            "gelu",
            {"dist": "normal", "scale": 3.0, "shape": [37, 129]},
        ),
        (
            "linspace_20",
            "linspace over [-20, 20], 4001 values",
            "gelu_range",
            {"dist": "linspace", "low": -20.0, "high": 20.0, "shape": [4001]},
        ),
        ("zeros", "exact zeros, 8x9", "gelu_zero", {"dist": "zeros", "shape": [8, 9]}),
    )
    return [
        Case(
            name=f"fused_gelu/{label}",
            group="fused_gelu",
            title=title,
            lesson=LESSONS[lesson],
            params=params,
            rtol=ELEMENTWISE_TOL[0],
            atol=ELEMENTWISE_TOL[1],
            label=label,
        )
        for label, title, lesson, params in specs
    ]


# The four convolution geometries; col2im reuses them.
GEOMETRIES = (
    ("pad1", "3x3, padding 1", "conv_padding", {"x_shape": [2, 3, 8, 8], "out_channels": 4, "kernel_size": 3, "stride": 1, "padding": 1, "bias": True}),
    ("stride2_odd", "3x3, stride 2, no padding, odd 9x11 input", "conv_stride", {"x_shape": [2, 3, 9, 11], "out_channels": 5, "kernel_size": 3, "stride": 2, "padding": 0, "bias": True}),
    ("k2_nonsquare", "2x2 kernel on a non-square 6x9 input, no bias", "conv", {"x_shape": [1, 2, 6, 9], "out_channels": 3, "kernel_size": 2, "stride": 1, "padding": 0, "bias": False}),
    ("k5_pad2", "5x5 kernel, padding 2, 7x10 input", "conv_padding", {"x_shape": [2, 2, 7, 10], "out_channels": 3, "kernel_size": 5, "stride": 1, "padding": 2, "bias": True}),
)  # fmt: skip


def _conv_cases() -> list[Case]:
    return [
        Case(
            name=f"im2col_conv2d/{label}",
            group="im2col_conv2d",
            title=f"{title}, x {'x'.join(map(str, p['x_shape']))}",
            lesson=LESSONS[lesson] + " " + LESSONS["conv"] if lesson != "conv" else LESSONS["conv"],
            params=dict(p),
            rtol=GEMM_TOL[0],
            atol=GEMM_TOL[1],
            label=label,
        )
        for label, title, lesson, p in GEOMETRIES
    ]


def _col2im_cases() -> list[Case]:
    cases = []
    for label, title, _lesson, p in GEOMETRIES:
        params = {key: p[key] for key in ("x_shape", "kernel_size", "stride", "padding")}
        cases.append(
            Case(
                name=f"col2im/{label}",
                group="col2im",
                title=f"adjoint of im2col, {title}, x {'x'.join(map(str, p['x_shape']))}",
                lesson=LESSONS["col2im"],
                params=params,
                rtol=GEMM_TOL[0],
                atol=GEMM_TOL[1],
                label=label,
            )
        )
    return cases


CASES: tuple[Case, ...] = tuple(_matmul_cases() + _gelu_cases() + _conv_cases() + _col2im_cases())
CASES_BY_NAME: dict[str, Case] = {case.name: case for case in CASES}


# Grading mode: cases drawn per run from the secret seed, besides the published 30.
HIDDEN_PREFIX = "hidden/"
# im2col has no published group (the convolution and the layout check test it); its hidden
# cases go with the convolution's, which is built on it. Drawn last, so a seed still replays the
# hidden cases of the other groups as it did before they existed.
HIDDEN_GROUPS = (*GROUPS, "im2col")
HIDDEN_COUNTS = {"tiled_matmul": 6, "fused_gelu": 2, "im2col_conv2d": 3, "col2im": 3, "im2col": 2}
_HIDDEN_STREAM = 0x48494444  # "HIDD": keeps the hidden draw apart from the cases' own data


def _ragged(rng: np.random.Generator, tile: int, whole_tiles: int = 0) -> int:
    """An axis length that is never a multiple of the tile: now and then 1 (unless it must hold
    at least `whole_tiles` whole tiles), else from `whole_tiles` to 2 whole tiles, plus a rest."""
    if not whole_tiles and rng.random() < 0.08:
        return 1
    return int(tile * rng.integers(whole_tiles, 3) + rng.integers(1, tile))


MULTI_K_TILE_HIDDEN = 2  # the first hidden matmul cases span several k-tiles: they always catch
# a kernel that assigns each k-tile's product instead of adding it (K within one tile hides it)


def _hidden_matmul(rng: np.random.Generator, i: int) -> Case:
    tile = int(rng.integers(3, 41))
    m = _ragged(rng, tile)
    k = _ragged(rng, tile, whole_tiles=1 if i < MULTI_K_TILE_HIDDEN else 0)
    n = _ragged(rng, tile)
    lesson = "k_one" if k == 1 else "one_wide" if 1 in (m, n) else "ragged"
    return Case(
        name=f"{HIDDEN_PREFIX}tiled_matmul/{i}/{m}x{k}x{n}/tile{tile}",
        group="tiled_matmul",
        title=f"hidden: {m}x{k} @ {k}x{n}, tile {tile}",
        lesson=LESSONS[lesson],
        params={"m": m, "k": k, "n": n, "tile_size": tile},
        rtol=GEMM_TOL[0],
        atol=GEMM_TOL[1],
    )


def _hidden_gelu(rng: np.random.Generator, i: int) -> Case:
    shape = [int(d) for d in rng.integers(1, 60, size=int(rng.integers(1, 4)))]
    scale = float(rng.choice([1.0, 3.0, 10.0]))
    return Case(
        name=f"{HIDDEN_PREFIX}fused_gelu/{i}/{'x'.join(map(str, shape))}",
        group="fused_gelu",
        title=f"hidden: N(0, {scale:g}), shape {'x'.join(map(str, shape))}",
        lesson=LESSONS["gelu"],
        params={"dist": "normal", "scale": scale, "shape": shape},
        rtol=ELEMENTWISE_TOL[0],
        atol=ELEMENTWISE_TOL[1],
    )


def _hidden_geometry(rng: np.random.Generator) -> dict[str, Any]:
    k = int(rng.integers(1, 6))
    return {
        "x_shape": [
            int(rng.integers(1, 3)),
            int(rng.integers(1, 4)),
            int(rng.integers(k, 13)),
            int(rng.integers(k, 13)),
        ],
        "out_channels": int(rng.integers(1, 6)),
        "kernel_size": k,
        "stride": int(rng.integers(1, 4)),
        "padding": int(rng.integers(0, k)),
        "bias": bool(rng.integers(0, 2)),
    }


def _geometry_text(p: dict[str, Any]) -> str:
    x = "x".join(map(str, p["x_shape"]))
    return f"x {x}, k={p['kernel_size']}, stride={p['stride']}, padding={p['padding']}"


def _geometry_lesson(p: dict[str, Any]) -> str:
    """The lesson of a window geometry: stride or padding first when it has them, then layout."""
    lesson = "conv_stride" if p["stride"] > 1 else "conv_padding" if p["padding"] else "conv"
    return LESSONS[lesson] + " " + LESSONS["conv"] if lesson != "conv" else LESSONS["conv"]


def _hidden_conv(rng: np.random.Generator, i: int) -> Case:
    p = _hidden_geometry(rng)
    return Case(
        name=f"{HIDDEN_PREFIX}im2col_conv2d/{i}",
        group="im2col_conv2d",
        title=f"hidden: {p['out_channels']} filters, {_geometry_text(p)}, bias {p['bias']}",
        lesson=_geometry_lesson(p),
        params=p,
        rtol=GEMM_TOL[0],
        atol=GEMM_TOL[1],
    )


def _hidden_windows(rng: np.random.Generator) -> dict[str, Any]:
    """A geometry without the filters: what im2col and col2im take."""
    g = _hidden_geometry(rng)
    return {key: g[key] for key in ("x_shape", "kernel_size", "stride", "padding")}


def _hidden_im2col(rng: np.random.Generator, i: int) -> Case:
    p = _hidden_windows(rng)
    return Case(
        name=f"{HIDDEN_PREFIX}im2col/{i}",
        group="im2col",
        title=f"hidden: windows as rows, {_geometry_text(p)}",
        lesson=_geometry_lesson(p),
        params=p,
        rtol=ELEMENTWISE_TOL[0],  # a gather: each value copied, never summed
        atol=ELEMENTWISE_TOL[1],
    )


def _hidden_col2im(rng: np.random.Generator, i: int) -> Case:
    p = _hidden_windows(rng)
    return Case(
        name=f"{HIDDEN_PREFIX}col2im/{i}",
        group="col2im",
        title=f"hidden: adjoint of im2col, {_geometry_text(p)}",
        lesson=LESSONS["col2im"],
        params=p,
        rtol=GEMM_TOL[0],
        atol=GEMM_TOL[1],
    )


_HIDDEN_MAKERS = {
    "tiled_matmul": _hidden_matmul,
    "fused_gelu": _hidden_gelu,
    "im2col": _hidden_im2col,
    "im2col_conv2d": _hidden_conv,
    "col2im": _hidden_col2im,
}


def hidden_cases(seed: int, groups: Any = None) -> tuple[Case, ...]:
    """Grading mode's extra cases, drawn from `seed`: ragged shapes and tiles no published case has.

    Same seed, same cases (a report's seed replays them); `groups` limits them to those groups
    (im2col's come with im2col_conv2d's).
    """
    rng = np.random.default_rng([seed, _HIDDEN_STREAM])
    published = [c.params for c in CASES]
    out: list[Case] = []
    for group in HIDDEN_GROUPS:
        for i in range(HIDDEN_COUNTS[group]):
            case = _HIDDEN_MAKERS[group](rng, i)
            while case.params in published:  # never one of the published problems
                case = _HIDDEN_MAKERS[group](rng, i)
            out.append(case)
    wanted = set(HIDDEN_GROUPS if groups is None else groups)
    if "im2col_conv2d" in wanted:
        wanted.add("im2col")
    return tuple(c for c in out if c.group in wanted)


def group_function(group: str) -> str:
    """The student function a group's cases call (each group is named after it)."""
    return group


def select_cases(names: Any = None) -> tuple[Case, ...]:
    """The cases named in `names` (a case name or a group name each), in registry order."""
    if names is None:
        return CASES
    if isinstance(names, str):
        names = [names]
    wanted = set(names)
    unknown = wanted - set(CASES_BY_NAME) - set(GROUPS)
    if unknown:
        raise ValueError(
            f"cases: unknown case or group name(s) {sorted(unknown)}; "
            f"groups are {list(GROUPS)}, case names look like {CASES[0].name!r}"
        )
    return tuple(c for c in CASES if c.name in wanted or c.group in wanted)
