"""What the notebook records for the grader: results as display outputs with our own MIME types.

The notebook displays them (HTML for people, JSON for the grader) as each step finishes, so a
grader still finds the earlier results when a later cell times out or the kernel dies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

CASES_MIME = "application/vnd.tinytorch.cases+json"  # {"stage": str, "cases": [CaseResult dict]}
CHECKS_MIME = "application/vnd.tinytorch.checks+json"  # {"checks": [CheckResult dict]}
VERDICT_MIME = "application/vnd.tinytorch.milestone07+json"  # milestone07.to_json(...) payload


def as_dict(result: Any) -> dict[str, Any]:
    """A result dataclass as JSON-ready data (tuples become lists)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return dict(vars(result))


def cases_bundle(
    results: Sequence[Any],
    stage: str,
    *,
    compact: bool = False,
    checks: Sequence[Any] = (),
    hidden: Sequence[Any] = (),
    lead: bool = True,
) -> dict[str, Any]:
    """A display bundle: the case table for people (compact: failures only), the dicts for the grader.

    lead=False: the table without its verdict and lessons (shown above it with cases_lead_html).

    `checks` (the same run's deeper checks) lets the table lead with the root cause; `hidden`
    (grading mode's hidden cases) join the table and its diagnosis, so it says what the JSON
    says. The grader's record keeps the published cases only (the verdict bundle has the rest).
    """
    from tinytorch.render.notebook_tables import cases_html, cases_text

    html = cases_html(results, compact=compact, checks=checks, hidden=hidden, lead=lead)
    return {
        CASES_MIME: {"stage": stage, "cases": [as_dict(r) for r in results]},
        "text/html": html,
        "text/plain": cases_text(results, checks, hidden),
    }


def checks_bundle(checks: Sequence[Any]) -> dict[str, Any]:
    from tinytorch.render.notebook_tables import checks_html, checks_text

    return {
        CHECKS_MIME: {"checks": [as_dict(c) for c in checks]},
        "text/html": checks_html(checks),
        "text/plain": checks_text(checks),
    }


def verdict_bundle(payload: dict[str, Any]) -> dict[str, Any]:
    """The verdict payload (milestone07.to_json) with a headline for people."""
    from tinytorch.render.notebook_tables import first_fix, verdict_html

    cases = payload.get("cases", [])
    passed = sum(c.get("status") == "pass" for c in cases)
    verdict = str(payload.get("verdict"))
    missing = payload.get("missing", []) or []
    fix = first_fix(payload.get("diagnosis") or {}) if verdict == "NOT_PASSED" else ""
    plain = f"Milestone 07: {verdict} ({passed}/{len(cases)} gate cases)"
    return {
        VERDICT_MIME: payload,
        "text/html": verdict_html(verdict, passed, len(cases), missing, fix),
        "text/plain": plain + (f"; fix first: {fix}" if fix else ""),
    }


def text_bundle(text: str, *, prose: bool = False) -> dict[str, Any]:
    """Text for people, wrapped at word boundaries in JupyterLab (print() would break words):
    a monospace block (tables, reports), or a paragraph with prose=True."""
    from tinytorch.render.notebook_tables import prose_html, text_html

    return {"text/html": prose_html(text) if prose else text_html(text), "text/plain": text}


def show(bundle: dict[str, Any]) -> None:
    """Display a bundle from a notebook cell."""
    from IPython.display import display

    display(bundle, raw=True)
