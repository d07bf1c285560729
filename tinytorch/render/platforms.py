"""One conversion layer: a milestone JSON doc -> gradebook row, Gradescope or PrairieLearn results.

Every number comes from `scoring.score_items`, so the three always agree on the points.
"""

from __future__ import annotations

from typing import Any

from tinytorch.milestone07.diagnose import Diagnosis
from tinytorch.milestone07.scoring import Item, Points, graded, score_items, total
from tinytorch.render.terminal import render_lessons, render_root_causes
from tinytorch.safe_text import clean

GRADEBOOK_COLUMNS = (
    "student", "verdict", "cases_passed", "cases_total", "checks_passed", "checks_total",
    "hidden_passed", "hidden_total", "score", "max_score", "seconds", "error", "graded_file",
)  # fmt: skip
LEADERBOARD_PROBLEM = "gemm 1024x1024x1024"
_TITLES = {"case": "case", "check": "deeper check", "hidden_case": "hidden case"}


def _count(items: list[Item], kind: str) -> tuple[int, int]:
    mine = [i for i in items if i.kind == kind]
    return sum(i.passed for i in mine), len(mine)


def _points(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def gradebook_row(student: str, doc: dict[str, Any], points: Points) -> dict[str, Any]:
    """One gradebook.csv row (GRADEBOOK_COLUMNS) for a student's doc."""
    items = score_items(doc, points)
    earned, possible = total(items)
    (cp, ct), (kp, kt), (hp, ht) = (_count(items, k) for k in ("case", "check", "hidden_case"))
    seconds = (doc.get("grader") or {}).get("seconds", doc.get("seconds", 0.0))
    return {
        "student": clean(student),
        "verdict": clean(str(doc["verdict"])),
        "cases_passed": cp,
        "cases_total": ct,
        "checks_passed": kp,
        "checks_total": kt,
        "hidden_passed": hp,
        "hidden_total": ht,
        "score": _points(earned),
        "max_score": _points(possible),
        "seconds": round(float(seconds or 0.0), 1),
        "error": clean(str(doc.get("error") or "")),
        "graded_file": clean(graded_file(doc)),
    }


def graded_file(doc: dict[str, Any]) -> str:
    """The file the result is for, as the student handed it in ("" when none was graded)."""
    named = doc.get("graded_file") or ""
    return str(named) if named else ""


def tiled_matmul_gflops(doc: dict[str, Any], problem: str = LEADERBOARD_PROBLEM) -> float | None:
    """The student's tiled_matmul GFLOP/s on `problem` from Part B, when it ran and was ok."""
    for row in (doc.get("part_b") or {}).get("rows", []):
        if row["backend"] == "student" and row["problem"] == problem and row["status"] == "ok":
            return row.get("gflops")
    return None


def diagnosis_shown(doc: dict[str, Any], *, hidden_details: bool) -> Diagnosis:
    """The run's diagnosis (root causes, lessons) as a student may read it: without
    `hidden_details` no hidden case is named, and a lesson only hidden cases have is dropped."""
    diag = Diagnosis.from_dict(doc.get("diagnosis") or {})
    if hidden_details:
        return diag
    hidden = {c["name"] for c in doc.get("hidden_cases", [])}
    for cause in diag.root_causes:
        cause.cases = [c for c in cause.cases if c not in hidden]
    for lesson in diag.lessons:
        lesson.cases = [c for c in lesson.cases if c not in hidden]
    diag.lessons = [x for x in diag.lessons if x.cases]
    diag.cause_of = {c: why for c, why in diag.cause_of.items() if c not in hidden}
    diag.lesson_of = {c: text for c, text in diag.lesson_of.items() if c not in hidden}
    return diag


def summary_text(
    doc: dict[str, Any], items: list[Item], *, hidden_details: bool, withhold_verdict: bool = False
) -> str:
    """What the student reads, as the CLI's report says it: verdict and counts, the root causes
    and their fixes first, each failure (pointing to its cause), then each other lesson once;
    hidden cases withheld unless `hidden_details`. With `withhold_verdict` (Gradescope before the
    due date) and hidden cases, the first line holds neither the verdict nor the total, which
    both count the hidden cases: only the published points."""
    earned, possible = total(items)
    verdict = doc["verdict"].replace("_", " ")
    lines = [f"Milestone 07: {verdict}  ({_points(earned)}/{_points(possible)} points)"]
    hidden_n = sum(i.kind == "hidden_case" for i in items)
    if withhold_verdict and hidden_n:
        shown, shown_max = total([i for i in items if i.kind != "hidden_case"])
        first = (
            f"Milestone 07: published cases and checks {_points(shown)}/{_points(shown_max)} "
            f"points; the verdict and total, which count {hidden_n} hidden cases, are shown "
            "after the due date"
        )
        lines = [first]
    if graded_file(doc):
        lines.append(f"graded file: {graded_file(doc)}")
    if doc.get("error"):
        lines.append(f"Not graded: {doc['error']}")
    for kind in ("case", "check"):
        passed, n = _count(items, kind)
        if n:
            lines.append(f"{_TITLES[kind]}s: {passed}/{n} passed")
    hidden = [i for i in items if i.kind == "hidden_case"]
    if hidden and hidden_details:
        lines.append(f"hidden cases: {sum(i.passed for i in hidden)}/{len(hidden)} passed")
    elif hidden:
        lines.append(f"{len(hidden)} hidden cases: their results are shown after the due date")
    diag = diagnosis_shown(doc, hidden_details=hidden_details)
    roots = {cause.check for cause in diag.root_causes}
    unreached = [i for i in items if not i.graded]
    if unreached:
        lines.append(f"{len(unreached)} items not reached by the run: 0 of their "
                     f"{_points(total(unreached)[1])} points")  # fmt: skip
    shown_items = [
        i for i in graded(items) if not i.passed and (i.kind != "hidden_case" or hidden_details)
    ]
    if diag.root_causes and shown_items:
        lines += ["", *render_root_causes(diag)]
    if diag.lessons and shown_items:  # each fix before the cases it is for, as the CLI has it
        lines += ([] if diag.root_causes else [""]) + render_lessons(diag.lessons)
    for item in shown_items:
        if item.kind == "check" and item.name in roots:
            continue  # shown above, with its fix
        cause = diag.cause_of.get(item.name)
        why = f" (cause: {cause}, above)" if cause else ""
        lines.append(f"  {item.status.upper():<10} {item.name}: {item.detail}{why}")
        if item.lesson and "diagnosis" not in doc:  # a doc without one: the item's own lesson
            lines.append(f"             lesson: {item.lesson}")
    for missing in doc.get("missing", []):
        lines.append(f"  still to write: {missing}")
    for warning in doc.get("warnings", []):
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def item_text(item: Item, diag: Diagnosis) -> tuple[str, str]:
    """(what happened, what to do) for one item's own test: its detail; its root cause's fix
    and what only it says, or its own lesson (a doc without a diagnosis)."""
    root = next((r for r in diag.root_causes if r.check == diag.cause_of.get(item.name)), None)
    fix = []
    if root is not None:
        fix.append(f"cause: {root.check} (deeper check): {root.lesson}")
        own = diag.lesson_of.get(item.name, "")
    else:
        own = diag.lesson_of.get(item.name, item.lesson)
    if item.kind == "check" and diag.consequence_of.get(item.name):
        fix.append(f"a consequence of {diag.consequence_of[item.name]}: fix that first")
    if own and not item.passed:
        fix.append(f"lesson: {own}")
    return item.detail, "\n".join(fix)


def _item_output(item: Item, diag: Diagnosis) -> str:
    detail, fix = item_text(item, diag)
    return f"{detail}\n{fix}" if fix else detail


def gradescope_results(doc: dict[str, Any], points: Points) -> dict[str, Any]:
    """Gradescope's results.json: one test per case, check and hidden case (after_due_date)."""
    items = score_items(doc, points)
    earned, _possible = total(items)
    diag = diagnosis_shown(doc, hidden_details=True)  # a test's output is as visible as the test
    numbers = {"case": 1, "check": 2, "hidden_case": 3}
    seen = dict.fromkeys(numbers, 0)
    tests = []
    for item in items:
        seen[item.kind] += 1
        tests.append(
            {
                "name": item.name if item.kind != "check" else f"deeper check: {item.name}",
                "number": f"{numbers[item.kind]}.{seen[item.kind]}",
                "score": _points(item.earned),
                "max_score": _points(item.max_points),
                "status": "passed" if item.passed else "failed",
                "output": _item_output(item, diag),
                "visibility": "after_due_date" if item.kind == "hidden_case" else "visible",
                "tags": [item.kind],
            }
        )
    if any(item.kind == "hidden_case" for item in items):  # shown with the hidden cases
        tests.append(
            {
                "name": "verdict (hidden cases included)",
                "number": "0.1",
                "score": 0,
                "max_score": 0,
                "status": "passed" if doc["verdict"] == "PASS" else "failed",
                "output": summary_text(doc, items, hidden_details=True),
                "visibility": "after_due_date",
            }
        )
    if not graded(items):  # nothing was graded: say why (its items above are worth 0 each)
        tests.append(
            {
                "name": "the submission could be graded",
                "number": "0.1",
                "score": 0,
                "max_score": 0,
                "status": "failed",
                "output": doc.get("error") or "; ".join(doc.get("missing", [])) or doc["verdict"],
                "visibility": "visible",
            }
        )
    seconds = (doc.get("grader") or {}).get("seconds", doc.get("seconds", 0.0)) or 0.0
    out: dict[str, Any] = {
        "score": _points(earned),
        "execution_time": round(float(seconds), 1),
        # Gradescope hides the top-level score from students while after_due_date tests are
        # hidden; the summary, always shown, must not give it (or the verdict) away either.
        "output": summary_text(doc, items, hidden_details=False, withhold_verdict=True),
        "output_format": "text",
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    gflops = tiled_matmul_gflops(doc)
    if gflops is not None:
        out["leaderboard"] = [
            {"name": "tiled_matmul GFLOP/s (1024)", "value": round(gflops, 2), "order": "desc"}
        ]
    return out


def prairielearn_results(doc: dict[str, Any], points: Points) -> dict[str, Any]:
    """PrairieLearn's external-grader results.json. PrairieLearn shows every test at once, so the
    hidden cases are one aggregate test (how many passed, no details)."""
    items = score_items(doc, points)
    earned, possible = total(items)
    diag = diagnosis_shown(doc, hidden_details=False)  # PrairieLearn shows every test at once
    tests = [
        {
            "name": item.name if item.kind == "case" else f"deeper check: {item.name}",
            "points": _points(item.earned),
            "max_points": _points(item.max_points),
            "message": message,
            "output": output,
        }
        for item in items
        if item.kind != "hidden_case"
        for message, output in [item_text(item, diag)]
    ]
    hidden = [i for i in items if i.kind == "hidden_case"]
    if hidden:
        h_earned, h_possible = total(hidden)
        passed = sum(i.passed for i in hidden)
        tests.append(
            {
                "name": "hidden cases",
                "points": _points(h_earned),
                "max_points": _points(h_possible),
                "message": f"{passed}/{len(hidden)} hidden cases passed",
                "output": "",
            }
        )
    # Not gradable (PrairieLearn: no points awarded or lost, no attempt used): the grader broke
    # (ERROR), or there was nothing to grade (no file found: an INCOMPLETE doc with no items).
    # A run stopped for the submission's memory or output flood is NOT PASSED: graded, 0 points.
    gradable = doc["verdict"] != "ERROR" and (bool(graded(items)) or doc["verdict"] == "NOT_PASSED")
    out: dict[str, Any] = {
        "gradable": gradable,
        "score": round(earned / possible, 6) if possible else 0.0,
        "message": summary_text(doc, items, hidden_details=False).splitlines()[0],
        "output": summary_text(doc, items, hidden_details=False),
        "tests": tests,
    }
    if not gradable:
        why = doc.get("error") or "; ".join(doc.get("missing", [])) or "internal grader error"
        out["message"] = f"Not graded: {why}"
        if doc["verdict"] != "ERROR":  # the submission's fault, not the grader's
            out["format_errors"] = [why]
    return out
