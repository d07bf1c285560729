"""Terminal renderers: the root cause first, one row per case, each lesson once, a summary last."""

from __future__ import annotations

import textwrap

from tinytorch.milestone07.cases import GROUP_INTRO, GROUPS
from tinytorch.milestone07.diagnose import Diagnosis, diagnose_result
from tinytorch.milestone07.results import PartAResult, PartBResult

MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "crash": "CRASH",
    "incomplete": "TODO",
    "not_observed": "N/A",
    "not_run": "NOT RUN",
}
VERDICT_LINE = {
    "PASS": "PASS: your Module 17 kernels match NumPy on every case.",
    "NOT_PASSED": "NOT PASSED: fix the root causes first, then each lesson, and run again.",
    "INCOMPLETE": "INCOMPLETE: Module 17 is not finished: write what is listed above, then rerun.",
    "ERROR": "ERROR: the grader itself failed; this is not a judgement of your code.",
}


def _wrap(text: str, indent: int = 10, width: int = 100) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, width=width, initial_indent=pad, subsequent_indent=pad) or []


def _err(value: float | None) -> str:
    return f"{value:9.1e}" if value is not None else "        -"


def _names(names: list[str], limit: int = 8) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def render_root_causes(diag: Diagnosis) -> list[str]:
    """The failing deeper checks, those that explain failing cases first: what to fix first."""
    if not diag.root_causes:
        return []
    lines = ["root cause first:"]
    for i, cause in enumerate(diag.root_causes, 1):
        lines += _wrap(
            f"{i}. {cause.check} ({MARK.get(cause.status, cause.status)}): {cause.detail}", 2
        )
        if cause.cases:
            lines += _wrap(f"explains {len(cause.cases)} failing case(s): {_names(cause.cases)}", 5)
        if cause.lesson:
            lines += _wrap(f"fix: {cause.lesson}", 5)
    return [*lines, ""]


def render_part_a(result: PartAResult) -> str:
    """The Part A table: root causes, each group's cases and lessons, the deeper checks, the verdict."""
    diag = diagnose_result(result)
    lines = [
        "Milestone 07: Custom Kernels. Part A, the pass gate",
        f"impl {result.impl}   seed {result.seed}   timeout {result.timeout:g} s per case",
        "",
    ]
    lines += render_root_causes(diag)
    width = max((len(c.name) for c in result.cases), default=20) + 2
    for group in GROUPS:
        rows = [c for c in result.cases if c.group == group]
        if not rows:
            continue
        ok = sum(c.status == "pass" for c in rows)
        lines.append(f"{group}  {ok}/{len(rows)}")
        lines += _wrap(GROUP_INTRO[group], indent=2)
        for c in rows:
            lines.append(
                f"  {MARK[c.status]:<7} {c.name:<{width}} err {_err(c.max_error)}  {c.seconds * 1e3:7.1f} ms"
            )
            if c.status not in ("pass", "incomplete"):  # incomplete: listed once at the end
                lines += _wrap(f"{c.title}: {c.detail}")
                if c.name in diag.cause_of:
                    lines += _wrap(f"cause: {diag.cause_of[c.name]} (root cause, above)")
        for lesson in diag.lessons_for(group):
            lines += _wrap(f"fix ({_names(lesson.cases, 4)}): {lesson.text}", indent=2)
        lines.append("")
    if result.checks:
        ok = sum(c.status == "pass" for c in result.checks)
        lines.append(f"deeper checks  {ok}/{len(result.checks)}")
        for c in result.checks:
            lines.append(f"  {MARK.get(c.status, c.status):<7} {c.name:<22} {c.detail}"[:400])
        lines.append("")
    if result.missing:
        lines.append("still to write:")
        lines += [f"  - {m}" for m in result.missing]
        lines.append("")
    lines.append(_summary(result, diag))
    return "\n".join(lines)


def _summary(result: PartAResult, diag: Diagnosis) -> str:
    checks = result.checks
    ok_checks = sum(c.ok for c in checks)
    head = f"{result.verdict.replace('_', ' ')}  {result.passed()}/{len(result.cases)} cases"
    if checks:
        head += f", {ok_checks}/{len(checks)} deeper checks"
    head += f"  ({result.seconds:.1f} s)"
    lines = [head, VERDICT_LINE.get(result.verdict, result.verdict)]
    if result.verdict == "NOT_PASSED":
        if diag.root_causes:
            lines += _wrap("root cause: " + ", ".join(r.check for r in diag.root_causes), 2)
        failing = [c.name for c in result.failing()]
        if failing:
            lines += _wrap("failing: " + _names(failing, 6), indent=2)
    unseen = [c.name for c in checks if c.status == "not_observed"]
    if unseen:
        lines += _wrap(f"not verified (nothing observable): {', '.join(unseen)}", indent=2)
    if diag.not_run:
        lines += _wrap(f"not run: {', '.join(diag.not_run)}", indent=2)
    if result.blamed() and result.verdict == "NOT_PASSED":
        lines.append("  look at: " + ", ".join(sorted(result.blamed())))
    return "\n".join(lines)


def render_diagnosis_lines(diag: dict) -> list[str]:
    """The diagnosis JSON (Diagnosis.to_dict()) as terminal lines: `tito grade`'s summary reads it."""
    lines = []
    for i, cause in enumerate(diag.get("root_causes", []), 1):
        lines += _wrap(f"root cause {i}: {cause['check']}: {cause['detail']}", 2)
        if cause.get("cases"):
            lines += _wrap(f"explains: {_names(cause['cases'])}", 5)
        if cause.get("lesson"):
            lines += _wrap(f"fix: {cause['lesson']}", 5)
    for lesson in diag.get("lessons", []):
        lines += _wrap(f"fix ({_names(lesson['cases'], 4)}): {lesson['text']}", 2)
    if diag.get("not_run"):
        lines += _wrap(f"not run: {', '.join(diag['not_run'])}", 2)
    return lines


def render_part_b(result: PartBResult) -> str:
    """The Part B table: ms and GFLOP/s or GB/s per backend and problem, then backend status lines."""
    lines = [
        "Part B, context (never the verdict): the same problems on other kernels",
        "(rates from the median; on a busy machine the best time is the kinder estimate)",
        "",
    ]
    problem = None
    for r in result.rows:
        if r.problem != problem:
            problem = r.problem
            unit = "GFLOP/s" if r.kind == "gemm" else "GB/s"
            lines.append(f"{problem:<20} {'median ms':>10} {'best ms':>9} {unit:>9}")
        rate = r.gflops if r.kind == "gemm" else r.gbps
        ms = f"{r.ms:10.2f}" if r.ms is not None else "         -"
        best = f"{r.min_ms:9.2f}" if r.min_ms is not None else "        -"
        rt = f"{rate:9.1f}" if rate is not None else "        -"
        status = "" if r.status == "ok" else f"[{r.status}] "
        lines.append(f"  {r.backend:<18} {ms} {best} {rt}  {status}{r.detail}"[:150])
    lines.append("")
    lines.append("backends")
    for b in result.backends:
        mark = "yes" if b.get("available") else "no "
        lines.append(f"  {b.get('name', '?'):<10} {mark}  {b.get('reason', '')}"[:160])
    lines.append(f"({result.seconds:.1f} s)")
    return "\n".join(lines)
