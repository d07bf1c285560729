"""Attacks on the grader's semantics (issue 9 items 4, 6, 7): each gets its exact verdict.

Precomputed answers for seed 0, special-cased published shapes, the bundled reference passed off
as one's own, seven ways of one whole-matrix np.matmul past the tiling audit, a forged audit
reply, and sleeping just under the per-case timeout on every call.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinytorch.cli.main import main
from tinytorch.milestone07 import CASES, run_part_a
from tinytorch.milestone07 import part_a as part_a_module
from tinytorch.milestone07.boundary import open_sandbox as Sandbox
from tinytorch.milestone07.cases import hidden_cases
from tinytorch.milestone07.checks import AUDIT_PROBLEMS, tiling_audit
from tinytorch.milestone07.references import make_call
from tinytorch.sandbox import spawn

BASE = Path(__file__).parent / "mutants" / "student_base.py"
NO_ACCUMULATE = ("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A")  # a real bug, off the table


def _write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return str(path)


def _buggy_base() -> str:
    src = BASE.read_text()
    assert src.count(NO_ACCUMULATE[0]) == 1
    return src.replace(*NO_ACCUMULATE)


def _audit_caught_a_wrong_answer(result: Any) -> None:
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert result.verdict == "NOT_PASSED" and audit.status == "fail", audit
    assert "wrong answer on the audit's" in audit.detail, audit


# ---- predictable data ---------------------------------------------------------------------------
@pytest.mark.slow
def test_answers_looked_up_by_input_hash_for_seed_0_pass_practice_and_fail_grading(
    tmp_path: Path,
) -> None:
    known = set()
    for case in CASES:
        if case.group == "tiled_matmul":
            _fn, (a, b), _kw = make_call(case, 0)
            known.add(hashlib.sha256(a.tobytes() + b.tobytes()).hexdigest())
    cheat = _buggy_base() + (
        f"\nKNOWN = {sorted(known)!r}\n"
        "import hashlib\n"
        "_buggy = tiled_matmul\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    A, B = _arr(a), _arr(b)\n"
        "    if hashlib.sha256(A.tobytes() + B.tobytes()).hexdigest() in KNOWN:\n"
        "        return Tensor((A.astype(np.float64) @ B).astype(np.float32))  # precomputed\n"
        "    return _buggy(a, b, tile_size)\n"
    )
    path = _write(tmp_path, "lookup", cheat)
    practice = run_part_a(path)
    assert practice.passed() == 30, [(c.name, c.detail) for c in practice.failing()]
    _audit_caught_a_wrong_answer(practice)  # practice's cases alone are fooled, not its audit
    graded = run_part_a(path, grading=True)
    assert graded.verdict == "NOT_PASSED" and graded.blamed() == {"tiled_matmul"}
    assert any(c.status == "fail" for c in graded.cases if c.group == "tiled_matmul")


def test_every_seeds_hidden_matmul_cases_span_several_k_tiles() -> None:
    """A kernel that assigns each k-tile's product (no +=) is right whenever K fits in one tile.
    Drawn freely, about 4 hidden cases in 10 had such a K, and 1 seed in ~300 let that kernel pass
    all six (the test below failed so once in a full run): two cases always span several."""
    for seed in range(500):
        cases = hidden_cases(seed, ["tiled_matmul"])
        assert sum(c.params["k"] > c.params["tile_size"] for c in cases) >= 2, (seed, cases)


def test_special_cased_published_shapes_fail_the_hidden_cases(tmp_path: Path) -> None:
    shapes = sorted(
        {(c.params["m"], c.params["k"], c.params["n"]) for c in CASES if c.group == "tiled_matmul"}
    )
    cheat = _buggy_base() + (
        f"\nPUBLISHED = {shapes!r}\n"
        "_buggy = tiled_matmul\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    A, B = _arr(a), _arr(b)\n"
        "    if (A.shape[0], A.shape[1], B.shape[1]) in PUBLISHED:\n"
        "        return Tensor((A.astype(np.float64) @ B).astype(np.float32))\n"
        "    return _buggy(a, b, tile_size)\n"
    )
    path = _write(tmp_path, "shapes", cheat)
    practice = run_part_a(path)
    assert practice.passed() == 30
    _audit_caught_a_wrong_answer(practice)
    graded = run_part_a(path, grading=True)
    assert graded.verdict == "NOT_PASSED"
    assert graded.passed() == 30  # every published case still passes ...
    failed = [c for c in graded.hidden if c.status != "pass"]
    assert failed and all(
        c.name.startswith("hidden/tiled_matmul/") for c in failed
    )  # ... not these


# ---- the bundled reference passed off as one's own --------------------------------------------
DELEGATIONS = {
    "star_import": "from tinytorch.perf.acceleration import *  # noqa: F403\n",
    "assigned": (
        "import tinytorch.perf.acceleration as _ref\n"
        "tiled_matmul, fused_gelu, im2col = _ref.tiled_matmul, _ref.fused_gelu, _ref.im2col\n"
        "im2col_conv2d, col2im = _ref.im2col_conv2d, _ref.col2im\n"
        "Im2colConv2dFunction = _ref.Im2colConv2dFunction\n"
    ),
}


def _reported_origins() -> bool:
    with Sandbox(str(BASE)) as box:
        return "origins" in box.start()


@pytest.mark.parametrize("name", sorted(DELEGATIONS))
def test_reference_delegation_is_not_passed_when_grading_and_a_warning_in_practice(
    name: str, tmp_path: Path
) -> None:
    if not _reported_origins():
        pytest.skip("this Sandbox's load info has no 'origins' (K1, issue 9 child side)")
    path = _write(tmp_path, name, DELEGATIONS[name])
    practice = run_part_a(path)
    assert practice.verdict == "PASS"
    assert any("uses the bundled reference solution" in w for w in practice.warnings)
    graded = run_part_a(path, grading=True)
    assert graded.verdict == "NOT_PASSED"
    text = " ".join([c.detail for c in graded.checks] + [c.detail for c in graded.cases])
    assert "reference" in text  # the own-work check, or the child refusing the import


EXEC_REFERENCE = {  # the import is refused while grading, so these read the source instead
    "exec_source": """
import os, tinytorch
exec(open(os.path.join(os.path.dirname(tinytorch.__file__), "perf", "acceleration.py")).read())
""",
    "exec_under_its_own_file_name": """
import os, tinytorch
src = open(os.path.join(os.path.dirname(tinytorch.__file__), "perf", "acceleration.py")).read()
exec(compile(src, __file__, "exec"))  # code "from" this file, whose text holds none of it
""",
    "copy_to_a_file_and_import": """
import importlib.util, os, shutil, tinytorch
src = os.path.join(os.path.dirname(tinytorch.__file__), "perf", "acceleration.py")
shutil.copy(src, "kernels_elsewhere.py")
spec = importlib.util.spec_from_file_location("kernels_elsewhere", "kernels_elsewhere.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
tiled_matmul, fused_gelu, im2col, col2im, im2col_conv2d = (
    mod.tiled_matmul, mod.fused_gelu, mod.im2col, mod.col2im, mod.im2col_conv2d
)
Im2colConv2dFunction = mod.Im2colConv2dFunction
""",
}


@pytest.mark.parametrize("name", sorted(EXEC_REFERENCE))
def test_running_the_references_source_is_not_passed_when_grading(
    name: str, tmp_path: Path, monkeypatch
) -> None:
    """Without a mount namespace the child reads the reference's source, and the own-work
    fingerprints find its code however it was run."""
    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    monkeypatch.setattr(spawn, "_NAMESPACES", None)
    monkeypatch.setenv(spawn.TRUST_VAR, "1")  # where Python is root-only, grading would refuse
    graded = run_part_a(_write(tmp_path, name, EXEC_REFERENCE[name]), grading=True)
    assert graded.verdict == "NOT_PASSED"
    (own,) = [c for c in graded.checks if c.name == "own work"]
    assert own.status == "fail" and "runs a copy of the reference's" in own.detail
    assert "tiled_matmul" in own.detail


@pytest.mark.parametrize("name", sorted(EXEC_REFERENCE))
def test_in_its_mount_namespace_a_grading_child_reads_the_reference_as_empty(
    name: str, tmp_path: Path
) -> None:
    """With one, the reference's source reads as empty (test_isolation.py): what these files
    run defines nothing (INCOMPLETE; NOT PASSED where the import itself then fails), whatever
    they would do to the code."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no mount namespace for the child: {spawn.namespace_prefix()[1]}")
    graded = run_part_a(_write(tmp_path, name, EXEC_REFERENCE[name]), grading=True)
    assert graded.verdict in ("INCOMPLETE", "NOT_PASSED"), graded.verdict
    assert graded.isolation["reference"]["active"], graded.isolation["reference"]
    practice = run_part_a(_write(tmp_path, name, EXEC_REFERENCE[name]))
    assert practice.verdict == "PASS"  # a practice run reads it: the fingerprints only warn


def test_the_references_fingerprints_are_computed_once_per_grader() -> None:
    from tinytorch.milestone07 import own_work as fingerprint

    first = fingerprint.reference_fingerprints()
    misses = fingerprint._reference_fingerprints.cache_info().misses
    first.clear()  # a caller's copy: the cache keeps its own
    again = fingerprint.reference_fingerprints()
    assert again and "tiled_matmul" in again.values()
    assert fingerprint._reference_fingerprints.cache_info().misses == misses  # not recomputed


def test_reference_text_in_the_submission_itself_is_a_similarity_question(tmp_path: Path) -> None:
    """Out of scope for the gate (README, Grading safely): the class grader flags it instead."""
    from tinytorch.release import reference_path

    path = _write(tmp_path, "pasted", reference_path(17).read_text())
    assert run_part_a(path, grading=True).verdict == "PASS"


class _Origins:
    """A real Sandbox whose load info claims what K1's child reports about a delegating file."""

    def __init__(self, box: Sandbox, extra: dict[str, Any]) -> None:
        self.box, self.extra = box, extra

    def __enter__(self) -> _Origins:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.box.close()

    def start(self) -> dict[str, Any]:
        return {**self.box.start(), **self.extra}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.box, name)


@pytest.mark.parametrize(
    "extra",
    [
        {"origins": dict.fromkeys(part_a_module.FUNCTIONS, "reference")},
        {"origins": {"tiled_matmul": "reference"}, "imports_reference": False},
        {"origins": {}, "imports_reference": True},
    ],
    ids=["all_reference", "one_reference", "imports_reference"],
)
def test_reported_reference_use_decides_the_verdict(
    extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = part_a_module.open_sandbox
    monkeypatch.setattr(
        part_a_module, "open_sandbox", lambda impl, **kw: _Origins(real(impl, **kw), extra)
    )
    practice = run_part_a(str(BASE), cases=["fused_gelu"])
    assert practice.verdict == "PASS"
    assert [w for w in practice.warnings if w.startswith("uses the bundled reference solution")]
    graded = run_part_a(str(BASE), cases=["fused_gelu"], grading=True)
    own = next(c for c in graded.checks if c.name == "own work")
    assert graded.verdict == "NOT_PASSED" and own.status == "fail"
    assert own.detail.startswith("uses the bundled reference solution")


def test_missing_origins_count_as_the_students_own() -> None:
    assert part_a_module.reference_use({"status": "ok", "functions": {}}) is None
    assert part_a_module.own_work_check({"status": "ok"}).ok
    info = {
        "origins": dict.fromkeys(part_a_module.FUNCTIONS, "student"),
        "imports_reference": False,
    }
    assert part_a_module.reference_use(info) is None
    assert part_a_module.reference_use({"origins": {"col2im": "numpy"}}) is None  # not ours


# ---- the tiling audit: one whole-matrix product, seven disguises ------------------------------
WHOLE_MATMULS = {
    "data_at_data": "    return Tensor(_arr(a) @ _arr(b))\n",
    "np_matmul_asarray": "    return Tensor(np.matmul(np.asarray(_arr(a)), np.asarray(_arr(b))))\n",
    "np_dot": "    return Tensor(np.dot(_arr(a), _arr(b)))\n",
    "einsum": "    return Tensor(np.einsum('ik,kj->ij', _arr(a), _arr(b)))\n",
    "plain_views": "    return Tensor(_arr(a).view(np.ndarray) @ _arr(b).view(np.ndarray))\n",
    "tolist_copies": (
        "    A = np.array(_arr(a).tolist(), dtype=np.float32)\n"
        "    return Tensor(A @ np.array(_arr(b).tolist(), dtype=np.float32))\n"
    ),
    "records_cleared": (
        "    from tinytorch.sandbox.child import audit\n"
        "    out = Tensor(_arr(a) @ _arr(b))\n"
        "    audit.RECORDS.clear()\n"
        "    return out\n"
    ),
    "record_replaced": (
        "    from tinytorch.sandbox.child import audit\n"
        "    audit.record = lambda *args: None\n"
        "    return Tensor(_arr(a) @ _arr(b))\n"
    ),
    "one_small_slice": (  # a tile-sized slice as the only evidence, the product out of sight
        "    A, B = _arr(a), _arr(b)\n"
        "    A[:1, :1]\n"
        "    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))\n"
    ),
    "one_small_product": (  # one tile-sized product seen, the whole one out of sight
        "    A, B = _arr(a), _arr(b)\n"
        "    A[:1, :1] @ B[:1, :1]\n"
        "    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))\n"
    ),
}


TAMPERING = {"records_cleared", "record_replaced"}


@pytest.mark.parametrize("name", sorted(WHOLE_MATMULS))
def test_a_whole_matrix_matmul_fails_the_tiling_audit(name: str, tmp_path: Path) -> None:
    body = "\ndef tiled_matmul(a, b, tile_size=64):\n" + WHOLE_MATMULS[name]
    result = run_part_a(_write(tmp_path, name, BASE.read_text() + body))
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert not audit.ok and audit.status in ("fail", "not_observed"), audit
    assert audit.blame == ["tiled_matmul"] and audit.lesson
    assert result.verdict == "NOT_PASSED" and "tiled_matmul" in result.blamed()
    if name not in TAMPERING:  # K1's guard fails every reply after tampering, not just the audit
        assert result.passed() == 30 and result.blamed() == {"tiled_matmul"}


@pytest.mark.parametrize("grading", [False, True], ids=["practice", "grading"])
def test_a_small_slice_or_product_does_not_vouch_for_the_whole_product(
    grading: bool, tmp_path: Path
) -> None:
    body = "\ndef tiled_matmul(a, b, tile_size=64):\n" + WHOLE_MATMULS["one_small_slice"]
    result = run_part_a(_write(tmp_path, "slice", BASE.read_text() + body), grading=grading)
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "not_observed" and "could not be verified" in audit.detail, audit
    assert "tile-sized slices of 1/" in audit.detail  # it names how little it saw
    assert result.verdict == "NOT_PASSED" and result.blamed() == {"tiled_matmul"}


def test_tiling_only_the_published_audit_shapes_fails_when_grading(tmp_path: Path) -> None:

    shapes = sorted({(m, k, n) for m, k, n, _t in AUDIT_PROBLEMS})
    cheat = BASE.read_text() + (
        f"\nAUDITED = {shapes!r}\n"
        "_tiled = tiled_matmul\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    A, B = _arr(a), _arr(b)\n"
        "    if (A.shape[0], A.shape[1], B.shape[1]) in AUDITED:\n"
        "        return _tiled(a, b, tile_size)\n"
        "    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))\n"
    )
    path = _write(tmp_path, "audited_shapes", cheat)
    practice = run_part_a(path, cases=["fused_gelu"])
    assert next(c for c in practice.checks if c.name == "tiling audit").status == "pass"
    graded = run_part_a(path, cases=["fused_gelu"], grading=True)
    audit = next(c for c in graded.checks if c.name == "tiling audit")
    assert audit.status == "not_observed" and graded.verdict == "NOT_PASSED", audit


def test_block_slices_are_recorded_with_their_index_ranges() -> None:
    from tinytorch.sandbox.child import audit

    a = np.arange(35, dtype=np.float32).reshape(5, 7).view(audit.AuditArray)
    b = np.zeros((7, 3), dtype=np.float32).view(audit.AuditArray)
    audit.reset([a, b, None])
    a[1:3, 2:6]  # a block
    a[4]  # one row
    a[:, 6:][None]  # a column, with an axis added
    b.T[1:, :4]  # a block of B, through its transpose
    a[::2, :2]  # a step: not one dense block
    a[0:2, 5:7].copy()[:, :1]  # a copy: no longer A's memory
    assert set(audit.BOXES) == {
        (0, 1, 3, 2, 6),
        (0, 4, 5, 0, 7),
        (0, 0, 5, 6, 7),
        (1, 0, 4, 1, 3),
        (0, 0, 2, 5, 7),  # the slice that was copied is itself a block
    }
    audit.reset()
    assert audit.BOXES == {} and audit.OPERANDS == []


def test_what_the_audit_saw_must_account_for_the_product() -> None:
    from tinytorch.milestone07.references import ref_matmul

    class Answers:  # the right answer to every audit problem, with the given evidence
        def __init__(self, evidence: Any) -> None:
            self.evidence = evidence

        def call(self, fn: str, args: list[Any], kwargs: dict[str, Any], **opts: Any) -> dict:
            (m, k), n, t = args[0].shape, args[1].shape[1], kwargs["tile_size"]
            out = ref_matmul(*args).astype(np.float32)
            return {"status": "ok", "output": out, **self.evidence(m, k, n, t)}

    def tiles(m: int, k: int, n: int, t: int) -> dict:
        boxes = [
            [0, i, min(i + t, m), j, min(j + t, k)] for i in range(0, m, t) for j in range(0, k, t)
        ]
        boxes += [
            [1, i, min(i + t, k), j, min(j + t, n)] for i in range(0, k, t) for j in range(0, n, t)
        ]
        return {"boxes": boxes}

    def products(m: int, k: int, n: int, t: int) -> dict:
        rec = [["matmul", [[t, t], [t, t]]]] * (-(-m // t) * -(-k // t) * -(-n // t))
        return {"records": rec}

    assert tiling_audit(Answers(tiles), 0).status == "pass"
    assert tiling_audit(Answers(products), 0).status == "pass"
    half = tiling_audit(Answers(lambda m, k, n, t: {"boxes": tiles(m, k, n, t)["boxes"][1:]}), 0)
    assert half.status == "not_observed" and not half.ok
    big = tiling_audit(Answers(lambda m, k, n, t: {"boxes": [[0, 0, m, 0, k], [1, 0, k, 0, n]]}), 0)
    assert big.status == "not_observed"  # whole-operand "blocks" are not tile-sized


class _Replies:
    """StudentCalls stand-in: every call answers with the given reply."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any], **opts: Any) -> dict[str, Any]:
        return {"output": (args[0].astype(np.float64) @ args[1]).astype(np.float32), **self.reply}


def test_a_reply_flagged_tampered_is_a_named_audit_failure() -> None:
    ok = {"status": "ok", "records": []}  # and the right answer
    got = tiling_audit(_Replies({**ok, "tampered": "audit.RECORDS was replaced"}), 0)
    assert got.status == "fail" and "tampered with" in got.detail and "RECORDS" in got.detail
    assert "audit" in got.lesson and got.blame == ["tiled_matmul"]
    forged = {**ok, "records": [("matmul", ((7, 7), (7, 7)))], "tampered": True}
    assert not tiling_audit(_Replies(forged), 0).ok
    unseen = tiling_audit(_Replies(ok), 0)
    assert unseen.status == "not_observed" and not unseen.ok and "np.matmul" in unseen.lesson


# ---- the run's budget -----------------------------------------------------------------------------
SLOW = (
    "\nimport time as _time\n"
    "_fast_gelu = fused_gelu\n"
    "def fused_gelu(x):\n"
    "    _time.sleep(0.4)  # just under the per-case timeout, on every call\n"
    "    return _fast_gelu(x)\n"
)


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.timing
def test_sleeping_under_the_timeout_on_every_call_is_cut_by_the_budget(tmp_path: Path) -> None:
    path = _write(tmp_path, "slow", BASE.read_text() + SLOW)
    start = time.perf_counter()
    result = run_part_a(path, timeout=0.5, budget=2.0, grading=True)
    took = time.perf_counter() - start
    assert took < 2.0 + 0.5 + 5.0  # budget + one cut-short call + start-up and the reference math
    assert result.verdict == "NOT_PASSED"
    cut = [c for c in [*result.cases, *result.hidden] if c.status == "timeout"]
    assert cut and all("budget" in c.detail for c in cut)
    assert any(w.startswith("budget:") for w in result.warnings)
    assert any(c.status == "pass" for c in result.cases)  # it graded what it reached


@pytest.mark.slow
def test_budget_flag_reaches_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "slow", BASE.read_text() + SLOW)
    argv = ["milestone", "run", "07", "--impl", path, "--no-part-b", "--timeout", "0.5"]
    assert main([*argv, "--budget", "2"]) == 1
    out = capsys.readouterr().out
    assert "TIMEOUT" in out and "budget" in out


# ---- tiling only when watched ---------------------------------------------------------------------
WATCHED_ONLY = '''

_tiled = tiled_matmul


def tiled_matmul(a, b, tile_size=64):
    """The buggy tiled kernel only when the grader's recording array is seen; NumPy otherwise."""
    import numpy as _np
    from tinytorch.core.tensor import Tensor as _T

    data = a.data if hasattr(a, "data") else a
    if type(data) is _np.ndarray:  # not watched: skip the tiles
        return _T(_np.asarray(data) @ _np.asarray(b.data if hasattr(b, "data") else b))
    return _tiled(a, b, tile_size)
'''


@pytest.mark.slow
@pytest.mark.parametrize("grading", [False, True])
def test_a_kernel_that_tiles_only_when_watched_is_graded_as_what_it_does(tmp_path, grading):
    """Every call gets the same array class and the same NumPy, audited or not: a buggy tiled
    kernel switched on only for the audit (and np.matmul for the cases) was PASS 30/30."""
    path = _write(tmp_path, "watched", _buggy_base() + WATCHED_ONLY)
    result = run_part_a(path, grading=grading)
    assert result.verdict == "NOT_PASSED"
    failed = {c.group for c in result.cases if c.status != "pass"}
    assert "tiled_matmul" in failed


# ---- counting its calls ---------------------------------------------------------------------------
# The probe and every case come before the audit in the published order (1 + 18 + 6 hidden calls).
COUNTING = '''

_tiled = tiled_matmul
_calls = [0]


def tiled_matmul(a, b, tile_size=64):
    """np.matmul of the whole matrices for the first 25 calls, then the {after} tiled kernel."""
    import numpy as _np
    from tinytorch.core.tensor import Tensor as _T

    _calls[0] += 1
    if _calls[0] <= 25:
        return _T(_np.asarray(a.data) @ _np.asarray(b.data))
    return _tiled(a, b, tile_size)
'''


@pytest.mark.slow
@pytest.mark.parametrize("after", ["buggy", "right"])
def test_a_kernel_that_counts_its_calls_cannot_find_the_unwatched_ones(tmp_path, after):
    """Grading mode draws the order of every call, the audit's among the cases', from the secret
    seed, and grades the audit's answers too. Before, with the audit after the cases, a kernel
    that switched to a buggy tiled kernel after its 25th call was PASS 30/30 and 16/16 hidden,
    and one that multiplied the whole matrices for the cases and tiled only after passed the
    audit."""
    src = _buggy_base() if after == "buggy" else BASE.read_text()
    path = _write(tmp_path, f"counting_{after}", src + COUNTING.replace("{after}", after))
    for seed in (1, 2, 3):
        result = run_part_a(path, grading=True, seed=seed)
        assert result.verdict == "NOT_PASSED", (seed, result.checks)
        audit = next(c for c in result.checks if c.name == "tiling audit")
        failed = [c for c in [*result.cases, *result.hidden] if c.status != "pass"]
        if after == "right":  # every answer is right: the whole-matrix products fail the audit
            assert not failed and audit.status == "fail" and "larger than the tile" in audit.detail
        elif not failed:  # only the audit's calls came after the 25th: its answers are graded
            assert audit.status == "fail" and "wrong answer" in audit.detail, audit
        else:
            assert {c.group for c in failed} == {"tiled_matmul"}


def test_a_wrong_answer_seen_only_by_the_audit_fails_it(tmp_path) -> None:
    """Practice mode calls the audit after the cases: right for the cases, buggy after them, the
    audit's wrong answer is a failure of its own, with its own lesson (no case explains it)."""
    path = _write(
        tmp_path,
        "counting_practice",
        _buggy_base() + COUNTING.replace("25", "19").replace("{after}", "buggy"),
    )
    result = run_part_a(path)
    assert result.verdict == "NOT_PASSED"
    assert all(c.status == "pass" for c in result.cases)
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "fail" and "wrong answer on the audit's" in audit.detail, audit
    assert not audit.names_cause and "every call" in audit.lesson


# ---- a restart that stalls ------------------------------------------------------------------------
RESTART_STALL = """
import os as _os
import time as _time

_MARK = "{mark}"  # in a world-writable folder: each restart gets a fresh private folder
if _os.path.exists(_MARK):
    _time.sleep(30)  # a restart: the import stalls (the first import was quick)
else:
    open(_MARK, "w").close()

_ok = tiled_matmul


def tiled_matmul(a, b, tile_size=64):
    _os._exit(3)  # every call kills the child, so the next call restarts it
"""


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.timing
def test_an_import_that_stalls_only_on_restarts_is_held_to_the_call_timeout(
    tmp_path, monkeypatch
) -> None:
    """Red-teaming: a restart's import could take START_TIMEOUT_S (60 s) whatever the per-case
    timeout and the budget, so a submission that crashed each call and stalled each re-import
    ran a 10 s budget for 51 s. A restart now imports within the call's own time."""
    # a folder like /tmp/.X11-unix: world-writable, not the sandbox uid's own, so what the child
    # leaves inside it outlives a restart (the sandbox removes only what its uid owns in /tmp).
    # In its own mount namespace a child gets a fresh /tmp (test_isolation.py), so the channel
    # exists only without one: the restart's time limit must hold there too.
    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    monkeypatch.setattr(spawn, "_NAMESPACES", None)
    monkeypatch.setenv(spawn.TRUST_VAR, "1")  # where Python is root-only, grading would refuse
    folder = Path(tempfile.mkdtemp(prefix="tt-restart-"))
    folder.chmod(0o1777)
    mark = folder / "started-once"
    source = BASE.read_text() + RESTART_STALL.replace("{mark}", str(mark))
    path = _write(tmp_path, "restart_stall", source)
    # The 5 probes alone spend about 4.5 s (a crash, then 4 restarts held to 1 s each), so the
    # budget leaves room for several cases to restart too: with 6 s, one slow start-up left none.
    budget = 10.0
    start = time.perf_counter()
    try:
        result = run_part_a(path, timeout=1.0, budget=budget, grading=True)
    finally:
        took = time.perf_counter() - start
        shutil.rmtree(folder, ignore_errors=True)
    assert mark.name in source
    assert result.verdict == "NOT_PASSED"
    assert took < budget + 1.0 + 8.0, took  # the budget, one call's timeout, start-up and checks
    assert result.restarts >= 4, result.restarts  # each probe after the first restarted the child
    every = [*result.cases, *result.hidden, *result.checks]
    assert any("restarting the child" in c.detail for c in every), [c.detail for c in every]


# ---- reading or forging the audit from inside the child -------------------------------------------
ASKS_IF_WATCHED = """

import sys as _sys

_tiled = tiled_matmul


def _watched(A):
    audit = type(A).__getitem__.__globals__ if type(A) is not np.ndarray else {}
    if not audit.get("OPERANDS"):  # audit.reset() filled it on audited calls only
        return False
    frame = _sys._getframe(1)
    while frame is not None:  # the child's call() had the request's flag in a local
        if "audited" in frame.f_locals:
            return bool(frame.f_locals["audited"])
        if isinstance(frame.f_locals.get("req"), dict) and "audit" in frame.f_locals["req"]:
            return bool(frame.f_locals["req"]["audit"])
        frame = frame.f_back
    return True


def tiled_matmul(a, b, tile_size=64):
    if not _watched(_arr(a)):
        return Tensor(np.zeros((_arr(a).shape[0], _arr(b).shape[1]), np.float32))  # unwatched
    return _tiled(a, b, tile_size)
"""


def test_a_kernel_cannot_ask_the_child_whether_a_call_is_audited(tmp_path) -> None:
    """Red-teaming: audit.OPERANDS was filled only on audited calls, and the child's call() held
    the request's audit flag in a local, so a kernel could tile only when watched (and compute
    anything otherwise: it was PASS with untiled cases). Every call is now recorded alike and no
    flag reaches the child: such a kernel always believes it is watched."""
    path = _write(tmp_path, "asks", BASE.read_text() + ASKS_IF_WATCHED)
    result = run_part_a(path, grading=True, seed=1)
    wrong = [c.name for c in [*result.cases, *result.hidden] if c.status != "pass"]
    assert not wrong, wrong  # it never once saw an unwatched call
    assert result.verdict == "PASS"


FORGED_RECORD = """

_forge_tiled = tiled_matmul


def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a), _arr(b)
    audit = type(A).__getitem__.__globals__
    M, K = A.shape
    record = {record}
    audit["RECORDS"].append(record)
    audit["_LOG"].append(record)  # the guard compares the two lists: both are written
    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))  # untiled, invisible
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "record",
    [
        '("matmul", ((-(M * K * B.shape[1]), 1), (1, -1)))',  # counted M*K*N, max dim 1
        '("matmul", ((-(10**320), 1), (1, 1)))',  # broke the grader: ERROR
    ],
    ids=["negative_dims", "astronomic_dims"],
)
def test_a_forged_record_of_impossible_dims_is_a_protocol_failure(tmp_path, record) -> None:
    path = _write(tmp_path, "forged", BASE.read_text() + FORGED_RECORD.replace("{record}", record))
    result = run_part_a(path, grading=True, seed=1)
    assert result.verdict == "NOT_PASSED"  # not PASS, not ERROR
    mm = [c for c in [*result.cases, *result.hidden] if c.group == "tiled_matmul"]
    assert any(c.status == "protocol" for c in mm), [c.status for c in mm]


FORGED_BOXES = """

def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a), _arr(b)
    audit = type(A).__getitem__.__globals__
    M, K = A.shape
    N = B.shape[1]
    for op, rows, cols in ((0, M, K), (1, K, N)):  # tile-sized block slices covering A and B
        for r in range(0, rows, tile_size):
            for c in range(0, cols, tile_size):
                box = (op, r, min(r + tile_size, rows), c, min(c + tile_size, cols))
                audit["BOXES"][box] = 1
    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))
"""


def test_forged_block_slices_are_named_tampering(tmp_path) -> None:
    path = _write(tmp_path, "boxes", BASE.read_text() + FORGED_BOXES)
    result = run_part_a(path, grading=True, seed=1)
    assert result.verdict == "NOT_PASSED"
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "fail" and "slice records were changed" in audit.detail, audit


# ---- strings that cannot be printed -------------------------------------------------------------
SURROGATE = """

def fused_gelu(x):
    raise ValueError("bad \\\\ud800 surrogate".encode().decode("unicode_escape"))
"""


def test_an_error_message_with_a_lone_surrogate_is_graded_not_an_error(tmp_path, capsys) -> None:
    """Red-teaming: a message holding a lone surrogate crossed the wire and broke printing the
    report, so the verdict was ERROR (and PrairieLearn's result not gradable)."""
    path = _write(tmp_path, "surrogate", BASE.read_text() + SURROGATE)
    report = tmp_path / "r.json"
    argv = ["milestone", "run", "07", "--impl", path, "--no-part-b", "--grading"]
    assert main([*argv, "--json", str(report)]) == 1  # NOT PASSED, not 3 (ERROR)
    out = capsys.readouterr().out
    assert "NOT PASSED" in out and "bad \ufffd" in out  # U+FFFD in place of the surrogate
    doc = json.loads(report.read_text(encoding="utf-8"))  # strict UTF-8 JSON
    assert doc["verdict"] == "NOT_PASSED" and "bad \ufffd" in json.dumps(doc, ensure_ascii=False)


BATCHED_DUMMY = """

def tiled_matmul(a, b, tile_size=64):
    A, B = _arr(a), _arr(b)
    M, K = A.shape
    N = B.shape[1]
    ones = {dummy}
    np.matmul(ones, np.zeros((1, 1), np.float32))  # "M*K*N block products of 1x1x1"
    return Tensor(A.view(np.ndarray) @ B.view(np.ndarray))  # the real product: untiled, unseen
"""


@pytest.mark.parametrize(
    "dummy",
    [
        "np.broadcast_to(np.zeros((1, 1, 1), np.float32), (M * K * N, 1, 1))",  # stride 0
        "np.zeros((M * K * N, 1, 1), np.float32)",  # real memory: a batch past the tile count
    ],
    ids=["broadcast", "batch"],
)
def test_a_dummy_batched_product_does_not_stand_for_the_tiles(tmp_path, dummy) -> None:
    """Red-teaming: one batched product of M*K*N 1x1 blocks counted as the whole product, and an
    untiled kernel was PASS. A broadcast axis counts once, and a batch counts at most one block
    per tile triple of the problem."""
    path = _write(tmp_path, "dummy", BASE.read_text() + BATCHED_DUMMY.replace("{dummy}", dummy))
    result = run_part_a(path, grading=True, seed=1)
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert result.verdict == "NOT_PASSED" and audit.status == "not_observed", audit
