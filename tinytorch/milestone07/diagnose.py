"""The diagnosis of a run: the root cause first, then each distinct lesson once, with its cases.

Two layers, both here so that every renderer tells the same story:
- `lesson_for` turns one wrong output into its most specific lesson, by testing the usual bugs;
- `diagnose` reads a whole run (cases and deeper checks) and returns a `Diagnosis`: the failing
  deeper checks that explain a group's failures lead, those cases point to them (and keep their
  own lessons when the check named no cause), a check that fails only because another did is a
  consequence of it, a lesson that a passing check contradicts is replaced, identical lessons
  collapse into one with their cases.
The terminal report, the notebook tables, `tito grade`'s summary and the JSON ("diagnosis") all
read the Diagnosis; none re-derives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tinytorch.compare import all_within, within
from tinytorch.milestone07.cases import HIDDEN_GROUPS, LESSONS, Case
from tinytorch.milestone07.references import out_size, ref_col2im, ref_im2col

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
    "unloadable_notebook": (
        "Fix the cell the error names (`[cell 5]:3` is line 3 of cell 5, counting every cell from "
        "1, markdown cells too): restart the kernel and run the `#| export` cells from the top "
        "to see the error there."
    ),
    "unloadable_module": "Fix the module so that it imports: `import` it in Python to see the error.",
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
# A failing check that follows from another's failure: the backward pass runs the student's im2col
# (forward) and col2im (grad x), so with either broken it fails too; it is a consequence, not a
# second root cause with a lesson of its own.
CONSEQUENCES = {"backward": ("im2col layout", "col2im coverage")}
# A failing check whose finding changes no value (a block product larger than the tile gives the
# right C): it is a root cause, but wrong values are not its doing, so it explains no case and the
# cases keep their own lessons (two bugs, two fixes).
VALUE_BLIND = ("tiling audit",)
_CHECK_OK = ("pass",)
_CHECK_SILENT = ("pass", "not_observed", "incomplete", "not_run")  # never a root cause


@dataclass(frozen=True)
class Im2colBug:
    """A usual im2col bug: what it does, its lesson, and the (N*oh*ow, C*k*k) it would produce."""

    cause: str  # what the lesson is about: "column order", "padding" or "stride"
    says: str  # what the wrong output is, as a clause ("columns are ordered ...")
    lesson: str
    make: Callable[[np.ndarray, int, int, int], np.ndarray | None]  # (x, k, s, p); None: n/a


def _kc_first(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    cols = ref_im2col(x, k, s, p)
    return cols.reshape(-1, x.shape[1], k, k).transpose(0, 2, 3, 1).reshape(cols.shape)


def _one_side(before: bool) -> Callable[[np.ndarray, int, int, int], np.ndarray | None]:
    def make(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray | None:
        side = (2 * p, 0) if before else (0, 2 * p)  # the same padded size, all on one side
        return ref_im2col(np.pad(x, ((0, 0), (0, 0), side, side)), k, s, 0) if p else None

    return make


def _steps_by_one(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray | None:
    if s == 1:
        return None
    n, _, h, w = x.shape
    every = ref_im2col(x, k, 1, p)  # a window at every position, (n, oh1, ow1) rows
    every = every.reshape(n, out_size(h, k, 1, p), out_size(w, k, 1, p), -1)
    oh, ow = out_size(h, k, s, p), out_size(w, k, s, p)
    return every[:, :oh, :ow].reshape(n * oh * ow, -1)  # oh, ow right, the starts not strided


# Each lesson says what its bug concerns and nothing else (no bias in an im2col lesson), once.
_PAD_LESSON = (
    "Pad both sides of H and W by `padding` before extracting windows, p zeros on each: "
    "np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))); the window of output (i, j) then starts at "
    "(i*s, j*s) of the padded x."
)
_ORDER_LESSON = (
    "Order the columns (channel, kernel row, kernel col), the order of weight.reshape(F, -1): "
    "gather the windows as (N, oh, ow, C, k, k), then reshape that to 2-D."
)
IM2COL_BUGS = (
    Im2colBug(
        "column order",
        "columns are ordered (kernel row, kernel col, channel)",
        _ORDER_LESSON,
        _kc_first,
    ),
    Im2colBug(
        "padding",
        "x is padded on the bottom and right only (2*padding there, none above or left)",
        _PAD_LESSON,
        _one_side(before=False),
    ),
    Im2colBug(
        "padding",
        "x is padded on the top and left only (2*padding there, none below or right)",
        _PAD_LESSON,
        _one_side(before=True),
    ),
    Im2colBug(
        "padding",
        "the padding is left out (the windows of the unpadded x)",
        _PAD_LESSON,
        lambda x, k, s, p: ref_im2col(x, k, s, 0) if p else None,
    ),
    Im2colBug(
        "stride",
        "the windows step by 1, not by the stride (oh and ow are right)",
        LESSONS["conv_stride"],
        _steps_by_one,
    ),
    Im2colBug(
        "stride",
        "the stride is ignored (a window at every position)",
        LESSONS["conv_stride"],
        lambda x, k, s, p: ref_im2col(x, k, 1, p) if s > 1 else None,
    ),
)


def im2col_bug(
    x: np.ndarray, k: int, s: int, p: int, matches: Callable[[np.ndarray], bool]
) -> Im2colBug | None:
    """The first usual im2col bug whose output `matches` (given that output), or None."""
    for bug in IM2COL_BUGS:
        cols = bug.make(x.astype(np.float64), k, s, p)
        if cols is not None and matches(cols):
            return bug
    return None


def _close(out: np.ndarray, guess: np.ndarray, case: Case) -> bool:
    return all_within(out, guess, rtol=case.rtol, atol=case.atol)


def _matmul(case: Case, args: list[Any], out: np.ndarray, ref: np.ndarray) -> str:
    a, b = (x.astype(np.float64) for x in args[:2])
    t = case.params["tile_size"]
    m, k = a.shape
    n = b.shape[1]
    if out.shape != ref.shape:
        return f"Return C with shape (M, N) = ({m}, {n})."
    bad = ~within(out, ref, rtol=case.rtol, atol=case.atol)
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


SQRT_2_OVER_PI, CUBIC = 0.7978845608028654, 0.044715  # the tanh GELU's two constants


def tanh_constants(x: np.ndarray, out: np.ndarray) -> tuple[float, float] | None:
    """(a, c) such that out = 0.5*x*(1 + tanh(a*(x + c*x**3))), fitted by least squares where the
    form can be inverted (0.1 < |x| < 3, tanh not saturated), or None if there are too few such
    points or the form does not fit them (out is then not a tanh GELU with other constants)."""
    x, out = x.astype(np.float64).ravel(), out.astype(np.float64).ravel()
    keep = (np.abs(x) > 0.1) & (np.abs(x) < 3)
    r = 2 * out[keep] / x[keep] - 1  # = tanh(a*x + a*c*x**3)
    ok = np.isfinite(r) & (np.abs(r) < 0.999)
    if ok.sum() < 8:
        return None
    xs, t = x[keep][ok], np.arctanh(r[ok])
    basis = np.stack([xs, xs**3], axis=1)  # (points, 2)
    (a, b), *_ = np.linalg.lstsq(basis, t, rcond=None)  # t = a*x + b*x**3
    if np.max(np.abs(basis @ (a, b) - t)) > 1e-3 * max(1.0, float(np.max(np.abs(t)))):
        return None
    if not (0.1 < a < 10 and abs(b / a) < 1):  # not the tanh GELU's form (no linear term...)
        return None
    return float(a), float(b / a)


def _in_float16(out: np.ndarray) -> bool:
    """Whether every value of `out` is a float16 value (past float16's range: no, and quietly)."""
    with np.errstate(over="ignore"):
        return bool(np.array_equal(out.astype(np.float16).astype(np.float64), out))


def gelu_lesson(
    x: np.ndarray, out: np.ndarray, ref: np.ndarray, default: str, *, rtol: float, atol: float
) -> str:
    """The most specific lesson for a wrong GELU output `out` of input `x` (`ref` the right one):
    overflow to NaN/inf, the erf form, a wrong constant in the tanh form, float16 rounding; else
    `default`, unless that is the NaN lesson and every output is finite."""
    import math

    x = x.astype(np.float64)
    if not np.isfinite(out).all():
        return LESSONS["gelu_range"]
    erf = np.vectorize(math.erf, otypes=[np.float64])
    if all_within(out, 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))), rtol=rtol, atol=atol):
        return (
            "This is the exact erf GELU; the gate wants the tanh approximation. " + LESSONS["gelu"]
        )
    fitted = tanh_constants(x, out)
    if fitted is not None:
        a, c = fitted
        wrong = []
        if not math.isclose(a, SQRT_2_OVER_PI, rel_tol=1e-3):
            wrong.append(f"sqrt(2/pi) = {SQRT_2_OVER_PI:.6f} is {a:.6f} here")
        if not math.isclose(c, CUBIC, rel_tol=1e-2):
            wrong.append(f"{CUBIC} is {c:.6f} here")
        if wrong:
            return (
                "The tanh form is right but a constant is not: "
                + "; ".join(wrong)
                + ". "
                + LESSONS["gelu"]
            )
    big = np.abs(ref) > 1e-2
    rel = float(np.median(np.abs(out - ref)[big] / np.abs(ref)[big])) if big.any() else 1.0
    enough = big.sum() >= 8  # a median of two values says nothing of a rounding
    if rel < 5e-3 and ((enough and rel > 1e-4) or _in_float16(out)):  # float16's 2^-11 step
        return (
            "The error looks like float16 rounding: compute in float32 or float64. "
            + LESSONS["gelu"]
        )
    return LESSONS["gelu"] if default == LESSONS["gelu_range"] else default


def _gelu(case: Case, args: list[Any], out: np.ndarray, ref: np.ndarray) -> str:
    if out.shape != ref.shape:
        return "Return the same shape as x: GELU is elementwise."
    return gelu_lesson(args[0], out, ref, case.lesson, rtol=case.rtol, atol=case.atol)


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
    n, f, oh, ow = ref.shape
    w2 = w.astype(np.float64).reshape(f, -1)  # (F, C*k*k), columns (channel, kr, kc)
    b = 0.0 if bias is None else bias.astype(np.float64)

    def conv_of(cols: np.ndarray) -> np.ndarray:  # (N*oh*ow, C*k*k) -> (N, F, oh, ow)
        return (cols @ w2.T + b).reshape(n, oh, ow, f).transpose(0, 3, 1, 2)

    def matches(cols: np.ndarray) -> bool:
        return cols.shape == (n * oh * ow, w2.shape[1]) and _close(out, conv_of(cols), case)

    bug = im2col_bug(x, w.shape[-1], s, p, matches)
    if bug is not None:
        return f"The output is the convolution of an im2col in which {bug.says}. {bug.lesson}"
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
    bad = ~within(out, ref, rtol=case.rtol, atol=case.atol)
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


def unloadable_lesson(impl: str) -> str:
    """How to see why `impl` does not import, in its own terms: a notebook's cell, a file's
    `python` run, a module's import (impl as the result names it: a path or a module name)."""
    if impl.endswith(".ipynb"):
        return FAILURE_LESSONS["unloadable_notebook"]
    if impl.endswith(".py"):
        name = impl.rsplit("/", 1)[-1]
        return FAILURE_LESSONS["unloadable"].replace("your_file.py", name)
    return FAILURE_LESSONS["unloadable_module"].replace("`import` it", f"`import {impl}`")


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
    cases: list[str]  # those cases, which point to it (and keep their lessons: see names_cause)
    names_cause: bool = True  # False: the check named no cause, so its cases keep their lessons
    consequences: list[str] = field(default_factory=list)  # failing checks that follow from it


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
    consequence_of: dict[str, str] = field(default_factory=dict)  # failing check -> root cause

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the "diagnosis" field of the result JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Diagnosis:
        """The Diagnosis back from to_dict()'s JSON, so a renderer of a report reads the same."""
        return cls(
            root_causes=[RootCause(**r) for r in doc.get("root_causes", [])],
            lessons=[Lesson(**x) for x in doc.get("lessons", [])],
            cause_of=dict(doc.get("cause_of", {})),
            lesson_of=dict(doc.get("lesson_of", {})),
            not_run=list(doc.get("not_run", [])),
            consequence_of=dict(doc.get("consequence_of", {})),
        )

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
    broken = {c.name for c in checks if c.status not in _CHECK_SILENT}
    failing = [c for c in cases if c.status not in ("pass", "incomplete")]
    diag = Diagnosis(not_run=[c.name for c in checks if c.status == "not_run"])
    shown_above: dict[str, str] = {}  # case -> its root cause's lesson, when that named no cause
    for check in checks:
        if check.status in _CHECK_SILENT:
            continue
        upstream = [name for name in CONSEQUENCES.get(check.name, ()) if name in broken]
        if upstream:
            diag.consequence_of[check.name] = upstream[0]
            continue
        explained = [c for c in failing if c.status == "fail" and _explains(check.blame, c.group)]
        explained = [] if check.name in VALUE_BLIND else explained
        explained = [c for c in explained if c.name not in diag.cause_of]
        names_cause = getattr(check, "names_cause", True)
        for c in explained:
            diag.cause_of[c.name] = check.name
            if not names_cause:
                shown_above[c.name] = check.lesson
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
                names_cause,
            )
        )
    for cause in diag.root_causes:
        cause.consequences = [n for n, up in diag.consequence_of.items() if up == cause.check]
    diag.root_causes.sort(key=lambda r: not r.cases)  # those that explain failures lead
    by_text: dict[str, Lesson] = {}
    for c in failing:
        if not c.lesson or (c.name in diag.cause_of and c.name not in shown_above):
            continue
        text = _uncontradicted(c.lesson, passed)
        if shown_above.get(c.name):  # the root cause says it already: keep what only the case says
            text = " ".join(text.replace(shown_above[c.name], "").split())
        if not text:
            continue
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
