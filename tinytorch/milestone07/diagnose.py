"""Turn a wrong answer into the lesson that fixes it, by testing the usual bugs against the output."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.milestone07.cases import LESSONS, Case
from tinytorch.milestone07.references import out_size, ref_col2im


def _close(out: np.ndarray, guess: np.ndarray, case: Case) -> bool:
    if out.shape != guess.shape:
        return False
    return bool(np.all(np.abs(out - guess) <= case.atol + case.rtol * np.abs(guess)))


def _matmul(case: Case, args: list[Any], out: np.ndarray, ref: np.ndarray) -> str:
    a, b = (x.astype(np.float64) for x in args[:2])
    t = case.params["tile_size"]
    m, k = a.shape
    n = b.shape[1]
    if out.shape != ref.shape:
        return f"Return C with shape (M, N) = ({m}, {n})."
    bad = np.abs(out - ref) > case.atol + case.rtol * np.abs(ref)
    hints = []
    if m > t and m % t and bad[m - m % t :].all() and not bad[: m - m % t].any():
        hints.append(f"rows {m - m % t}..{m - 1} (the ragged last tile on M) are wrong")
    if n > t and n % t and bad[:, n - n % t :].all() and not bad[:, : n - n % t].any():
        hints.append(f"columns {n - n % t}..{n - 1} (the ragged last tile on N) are wrong")
    if k % t and _close(out, a[:, : k - k % t] @ b[: k - k % t], case):  # zeros when K < tile
        hints.append("the result leaves out the ragged last k-tile")
    if hints:
        text = "; ".join(hints)
        return text[0].upper() + text[1:] + ". " + LESSONS["ragged"]
    last = (k - 1) // t * t
    if k > t and _close(out, a[:, last:] @ b[last:], case):
        return (
            "C holds only the last k-tile's product: it is assigned, not accumulated. "
            + (LESSONS["accumulate"])
        )
    return case.lesson


def _gelu(case: Case, args: list[Any], out: np.ndarray, ref: np.ndarray) -> str:
    import math

    x = args[0].astype(np.float64)
    if out.shape != ref.shape:
        return "Return the same shape as x: GELU is elementwise."
    if not np.isfinite(out).all():
        return LESSONS["gelu_range"]
    erf = np.vectorize(math.erf, otypes=[np.float64])
    if _close(out, 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))), case):
        return (
            "This is the exact erf GELU; the gate wants the tanh approximation. " + LESSONS["gelu"]
        )
    big = np.abs(ref) > 1e-2
    rel = np.abs(out - ref)[big] / np.abs(ref)[big]
    if big.any() and 1e-4 < float(np.median(rel)) < 5e-3:  # float16 has a 2^-11 mantissa step
        return (
            "The error looks like float16 rounding: compute in float32 or float64. "
            + LESSONS["gelu"]
        )
    return case.lesson


def _conv(
    case: Case, args: list[Any], kwargs: dict[str, Any], out: np.ndarray, ref: np.ndarray
) -> str:
    x, w, bias = args
    s, p = kwargs["stride"], kwargs["padding"]
    if out.shape != ref.shape:
        h = x.shape[2]
        k = w.shape[-1]
        return (
            f"Output must be (N, F, oh, ow) = {ref.shape}: oh = (H + 2p - k) // s + 1 = "
            f"({h} + {2 * p} - {k}) // {s} + 1 = {out_size(h, k, s, p)}. " + case.lesson
        )
    if bias is not None and _close(out, ref - bias.astype(np.float64)[None, :, None, None], case):
        return "The bias is missing: add bias[f] to every output position of filter f."
    return case.lesson


def _col2im(
    case: Case, args: list[Any], kwargs: dict[str, Any], out: np.ndarray, ref: np.ndarray
) -> str:
    x_shape, k = args[1], args[2]
    s, p = kwargs["stride"], kwargs["padding"]
    n, c, h, w = x_shape
    if out.shape == (n, c, h + 2 * p, w + 2 * p) and p:
        return (
            "The output still carries the padding: crop it, xp[:, :, p:p+H, p:p+W]. " + case.lesson
        )
    if out.shape != ref.shape:
        return f"col2im returns the input's shape x_shape = {tuple(x_shape)}. " + case.lesson
    rows = args[0].shape[0]
    cover = ref_col2im(np.ones((rows, c * k * k)), x_shape, k, s, p)
    bad = np.abs(out - ref) > case.atol + case.rtol * np.abs(ref)
    if bad.any() and (cover[bad] > 1).all():
        return (
            "Only pixels covered by several windows are wrong: overlapping patches must ADD. "
            + (case.lesson)
        )
    return case.lesson


def lesson_for(case: Case, args: list[Any], kwargs: dict[str, Any], out: np.ndarray) -> str:
    """The most specific lesson for a wrong (but well-formed) output."""
    from tinytorch.milestone07.references import reference

    out = out.astype(np.float64)
    ref = reference(case, args, kwargs)
    try:
        if case.group == "tiled_matmul":
            return _matmul(case, args, out, ref)
        if case.group == "fused_gelu":
            return _gelu(case, args, out, ref)
        if case.group == "im2col_conv2d":
            return _conv(case, args, kwargs, out, ref)
        if case.group == "col2im":
            return _col2im(case, args, kwargs, out, ref)
    except (ValueError, IndexError, FloatingPointError):  # a hint is a bonus, never a crash
        pass
    return case.lesson
