"""The backward check in grading mode (issue 37 item 6): hidden geometries from the run's secret
seed, and the output of Im2colConv2dFunction.apply compared as well as its gradients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinytorch.milestone07 import CASES, run_part_a
from tinytorch.milestone07 import backward as bw
from tinytorch.milestone07.references import out_size, ref_conv2d, ref_conv2d_grads

BASE = Path(__file__).parent / "mutants" / "student_base.py"
COURSE = Path(__file__).parent / "course" / "course_module.py"
PUBLISHED_X = {g[0] for g in bw.GEOMETRIES}

# A backward that is right on the four published geometries only: anywhere else grad x comes out
# 1% off (a patch that special-cases what the published check asks, as a cheat would).
RIGHT_ON_PUBLISHED_ONLY = (
    "        grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data\n",
    (
        "        grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data\n"
        f"        if tuple(xd.shape) not in {sorted(PUBLISHED_X)!r}:\n"
        "            grad_x = grad_x * np.float32(1.01)\n"
    ),
)
# The issue's finding: right on the published four, wrong on x (2, 3, 9, 11), stride 2, padding 1
# (the scatter assigns instead of adding, where windows overlap).
WRONG_ON_2_3_9_11 = (
    "        grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data\n",
    (
        "        grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data\n"
        "        if tuple(xd.shape) == (2, 3, 9, 11):\n"
        "            grad_x = np.where(grad_x > 0, grad_x, np.float32(0))\n"
    ),
)
# apply's forward returns zeros; backward is right, and im2col_conv2d computes the convolution
# on its own, so the 30 cases pass.
ZEROS_FORWARD = (
    "        return out.reshape(N, oh, ow, F).transpose(0, 3, 1, 2)\n",
    "        return np.zeros((N, F, oh, ow), dtype=np.float32)\n",
)
OWN_CONV = """
def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    Wt = _arr(weight)
    X = _arr(x)
    F, _, k, _ = Wt.shape
    N, _, H, W = X.shape
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    out = im2col(X, k, stride, padding).data @ Wt.reshape(F, -1).T
    if bias is not None:
        out = out + _arr(bias)
    return Tensor(out.reshape(N, oh, ow, F).transpose(0, 3, 1, 2))
"""


def _module(tmp_path: Path, name: str, *edits: tuple[str, str], append: str = "") -> str:
    src = BASE.read_text()
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(src + append)
    return str(path)


def _backward(result: Any) -> Any:
    return next(c for c in result.checks if c.name == "backward")


# ---- the draw ---------------------------------------------------------------------------------
def test_practice_runs_the_published_geometries_in_their_order() -> None:
    assert [g for g, hidden in bw.geometries(0, grading=False)] == list(bw.GEOMETRIES)
    assert [g for g, hidden in bw.geometries(12345, grading=False)] == list(bw.GEOMETRIES)


@pytest.mark.parametrize("seed", [0, 1, 7, 2**40 + 3, 2**63 - 1])
def test_hidden_geometries_are_the_hostile_kinds_and_never_published(seed: int) -> None:
    hidden = bw.hidden_geometries(seed)
    assert len(hidden) == bw.HIDDEN_COUNT == len(bw.HIDDEN_KINDS)
    published_x = PUBLISHED_X | {tuple(c.params["x_shape"]) for c in CASES if "x_shape" in c.params}
    for x_shape, w_shape, stride, padding, _bias in hidden:
        _n, c, h, w = x_shape
        _o, ci, kh, kw = w_shape
        assert ci == c and kh == kw and x_shape not in published_x
        assert h % 2 == 1 and w % 2 == 1 and h != w  # odd, non-square
        assert out_size(h, kh, stride, padding) >= 1 and out_size(w, kw, stride, padding) >= 1
    stride2, no_bias, gaps = hidden
    assert stride2[2] == 2 and stride2[3] >= 1 and stride2[1][2] > 2  # overlaps, a crop
    assert no_bias[4] is False
    assert gaps[2] > gaps[1][2]  # a stride past the kernel: pixels no window covers
    assert bw.hidden_geometries(seed) == hidden  # the report's seed replays them


def test_hidden_geometries_and_their_order_vary_with_the_seed() -> None:
    draws = {bw.hidden_geometries(seed) for seed in range(20)}
    assert len(draws) >= 15
    orders = {tuple(h for _g, h in bw.geometries(seed, grading=True)) for seed in range(20)}
    assert len(orders) > 1  # the hidden ones are not always last


# ---- the check, on fake replies (no sandbox) ---------------------------------------------------
class _Calls:
    """StudentCalls' interface, answering from the float64 references through `answer`."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen = type("Seen", (), {"not_implemented": {}})()
        self.shapes: list[tuple[int, ...]] = []

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any], **opts: Any) -> dict:
        x, w, b = args
        s, p = kwargs["stride"], kwargs["padding"]
        self.shapes.append(x.shape)
        out = ref_conv2d(x, w, b, s, p).astype(np.float32)
        grads = [
            None if r is None else r.astype(np.float32)
            for r in ref_conv2d_grads(x, w, b is not None, opts["grad"], s, p)
        ]
        return {"status": "ok", "output": out, "grads": grads, **self.answer(x, out, grads)}


def test_a_right_answer_passes_and_grading_asks_the_hidden_geometries() -> None:
    calls = _Calls(lambda x, out, grads: {})
    assert bw.backward_check(calls, 0).ok and len(calls.shapes) == 4
    calls = _Calls(lambda x, out, grads: {})
    check = bw.backward_check(calls, 99, grading=True)
    assert check.ok and "3 of them hidden" in check.detail
    assert set(calls.shapes) >= {g[0] for g in bw.hidden_geometries(99)}


def test_a_zero_output_with_right_gradients_fails_on_the_output() -> None:
    calls = _Calls(lambda x, out, grads: {"output": np.zeros_like(out)})
    check = bw.backward_check(calls, 0)
    assert check.status == "fail" and check.lesson == bw.LESSONS["output"]
    assert "the output of Im2colConv2dFunction.apply is wrong" in check.detail
    assert check.blame == ["im2col_conv2d"]
    assert check.names_cause is False  # no cause named: failing cases keep their own lessons


def test_a_wrong_output_gets_the_gates_diagnosis_when_one_fits() -> None:
    """A forward that drops the bias breaks im2col_conv2d's cases too: the check names the cause
    ('the bias is missing'), so the report leads with it rather than with a generic lesson."""

    class Calls(_Calls):  # right gradients; the output without its bias
        def call(self, fn: str, args: list, kwargs: dict, **opts: Any) -> dict:
            reply = super().call(fn, args, kwargs, **opts)
            if args[2] is not None:
                reply["output"] = reply["output"] - args[2][None, :, None, None]
            return reply

    check = bw.backward_check(Calls(lambda x, out, grads: {}), 0)
    assert check.status == "fail" and check.names_cause is True
    assert check.lesson.startswith("In Im2colConv2dFunction.forward (what apply returns)")
    assert "bias is missing" in check.lesson


def test_gradients_right_only_on_published_shapes_fail_only_when_grading() -> None:
    def answer(x: np.ndarray, out: np.ndarray, grads: list) -> dict:
        if x.shape in PUBLISHED_X:
            return {}
        return {"grads": [grads[0] * np.float32(1.01), *grads[1:]]}

    assert bw.backward_check(_Calls(answer), 5).ok
    check = bw.backward_check(_Calls(answer), 5, grading=True)
    assert check.status == "fail" and check.detail.startswith("hidden: x (")
    assert "grad x is wrong" in check.detail and check.lesson == bw.LESSONS["x"]


# ---- whole runs through the sandbox --------------------------------------------------------------
def test_a_backward_right_only_on_the_published_geometries_is_not_passed_when_grading(
    tmp_path: Path,
) -> None:
    path = _module(tmp_path, "published_only", RIGHT_ON_PUBLISHED_ONLY)
    practice = run_part_a(path, cases=["im2col_conv2d"])
    assert practice.verdict == "PASS", [(c.name, c.detail) for c in practice.failing_checks()]
    for seed in (1, 2, 3):
        graded = run_part_a(path, cases=["im2col_conv2d"], grading=True, seed=seed)
        check = _backward(graded)
        assert graded.verdict == "NOT_PASSED" and check.status == "fail", check
        assert check.detail.startswith("hidden: ") and "grad x is wrong" in check.detail
        assert graded.blamed() == {"im2col_conv2d"}


def test_the_issues_finding_wrong_on_x_2_3_9_11_stride_2_padding_1(tmp_path: Path) -> None:
    """A backward wrong only on the gate's own stride-2 shape, x (2, 3, 9, 11): the published
    backward geometries never ask it; a hidden draw of that shape, stride 2, padding 1 would."""
    path = _module(tmp_path, "wrong_on_2_3_9_11", WRONG_ON_2_3_9_11)
    assert run_part_a(path, cases=["im2col_conv2d"]).verdict == "PASS"  # today's blind spot
    geometry = ((2, 3, 9, 11), (4, 3, 3, 3), 2, 1, False)
    calls: list[tuple] = []

    def draw(seed: int) -> tuple:  # the hidden draw, with the issue's geometry among it
        calls.append(seed)
        return (geometry,)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bw, "hidden_geometries", draw)
        graded = run_part_a(path, cases=["im2col_conv2d"], grading=True, seed=11)
    check = _backward(graded)
    assert calls == [11] and graded.verdict == "NOT_PASSED"
    assert check.detail.startswith("hidden: x (2, 3, 9, 11), weight (4, 3, 3, 3), stride 2")


@pytest.mark.parametrize("grading", [False, True], ids=["practice", "grading"])
def test_an_apply_whose_forward_returns_zeros_is_not_passed(tmp_path: Path, grading: bool) -> None:
    path = _module(tmp_path, "zeros_forward", ZEROS_FORWARD, append=OWN_CONV)
    result = run_part_a(path, cases=["im2col_conv2d"], grading=grading)
    check = _backward(result)
    assert all(c.status == "pass" for c in result.cases)  # im2col_conv2d itself is right
    assert result.verdict == "NOT_PASSED" and check.status == "fail", check
    assert "the output of Im2colConv2dFunction.apply is wrong" in check.detail
    assert check.lesson == bw.LESSONS["output"] and result.blamed() == {"im2col_conv2d"}


@pytest.mark.parametrize("impl", [BASE, COURSE], ids=["student_base", "course_module"])
def test_honest_modules_pass_the_hidden_geometries(impl: Path) -> None:
    for seed in (1, 2, 3, 4):
        result = run_part_a(str(impl), cases=["im2col_conv2d"], grading=True, seed=seed)
        check = _backward(result)
        assert check.status == "pass" and "3 of them hidden" in check.detail, check
