"""The class report: one self-contained HTML file (figures inlined) plus each figure as a PNG."""

from __future__ import annotations

import base64
import html
from collections import Counter
from pathlib import Path
from typing import Any

from tinytorch.classroom.similarity import (
    FUNC_MIN,
    MARKED_MAX,
    MIN_TOKENS,
    PAIR_THRESHOLD,
    REFERENCE,
    REFERENCE_THRESHOLD,
    Flag,
    lf,
)
from tinytorch.milestone07.cases import FUNCTIONS
from tinytorch.render.platforms import tiled_matmul_gflops
from tinytorch.safe_text import clean

VERDICT_ORDER = ("PASS", "NOT_PASSED", "INCOMPLETE", "ERROR")
SIDE_BY_SIDE_MAX = MARKED_MAX  # flags shown side by side (all are listed in the table)
_CASE_INTRO = (
    "<p>The share of graded students failing each published case: a long bar on one tile size"
    " or shape names what the class missed.</p>"
)
_COLORS = {"PASS": "#2e7d32", "NOT_PASSED": "#c62828", "INCOMPLETE": "#f9a825", "ERROR": "#6a1b9a"}


def _figure(name: str, folder: Path, draw) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinytorch.viz import style

    fig, ax = plt.subplots(figsize=(8, 4.5))
    draw(fig, ax)
    fig.tight_layout()
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=style.DPI)
    plt.close(fig)
    return path


def verdict_counts(docs: dict[str, dict[str, Any]]) -> Counter:
    return Counter(d["verdict"] for d in docs.values())


def case_failures(docs: dict[str, dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(case, students failing it, students graded on it) for every published case, by name."""
    fails: Counter = Counter()
    seen: Counter = Counter()
    for doc in docs.values():
        for case in doc.get("cases", []):
            seen[case["name"]] += 1
            fails[case["name"]] += case["status"] != "pass"
    return [(name, fails[name], seen[name]) for name in seen]


def common_lessons(docs: dict[str, dict[str, Any]]) -> list[tuple[str, int]]:
    """Each lesson with how many students got it (once per student), most common first."""
    count: Counter = Counter()
    for doc in docs.values():
        mine = {
            r["lesson"]
            for key in ("cases", "checks")
            for r in doc.get(key, [])
            if r.get("lesson") and r["status"] != "pass"
        }
        count.update(mine)
    return count.most_common()


def function_verdicts(docs: dict[str, dict[str, Any]]) -> dict[str, Counter]:
    """Per student function: students for whom it passes, fails or is unwritten."""
    out = {fn: Counter() for fn in FUNCTIONS}
    for doc in docs.values():
        if doc["verdict"] == "ERROR" or not doc.get("cases"):
            continue
        results = [*doc.get("cases", []), *doc.get("checks", [])]
        for fn in FUNCTIONS:
            mine = [r for r in results if fn in r.get("blame", [])]
            if any(r["status"] == "incomplete" for r in mine):
                out[fn]["incomplete"] += 1
            elif mine:
                out[fn]["fail"] += 1
            else:
                out[fn]["pass"] += 1
    return out


def figures(docs: dict[str, dict[str, Any]], folder: Path, *, part_b: bool) -> dict[str, Path]:
    """Draw every figure of the report into `folder` as PNG; name -> path."""
    from tinytorch.viz import style  # matplotlib only when a report is drawn

    folder.mkdir(parents=True, exist_ok=True)
    counts = verdict_counts(docs)
    n = max(1, len(docs))
    out = {}

    def pass_rate(fig, ax):
        labels = [v for v in VERDICT_ORDER if counts[v]]
        values = [counts[v] for v in labels]
        ax.bar(labels, values, color=[_COLORS[v] for v in labels])
        for i, v in enumerate(values):
            ax.text(i, v, f"{v} ({100 * v / n:.0f}%)", ha="center", va="bottom")
        ax.set_ylabel("students")
        ax.set_title(f"Verdicts: {100 * counts['PASS'] / n:.0f}% of {len(docs)} students pass")

    out["pass_rate"] = _figure("pass_rate", folder, pass_rate)
    failures = case_failures(docs)

    def per_case(fig, ax):
        fig.set_size_inches(8, max(4.5, 0.25 * len(failures) + 1))
        names = [f[0] for f in failures][::-1]
        share = [100 * f[1] / max(1, f[2]) for f in failures][::-1]
        ax.barh(names, share, color="#c62828")
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of graded students failing the case")
        ax.set_title("Failures per case")
        ax.tick_params(axis="y", labelsize=style.MIN_FONT_PT)

    out["case_failures"] = _figure("case_failures", folder, per_case)
    by_fn = function_verdicts(docs)

    def per_function(fig, ax):
        bottom = [0] * len(FUNCTIONS)
        for status, color in (("pass", "#2e7d32"), ("fail", "#c62828"), ("incomplete", "#f9a825")):
            vals = [by_fn[fn][status] for fn in FUNCTIONS]
            ax.bar(FUNCTIONS, vals, bottom=bottom, color=color, label=status)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_ylabel("students")
        ax.set_title("Verdicts by function")
        ax.legend()

    out["function_verdicts"] = _figure("function_verdicts", folder, per_function)
    if part_b:
        values = [g for d in docs.values() if (g := tiled_matmul_gflops(d)) is not None]

        def gflops(fig, ax):
            if values:
                ax.hist(
                    values,
                    bins=min(20, max(5, len(values) // 3)),
                    color=style.backend_colour("student"),
                )
            else:
                ax.text(0.5, 0.5, "no Part B timing succeeded", ha="center", transform=ax.transAxes)
            ax.set_xlabel("tiled_matmul GFLOP/s at 1024 (Part B)")
            ax.set_ylabel("students")
            ax.set_title(f"tiled_matmul speed ({len(values)} students timed)")

        out["gflops"] = _figure("gflops", folder, gflops)
    return out


def _esc(text: str) -> str:
    """Student-controlled text for HTML: control characters and escapes removed, then escaped."""
    return html.escape(clean(text))


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{_esc(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _side(source: str, marked: set[int]) -> str:
    lines = []
    # numbered as similarity counts lines (tokenize: LF, after CR and CRLF became LF), not as
    # str.splitlines, which also breaks at form feeds, U+2028 and others: marks on the right rows
    for i, line in enumerate(lf(source).removesuffix("\n").split("\n"), start=1):
        text = f"{i:4d}  {_esc(line)}"
        lines.append(f"<mark>{text}</mark>" if i in marked else text)
    return "<pre>" + "\n".join(lines) + "</pre>"


def _kind(f: Flag) -> str:
    """The flag's kind as the report says it, with the copied functions where there are some."""
    return f.kind + (f" ({', '.join(f.functions)})" if f.functions else "")


def similarity_html(flags: list[Flag], sources: dict[str, str], reference: str) -> str:
    intro = (
        "<p>Each file is read through Python's AST and printed back in one spelling (no "
        "comments, docstrings, formatting or redundant parentheses; numbers by value, so 0x10 "
        "is 16; names as ID), the starter code removed, then compared. Flagged: pairs at "
        f"{PAIR_THRESHOLD:.2f} or more, and submissions at {REFERENCE_THRESHOLD:.2f} or more "
        "against the reference solution. Each flag names its kind: <b>verbatim</b> (the same "
        "code with the same names, however it is spelled), <b>renamed</b> (the same code, its "
        "names changed) or <b>contained</b> (that share of the smaller file's code, or of the "
        f"named functions of {FUNC_MIN} tokens or more, is inside the other: a copy with code "
        "added around it). "
        f"Submissions with fewer than {MIN_TOKENS} tokens of their own are not compared. "
        "Flags inform; they never change a verdict. The table lists every flag; the "
        f"{SIDE_BY_SIDE_MAX} best-scoring are shown side by side below it, matching regions "
        "highlighted.</p>"
    )
    if not flags:
        return intro + "<p>No flags.</p>"
    rows = [[f.a, f.b, f"{f.score:.3f}", _kind(f)] for f in flags]
    parts = [intro, _table(["submission", "near-identical to", "score", "kind"], rows)]
    for f in flags[:SIDE_BY_SIDE_MAX]:
        right = reference if f.b == REFERENCE else sources.get(f.b, "")
        parts.append(
            f"<h3>{_esc(f.a)} ~ {_esc(f.b)} (score {f.score:.3f}, {_esc(_kind(f))})</h3>"
            f'<div class="sbs"><div>{_side(sources.get(f.a, ""), f.a_lines)}</div>'
            f"<div>{_side(right, f.b_lines)}</div></div>"
        )
    if len(flags) > SIDE_BY_SIDE_MAX:
        parts.append(f"<p>{len(flags) - SIDE_BY_SIDE_MAX} more flags are listed above only.</p>")
    return "".join(parts)


_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}img{max-width:100%}
.sbs{display:flex;gap:1em}.sbs>div{flex:1;overflow-x:auto}pre{font-size:11px}
mark{background:#ffe082}"""


def write_report(
    out: Path,
    docs: dict[str, dict[str, Any]],
    rows: list[dict[str, Any]],
    flags: list[Flag],
    sources: dict[str, str],
    reference: str,
    *,
    part_b: bool = False,
    notes: list[str] | None = None,
) -> Path:
    """Write out/class_report.html and out/figures/*.png; the HTML path."""
    figs = figures(docs, out / "figures", part_b=part_b)
    counts = verdict_counts(docs)
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER if counts[v])
    lessons = common_lessons(docs)
    sections = [
        f"<h1>Milestone 07 class report</h1><p>{len(docs)} students: {summary}.</p>",
        *(f"<p><b>Note:</b> {_esc(n)}</p>" for n in notes or []),
        "<h2>Pass rate</h2>",
        _img(figs["pass_rate"], "pass rate"),
        "<h2>Failures per case</h2>",
        _CASE_INTRO,
        _img(figs["case_failures"], "failures per case"),
        "<h2>Most common lessons</h2>",
        _table(["students", "lesson"], [[c, lesson] for lesson, c in lessons])
        if lessons
        else "<p>No failing case or check.</p>",
        "<h2>Verdicts by function</h2>",
        _img(figs["function_verdicts"], "verdicts by function"),
    ]
    if "gflops" in figs:
        sections += ["<h2>tiled_matmul GFLOP/s (Part B)</h2>", _img(figs["gflops"], "GFLOP/s")]
    sections += [
        "<h2>Similarity</h2>",
        similarity_html(flags, sources, reference),
        "<h2>Gradebook</h2>",
        _table(list(rows[0]) if rows else [], [list(r.values()) for r in rows]),
    ]
    page = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Milestone 07 class report'
        f"</title><style>{_CSS}</style></head><body>{''.join(sections)}</body></html>"
    )
    path = out / "class_report.html"
    path.write_text(page, encoding="utf-8")
    return path
