"""Part A results as HTML and text tables for the notebook (the terminal report lives in milestone07)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tinytorch.milestone07.diagnose import Diagnosis, diagnose
from tinytorch.safe_text import clean
from tinytorch.viz.style import ERROR_COLOUR, FAIL_COLOUR, PASS_COLOUR

# One colour language (viz/style.py): red and green for fail and pass only; what has no verdict
# on the numbers (not observed, not run, unfinished) grey, never a backend's colour.
_BADGE = {
    "pass": (PASS_COLOUR, "PASS"),
    "fail": (FAIL_COLOUR, "FAIL"),
    "not_observed": (ERROR_COLOUR, "NOT OBSERVED"),
    "not_run": (ERROR_COLOUR, "NOT RUN"),
}


def _badge(status: str) -> str:
    colour, label = _BADGE.get(status, (ERROR_COLOUR, status.upper()))
    return f'<span style="color:white;background:{colour};padding:1px 6px;border-radius:3px">{label}</span>'


def _err(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def code_html(text: str) -> str:
    """Escaped text whose `backtick` spans show as code, as in the lessons' source."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: shown as it is
        return html.escape(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


# JupyterLab shows printed text in a <pre> with word-break: break-all, so a long line wraps in the
# middle of a word ("your tiled_m / atmul"). Our text keeps its line breaks and wraps at spaces.
_TEXT_STYLE = (
    "white-space:pre-wrap;word-break:normal;overflow-wrap:break-word;"
    "font-family:var(--jp-code-font-family, monospace);font-size:var(--jp-code-font-size, 13px);"
    "line-height:1.35;margin:0"
)


def text_html(text: str) -> str:
    """Plain text (a table, a report) for a notebook output: monospace, wrapped at word
    boundaries only, never in the middle of a word."""
    return f'<pre class="tt-text" style="{_TEXT_STYLE}">{html.escape(clean(text))}</pre>'


def prose_html(text: str) -> str:
    """A paragraph (a group's intro): wraps at word boundaries, `code` shown as code."""
    return f'<p class="tt-prose" style="word-break:normal;max-width:60em">{code_html(text)}</p>'


def _names(names: Sequence[str], limit: int = 6) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(f"<code>{html.escape(n)}</code>" for n in names[:limit]) + more


def diagnosis_html(diag: Diagnosis) -> str:
    """Root causes first (the failing deeper checks and the cases they explain), then each lesson."""
    parts = []
    if diag.root_causes:
        items = "".join(
            f"<li><b>{html.escape(r.check)}</b>: {html.escape(r.detail)}"
            + (f"<br>explains {_names(r.cases)}" if r.cases else "")
            + (
                f"<br>also makes fail {_names(r.consequences)} (a consequence: fix this first)"
                if r.consequences
                else ""
            )
            + (f"<br><b>Fix:</b> {code_html(r.lesson)}" if r.lesson else "")
            + "</li>"
            for r in diag.root_causes
        )
        parts.append(f"<p style='color:#a00'><b>Root cause first</b></p><ol>{items}</ol>")
    if diag.lessons:
        items = "".join(
            f"<li>{code_html(item.text)}<br><small>for {_names(item.cases)}</small></li>"
            for item in diag.lessons
        )
        parts.append(f"<p><b>Lessons</b> (each once, with its cases)</p><ul>{items}</ul>")
    if diag.not_run:
        parts.append(f"<p><i>Not run: {html.escape(', '.join(diag.not_run))}</i></p>")
    return "".join(parts)


def _row(r: Any, diag: Diagnosis) -> str:
    where = f" at {list(r.where)}" if getattr(r, "where", None) else ""
    note = ""
    if r.status != "pass":
        note = f"<div style='color:#a00'>{html.escape(r.detail)}</div>"
        if r.name in diag.cause_of:
            note += f"<div><b>Cause:</b> {html.escape(diag.cause_of[r.name])} (root cause)</div>"
    return (
        f"<tr><td>{_badge(r.status)}</td><td style='text-align:left'><code>{html.escape(r.name)}</code>"
        f"<br>{html.escape(r.title)}{note}</td>"
        f"<td>{_err(r.max_error)}{html.escape(where)}</td><td>{r.seconds * 1e3:.1f} ms</td></tr>"
    )


def cases_html(
    results: Sequence[Any],
    *,
    compact: bool = False,
    checks: Sequence[Any] = (),
    hidden: Sequence[Any] = (),
    lead: bool = True,
) -> str:
    """The fix first, then the table: the verdict line, the root cause and each lesson once (its
    cases named), then one row per failing case (status, title, max error and where), the passing
    rows folded away below them.

    compact=True leaves the passing rows out (the full gate). `checks` (the deeper checks of the
    same run) lets the diagnosis lead with a root cause; `hidden` (grading mode's hidden cases) go
    through the same diagnosis, below the published ones. lead=False: the table only (the notebook
    showed cases_lead_html above it, then the drawing).
    """
    diag = diagnose([*results, *hidden], checks)  # = diagnose_result of the run: what the JSON says
    failing = [_row(r, diag) for r in results if r.status != "pass"]
    passing = [_row(r, diag) for r in results if r.status == "pass"]
    secret = [_row(r, diag) for r in hidden if not (compact and r.status == "pass")]
    if secret:
        title = "hidden cases (grading mode, drawn for this run)"
        failing += [f"<tr><th colspan='4' style='text-align:left'>{title}</th></tr>", *secret]
    head = cases_lead_html(results, checks=checks, hidden=hidden) if lead else ""
    header = (
        "<tr><th>status</th><th style='text-align:left'>case</th><th>max abs error</th>"
        "<th>time</th></tr>"
    )
    table = f"<table>{header}{''.join(failing)}</table>" if failing else ""
    if passing and not compact:
        table += (
            f"<details><summary>{len(passing)} passing case(s)</summary>"
            f"<table>{header}{''.join(passing)}</table></details>"
        )
    return head + table


def cases_lead_html(
    results: Sequence[Any], *, checks: Sequence[Any] = (), hidden: Sequence[Any] = ()
) -> str:
    """What to fix, before any table: the verdict of these cases, the root cause, each lesson."""
    diag = diagnose([*results, *hidden], checks)
    passed = sum(r.status == "pass" for r in results)
    more = f", {sum(r.status == 'pass' for r in hidden)}/{len(hidden)} hidden" if hidden else ""
    ok = passed == len(results) and all(r.status == "pass" for r in hidden)
    word = _badge("pass" if ok else "fail")
    head = f"<p>{word} <b>{passed}/{len(results)} cases pass{more}</b></p>"
    return head + diagnosis_html(diag)


def cases_text(
    results: Sequence[Any], checks: Sequence[Any] = (), hidden: Sequence[Any] = ()
) -> str:
    """Plain-text fallback of cases_html (what a terminal or a text-only viewer shows)."""
    diag = diagnose([*results, *hidden], checks)
    lines = [f"{sum(r.status == 'pass' for r in results)}/{len(results)} cases pass"]
    for r in diag.root_causes:
        lines.append(f"  ROOT CAUSE {r.check}: {r.detail}")
    for r in [*results, *hidden]:
        lines.append(f"  {r.status.upper():<10} {r.name:<45} max err {_err(r.max_error) or '-'}")
        if r.status != "pass":
            lines.append(f"             {r.detail}")
            if r.name in diag.cause_of:
                lines.append(f"             cause: {diag.cause_of[r.name]} (root cause)")
    for item in diag.lessons:
        lines.append(f"  lesson for {', '.join(item.cases)}: {item.text}")
    return "\n".join(lines)


def _check_note(check: Any, follows: dict[str, str]) -> str:
    if check.name in follows:  # its own lesson would point away from the root cause
        up = html.escape(follows[check.name])
        return f"<div><b>A consequence of {up}</b>: fix that first.</div>"
    return f"<div><b>Lesson:</b> {html.escape(check.lesson)}</div>" if check.lesson else ""


def checks_html(checks: Sequence[Any]) -> str:
    """The deeper checks: status, name, detail, and the lesson when it did not pass (or, for a
    check that fails only because another did, which one to fix first)."""
    follows = diagnose((), checks).consequence_of
    rows = "".join(
        f"<tr><td>{_badge(c.status)}</td><td style='text-align:left'><b>{html.escape(c.name)}</b>: "
        f"{html.escape(c.detail)}{_check_note(c, follows)}</td></tr>"
        for c in checks
    )
    return f"<table><tr><th>status</th><th style='text-align:left'>deeper check</th></tr>{rows}</table>"


def checks_text(checks: Sequence[Any]) -> str:
    follows = diagnose((), checks).consequence_of
    return "\n".join(
        f"  {c.status.upper().replace('_', ' '):<12} {c.name}: {c.detail}"
        + (f" (a consequence of {follows[c.name]})" if c.name in follows else "")
        for c in checks
    )


def verdict_html(
    verdict: str, passed: int, total: int, missing: Sequence[str] = (), fix: str = ""
) -> str:
    """The headline: PASS in green, NOT PASSED in red, INCOMPLETE in orange, with what remains
    and, when it did not pass, what to fix first (`fix`, from the run's diagnosis)."""
    colour = {"PASS": PASS_COLOUR, "NOT_PASSED": FAIL_COLOUR}.get(verdict, ERROR_COLOUR)
    todo = "".join(f"<li>{code_html(m)}</li>" for m in missing)
    return (
        f"<h3 style='color:{colour}'>Milestone 07: {verdict.replace('_', ' ')} "
        f"({passed}/{total} gate cases)</h3>"
        + (f"<p>Still to do:</p><ul>{todo}</ul>" if todo else "")
        + (f"<p><b>Fix first:</b> {code_html(fix)}</p>" if fix else "")
    )


def first_fix(diagnosis: dict[str, Any]) -> str:
    """What to fix first, from a result's JSON diagnosis: the root cause, else the first lesson."""
    for cause in diagnosis.get("root_causes", []):
        lesson = f": {cause['lesson']}" if cause.get("lesson") else ""
        return f"the root cause, {cause['check']} ({', '.join(cause['blame'])}){lesson}"
    for lesson in diagnosis.get("lessons", []):
        return f"{lesson['group']}: {lesson['text']}"
    return ""
