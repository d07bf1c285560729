"""Part A results as HTML and text tables for the notebook (the terminal report lives in milestone07)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

_BADGE = {
    "pass": ("#2ca02c", "PASS"),
    "fail": ("#d62728", "FAIL"),
    "not_observed": ("#ff7f0e", "NOT OBSERVED"),
}


def _badge(status: str) -> str:
    colour, label = _BADGE.get(status, ("#7f7f7f", status.upper()))
    return f'<span style="color:white;background:{colour};padding:1px 6px;border-radius:3px">{label}</span>'


def _err(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def cases_html(results: Sequence[Any], *, compact: bool = False) -> str:
    """One row per case: status, title, max error (and where), and the lesson when it did not pass.

    compact=True lists only the cases that did not pass (the full gate, after the walk).
    """
    rows = []
    for r in results:
        if compact and r.status == "pass":
            continue
        where = f" at {list(r.where)}" if getattr(r, "where", None) else ""
        lesson = (
            ""
            if r.status == "pass"
            else (
                f"<div style='color:#a00'>{html.escape(r.detail)}</div>"
                f"<div><b>Lesson:</b> {html.escape(r.lesson)}</div>"
            )
        )
        rows.append(
            f"<tr><td>{_badge(r.status)}</td><td style='text-align:left'><code>{html.escape(r.name)}</code>"
            f"<br>{html.escape(r.title)}{lesson}</td>"
            f"<td>{_err(r.max_error)}{html.escape(where)}</td><td>{r.seconds * 1e3:.1f} ms</td></tr>"
        )
    passed = sum(r.status == "pass" for r in results)
    if compact and not rows:
        return f"<p><b>{passed}/{len(results)} cases pass</b></p>"
    return (
        f"<p><b>{passed}/{len(results)} cases pass</b></p>"
        "<table><tr><th>status</th><th style='text-align:left'>case</th><th>max abs error</th>"
        f"<th>time</th></tr>{''.join(rows)}</table>"
    )


def cases_text(results: Sequence[Any]) -> str:
    """Plain-text fallback of cases_html (what a terminal or a text-only viewer shows)."""
    lines = [f"{sum(r.status == 'pass' for r in results)}/{len(results)} cases pass"]
    for r in results:
        lines.append(f"  {r.status.upper():<10} {r.name:<45} max err {_err(r.max_error) or '-'}")
        if r.status != "pass":
            lines.append(f"             {r.detail}")
            lines.append(f"             lesson: {r.lesson}")
    return "\n".join(lines)


def checks_html(checks: Sequence[Any]) -> str:
    """The deeper checks: status, name, detail, and the lesson when it did not pass."""
    rows = "".join(
        f"<tr><td>{_badge(c.status)}</td><td style='text-align:left'><b>{html.escape(c.name)}</b>: "
        f"{html.escape(c.detail)}"
        + ("" if c.status == "pass" else f"<div><b>Lesson:</b> {html.escape(c.lesson)}</div>")
        + "</td></tr>"
        for c in checks
    )
    return f"<table><tr><th>status</th><th style='text-align:left'>deeper check</th></tr>{rows}</table>"


def checks_text(checks: Sequence[Any]) -> str:
    return "\n".join(f"  {c.status.upper():<12} {c.name}: {c.detail}" for c in checks)


def verdict_html(verdict: str, passed: int, total: int, missing: Sequence[str] = ()) -> str:
    """The headline: PASS in green, NOT PASSED in red, INCOMPLETE in orange, with what remains."""
    colour = {"PASS": "#2ca02c", "NOT_PASSED": "#d62728"}.get(verdict, "#ff7f0e")
    todo = "".join(f"<li>{html.escape(m)}</li>" for m in missing)
    return (
        f"<h3 style='color:{colour}'>Milestone 07: {verdict.replace('_', ' ')} "
        f"({passed}/{total} gate cases)</h3>"
        + (f"<p>Still to do:</p><ul>{todo}</ul>" if todo else "")
    )
