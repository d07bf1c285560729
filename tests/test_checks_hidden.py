"""Every check is randomised in grading mode: the im2col layout and col2im coverage checks add
geometries drawn from the secret seed to their published ones, so a kernel right only on the
published shapes fails them (it passed both before)."""

from __future__ import annotations

import numpy as np
import pytest

from tinytorch.milestone07 import checks
from tinytorch.milestone07.references import ref_col2im, ref_im2col

PUBLISHED_X = {g[0] for g in (*checks.LAYOUT_GEOMETRIES, *checks.COVERAGE_GEOMETRIES)}


class OnlyThePublished:
    """A student's calls, right on the published geometries and zeros elsewhere."""

    def call(self, fn: str, args: list, kwargs: dict, label: str = "") -> dict:
        if fn == "im2col":
            x, k = args
            ref = ref_im2col(x, k, kwargs["stride"], kwargs["padding"])
            right = tuple(x.shape) in PUBLISHED_X
        else:
            cols, x_shape, k = args
            ref = ref_col2im(cols, x_shape, k, kwargs["stride"], kwargs["padding"])
            right = tuple(x_shape) in PUBLISHED_X
        out = ref if right else np.zeros_like(ref)
        return {"status": "ok", "output": out.astype(np.float32)}


@pytest.mark.parametrize("check", [checks.im2col_layout, checks.col2im_coverage])
def test_a_kernel_right_only_on_the_published_geometries_fails_in_grading_mode(check) -> None:
    assert check(OnlyThePublished(), 0, grading=False).status == "pass"  # practice: as before
    for seed in (1, 2, 3):
        got = check(OnlyThePublished(), seed, grading=True)
        assert got.status == "fail", (seed, got.detail)


def test_the_drawn_geometries_follow_the_seed_and_are_odd_and_not_square() -> None:
    a = checks.check_geometries(checks.LAYOUT_GEOMETRIES, 7, True, 1)
    assert a == checks.check_geometries(checks.LAYOUT_GEOMETRIES, 7, True, 1)
    assert a != checks.check_geometries(checks.LAYOUT_GEOMETRIES, 8, True, 1)
    drawn = [g for g in a if g not in checks.LAYOUT_GEOMETRIES]
    assert len(drawn) == 2
    for (_n, _c, h, w), _k, _s, _p in drawn:
        assert h % 2 == 1 and w % 2 == 1 and h != w
    assert checks.check_geometries(checks.LAYOUT_GEOMETRIES, 7, False, 1) == list(
        checks.LAYOUT_GEOMETRIES
    )
