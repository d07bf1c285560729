"""Milestone 07 Part A against realistic student bugs: each is caught and blamed on its function.

Every mutant is cut from tests/mutants/student_base.py (a correct student module) by replacing an
exact snippet, or by redefining one function after it. The base must PASS, or no mutant means
anything. One Part A run per module, shared by the assertions (`--no-part-b` territory: no timing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tinytorch.milestone07 import run_part_a
from tinytorch.render.terminal import render_part_a

BASE = Path(__file__).parent / "mutants" / "student_base.py"
IM2COL = frozenset({"im2col", "im2col_conv2d"})  # an im2col bug also breaks the convolution
COL2IM = frozenset({"col2im", "im2col_conv2d"})  # the base's conv backward goes through col2im


@dataclass(frozen=True)
class Mutant:
    name: str
    blame: frozenset[str]  # exactly the functions the report must point at
    edits: tuple[tuple[str, str], ...] = ()  # (exact snippet, replacement), each applied once
    append: str = ""  # a redefinition appended to the module
    lesson: str = ""  # a phrase the rendered report (a lesson or a detail) must contain
    leads: bool = False  # the report's first fix must contain `lesson`: it names the bug first


def _m(
    name: str, fn: str | frozenset[str], *edits: tuple[str, str], append: str = "", lesson: str = "",
    leads: bool = False,
) -> Mutant:  # fmt: skip
    blame = frozenset({fn}) if isinstance(fn, str) else fn
    return Mutant(name, blame, tuple(edits), append, lesson, leads)


MUTANTS = [
    _m("ragged_m_dropped", "tiled_matmul",
       ("for i0 in range(0, M, tile_size)", "for i0 in range(0, M - M % tile_size, tile_size)"),
       lesson="ragged last tile on M"),
    _m("ragged_n_dropped", "tiled_matmul",
       ("for j0 in range(0, N, tile_size)", "for j0 in range(0, N - N % tile_size, tile_size)"),
       lesson="ragged last tile on N"),
    _m("ragged_k_dropped", "tiled_matmul",
       ("for k0 in range(0, K, tile_size)", "for k0 in range(0, K - K % tile_size, tile_size)"),
       lesson="ragged last k-tile", leads=True),
    _m("assign_not_accumulate", "tiled_matmul",
       ("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A"), lesson="+=", leads=True),
    _m("off_by_one_tile_end", "tiled_matmul",
       ("k1 = min(k0 + tile_size, K)", "k1 = min(k0 + tile_size - 1, K)"), lesson="min("),
    _m("whole_matmul_posing_as_tiles", "tiled_matmul",
       ("C[i0:i1, j0:j1] += A[i0:i1, k0:k1] @ B[k0:k1, j0:j1]", "C[i0:i1, j0:j1] = (A @ B)[i0:i1, j0:j1]"),
       lesson="not a tiled kernel", leads=True),
    _m("gelu_wrong_constant", "fused_gelu", ("np.sqrt(2 / np.pi)", "np.sqrt(np.pi / 2)"),
       lesson="sqrt(2/pi) = 0.797885 is 1.253314 here", leads=True),
    _m("gelu_wrong_cubic", "fused_gelu", ("0.044715", "0.44715"),
       lesson="0.044715 is 0.447150 here", leads=True),
    _m("gelu_erf", "fused_gelu", append='''
import math
def fused_gelu(x):
    xs = _arr(x)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return Tensor(0.5 * xs * (1.0 + erf(xs / np.sqrt(2.0))))
''', lesson="erf"),
    _m("gelu_float16", "fused_gelu", ("    xs = _arr(x)\n", "    xs = _arr(x).astype(np.float16)\n"),
       lesson="float16"),
    _m("gelu_nan_large_x", "fused_gelu",
       ("np.tanh(inner)", "((np.exp(2 * inner) - 1) / (np.exp(2 * inner) + 1))"), lesson="NaN"),
    _m("gelu_in_place_clobbers_input", "fused_gelu", append='''
def fused_gelu(x):
    xs = x.data  # no copy: the in-place passes below write into the caller's tensor
    inner = xs * xs * xs
    inner *= 0.044715
    inner += xs
    inner *= np.sqrt(2 / np.pi)
    np.tanh(inner, out=inner)
    inner += 1.0
    xs *= 0.5
    xs *= inner
    return Tensor(xs)
''', lesson="Never write into an input"),
    _m("im2col_column_order", IM2COL,
       ("cols = np.empty((N, oh, ow, C, k, k), dtype=np.float32)", "cols = np.empty((N, oh, ow, k, k, C), dtype=np.float32)"),
       ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
       lesson="Order the columns (channel, kernel row, kernel col)", leads=True),
    _m("im2col_stride_ignored", IM2COL,
       ("win = Xp[:, :, di : di + stride * oh : stride, dj : dj + stride * ow : stride]", "win = Xp[:, :, di : di + oh, dj : dj + ow]"),
       lesson="step the slices by s", leads=True),
    _m("im2col_padding_one_side", IM2COL,
       ("((0, 0), (0, 0), (padding, padding), (padding, padding))", "((0, 0), (0, 0), (0, 2 * padding), (0, 2 * padding))"),
       lesson="Pad both sides", leads=True),
    _m("col2im_assigns", COL2IM,
       ("dj : dj + stride * ow : stride] += patch", "dj : dj + stride * ow : stride] = patch"),
       lesson="scatter-ADD", leads=True),
    _m("col2im_no_crop", COL2IM,
       ("return Tensor(xp[:, :, padding : padding + H, padding : padding + W])", "return Tensor(xp)"),
       lesson="crop the padding", leads=True),
    _m("conv_bias_dropped", "im2col_conv2d", ("        out = out + _arr(bias)\n", "        pass\n"),
       lesson="bias is missing", leads=True),
    # the backward pass (graded by the "backward" check; the 30 forward cases still pass)
    _m("grad_x_assigned_not_added", "im2col_conv2d",
       ("grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data",
        "grad_x = _scatter_assign(dcols, xd.shape, k, self.stride, self.padding)"),
       append='''
def _scatter_assign(cols, x_shape, k, stride, padding):
    N, C, H, W = x_shape
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    c6 = cols.reshape(N, oh, ow, C, k, k)
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=np.float32)
    for di in range(k):
        for dj in range(k):
            xp[:, :, di : di + stride * oh : stride, dj : dj + stride * ow : stride] = (
                c6[:, :, :, :, di, dj].transpose(0, 3, 1, 2)
            )
    return xp[:, :, padding : padding + H, padding : padding + W]
''', lesson="assigned (=), not added (+=)"),
    _m("grad_w_transposed", "im2col_conv2d",
       ("grad_w = (g2.T @ self.saved_cols)", "grad_w = (self.saved_cols.T @ g2)"),
       lesson="grad weight is wrong"),
    _m("grad_w_halved", "im2col_conv2d",
       ("grad_w = (g2.T @ self.saved_cols)", "grad_w = 0.5 * (g2.T @ self.saved_cols)"),
       lesson="0.5 times the right one"),
    _m("grad_bias_missing", "im2col_conv2d",
       ("grad_b = g2.sum(axis=0) if self.inputs[2] is not None else None", "grad_b = None"),
       lesson="grad bias is missing"),
    # untrusted behaviour, each a named failure rather than a traceback
    _m("matmul_returns_ndarray", "tiled_matmul", ("    return Tensor(C)\n", "    return C\n"),
       lesson="Tensor(result)"),
    _m("conv_raises", "im2col_conv2d", ("    Wt = _arr(weight)\n", "    Wt = _arr(weight)\n    raise ValueError('oops')\n"),
       lesson="ValueError: oops"),
    _m("col2im_wrong_shape", COL2IM,
       ("    G = _arr(cols)\n", "    G = _arr(cols)\n    return Tensor(G)\n"), lesson="wrong shape"),
]  # fmt: skip


def mutate(mutant: Mutant, base: str) -> str:
    src = base
    for old, new in mutant.edits:
        assert src.count(old) == 1, (
            f"{mutant.name}: snippet not found once in student_base.py: {old!r}"
        )
        src = src.replace(old, new)
    return src + mutant.append


_RUNS: dict[str, object] = {}


def part_a(path: Path | str, **kwargs: object) -> object:
    key = f"{path}{sorted(kwargs.items())}"
    if key not in _RUNS:
        _RUNS[key] = run_part_a(str(path), **kwargs)
    return _RUNS[key]


def test_base_student_module_passes() -> None:
    result = part_a(BASE)
    assert result.verdict == "PASS", [(c.name, c.detail) for c in result.failing()]
    assert result.passed() == 30
    assert all(c.status == "pass" for c in result.checks), result.checks


@pytest.fixture(scope="module")
def mutant_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the module's mutant files, so that tests share each mutant's run."""
    return tmp_path_factory.mktemp("mutants")


def mutant_run(mutant: Mutant, folder: Path) -> object:
    """The mutant's Part A run (one per mutant, shared by every test of this module)."""
    path = folder / f"{mutant.name}.py"
    if not path.exists():
        path.write_text(mutate(mutant, BASE.read_text()))
    return part_a(path, timeout=10.0)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_caught_and_blamed(mutant: Mutant, mutant_dir: Path) -> None:
    result = mutant_run(mutant, mutant_dir)
    failures = [*result.failing(), *result.failing_checks()]
    assert result.verdict == "NOT_PASSED", f"{mutant.name} was not caught"
    assert result.blamed() == mutant.blame, [(f.name, f.blame, f.detail) for f in failures]
    untouched = {c.group for c in result.cases} - mutant.blame
    assert all(c.status == "pass" for c in result.cases if c.group in untouched)
    report = render_part_a(result)  # what the student reads, not the raw CaseResult lessons
    text = " ".join(report.split())
    assert mutant.lesson in text, f"the report never says {mutant.lesson!r}: {text[:900]}"
    if mutant.leads:
        first = first_fix(report)
        assert mutant.lesson in first, f"the first fix shown is not {mutant.lesson!r}: {first}"


# The student with one bug reads the fix first: (line of the first lesson, lines in all) of the
# report without Part B. The bounds: the first lesson within 15 lines, at most 60 lines.
ONE_BUG_LAYOUT = {
    "ragged_k_dropped": (6, 20),
    "ragged_m_dropped": (6, 25),
    "off_by_one_tile_end": (6, 20),
    "assign_not_accumulate": (6, 20),
    "gelu_wrong_constant": (6, 19),
    "im2col_column_order": (10, 29),
    "col2im_assigns": (10, 29),
}
FIRST_LESSON_BY, LINES_AT_MOST = 15, 60


@pytest.mark.parametrize("name", sorted(ONE_BUG_LAYOUT))
def test_a_one_bug_report_leads_with_its_lesson_and_is_short(name: str, mutant_dir: Path) -> None:
    mutant = next(m for m in MUTANTS if m.name == name)
    lines = render_part_a(mutant_run(mutant, mutant_dir)).splitlines()
    first = 1 + next(i for i, line in enumerate(lines) if line.lstrip().startswith(FIXES))
    assert first <= FIRST_LESSON_BY and len(lines) <= LINES_AT_MOST, "\n".join(lines)
    assert (first, len(lines)) == ONE_BUG_LAYOUT[name], "\n".join(lines)
    assert lines[0].startswith("NOT PASSED"), "the verdict comes first"
    if mutant.lesson:
        assert mutant.lesson in " ".join(" ".join(lines).split()), "the lesson is still there"


FIXES = ("fix:", "fix (")


def first_fix(report: str) -> str:
    """The first lesson a rendered report shows (a root cause's `fix:`, else a `fix (cases):`)."""
    lines = report.splitlines()
    fix = FIXES
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(fix))
    indent = len(lines[start]) - len(lines[start].lstrip())
    text = [lines[start].strip()]
    for line in lines[start + 1 :]:  # its wrapped continuation: same indent, not a new item
        if not line.strip() or line.lstrip().startswith(fix):
            break
        if len(line) - len(line.lstrip()) != indent:
            break
        text.append(line.strip())
    return " ".join(text)


@pytest.mark.parametrize("name", ["gelu_wrong_constant", "gelu_wrong_cubic", "gelu_erf"])
def test_a_finite_gelu_bug_never_gets_the_overflow_lesson(name: str, mutant_dir: Path) -> None:
    """Its outputs are all finite: the NaN/inf lesson (and float16's) concern other bugs."""
    mutant = next(m for m in MUTANTS if m.name == name)
    text = " ".join(render_part_a(mutant_run(mutant, mutant_dir)).split())
    assert "NaN" not in text and "overflow" not in text and "float16 rounding" not in text, text


def test_there_are_at_least_15_bug_mutants() -> None:
    assert len(MUTANTS) >= 15
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


ALTERNATIVES = {
    "loop_order_kji_with_dot": '''
def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a), _arr(b)
    C = np.zeros((A.shape[0], B.shape[1]), dtype=np.float32)
    T = tile_size
    for k0 in range(0, A.shape[1], T):
        for j0 in range(0, B.shape[1], T):
            for i0 in range(0, A.shape[0], T):  # slices clip at the edge by themselves
                C[i0:i0 + T, j0:j0 + T] += np.dot(A[i0:i0 + T, k0:k0 + T], B[k0:k0 + T, j0:j0 + T])
    return Tensor(C)
''',
    "float64_inside_then_cast": '''
def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a).astype(np.float64), _arr(b).astype(np.float64)
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N))
    for i0 in range(0, M, tile_size):
        for j0 in range(0, N, tile_size):
            for k0 in range(0, K, tile_size):
                C[i0:i0 + tile_size, j0:j0 + tile_size] += (
                    A[i0:i0 + tile_size, k0:k0 + tile_size] @ B[k0:k0 + tile_size, j0:j0 + tile_size]
                )
    return Tensor(C.astype(np.float32))

def fused_gelu(x):
    x64 = _arr(x).astype(np.float64)
    y = 0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64**3)))
    return Tensor(y.astype(np.float32))
''',
    "tiles_by_broadcast_multiply_sum": '''
def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a), _arr(b)
    C = np.zeros((A.shape[0], B.shape[1]), dtype=np.float32)
    T = tile_size
    for i0 in range(0, A.shape[0], T):
        for j0 in range(0, B.shape[1], T):
            for k0 in range(0, A.shape[1], T):  # no product at all: slices, multiply, sum
                a_t, b_t = A[i0:i0 + T, k0:k0 + T], B[k0:k0 + T, j0:j0 + T]
                C[i0:i0 + T, j0:j0 + T] += (a_t[:, :, None] * b_t[None, :, :]).sum(axis=1)
    return Tensor(C)
''',
    "im2col_as_strided": '''
def im2col(x, kernel_size, stride=1, padding=0):
    k = kernel_size
    xp = np.ascontiguousarray(np.pad(_arr(x), ((0, 0), (0, 0), (padding, padding), (padding, padding))))
    N, C, Hp, Wp = xp.shape
    oh, ow = (Hp - k) // stride + 1, (Wp - k) // stride + 1
    sN, sC, sH, sW = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, shape=(N, oh, ow, C, k, k), strides=(sN, sH * stride, sW * stride, sC, sH, sW), writeable=False
    )
    return Tensor(view.reshape(N * oh * ow, C * k * k))
''',
    "col2im_add_at": '''
def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
    N, C, H, W = x_shape
    k = kernel_size
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    n, i, j, c, di, dj = np.meshgrid(
        np.arange(N), np.arange(oh), np.arange(ow), np.arange(C), np.arange(k), np.arange(k), indexing="ij"
    )
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=np.float32)
    np.add.at(xp, (n.ravel(), c.ravel(), (i * stride + di).ravel(), (j * stride + dj).ravel()), _arr(cols).reshape(-1))
    return Tensor(xp[:, :, padding:padding + H, padding:padding + W])
''',
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ALTERNATIVES))
def test_alternative_correct_implementation_passes(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(BASE.read_text() + ALTERNATIVES[name])
    result = part_a(path)
    bad = [(c.name, c.detail) for c in [*result.failing(), *result.failing_checks()]]
    assert result.verdict == "PASS", bad
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "pass", audit  # np.dot, float64 copies, slices: observed as tiles
