"""Terminal renderers: the root cause first, one row per case, each lesson once, a summary last."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from tinytorch.milestone07.cases import CASES_BY_NAME, GROUPS, HIDDEN_PREFIX
from tinytorch.milestone07.diagnose import Diagnosis, Lesson, diagnose_result, unloadable_lesson
from tinytorch.milestone07.results import CaseResult, PartAResult, PartBResult
from tinytorch.safe_text import clean

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
    "INCOMPLETE": "INCOMPLETE: Module 17 is not finished: write what is still to write (above), then rerun.",
    "ERROR": "ERROR: the grader itself failed (not your code's fault); report it with this output.",
}


_GRADING = " (grading mode: secret until now)"


def _wrap(text: str, indent: int = 10, width: int = 100, hang: int | None = None) -> list[str]:
    pad = " " * indent
    rest = pad if hang is None else " " * hang
    return textwrap.wrap(text, width=width, initial_indent=pad, subsequent_indent=rest) or []


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


def render_part_a(result: PartAResult, verbose: bool = False) -> str:
    """The Part A report, the fix first: the verdict; what is still to write; the root causes;
    each failing function with its lesson and its failing cases named compactly; then one line
    per passing group and for the deeper checks (every case and check with `verbose`)."""
    diag = diagnose_result(result)
    lines = [
        _headline(result),
        (
            f"Milestone 07: Custom Kernels. Part A, the pass gate: impl {result.impl}, seed "
            f"{result.seed}{_GRADING if result.grading else ''}, "
            f"timeout {result.timeout:g} s per case"
        ),
        "",
    ]
    if result.load_error or result.error:  # nothing ran: one cause, not one line per case
        lines += _render_unloaded(result)
        lines.append(_footer(result, diag, verbose))
        return clean("\n".join(lines))  # student text never reaches a terminal raw
    if result.missing:
        lines.append("still to write:")
        lines += [line for m in result.missing for line in _wrap(f"- {m}", 2, hang=4)]
        lines.append("")
    lines += render_root_causes(diag)
    for group in GROUPS:
        rows = [c for c in result.cases if c.group == group]
        if rows:
            lines += _render_group(group, rows, diag, verbose)
    lines += _render_checks(result, diag, verbose)
    if result.hidden:
        lines += _render_hidden(result, diag, verbose)
    if lines[-1]:
        lines.append("")
    if result.warnings:
        lines += [line for w in result.warnings for line in _wrap(f"note: {w}"[:600], 0)]
        lines.append("")
    lines.append(_footer(result, diag, verbose))
    return clean("\n".join(lines))  # student text never reaches a terminal raw


def _headline(result: PartAResult) -> str:
    head = f"{result.verdict.replace('_', ' ')}  {result.passed()}/{len(result.cases)} cases"
    if result.hidden:
        head += f", {sum(c.status == 'pass' for c in result.hidden)}/{len(result.hidden)} hidden"
    if result.checks:
        head += f", {sum(c.ok for c in result.checks)}/{len(result.checks)} deeper checks"
    return head + f"  ({result.seconds:.1f} s)"


def _render_unloaded(result: PartAResult) -> list[str]:
    """A module that does not import (or a grader that broke): the one error, said once."""
    if result.error:
        return [*_wrap(result.error, 2), ""]
    lines = ["root cause first: your module does not import, so no case ran"]
    lines += _wrap(str(result.load_error), 2)
    lines += _wrap(f"fix: {unloadable_lesson(result.impl)}", 2)
    return [*lines, ""]


def compact_cases(names: Sequence[str], limit: int = 6) -> str:
    """Failing cases named by their label within the group, tile sizes gathered:
    "ragged_all_axes, k1 (tile 64, 16, 7 each)" or "pad1, k5_pad2"."""
    tiles: dict[str, list[str]] = {}
    for name in names:
        case = CASES_BY_NAME.get(name)
        label = case.label if case is not None and case.label else name
        tile = case.params.get("tile_size") if case is not None else None
        tiles.setdefault(label, []).extend([str(tile)] if tile is not None else [])
    labels = list(tiles)
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    shown = labels[:limit]
    sizes = {tuple(tiles[label]) for label in shown}
    if len(sizes) == 1 and next(iter(sizes)):
        each = " each" if len(shown) > 1 else ""
        return f"{', '.join(shown)}{more} (tile {', '.join(next(iter(sizes)))}{each})"
    parts = [f"{lab} (tile {', '.join(tiles[lab])})" if tiles[lab] else lab for lab in shown]
    return ", ".join(parts) + more


def _failing(rows: Sequence[CaseResult]) -> list[CaseResult]:
    return [c for c in rows if c.status not in ("pass", "incomplete")]


def _render_group(group: str, rows: list[CaseResult], diag: Diagnosis, verbose: bool) -> list[str]:
    """One line for a passing or unwritten group; a failing one leads with its fix."""
    ok = sum(c.status == "pass" for c in rows)
    failing = _failing(rows)
    todo = sum(c.status == "incomplete" for c in rows)
    if not failing:
        what = "PASS" if ok == len(rows) else "TODO"
        line = f"{group:<14} {what}  {ok}/{len(rows)}"
        line += " (not written yet: see above)" if todo else ""
        return [line, *(_case_rows(rows, diag) if verbose else [])]
    names = [c.name for c in failing]
    kinds = {MARK[c.status]: sum(x.status == c.status for x in failing) for c in failing}
    how = f" ({', '.join(f'{n} {k}' for k, n in kinds.items())})" if set(kinds) != {"FAIL"} else ""
    head = f"{group:<14} FAIL  {len(failing)} of {len(rows)} cases{how}: {compact_cases(names)}"
    lines = _wrap(head, 0, hang=2)
    lines += _render_causes(names, diag)
    every = {c.name for c in failing}
    for lesson in diag.lessons_for(group):
        if lesson.cases[0].startswith(HIDDEN_PREFIX):
            continue
        published = [n for n in lesson.cases if not n.startswith(HIDDEN_PREFIX)]
        hidden = len(lesson.cases) - len(published)
        whom = f"all {len(published)}" if set(published) == every else compact_cases(published)
        whom += f" and {hidden} hidden" if hidden else ""
        lines += _wrap(f"fix ({whom}): {lesson.text}", 2)
    first = failing[0]
    lines += _wrap(f"first {MARK[first.status]}: {first.title}: {first.detail}"[:400], 4)
    if verbose:
        lines += _case_rows(rows, diag)
    return [*lines, ""]


def _render_causes(names: Sequence[str], diag: Diagnosis) -> list[str]:
    """The failing cases that a root cause explains, by cause."""
    by_cause: dict[str, list[str]] = {}
    for name in names:
        if name in diag.cause_of:
            by_cause.setdefault(diag.cause_of[name], []).append(name)
    lines = []
    for check, cases in by_cause.items():
        whom = f"all {len(cases)}" if len(cases) == len(names) else compact_cases(cases)
        n = next(i for i, r in enumerate(diag.root_causes, 1) if r.check == check)
        lines += _wrap(f"cause ({whom}): {check} (root cause {n}, above)", 2)
    return lines


def _case_rows(rows: Sequence[CaseResult], diag: Diagnosis) -> list[str]:
    """--verbose: one row per case, its error and time; a failing one's detail below it."""
    width = max(len(c.name) for c in rows) + 2
    lines = []
    for c in rows:
        lines.append(
            f"  {MARK[c.status]:<7} {c.name:<{width}} err {_err(c.max_error)}  {c.seconds * 1e3:7.1f} ms"
        )
        if c.status not in ("pass", "incomplete"):
            lines += _wrap(f"{c.title}: {c.detail}")
    return lines


# What a passing check vouches for, where its detail also reports what the cases grade.
PASS_MEANS = {"tiling audit": "tiled (the values are the cases' to grade)"}


def _render_checks(result: PartAResult, diag: Diagnosis, verbose: bool) -> list[str]:
    checks = result.checks
    if not checks:
        return []
    ok = [c for c in checks if c.ok]
    if len(ok) == len(checks) and not verbose:
        return [f"{'deeper checks':<14} PASS  {len(ok)}/{len(checks)}"]
    if all(c.status in ("incomplete", "not_run") for c in checks if not c.ok) and not ok:
        return [f"{'deeper checks':<14} TODO  0/{len(checks)} (they call the functions above)"]
    lines = [f"{'deeper checks':<14} {len(ok)}/{len(checks)}"]
    roots = [r.check for r in diag.root_causes]
    todo = [c.name for c in checks if c.status == "incomplete"]
    for c in checks:
        mark = MARK.get(c.status, c.status)
        if c.status == "incomplete" and not verbose:
            continue  # one line below: they wait for a function still to write
        if c.ok:
            if verbose:
                means = f"{PASS_MEANS[c.name]}: " if c.name in PASS_MEANS else ""
                lines.append(f"  {mark:<7} {c.name:<22} {means}{c.detail}"[:400])
            continue
        if c.name in roots:
            lines.append(f"  {mark:<7} {c.name} (root cause {roots.index(c.name) + 1}, above)")
        elif c.name in diag.consequence_of:
            lines.append(f"  {mark:<7} {c.name}{_follows(c.name, diag)}")
        else:
            lines += _wrap(f"{mark:<7} {c.name}: {c.detail}"[:600], 2)
            if c.lesson and c.status == "not_observed":
                lines += _wrap(f"fix: {c.lesson}", 10)
    if todo and not verbose:
        lines += _wrap(f"TODO: {', '.join(todo)} (each calls a function still to write)", 2)
    if ok and not verbose:
        lines += _wrap("pass: " + ", ".join(c.name for c in ok), 2)
    return [*lines, ""]


def _render_hidden(result: PartAResult, diag: Diagnosis, verbose: bool) -> list[str]:
    rows = result.hidden
    ok = sum(c.status == "pass" for c in rows)
    title = "hidden cases (grading mode, drawn for this run)"
    failing = _failing(rows)
    if not failing and not verbose:
        return [f"{title}  PASS  {ok}/{len(rows)}"]
    lines = [f"{title}  {ok}/{len(rows)}"]
    if failing:
        lines += _wrap("failing: " + _names([c.name for c in failing], 6), 2)
    lines += _render_causes([c.name for c in failing], diag)
    lines += render_lessons([x for x in diag.lessons if _hidden(x)])
    if verbose:
        for c in rows:
            lines.append(f"  {MARK[c.status]:<7} {c.name}  {c.title}"[:300])
            if c.status not in ("pass", "incomplete"):
                lines += _wrap(f"{c.detail}")
    return [*lines, ""]


def _hidden(lesson: Lesson) -> bool:
    """Only hidden cases have it (the published ones of its group list it otherwise)."""
    return lesson.cases[0].startswith(HIDDEN_PREFIX)  # published cases come first


def render_lessons(lessons: list[Lesson]) -> list[str]:
    """Each remaining lesson once, with the cases it is for."""
    return [line for x in lessons for line in _wrap(f"fix ({_names(x.cases, 4)}): {x.text}", 2)]


def _footer(result: PartAResult, diag: Diagnosis, verbose: bool) -> str:
    """The verdict again, saying only what the report above printed, then what to run next."""
    if result.verdict == "NOT_PASSED":
        if result.load_error:
            what = "fix the import error above, and run again."
        elif diag.root_causes and diag.lessons:
            what = "fix the root cause first, then each lesson, and run again."
        elif diag.root_causes:
            what = "fix the root cause above, and run again."
        elif diag.lessons:
            what = "fix what each lesson above says, and run again."
        else:
            what = "see the deeper checks above, and run again."
        lines = [f"NOT PASSED: {what}"]
    else:
        lines = [VERDICT_LINE.get(result.verdict, result.verdict)]
    if result.blamed() and result.verdict == "NOT_PASSED" and not result.load_error:
        lines.append("  look at: " + ", ".join(sorted(result.blamed())))
    if not verbose and not result.load_error and not result.error:
        more = "--verbose lists every case with its error and time"
        if result.verdict == "NOT_PASSED":
            more += "; --plots DIR draws where each group's first failure is wrong"
        lines += _wrap(f"({more})", 2)
    return "\n".join(lines)


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
    """The Part B table, as tinytorch/bench/report.py writes it (one home for Part B's text: each
    description under its row, what a busy machine leaves standing, withheld figures)."""
    from tinytorch.bench.report import part_b_text

    return part_b_text(result)
