"""The deeper checks, graded apart from the 30 cases: what a right answer alone does not prove."""

from __future__ import annotations

import math

import numpy as np

from tinytorch.compare import compare
from tinytorch.milestone07.backward import backward_check
from tinytorch.milestone07.calls import StudentCalls, broken_check
from tinytorch.milestone07.cases import CONV_FUNCTION, GEMM_TOL
from tinytorch.milestone07.diagnose import im2col_bug
from tinytorch.milestone07.evidence import im2col_evidence
from tinytorch.milestone07.references import (
    out_size,
    ref_col2im,
    ref_gelu,
    ref_im2col,
    ref_matmul,
)
from tinytorch.milestone07.results import CheckResult
from tinytorch.sandbox.child.audit import block_dims, block_work

AUDIT_PROBLEMS = ((150, 130, 140, 64), (40, 35, 30, 16), (20, 17, 19, 7))  # (M, K, N, tile)
_AUDIT_STREAM = 0x41554454  # "AUDT": grading mode's audit shapes, apart from the data and cases
LAYOUT_GEOMETRIES = (((2, 3, 7, 9), 3, 2, 1), ((1, 2, 5, 6), 2, 1, 0))  # (x_shape, k, s, p)
COVERAGE_GEOMETRIES = (((1, 2, 7, 8), 3, 2, 1), ((1, 1, 6, 7), 2, 3, 0))
_LAYOUT_STREAM, _COVERAGE_STREAM = 0x4C41594F, 0x434F5645  # "LAYO", "COVE"
Geometry = tuple[tuple[int, int, int, int], int, int, int]  # (x_shape (N, C, H, W), k, stride, pad)


def check_geometries(
    published: tuple[Geometry, ...], seed: int, grading: bool, stream: int
) -> list[Geometry]:
    """The published geometries, and in grading mode two more drawn from the secret seed (odd,
    non-square inputs; stride 2 with padding, where windows overlap; a stride past the kernel,
    which leaves gaps), in an order drawn from the same seed: a kernel special-cased on the
    published shapes fails."""
    if not grading:
        return list(published)
    rng = np.random.default_rng([seed, stream])
    drawn: list[Geometry] = []
    for k, s, p in ((3, 2, 1), (2, 3, 0)):
        h, w = (int(v) * 2 + 1 for v in rng.integers(3, 7, size=2))  # 7..13, odd
        if h == w:
            w += 2
        x_shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), h, w)
        drawn.append((x_shape, k, s, p))
    out = [*published, *drawn]
    return [out[i] for i in rng.permutation(len(out))]


EXTREMES = np.array(
    [-3e38, -1e10, -1e4, -100, -20, -5, -1e-30, 0, 1e-30, 5, 20, 100, 1e4, 1e10, 3e38],
    dtype=np.float32,
)
EXACT = (1e-6, 1e-6)  # (rtol, atol): a gather/scatter of float32 values is exact up to one add


TAMPERED_LESSON = (
    "Leave the grader's audit alone: it records the block products your kernel performs; "
    "clearing, replacing or faking its records is a failure, not a faster kernel."
)


def tampered(reply: dict) -> str | None:
    """What a reply says was tampered with (the child verifies the audit before replying)."""
    flag = reply.get("tampered") or (reply.get("error") if reply["status"] == "tampered" else None)
    if not flag:
        return None
    return flag if isinstance(flag, str) else "the audit's functions or records were changed"


WRONG_WHEN_AUDITED = (
    "tiled_matmul must compute the same right answer on every call: it passed the cases but "
    "gave a wrong one on the audit's problem (ragged on every axis). Clip every tile with "
    "min(i0 + tile_size, M) and accumulate over K, whatever the call."
)


def audit_problems(seed: int, grading: bool) -> tuple[tuple[int, int, int, int], ...]:
    """The tiling audit's (M, K, N, tile) problems: the published three in practice; when
    grading, three drawn from the secret seed (ragged on every axis, 2-4 tiles each), so a
    file cannot tile on the published shapes only."""
    if not grading:
        return AUDIT_PROBLEMS
    rng = np.random.default_rng([seed, _AUDIT_STREAM])
    out = []
    for _ in AUDIT_PROBLEMS:
        t = int(rng.integers(4, 41))
        m, k, n = (int(t * rng.integers(1, 4) + rng.integers(1, t)) for _ in range(3))
        out.append((m, k, n, t))
    return tuple(out)


def _covered(boxes: list, shapes: tuple[tuple[int, int], ...], tile: int) -> list[int]:
    """Elements of each operand inside some recorded block slice no larger than the tile."""
    masks = [np.zeros(shape, dtype=bool) for shape in shapes]
    for op, r0, r1, c0, c1 in boxes:
        if op < len(masks) and r1 - r0 <= tile and c1 - c0 <= tile:
            masks[op][r0:r1, c0:c1] = True
    return [int(mask.sum()) for mask in masks]


AuditProblem = tuple[tuple[int, int, int, int], np.ndarray, np.ndarray]  # ((M, K, N, tile), A, B)


def audit_inputs(seed: int, grading: bool = False) -> list[AuditProblem]:
    """The tiling audit's problems with their inputs, drawn from the seed."""
    rng = np.random.default_rng([seed, 17])
    out = []
    for m, k, n, t in audit_problems(seed, grading):
        a = rng.standard_normal((m, k)).astype(np.float32)  # (M, K)
        b = rng.standard_normal((k, n)).astype(np.float32)  # (K, N)
        out.append(((m, k, n, t), a, b))
    return out


def audit_call(calls: StudentCalls, problem: AuditProblem) -> dict:
    """One audited tiled_matmul call: the reply carries the block products and slices it took."""
    (m, k, n, t), a, b = problem
    return calls.call(
        "tiled_matmul", [a, b], {"tile_size": t}, label=f"audit {m}x{k}x{n}", audit=True
    )


def tiling_audit(
    calls: StudentCalls,
    seed: int,
    grading: bool = False,
    *,
    reported: bool = False,
    replies: list[dict] | None = None,
) -> CheckResult:
    """Every block product the student's tiled_matmul performs is at most tile_size on M, K and N,
    and what the audit saw accounts for the whole product: block products adding up to M*K*N
    multiply-adds, or (a loop kernel without products) tile-sized slices covering all of A and B.

    An audited call's answer is graded too: a kernel must be right on every call, watched or not.
    A wrong one fails this check unless a case of tiled_matmul already fails (reported=True: the
    cases name that bug). replies: the audit's replies when the caller made its calls (grading
    mode makes them at secret places among the cases, so no kernel can count its way to them).
    """
    name, fn = "tiling audit", "tiled_matmul"
    lesson = (
        "Multiply tile by tile: A[i0:i1, k0:k1] @ B[k0:k1, j0:j1] with every extent <= tile_size; "
        "one np.matmul of the whole matrices is not a tiled kernel."
    )
    seen, by_slices, wrong, unseen, partial = 0, 0, [], [], []
    problems = audit_inputs(seed, grading)
    for i, problem in enumerate(problems):
        (m, k, n, t), a, b = problem
        where = f"{m}x{k} @ {k}x{n}, tile_size={t}"
        reply = replies[i] if replies is not None else audit_call(calls, problem)
        if tampered(reply):
            detail = f"{fn}: the grader's audit was tampered with: {tampered(reply)} ({where})"
            return CheckResult(name, "fail", detail, TAMPERED_LESSON, [fn])
        if reply["status"] != "ok":
            return broken_check(name, fn, reply, lesson)
        got = compare(reply["output"], ref_matmul(a, b), rtol=GEMM_TOL[0], atol=GEMM_TOL[1])
        if not got.ok:
            wrong.append(f"{where}: {got.detail}")
        records = reply.get("records", [])
        for op, shapes in records:
            dims = block_dims(op, shapes)
            if max(dims) > t:
                detail = (
                    f"a {op} of a {dims[0]}x{dims[1]} by {dims[1]}x{dims[2]} block on the "
                    f"{m}x{k} @ {k}x{n} problem with tile_size={t}: larger than the tile"
                )
                return CheckResult(name, "fail", detail, lesson, [fn])
        big = [s for s in reply.get("slices", []) if s and max(s) > t]
        if not records and big:  # no product seen: judge the blocks a loop kernel sliced out
            shape = "x".join(map(str, max(big, key=max)))
            detail = (
                f"no block product observed, and a {shape} slice was taken on the "
                f"{m}x{k} @ {k}x{n} problem with tile_size={t}: larger than the tile"
            )
            return CheckResult(name, "fail", detail, lesson, [fn])
        # A batched product counts at most one block per tile triple of the problem: more is
        # not a tiling of this product, however many multiply-adds it did.
        triples = -(-m // t) * -(-k // t) * -(-n // t)
        work = sum(
            min(block_work(op, shapes), triples * math.prod(block_dims(op, shapes)))
            for op, shapes in records
        )
        if work >= m * k * n:
            seen += len(records)
            continue
        got_a, got_b = _covered(reply.get("boxes", []), ((m, k), (k, n)), t)
        if got_a == m * k and got_b == k * n:
            by_slices += 1
            continue
        if (records or got_a or got_b) and not got.ok:  # tiled, but wrong: graded below
            seen += len(records)
            continue
        if records or got_a or got_b:
            partial.append(
                f"{where}: products of {work / (m * k * n):.0%} of the M*K*N multiply-adds and "
                f"tile-sized slices of {got_a}/{m * k} elements of A and {got_b}/{k * n} of B"
            )
        else:
            unseen.append(where)
    unseen_lesson = (
        "Multiply blocks of the Tensor's own array with `@` or np.matmul, e.g. "
        "A[i0:i1, k0:k1] @ B[k0:k1, j0:j1], so the audit can see every tile."
    )
    if wrong and not reported:  # right on every case, wrong when audited: a grade of its own
        detail = (
            f"a wrong answer on the audit's {'; '.join(wrong)} (every case of tiled_matmul "
            "passed: a kernel must give the right answer on every call)"
        )
        return CheckResult(name, "fail", detail, WRONG_WHEN_AUDITED, [fn], names_cause=False)
    if partial:
        detail = (
            "a right answer, but what the audit saw does not account for it, so tiling could "
            "not be verified (the rest was computed by a product it cannot see, e.g. on arrays "
            f"copied out of the Tensor): {'; '.join(partial)}"
        )
        if unseen:
            detail += f"; nothing observed on {', '.join(unseen)}"
        return CheckResult(name, "not_observed", detail, unseen_lesson, [fn])
    if unseen:
        detail = (
            "no matrix product was observed (e.g. `@` on arrays copied out of the Tensor, or a "
            "product through torch or the SIMD kernels), so tiling could not be verified "
            f"on {', '.join(unseen)}"
        )
        return CheckResult(name, "not_observed", detail, unseen_lesson, [fn])
    said = [f"{seen} block products observed, none larger than the tile"] if seen else []
    if by_slices:
        said.append(f"tile-sized slices covering A and B on {by_slices} problem(s)")
    if wrong:
        said.append(f"a wrong answer on {len(wrong)} problem(s), which the cases report")
    return CheckResult(name, "pass", "; ".join(said), "", [])


def im2col_layout(calls: StudentCalls, seed: int, grading: bool = False) -> CheckResult:
    """im2col(x) is (N*oh*ow, C*k*k), rows (image, out row, out col), cols (channel, kr, kc)."""
    name, fn = "im2col layout", "im2col"
    from tinytorch.milestone07.cases import LESSONS

    lesson = LESSONS["conv"]
    rng = np.random.default_rng([seed, 23])
    geometries = check_geometries(LAYOUT_GEOMETRIES, seed, grading, _LAYOUT_STREAM)
    for x_shape, k, s, p in geometries:
        x = rng.standard_normal(x_shape).astype(np.float32)
        reply = calls.call(fn, [x, k], {"stride": s, "padding": p}, label=f"layout {x_shape}")
        if reply["status"] != "ok":
            return broken_check(name, fn, reply, lesson)
        ref = ref_im2col(x, k, s, p)
        out = reply["output"]
        got = compare(out, ref, rtol=EXACT[0], atol=EXACT[1])
        if got.ok:
            continue
        where = f"x {x_shape}, k={k}, stride={s}, padding={p}"
        c = x_shape[1]
        evidence = im2col_evidence(out, ref, c, k) if out.shape == ref.shape else None

        def matches(cols: np.ndarray, out: np.ndarray = out) -> bool:
            return cols.shape == out.shape and compare(out, cols, rtol=EXACT[0], atol=EXACT[1]).ok

        bug = im2col_bug(x, k, s, p, matches)  # column order, one-sided padding, stride, ...
        if bug is not None:
            detail = f"{where}: {bug.says}"
            return CheckResult(name, "fail", detail, bug.lesson, [fn], evidence)
        if out.shape == ref.T.shape:
            return CheckResult(
                name,
                "fail",
                f"{where}: got (C*k*k, N*oh*ow) = {out.shape}, the transpose",
                lesson,
                [fn],
            )
        detail = f"{where}: {got.detail}"  # wrong, but none of the usual bugs: no cause named
        return CheckResult(name, "fail", detail, lesson, [fn], evidence, names_cause=False)
    said = f"matches the reference layout on {len(geometries)} geometries"
    return CheckResult(name, "pass", said, "", [])


def col2im_coverage(calls: StudentCalls, seed: int, grading: bool = False) -> CheckResult:
    """col2im(ones) counts, for each pixel, the windows that cover it."""
    name, fn = "col2im coverage", "col2im"
    lesson = (
        "col2im of all-ones must count the windows covering each pixel: scatter-ADD (+=) each "
        "column back to its window and crop the padding."
    )
    geometries = check_geometries(COVERAGE_GEOMETRIES, seed, grading, _COVERAGE_STREAM)
    for x_shape, k, s, p in geometries:
        n, c, h, w = x_shape
        rows = n * out_size(h, k, s, p) * out_size(w, k, s, p)
        ones = np.ones((rows, c * k * k), dtype=np.float32)
        reply = calls.call(fn, [ones, x_shape, k], {"stride": s, "padding": p}, label="coverage")
        if reply["status"] != "ok":
            return broken_check(name, fn, reply, lesson)
        ref = ref_col2im(ones, x_shape, k, s, p)
        got = compare(reply["output"], ref, rtol=EXACT[0], atol=EXACT[1])
        if not got.ok:
            detail = f"x {x_shape}, k={k}, stride={s}, padding={p}: {got.detail}"
            return CheckResult(name, "fail", detail, lesson, [fn])
    said = f"counts match on {len(geometries)} geometries (overlaps and gaps)"
    return CheckResult(name, "pass", said, "", [])


def gelu_extremes(calls: StudentCalls, seed: int, grading: bool = False) -> CheckResult:
    """fused_gelu stays float32 and finite, and right, from -3e38 to 3e38."""
    name, fn = "dtype and finiteness", "fused_gelu"
    from tinytorch.milestone07.cases import ELEMENTWISE_TOL, LESSONS

    reply = calls.call(fn, [EXTREMES.copy()], {}, label="extremes")
    if reply["status"] != "ok":
        return broken_check(name, fn, reply, LESSONS["gelu_range"])
    got = compare(
        reply["output"], ref_gelu(EXTREMES), rtol=ELEMENTWISE_TOL[0], atol=ELEMENTWISE_TOL[1]
    )
    bad = {f: v for f, v in calls.seen.bad_dtype.items()}
    lessons = []  # what this failure concerns, and nothing else
    if not got.ok:
        bad.setdefault(fn, []).insert(0, f"on x from -3e38 to 3e38: {got.detail}")
        if got.reason == "shape":
            lessons.append("Return the same shape as x: GELU is elementwise.")
        elif got.reason == "nonfinite":
            lessons.append(LESSONS["gelu_range"])
        elif got.reason != "dtype":  # finite and wrong: the formula, not an overflow
            lessons.append(LESSONS["gelu"])
    if calls.seen.bad_dtype or got.reason == "dtype":
        lessons.append("Return float32 Tensors.")
    if bad:
        detail = "; ".join(f"{f}: {', '.join(v[:3])}" for f, v in bad.items())
        return CheckResult(name, "fail", detail, " ".join(lessons), sorted(bad))
    return CheckResult(
        name, "pass", "every output float32 and finite; GELU right out to ±3e38", "", []
    )


def no_mutation(calls: StudentCalls) -> CheckResult:
    """No call wrote into its input Tensors."""
    name = "inputs not mutated"
    seen = calls.seen.mutated
    if seen:
        detail = "; ".join(f"{fn} wrote into {', '.join(v[:3])}" for fn, v in seen.items())
        lesson = (
            "Never write into an input: in-place ufuncs (out=) and `+=` need a buffer of your own "
            "(e.g. y = x.copy() or np.empty_like), not x.data."
        )
        return CheckResult(name, "fail", detail, lesson, sorted(seen))
    if not calls.seen.answered:  # nothing ran to the end, so nothing could have been written
        return CheckResult(name, "not_run", "no call returned, so nothing was observed", "", [])
    return CheckResult(name, "pass", "every input Tensor unchanged after every call", "", [])


CHECKS = (  # (name, the function it examines, check)
    ("tiling audit", "tiled_matmul", tiling_audit),
    ("im2col layout", "im2col", im2col_layout),
    ("col2im coverage", "col2im", col2im_coverage),
    ("dtype and finiteness", "fused_gelu", gelu_extremes),
    ("backward", CONV_FUNCTION, backward_check),  # Im2colConv2dFunction.apply, then backward
)


def run_checks(
    calls: StudentCalls,
    seed: int,
    skip: set[str],
    grading: bool = False,
    *,
    failing: set[str] = frozenset(),
    audit_replies: list[dict] | None = None,
) -> list[CheckResult]:
    """The deeper checks; a check of an unfinished function is reported as incomplete.
    grading: a check may draw its problems from the (secret) seed instead of the published ones.
    failing: the functions with a failing case; audit_replies: see tiling_audit."""
    out = []
    for name, fn, check in CHECKS:
        if fn in skip:
            out.append(CheckResult(name, "incomplete", f"{fn} is not written yet", "", [fn]))
        elif check is tiling_audit:
            reported = fn in failing
            out.append(check(calls, seed, grading, reported=reported, replies=audit_replies))
        else:
            out.append(check(calls, seed, grading=grading))
    out.append(no_mutation(calls))  # last: it sums up every call made above
    return out
