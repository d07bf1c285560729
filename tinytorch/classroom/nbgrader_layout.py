"""The graded cells of Milestone 07's nbgrader assignment: which items each one scores.

One home for the mapping that `tito nbgrader generate` writes into the notebook (each cell's
points, from `scoring`) and the autograde preprocessor reads back (each cell's outcome). Every
item of the assignment (`scoring.assignment_items`) belongs to exactly one graded cell, so the
cells' points add up to the gradebook's max_score on every route.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytorch.milestone07.scoring import Item, Points, assignment_items

ASSIGNMENT = "07_custom_kernels"  # the nbgrader assignment and its notebook's name
REPORT_ID = "report"  # the locked, ungraded cell that shows the whole lesson-first report


@dataclass(frozen=True)
class GradedCell:
    """One locked, graded cell: its nbgrader grade_id, what it scores, in words."""

    grade_id: str
    kind: str  # "case" | "check" | "hidden_case"
    key: str  # the case group, the check's name, or "" (every hidden case)
    title: str

    def holds(self, item: Item) -> bool:
        """Whether `item` is scored by this cell."""
        if item.kind != self.kind:
            return False
        if self.kind == "case":
            return item.name.split("/", 1)[0] == self.key
        return self.kind == "hidden_case" or item.name == self.key


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def graded_cells() -> tuple[GradedCell, ...]:
    """The assignment's graded cells, in notebook order: one per case group, one per deeper
    check, one for every hidden case."""
    from tinytorch.milestone07.cases import GROUPS

    cells = [GradedCell(f"cases_{g}", "case", g, f"{g}: the published cases") for g in GROUPS]
    checks = [name for kind, name in assignment_items(grading=True) if kind == "check"]
    cells += [GradedCell(f"check_{_slug(n)}", "check", n, f"deeper check: {n}") for n in checks]
    cells.append(GradedCell("hidden_cases", "hidden_case", "", "the hidden cases"))
    return tuple(cells)


def cell_of(items: list[Item]) -> dict[str, list[Item]]:
    """{grade_id: the items it scores}; raises ValueError for an item no cell holds (the
    assignment and the layout disagree: a points total would be wrong)."""
    cells = graded_cells()
    out: dict[str, list[Item]] = {c.grade_id: [] for c in cells}
    for item in items:
        holder = next((c for c in cells if c.holds(item)), None)
        if holder is None:
            raise ValueError(f"nbgrader layout: no graded cell scores {item.kind} {item.name!r}")
        out[holder.grade_id].append(item)
    return out


def cell_points(points: Points) -> dict[str, float]:
    """{grade_id: its points} for the assignment in grading mode, before any run: what the
    released notebook's cells are worth."""
    template = [
        Item(kind, name, "", 0.0, points.of(kind, name), "", "")
        for kind, name in assignment_items(grading=True)
    ]
    return {gid: sum(i.max_points for i in its) for gid, its in cell_of(template).items()}
