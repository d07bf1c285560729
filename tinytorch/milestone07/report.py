"""Terminal renderers: one row per case, the failures explained under their row, a summary last."""

from __future__ import annotations

import textwrap

from tinytorch.milestone07.cases import GROUP_INTRO, GROUPS
from tinytorch.milestone07.results import PartAResult, PartBResult

MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "crash": "CRASH",
    "incomplete": "TODO",
    "not_observed": "UNSEEN",
    "not_run": "NOT RUN",
}
VERDICT_LINE = {
    "PASS": "PASS: your Module 17 kernels match NumPy on every case.",
    "NOT_PASSED": "NOT PASSED: fix the cases above (each names its lesson) and run again.",
    "INCOMPLETE": "INCOMPLETE: Module 17 is not finished: write what is listed above, then rerun.",
    "ERROR": "ERROR: the grader itself failed (not your code's fault); report it with this output.",
}


_GRADING = " (grading mode: secret until now)"


def _wrap(text: str, indent: int = 10, width: int = 100) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, width=width, initial_indent=pad, subsequent_indent=pad) or []


def _err(value: float | None) -> str:
    return f"{value:9.1e}" if value is not None else "        -"


def render_part_a(result: PartAResult) -> str:
    """The Part A table: a header, each group's cases, the deeper checks, then the verdict."""
    lines = [
        "Milestone 07: Custom Kernels. Part A, the pass gate",
        f"impl {result.impl}   seed {result.seed}{_GRADING if result.grading else ''}   "
        + f"timeout {result.timeout:g} s per case",
        "",
    ]
    width = max((len(c.name) for c in result.cases), default=20) + 2
    told: dict[str, str] = {}  # lesson -> the first case that printed it
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
                if c.lesson in told:
                    lines += _wrap(f"fix: as for {told[c.lesson]}")
                elif c.lesson:
                    told[c.lesson] = c.name
                    lines += _wrap(f"fix: {c.lesson}")
        lines.append("")
    if result.checks:
        ok = sum(c.status == "pass" for c in result.checks)
        lines.append(f"deeper checks  {ok}/{len(result.checks)}")
        for c in result.checks:
            lines.append(f"  {MARK[c.status]:<7} {c.name:<22} {c.detail}"[:400])
            if c.lesson and c.status not in ("pass", "incomplete"):
                lines += _wrap(f"fix: {c.lesson}")
        lines.append("")
    if result.hidden:
        ok = sum(c.status == "pass" for c in result.hidden)
        lines.append(f"hidden cases (grading mode, drawn for this run)  {ok}/{len(result.hidden)}")
        for c in result.hidden:
            lines.append(f"  {MARK[c.status]:<7} {c.name}  {c.title}"[:300])
            if c.status not in ("pass", "incomplete"):
                lines += _wrap(f"{c.detail}")
                lines += _wrap(f"fix: {c.lesson}") if c.lesson else []
        lines.append("")
    if result.warnings or result.error:
        lines += [f"warning: {w}"[:600] for w in result.warnings]
        lines += [result.error[:600]] if result.error else []
        lines.append("")
    if result.missing:
        lines.append("still to write:")
        lines += [f"  - {m}" for m in result.missing]
        lines.append("")
    lines.append(_summary(result))
    return "\n".join(lines)


def _summary(result: PartAResult) -> str:
    checks = result.checks
    ok_checks = sum(c.ok for c in checks)
    head = f"{result.verdict.replace('_', ' ')}  {result.passed()}/{len(result.cases)} cases"
    if result.hidden:
        head += f", {sum(c.status == 'pass' for c in result.hidden)}/{len(result.hidden)} hidden"
    if checks:
        head += f", {ok_checks}/{len(checks)} deeper checks"
    head += f"  ({result.seconds:.1f} s)"
    lines = [head, VERDICT_LINE[result.verdict]]
    failing = [c.name for c in result.failing()] + [c.name for c in result.failing_checks()]
    failing += [c.name for c in result.hidden if c.status != "pass"]
    if failing and result.verdict == "NOT_PASSED":
        more = f" and {len(failing) - 6} more" if len(failing) > 6 else ""
        lines += _wrap("failing: " + ", ".join(failing[:6]) + more, indent=2)
    unseen = [c.name for c in checks if c.status == "not_observed"]
    if unseen:
        lines += _wrap(f"not verified, so not passed: {', '.join(unseen)}", indent=2)
    if result.blamed() and result.verdict == "NOT_PASSED":
        lines.append("  look at: " + ", ".join(sorted(result.blamed())))
    return "\n".join(lines)


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
