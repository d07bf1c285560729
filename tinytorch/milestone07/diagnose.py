"""The diagnosis of a run: the root cause first, then each distinct lesson once, with its cases.

Two layers, both here so that every renderer tells the same story:
- `lesson_for` turns one wrong output into its most specific lesson, by testing the usual bugs;
- `diagnose` reads a whole run (cases and deeper checks) and returns a `Diagnosis`: the failing
  deeper checks that explain a group's failures lead, those cases point to them, a lesson that a
  passing check contradicts is replaced, identical lessons collapse into one with their cases.
The terminal report, the notebook tables, `tito grade`'s summary and the JSON ("diagnosis") all
read the Diagnosis; none re-derives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tinytorch.milestone07.cases import HIDDEN_GROUPS, LESSONS, Case
from tinytorch.milestone07.references import out_size, ref_col2im

# Lessons of failures that are not a wrong answer: the kernel never gave one.
FAILURE_LESSONS = {
    "timeout": (
        "No answer within the time limit: look for a loop that never ends (a range step of 0, a "
        "while loop whose index never moves) or one Python-level step per element."
    ),
    "crash": (
        "The process running your code died (a segfault, os._exit or sys.exit): do not exit, and "
        "check any native code or ctypes call with these shapes."
    ),
    "protocol": (
        "Your code broke the grader's channel to it (a reply it did not send, or one it could not "
        "read): leave the file descriptors you did not open alone, and return a Tensor."
    ),
    "not_tensor": "Return a Tensor: wrap the result array, `return Tensor(result)`.",
    "unloadable": "Fix the module so that it imports: run `python your_file.py` to see the error.",
    "skipped": ("Not run, because this function's previous calls hung or crashed: fix that first."),
}

_ADD_HINT = "Only pixels covered by several windows are wrong: overlapping patches must ADD. "

# A deeper check that PASSED rules out these phrases: (check name, phrases, what to say instead).
CONTRADICTED = (
    (
        "col2im coverage",
        (_ADD_HINT, LESSONS["col2im"]),
        (
            "col2im adds overlapping windows correctly (the coverage check passes): look at the "
            "order in which it reads each row's columns, (channel, kernel row, kernel col), and "
            "the rows, (image, out row, out col)."
        ),
    ),
    (
        "im2col layout",
        (LESSONS["conv_padding"], LESSONS["conv_stride"], LESSONS["conv"]),
        (
            "im2col passes its layout check (padding, stride and column order are right): look at "
            "the GEMM step, cols @ weight.reshape(F, -1).T, its reshape to (N, oh, ow, F), the "
            "transpose to (N, F, oh, ow), and the bias."
        ),
    ),
)
_CHECK_OK = ("pass",)
_CHECK_SILENT = ("pass", "not_observed", "incomplete", "not_run")  # never a root cause


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
        hints.append("the rows of the ragged last tile on M are wrong")  # which: see the drawing
    if n > t and n % t and bad[:, n - n % t :].all() and not bad[:, : n - n % t].any():
        hints.append("the columns of the ragged last tile on N are wrong")
    if k % t and _close(out, a[:, : k - k % t] @ b[: k - k % t], case):  # zeros when K < tile
        hints.append("the result leaves out the ragged last k-tile")
    if hints:
        text = "; ".join(hints)
        return text[0].upper() + text[1:] + ". " + LESSONS["ragged"]
    skipped = [k0 + t - 1 for k0 in range(0, k, t) if k0 + t - 1 < k]  # an end one short
    keep = [j for j in range(k) if j not in skipped]
    if skipped and _close(out, a[:, keep] @ b[keep], case):
        return (
            "Each K-block leaves out its last k: a slice end is exclusive, so clip it with "
            "k1 = min(k0 + tile_size, K), not tile_size - 1. " + LESSONS["ragged"]
        )
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
    c_k_k = args[0].reshape(rows, k, k, c).transpose(0, 3, 1, 2).reshape(rows, c * k * k)
    if _close(out, ref_col2im(c_k_k, x_shape, k, s, p), case):
        return (
            "col2im reads each row's columns as (kernel row, kernel col, channel): read them as "
            "(channel, kernel row, kernel col), the order im2col writes. " + case.lesson
        )
    if bad.any() and (cover[bad] > 1).all():
        return _ADD_HINT + case.lesson
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


def failure_lesson(reply: dict[str, Any], case_lesson: str) -> str:
    """The lesson of a call that gave no answer: its own for a hang, crash or broken channel."""
    if reply.get("skipped"):
        return FAILURE_LESSONS["skipped"]
    return FAILURE_LESSONS.get(reply.get("status", ""), case_lesson)


@dataclass
class RootCause:
    """A failing deeper check, and the failing cases of the groups it explains."""

    check: str
    status: str
    detail: str
    lesson: str
    blame: list[str]
    groups: list[str]  # groups whose failing cases it explains
    cases: list[str]  # those cases, which point to it instead of a lesson of their own


@dataclass
class Lesson:
    """One distinct lesson and every failing case it is for."""

    text: str
    cases: list[str]
    group: str  # the group of its first case


@dataclass
class Diagnosis:
    """What to fix, in order: root causes first, then each distinct lesson once."""

    root_causes: list[RootCause] = field(default_factory=list)
    lessons: list[Lesson] = field(default_factory=list)
    cause_of: dict[str, str] = field(default_factory=dict)  # case name -> root-cause check
    lesson_of: dict[str, str] = field(default_factory=dict)  # case name -> its (shown) lesson
    not_run: list[str] = field(default_factory=list)  # deeper checks that never ran

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the "diagnosis" field of the result JSON)."""
        return asdict(self)

    def lessons_for(self, group: str) -> list[Lesson]:
        """The lessons whose first case is in `group`, in report order."""
        return [item for item in self.lessons if item.group == group]


def _explains(blame: Sequence[str], group: str) -> bool:
    # A broken im2col also breaks the convolution that is built on it.
    return group in blame or (group == "im2col_conv2d" and "im2col" in blame)


def _uncontradicted(lesson: str, passed: set[str]) -> str:
    for check, phrases, instead in CONTRADICTED:
        if check in passed and any(p in lesson for p in phrases):
            for phrase in phrases:
                lesson = lesson.replace(phrase, "")
            lesson = " ".join(lesson.split())
            lesson = f"{lesson} {instead}" if lesson else instead
    return lesson


def diagnose(cases: Sequence[Any], checks: Sequence[Any] = ()) -> Diagnosis:
    """The diagnosis of a run from its CaseResults and CheckResults (anything with their fields)."""
    passed = {c.name for c in checks if c.status in _CHECK_OK}
    failing = [c for c in cases if c.status not in ("pass", "incomplete")]
    diag = Diagnosis(not_run=[c.name for c in checks if c.status == "not_run"])
    for check in checks:
        if check.status in _CHECK_SILENT:
            continue
        explained = [c for c in failing if c.status == "fail" and _explains(check.blame, c.group)]
        explained = [c for c in explained if c.name not in diag.cause_of]
        for c in explained:
            diag.cause_of[c.name] = check.name
        groups = [g for g in HIDDEN_GROUPS if any(c.group == g for c in explained)]
        diag.root_causes.append(
            RootCause(
                check.name,
                check.status,
                check.detail,
                check.lesson,
                list(check.blame),
                groups,
                [c.name for c in explained],
            )
        )
    diag.root_causes.sort(key=lambda r: not r.cases)  # those that explain failures lead
    by_text: dict[str, Lesson] = {}
    for c in failing:
        if c.name in diag.cause_of or not c.lesson:
            continue
        text = _uncontradicted(c.lesson, passed)
        diag.lesson_of[c.name] = text
        if text in by_text:
            by_text[text].cases.append(c.name)
        else:
            by_text[text] = Lesson(text, [c.name], c.group)
            diag.lessons.append(by_text[text])
    return diag


def diagnose_result(result: Any) -> Diagnosis:
    """diagnose() of a PartAResult: its cases (and hidden cases, when graded) and its checks."""
    return diagnose([*result.cases, *getattr(result, "hidden", [])], result.checks)
