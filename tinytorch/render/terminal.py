"""Terminal renderers: the root cause first, one row per case, each lesson once, a summary last."""

from __future__ import annotations

import textwrap

from tinytorch.milestone07.cases import GROUP_INTRO, GROUPS, HIDDEN_PREFIX
from tinytorch.milestone07.diagnose import Diagnosis, Lesson, diagnose_result
from tinytorch.milestone07.results import PartAResult, PartBResult

MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "crash": "CRASH",
    "protocol": "PROTOCOL",
    "incomplete": "TODO",
    "not_observed": "UNSEEN",
    "not_run": "NOT RUN",
}
VERDICT_LINE = {
    "PASS": "PASS: your Module 17 kernels match NumPy on every case.",
    "NOT_PASSED": "NOT PASSED: fix the root causes first, then each lesson, and run again.",
    "INCOMPLETE": "INCOMPLETE: Module 17 is not finished: write what is listed above, then rerun.",
    "ERROR": "ERROR: the grader itself failed (not your code's fault); report it with this output.",
}


_GRADING = " (grading mode: secret until now)"


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
        if cause.consequences:
            lines += _wrap(_also_fail(cause.consequences), 5)
        if cause.lesson:
            lines += _wrap(f"fix: {cause.lesson}", 5)
    return [*lines, ""]


def _also_fail(checks: list[str]) -> str:
    return f"also makes fail: {', '.join(checks)} (deeper check, a consequence: fix this first)"


def _follows(check: str, diag: Diagnosis) -> str:
    up = diag.consequence_of.get(check)
    return f" (a consequence of {up}: fix that first)" if up else ""


def render_part_a(result: PartAResult) -> str:
    """The Part A table: root causes, each group's cases and lessons, the deeper checks, the verdict."""
    diag = diagnose_result(result)
    lines = [
        "Milestone 07: Custom Kernels. Part A, the pass gate",
        f"impl {result.impl}   seed {result.seed}{_GRADING if result.grading else ''}   "
        + f"timeout {result.timeout:g} s per case",
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
                lines += _cause(c.name, diag)
        lines += render_lessons([x for x in diag.lessons_for(group) if not _hidden(x)])
        lines.append("")
    if result.checks:
        ok = sum(c.status == "pass" for c in result.checks)
        lines.append(f"deeper checks  {ok}/{len(result.checks)}")
        for c in result.checks:
            line = f"  {MARK.get(c.status, c.status):<7} {c.name:<22} {c.detail}"[:400]
            lines.append(line + _follows(c.name, diag))
        lines.append("")
    if result.hidden:
        ok = sum(c.status == "pass" for c in result.hidden)
        lines.append(f"hidden cases (grading mode, drawn for this run)  {ok}/{len(result.hidden)}")
        for c in result.hidden:  # the same diagnosis: a cause, or a lesson listed once below
            lines.append(f"  {MARK[c.status]:<7} {c.name}  {c.title}"[:300])
            if c.status not in ("pass", "incomplete"):
                lines += _wrap(f"{c.detail}")
                lines += _cause(c.name, diag)
        lines += render_lessons([x for x in diag.lessons if _hidden(x)])
        lines.append("")
    if result.warnings or result.error:
        lines += [f"warning: {w}"[:600] for w in result.warnings]
        lines += [result.error[:600]] if result.error else []
        lines.append("")
    if result.missing:
        lines.append("still to write:")
        lines += [f"  - {m}" for m in result.missing]
        lines.append("")
    lines.append(_summary(result, diag))
    return "\n".join(lines)


def _cause(case: str, diag: Diagnosis) -> list[str]:
    if case not in diag.cause_of:
        return []
    return _wrap(f"cause: {diag.cause_of[case]} (root cause, above)")


def _hidden(lesson: Lesson) -> bool:
    """Only hidden cases have it (the published ones of its group list it otherwise)."""
    return lesson.cases[0].startswith(HIDDEN_PREFIX)  # published cases come first


def render_lessons(lessons: list[Lesson]) -> list[str]:
    """Each remaining lesson once, with the cases it is for."""
    return [line for x in lessons for line in _wrap(f"fix ({_names(x.cases, 4)}): {x.text}", 2)]


def _summary(result: PartAResult, diag: Diagnosis) -> str:
    checks = result.checks
    ok_checks = sum(c.ok for c in checks)
    head = f"{result.verdict.replace('_', ' ')}  {result.passed()}/{len(result.cases)} cases"
    if result.hidden:
        head += f", {sum(c.status == 'pass' for c in result.hidden)}/{len(result.hidden)} hidden"
    if checks:
        head += f", {ok_checks}/{len(checks)} deeper checks"
    head += f"  ({result.seconds:.1f} s)"
    lines = [head, VERDICT_LINE.get(result.verdict, result.verdict)]
    if result.verdict == "NOT_PASSED":
        if diag.root_causes:
            lines += _wrap("root cause: " + ", ".join(r.check for r in diag.root_causes), 2)
        failing = [c.name for c in result.failing()]
        failing += [c.name for c in result.hidden if c.status != "pass"]
        if failing:
            lines += _wrap("failing: " + _names(failing, 6), indent=2)
    unseen = [c.name for c in checks if c.status == "not_observed"]
    if unseen:
        lines += _wrap(f"not verified, so not passed: {', '.join(unseen)}", indent=2)
    if diag.not_run:
        lines += _wrap(f"not run: {', '.join(diag.not_run)}", indent=2)
    if result.blamed() and result.verdict == "NOT_PASSED":
        lines.append("  look at: " + ", ".join(sorted(result.blamed())))
    return "\n".join(lines)


FLAG_TEXT = {
    "incorrect": "incorrect: not credited",
    "not_credible": "not credible: not credited",
    "noisy": "noisy: rerun",
}
UNIT = {"gemm": "GFLOP/s", "bias_gelu": "GB/s", "gelu": "GB/s"}


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else "-".rjust(width)


def render_grade_lines(result: dict) -> list[str]:
    """`tito grade`'s summary below its headline, from its report dict (cases, checks and the
    JSON diagnosis): the root causes and their fixes first, then each failing case and check,
    pointing to its root cause, then each remaining lesson once."""
    if result.get("verdict") == "INCOMPLETE" and result.get("missing"):
        return [f"  TODO       {line}" for line in result["missing"]]
    diag = Diagnosis.from_dict(result.get("diagnosis") or {})
    roots = {cause.check for cause in diag.root_causes}
    lines = [f"  WARNING    {line}" for line in result.get("warnings", [])]
    lines += render_root_causes(diag)  # the same lines as the Part A report's
    for case in [*result.get("cases", []), *result.get("hidden_cases", [])]:
        if case.get("status") != "pass":
            cause = diag.cause_of.get(case["name"])
            why = f" (cause: {cause}, above)" if cause else ""
            status = str(case.get("status", "?")).upper()
            lines.append(f"  {status:<10} {case['name']}: {case.get('detail', '')}{why}")
    for check in result.get("checks", []):
        name = check.get("name")
        if check.get("status") in ("pass", "not_observed") or name in roots:
            continue  # a root cause is shown above
        status = str(check.get("status", "?")).upper().replace("_", " ")
        lines.append(f"  {status:<10} {name} (deeper check): {check.get('detail', '')}")
        lines[-1] += _follows(name, diag)
    lines += render_lessons(diag.lessons)
    if diag.not_run:
        lines += _wrap(f"not run: {', '.join(diag.not_run)}", 2)
    return lines


def render_part_b(result: PartBResult) -> str:
    """The Part B table: one block per problem with the timed backends (rate, spread, load, flags),
    then each backend that was not timed, once, with its full reason; warnings last."""
    lines = [
        "Part B, context (never the verdict): the same problems on other kernels",
        "rate from the median; spread = (q3 - q1) / median of the samples; load = cores other",
        "processes kept busy meanwhile. Student kernels run alone, on rotated inputs, checked every call.",
        "",
    ]
    ceil = result.ceilings
    if ceil:
        lines.append(
            f"this machine: measured peak {ceil['fma_gflops']:.0f} GFLOP/s, "
            f"copy bandwidth {ceil['copy_gbs']:.1f} GB/s ({ceil.get('how', '')})"
        )
        lines.append("")
    width = max((len(r.backend) for r in result.rows), default=10) + 2
    problem = None
    untimed: dict[tuple[str, str], None] = {}  # (backend, reason), each listed once
    for r in result.rows:
        if r.status == "unavailable":
            untimed[(r.backend, r.detail)] = None
            continue
        if r.problem != problem:
            problem = r.problem
            head = f"{'median ms':>10} {'best ms':>9} {UNIT[r.kind]:>8} {'spread':>6} {'load':>5}"
            lines.append(f"{problem:<{width + 2}}{head}")
        credited = not ({"incorrect", "not_credible"} & set(r.flags))
        shown = (r.gflops if r.kind == "gemm" else r.gbps) if credited else None
        notes = [FLAG_TEXT[f] for f in r.flags]
        if r.status != "ok":
            notes.insert(0, r.status)
        cells = (
            f"{_num(r.ms, 10, 2)} {_num(r.min_ms, 9, 2)} {_num(shown, 8, 1)} "
            f"{_num(r.spread, 6, 2)} {_num(r.load, 5, 1)}"
        )
        note = f"[{', '.join(notes)}] " if notes else ""
        lines.append(f"  {r.backend:<{width}}{cells}  {note}{r.detail}")
    lines.append("")
    fusion = [r for r in result.rows if r.kind == "gelu" and r.gbps and ceil]
    if fusion:
        lines.append(
            "fusion: each GELU pass reads and writes the whole array; at copy bandwidth one pass "
            f"of {fusion[0].problem} takes {fusion[0].bytes / ceil['copy_gbs'] / 1e6:.2f} ms"
        )
        for r in fusion:
            lines.append(
                f"  {r.backend:<{width}}as long as {ceil['copy_gbs'] / r.gbps:5.1f} passes"
            )
        lines.append("")
    lines.append("backends")
    listed = set()
    for b in result.backends:
        name = b.get("name", "?")
        listed.add(name)
        mark = "yes" if b.get("available") else "no "
        lines.append(f"  {name:<{width}}{mark}  {b.get('reason', '')}")
    rest = [(name, why) for name, why in untimed if name not in listed]
    if rest:
        lines.append("not timed")
        lines += [f"  {name:<{width}}{why}" for name, why in rest]
    for w in result.warnings:
        lines += _wrap(f"WARNING: {w}", indent=0)
    lines.append(f"({result.seconds:.1f} s)")
    return "\n".join(lines)
