"""The notebook's full-gate summary, saying only what the group walks above it did not.

The notebook walks the four groups first (sections 1 to 4: each failing case, its lesson and its
drawing), then runs the full gate. Shown again, the gate's failing rows and lessons were the same
table twice (15 rows, in a run with a tiled_matmul bug). Here the gate says what is new: the count,
one line per group pointing at its section, the root causes that the deeper checks found, and the
hidden cases of grading mode. A grading run draws its own data (a secret seed), so its failing
rows are its own and are listed in full.
"""

from __future__ import annotations

import dataclasses
import html

from tinytorch.milestone07.cases import GROUPS
from tinytorch.milestone07.diagnose import diagnose_result
from tinytorch.milestone07.results import PartAResult
from tinytorch.render.notebook_tables import cases_html, diagnosis_html


def gate_html(result: PartAResult) -> str:
    """The full gate for people, below the group walks: each thing said once."""
    cases = result.cases
    passed = sum(c.status == "pass" for c in cases)
    checks_ok = sum(c.ok for c in result.checks)
    head = f"{passed}/{len(cases)} cases pass"
    head += f", {checks_ok}/{len(result.checks)} deeper checks" if result.checks else ""
    parts = [f"<p><b>The full gate: {html.escape(head)}</b></p>"]
    if result.grading:  # other data than the walks above: its rows are news
        table = cases_html(cases, compact=True, checks=result.checks, hidden=result.hidden)
        return parts[0] + table
    items = []
    for number, group in enumerate(GROUPS, 1):
        rows = [c for c in cases if c.group == group]
        ok = sum(c.status == "pass" for c in rows)
        where = (
            f": the failing cases, their lesson and drawing are in section {number} above"
            if ok < len(rows)
            else ""
        )
        items.append(f"<li><code>{group}</code> {ok}/{len(rows)} pass{where}</li>")
    parts.append(f"<ul>{''.join(items)}</ul>")
    diag = diagnose_result(result)  # its root causes are news; its lessons were said above
    parts.append(diagnosis_html(dataclasses.replace(diag, lessons=[])))
    return "".join(parts)
