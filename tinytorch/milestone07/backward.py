"""The backward check: the output, grad x, grad weight and grad bias of Im2colConv2dFunction.

The 30 gate cases grade the forward pass of im2col_conv2d only. This check grades the course's
differentiable path: it asks the sandbox to run `Im2colConv2dFunction.apply(x, weight, bias,
stride=..., padding=...)` on Tensors that require grad and then `out.backward(g)` (the "grad"
request), and compares the output and the three gradients with float64 references, on geometries
that catch the usual bugs: stride 2 with padding (overlaps and the crop), a non-square input
(square kernels, as the gate's cases use), no bias, and a stride larger than the kernel (pixels
that no window covers).

Practice runs the four published GEOMETRIES. Grading adds HIDDEN_COUNT geometries drawn from the
run's secret seed (`hidden_geometries`: stride 2 with padding on odd sizes, no bias, gaps; never a
published input shape), in an order drawn from the same seed, so a backward special-cased on the
published geometries, or on the order of its calls, fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.compare import GEMM_TOL, all_within, compare, within
from tinytorch.milestone07.calls import StudentCalls, broken_check
from tinytorch.milestone07.cases import CASES, CONV_FUNCTION, Case
from tinytorch.milestone07.diagnose import lesson_for
from tinytorch.milestone07.references import (
    out_size,
    ref_col2im,
    ref_conv2d,
    ref_conv2d_grads,
)
from tinytorch.milestone07.results import CheckResult

NAME, FN = "backward", "im2col_conv2d"  # FN: the graded function the check's failures blame
CALL = f"{CONV_FUNCTION}.apply"  # what the check calls: the course's differentiable path
BACKWARD_STUB = f"{CONV_FUNCTION}.backward"
# (x shape, weight shape, stride, padding, bias?)
Geometry = tuple[tuple[int, int, int, int], tuple[int, int, int, int], int, int, bool]
GEOMETRIES: tuple[Geometry, ...] = (
    ((2, 3, 7, 7), (4, 3, 3, 3), 2, 1, True),  # stride 2 + padding: overlaps, crop
    ((1, 2, 6, 9), (3, 2, 3, 3), 1, 0, True),  # non-square input
    ((2, 2, 5, 6), (3, 2, 3, 3), 1, 2, False),  # no bias, wide padding
    ((1, 1, 8, 7), (2, 1, 2, 2), 3, 0, True),  # stride > kernel: gaps nobody covers
)
GRAD_TOL = (1e-4, 1e-4)  # (rtol, atol): a few float32 sums of O(10) products each
OUT_TOL = GEMM_TOL  # the output of apply: the same convolution the gate's cases grade

# Grading mode: geometries drawn from the secret seed, besides the published four.
HIDDEN_COUNT = 3
HIDDEN_KINDS = ("stride2_padded", "no_bias", "gaps")  # one draw of each, in this order
_HIDDEN_STREAM = 0x4257_4B44  # "BWKD": apart from the data, the hidden cases and the call order
_ORDER_STREAM = 0x4257_4F52  # "BWOR": the order the published and hidden geometries run in
_DATA_STREAM = 31  # the inputs and grad_output of every geometry (practice's seed 0 replays)

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
    "output": (
        "Im2colConv2dFunction.apply must return the convolution itself, as im2col_conv2d does: "
        "forward(x, weight, bias) = im2col(x) @ weight.reshape(O, -1).T (+ bias), reshaped to "
        "(N, oh, ow, O) and transposed to (N, O, oh, ow). A right backward does not make up for "
        "a wrong or empty forward."
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


def _published_shapes() -> set[tuple[int, ...]]:
    """The input shapes any published problem uses: this check's and the gate's convolutions."""
    shapes = {x_shape for x_shape, *_ in GEOMETRIES}
    shapes |= {tuple(c.params["x_shape"]) for c in CASES if "x_shape" in c.params}
    return shapes


def _odd(rng: np.random.Generator, low: int, high: int) -> int:
    """An odd size in [low, high] (low <= high, the range holds an odd number)."""
    return int(rng.choice([v for v in range(low, high + 1) if v % 2]))


def _draw(rng: np.random.Generator, kind: str) -> Geometry:
    """One hidden geometry of `kind` (HIDDEN_KINDS): square kernels, odd non-square inputs."""
    k = int(rng.integers(3 if kind == "stride2_padded" else 2, 5))  # 2..4
    if kind == "stride2_padded":  # k > stride: overlapping windows, and a crop on both sides
        stride, padding, bias = 2, int(rng.integers(1, k)), bool(rng.integers(0, 2))
    elif kind == "no_bias":  # backward's gradient for a None input
        stride, padding, bias = int(rng.integers(1, 4)), int(rng.integers(0, k)), False
    else:  # "gaps": a stride larger than the kernel leaves pixels no window covers
        stride, padding, bias = k + int(rng.integers(1, 3)), int(rng.integers(0, k)), True
    h = _odd(rng, k + 2 if k % 2 else k + 1, 13)
    w = h
    while w == h:
        w = _odd(rng, k + 2 if k % 2 else k + 1, 13)
    n, c, o = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    return (n, c, h, w), (o, c, k, k), stride, padding, bias


def hidden_geometries(seed: int) -> tuple[Geometry, ...]:
    """Grading mode's backward geometries, drawn from `seed`: one of each of HIDDEN_KINDS
    (stride 2 with padding, no bias, a stride past the kernel), odd and non-square, and never an
    input shape a published problem uses. Same seed, same geometries (a report's seed replays)."""
    rng = np.random.default_rng([seed, _HIDDEN_STREAM])
    published = _published_shapes()
    out = []
    for kind in HIDDEN_KINDS:
        geometry = _draw(rng, kind)
        while geometry[0] in published:
            geometry = _draw(rng, kind)
        out.append(geometry)
    return tuple(out)


def geometries(seed: int, grading: bool) -> list[tuple[Geometry, bool]]:
    """(geometry, hidden?) in the order the check runs them: the published four in practice;
    when grading, the hidden ones among them, in an order drawn from the secret seed."""
    todo = [(g, False) for g in GEOMETRIES]
    if grading:
        todo += [(g, True) for g in hidden_geometries(seed)]
        order = np.random.default_rng([seed, _ORDER_STREAM]).permutation(len(todo))
        todo = [todo[int(i)] for i in order]
    return todo


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


def _where(geometry: Geometry, hidden: bool) -> str:
    x_shape, w_shape, stride, padding, with_bias = geometry
    text = f"x {x_shape}, weight {w_shape}, stride {stride}, padding {padding}"
    return ("hidden: " if hidden else "") + text + ("" if with_bias else ", no bias")


def backward_check(calls: StudentCalls, seed: int, grading: bool = False) -> CheckResult:
    """The output of Im2colConv2dFunction.apply, then grad x, grad weight and grad bias, against
    float64: on the four published geometries, and when grading on hidden ones as well."""
    rng = np.random.default_rng([seed, _DATA_STREAM])
    todo = geometries(seed, grading)
    for geometry, hidden in todo:
        x_shape, w_shape, stride, padding, with_bias = geometry
        args, g = _inputs(rng, x_shape, w_shape, stride, padding, with_bias)
        where = _where(geometry, hidden)
        kwargs = {"stride": stride, "padding": padding}
        reply = calls.call(CALL, args, kwargs, label=f"backward {where}", grad=g)
        failed = _failed_reply(calls, reply, where)
        if failed is not None:
            return failed
        out_ref = ref_conv2d(args[0], args[1], args[2], stride, padding)  # (N, O, oh, ow)
        cmp = compare(reply.get("output"), out_ref, rtol=OUT_TOL[0], atol=OUT_TOL[1])
        if not cmp.ok:
            return _wrong_output(where, args, kwargs, reply.get("output"), cmp)
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
    hidden = sum(h for _, h in todo)
    detail = (
        f"the output, grad x, grad weight and grad bias match float64 on {len(todo)} geometries"
        + (f" ({hidden} of them hidden, drawn from the run's seed)" if hidden else "")
    )
    return CheckResult(NAME, "pass", detail, "", [])


def _wrong_output(
    where: str, args: list[Any], kwargs: dict[str, Any], out: Any, cmp: Any
) -> CheckResult:
    """A wrong output of apply, with the gate's own diagnosis of a wrong convolution (a missing
    bias, an im2col bug, the wrong shape) when one fits: then it names the cause of the failing
    im2col_conv2d cases too. Otherwise (zeros, noise) the cases keep their own lessons."""
    detail = f"{where}: the output of {CALL} is wrong: {cmp.detail}"
    lesson, named = LESSONS["output"], False
    if isinstance(out, np.ndarray) and out.dtype.kind == "f" and cmp.reason != "dtype":
        case = Case(f"backward/{where}", FN, where, LESSONS["output"], {}, OUT_TOL[0], OUT_TOL[1])
        specific = lesson_for(case, args, kwargs, out)
        if specific != case.lesson:
            said = specific[:1].lower() + specific[1:]
            lesson, named = f"In {CONV_FUNCTION}.forward (what apply returns): {said}", True
    return CheckResult(NAME, "fail", detail, lesson, [FN], names_cause=named)


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
