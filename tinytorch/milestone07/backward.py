"""The backward check: grad x, grad weight and grad bias of the student's Im2colConv2dFunction.

The 30 gate cases grade the forward pass only. This check grades the course's differentiable
path: it asks the sandbox to run `Im2colConv2dFunction.apply(x, weight, bias, stride=...,
padding=...)` on Tensors that require grad and then `out.backward(g)` (the "grad" request), and
compares the three gradients with float64 references on geometries that
catch the usual bugs: stride 2 with padding (overlaps and the crop), a non-square input (square
kernels, as the gate's cases use), no bias, and a stride larger than the kernel (pixels that no
window covers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.compare import all_within, compare, within
from tinytorch.milestone07.calls import StudentCalls, broken_check
from tinytorch.milestone07.cases import CONV_FUNCTION
from tinytorch.milestone07.references import out_size, ref_col2im, ref_conv2d_grads
from tinytorch.milestone07.results import CheckResult

NAME, FN = "backward", "im2col_conv2d"  # FN: the graded function the check's failures blame
CALL = f"{CONV_FUNCTION}.apply"  # what the check calls: the course's differentiable path
BACKWARD_STUB = f"{CONV_FUNCTION}.backward"
# (x shape, weight shape, stride, padding, bias?)
GEOMETRIES = (
    ((2, 3, 7, 7), (4, 3, 3, 3), 2, 1, True),  # stride 2 + padding: overlaps, crop
    ((1, 2, 6, 9), (3, 2, 3, 3), 1, 0, True),  # non-square input
    ((2, 2, 5, 6), (3, 2, 3, 3), 1, 2, False),  # no bias, wide padding
    ((1, 1, 8, 7), (2, 1, 2, 2), 3, 0, True),  # stride > kernel: gaps nobody covers
)
GRAD_TOL = (1e-4, 1e-4)  # (rtol, atol): a few float32 sums of O(10) products each

LESSONS = {
    "x": (
        "In Im2colConv2dFunction.backward, grad x must scatter-ADD through col2im: dcols = g2 @ W2 with g2 = grad_output as "
        "(N*oh*ow, O), then col2im(dcols) adds (+=) every column back to its window, because "
        "windows overlap; crop the padding. (If col2im fails its own cases, fix it first.)"
    ),
    "weight": (
        "In Im2colConv2dFunction.backward, grad weight = g2.T @ cols (O, C*kh*kw), summed over every output position of every "
        "image, reshaped to weight.shape: not transposed, not averaged, not scaled."
    ),
    "bias": (
        "Im2colConv2dFunction.backward returns one gradient per input: grad bias = grad_output.sum(axis=(0, 2, 3)), "
        "shape (O,), and None only when there is no bias."
    ),
    "graph": (
        "Im2colConv2dFunction.apply(x, weight, bias, stride=..., padding=...) must return the "
        "Tensor that Function.apply makes (it records the node), so that backward() reaches your "
        "Function's backward. (im2col_conv2d itself may stay inference only, as in the course.)"
    ),
    "forward": (
        "Im2colConv2dFunction.apply raised before backward ran, on inputs that require grad (the "
        "gate's cases call im2col_conv2d on inputs that do not, and one geometry here has no "
        "bias): forward gets the arrays from Function.apply and must work whatever "
        "requires_grad is. Fix the error named."
    ),
    "gradients": (
        "backward returns one gradient per input of apply, in order, each of its input's shape: "
        "(grad x (N, C, H, W), grad weight (O, C, kh, kw), grad bias (O,), or None when there is "
        "no bias)."
    ),
    "backward": (
        "backward raised. From grad_output (N, O, oh, ow): g2 = grad_output as (N*oh*ow, O); "
        "grad weight = g2.T @ cols reshaped to weight.shape; grad x = col2im(g2 @ W2) with "
        "W2 = weight as (O, C*kh*kw); grad bias = g2.sum(axis=0). Fix the error named."
    ),
}
# What our autograd says (core/autograd.py:backward_pass) when backward's gradients do not fit.
_GRADIENTS_MISFIT = ".backward returned"

TITLES = {"x": "grad x", "weight": "grad weight", "bias": "grad bias"}


def _inputs(
    rng: np.random.Generator, x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: int,
    padding: int, with_bias: bool,
) -> tuple[list[Any], np.ndarray]:  # fmt: skip
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / w_shape[-1]).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32) if with_bias else None
    oh = (x_shape[2] + 2 * padding - w_shape[2]) // stride + 1
    ow = (x_shape[3] + 2 * padding - w_shape[3]) // stride + 1
    g = rng.standard_normal((x_shape[0], w_shape[0], oh, ow)).astype(np.float32)
    return [x, w, b], g


def backward_check(calls: StudentCalls, seed: int, grading: bool = False) -> CheckResult:
    """grad x, grad weight, grad bias through Im2colConv2dFunction.apply against float64, on four
    geometries."""
    rng = np.random.default_rng([seed, 31])
    for x_shape, w_shape, stride, padding, with_bias in GEOMETRIES:
        args, g = _inputs(rng, x_shape, w_shape, stride, padding, with_bias)
        where = f"x {x_shape}, weight {w_shape}, stride {stride}, padding {padding}" + (
            "" if with_bias else ", no bias"
        )
        kwargs = {"stride": stride, "padding": padding}
        reply = calls.call(CALL, args, kwargs, label=f"backward {where}", grad=g)
        failed = _failed_reply(calls, reply, where)
        if failed is not None:
            return failed
        grads = list(reply.get("grads") or [None, None, None])
        refs = ref_conv2d_grads(args[0], args[1], with_bias, g, stride, padding)
        for key, got, ref in zip(("x", "weight", "bias"), grads, refs, strict=False):
            if ref is None:
                continue
            title = TITLES[key]
            if got is None:
                detail = f"{where}: {title} is missing (backward returned None for it)"
                return CheckResult(NAME, "fail", detail, LESSONS[key], [FN])
            cmp = compare(got, ref, rtol=GRAD_TOL[0], atol=GRAD_TOL[1])
            if not cmp.ok:
                cover = _coverage(x_shape, w_shape[2], stride, padding) if key == "x" else None
                detail = (
                    f"{where}: {title} is wrong: {cmp.detail}{_diagnosis(key, got, ref, cover)}"
                )
                return CheckResult(NAME, "fail", detail, LESSONS[key], [FN])
    detail = f"grad x, grad weight and grad bias match float64 on {len(GEOMETRIES)} geometries"
    return CheckResult(NAME, "pass", detail, "", [])


def _failed_reply(calls: StudentCalls, reply: dict[str, Any], where: str) -> CheckResult | None:
    status = reply["status"]
    if status == "ok":
        return None
    if status == "not_implemented":
        place = reply.get("stub") or (
            BACKWARD_STUB if reply.get("phase") == "backward" else f"{CONV_FUNCTION}.forward"
        )
        calls.seen.not_implemented.setdefault(place, reply.get("error", "NotImplementedError"))
        return CheckResult(NAME, "incomplete", f"{place} is not written yet", "", [FN])
    if status == "raised":
        error = reply.get("error", "")
        return CheckResult(NAME, "fail", f"{where}: raised {error}", raised_lesson(reply), [FN])
    if status == "not_tensor":
        detail = f"{where}: returned a {reply.get('type')}, expected a Tensor"
        return CheckResult(NAME, "fail", detail, LESSONS["graph"], [FN])
    # A hang, a crash, a broken channel, or a call skipped after them: the same statuses and
    # lessons as every deeper check's.
    broken = broken_check(
        NAME, FN, reply, ""
    )  # blamed on the convolution, as every backward failure
    broken.detail = f"{where}: {broken.detail}"
    return broken


def raised_lesson(reply: dict[str, Any]) -> str:
    """The lesson for a call that raised, by where (reply["phase"]) and what it said."""
    error = str(reply.get("error", ""))
    if "does not require grad" in error:  # Tensor.backward on a result without a graph
        return LESSONS["graph"]
    if reply.get("phase") == "forward":
        return LESSONS["forward"]
    if _GRADIENTS_MISFIT in error:  # the wrong number of gradients, or one of the wrong shape
        return LESSONS["gradients"]
    return LESSONS["backward"]


def _coverage(x_shape: tuple[int, ...], k: int, stride: int, padding: int) -> np.ndarray:
    """How many windows cover each pixel of x (N, C, H, W)."""
    n, c, h, w = x_shape
    rows = n * out_size(h, k, stride, padding) * out_size(w, k, stride, padding)
    return ref_col2im(np.ones((rows, c * k * k)), x_shape, k, stride, padding)


def _diagnosis(key: str, got: np.ndarray, ref: np.ndarray, cover: np.ndarray | None) -> str:
    """A short guess at the bug, from how the wrong gradient relates to the right one."""
    if got.shape != ref.shape:
        return ""
    close = within(got, ref, rtol=GRAD_TOL[0], atol=GRAD_TOL[1])
    if cover is not None and close[cover <= 1].all() and not close[cover > 1].all():
        return (
            " (right where one window covers a pixel, wrong where windows overlap: the "
            "overlapping contributions were assigned (=), not added (+=))"
        )
    scale = float(np.vdot(got.astype(np.float64).ravel(), ref.ravel())) / max(
        float(np.vdot(ref.ravel(), ref.ravel())), 1e-30
    )
    if abs(scale - 1.0) > 1e-3 and all_within(got, scale * ref, rtol=1e-3, atol=1e-4):
        return f" (it is {scale:.3g} times the right one)"
    if key == "weight":
        o = ref.shape[0]
        flipped = ref.reshape(o, -1).T.reshape(-1)  # (C*kh*kw, O) read as if it were (O, ...)
        if all_within(got.reshape(-1), flipped, rtol=1e-3, atol=1e-4):
            return " (it is cols.T @ g2, transposed: (C*kh*kw, O) reshaped as (O, C, kh, kw))"
    return ""
