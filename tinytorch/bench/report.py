"""Part B in words: the table a terminal prints and a notebook shows, the progress line per row,
and the sentence a busy run adds. Plain sentences, read once; each row's description wraps under
itself, never back to column 0.

The terminal report calls part_b_text (tinytorch.render.terminal.render_part_b); the notebook
shows the same text.
"""

from __future__ import annotations

import textwrap

from tinytorch.milestone07.results import BenchRow, PartBResult
from tinytorch.profiling.credible import busy_trust
from tinytorch.safe_text import clean

WIDTH = 100  # the report's width, as the rest of the terminal report
DESCRIPTION_INDENT = 4  # a row's description sits under its backend's name, two further in
FLAG_TEXT = {
    "incorrect": "incorrect: not credited",
    "not_credible": "not credible: not credited",
    "noisy": "noisy: rerun",
}
UNIT = {"gemm": "GFLOP/s", "bias_gelu": "GB/s", "gelu": "GB/s"}
INTRO = (
    "Part B: speed, for context only. It never changes the verdict.",
    (
        "Each rate comes from the median time of several runs. 'spread' is how much the runs "
        "disagree (0.05 means 5%). 'load' is how many CPU cores other programs kept busy meanwhile. "
        "Your kernels run alone, on new inputs every time, and every answer is checked."
    ),
)
FUSION = (
    "Fusion: each step of a GELU reads and writes the whole array. Between each row's runs we "
    "also time one plain copy of the array. Below, each GELU's time is counted in copies: fewer "
    "copies means fewer trips through memory."
)


def busy_sentence() -> str:
    """What a busy machine leaves standing in Part B, in one sentence."""
    return busy_trust("the verdict (Part A)", "each GELU's time in copies")


def rate(row: BenchRow) -> float | None:
    return row.gflops if row.kind == "gemm" else row.gbps


def progress_line(done: int, total: int, row: BenchRow) -> str:
    """One line as a row finishes: "Part B 3/17: numpy, gemm 256x256x256: 0.52 ms (12 runs)".

    The time only: its rate is printed once checked against the ceilings, in the table."""
    if row.status == "ok" and row.ms is not None:
        figure = f"{row.ms:.2f} ms ({row.samples} run{'s' if row.samples != 1 else ''})"
    else:
        figure = {"unavailable": "not available"}.get(row.status, row.status)
    return clean(f"Part B {done}/{total}: {row.backend}, {row.problem}: {figure}")


def _wrap(text: str, indent: int) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, width=WIDTH, initial_indent=pad, subsequent_indent=pad) or []


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else "-".rjust(width)


def _copies(copies: float) -> str:
    """A time in copies of the array; under one cannot happen (a GELU must read and write the
    array once), so it is marked, never printed as a fact."""
    if copies >= 1.0:
        return f"as long as {copies:5.1f} copies"
    return f"under 1 copy ({copies:.1f} measured): impossible, rerun on a quiet machine"


def part_b_text(result: PartBResult) -> str:
    """The Part B table: one block per problem with the timed backends (rate, spread, load, flags)
    and each row's description under it; the fusion lesson; the backends; warnings last."""
    from tinytorch.bench.tasks import reference_passes  # tasks imports the registry: not at top

    lines = [INTRO[0], *_wrap(INTRO[1], 0), ""]
    ceil = result.ceilings
    if ceil:
        moved = " They moved during the run: see the warning below." if ceil.get("moved") else ""
        lines += _wrap(
            f"This machine: measured peak {ceil['fma_gflops']:.0f} GFLOP/s, copy bandwidth "
            f"{ceil['copy_gbs']:.1f} GB/s ({ceil.get('how', '')}).{moved}",
            0,
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
        cells = (
            f"{_num(r.ms, 10, 2)} {_num(r.min_ms, 9, 2)} {_num(rate(r) if credited else None, 8, 1)} "
            f"{_num(r.spread, 6, 2)} {_num(r.load, 5, 1)}"
        )
        notes = ([r.status] if r.status != "ok" else []) + [FLAG_TEXT[f] for f in r.flags]
        note = f"  [{', '.join(notes)}]" if notes else ""
        lines.append(f"  {r.backend:<{width}}{cells}{note}")
        lines += _wrap(r.detail, DESCRIPTION_INDENT)
    lines.append("")
    fusion = [r for r in result.rows if r.kind == "gelu" and r.gbps and r.ms and r.pass_ms]
    if fusion:
        lines += _wrap(FUSION, 0)
        lines += [
            f"  {r.backend:<{width}}{_copies(r.ms / r.pass_ms)}  (one copy: {r.pass_ms:.2f} ms)"
            for r in fusion
        ]
        lines += _wrap(f"For comparison, {reference_passes()}.", 2)
        lines.append("")
    lines.append("backends")
    listed = set()
    for b in result.backends:
        name = b.get("name", "?")
        listed.add(name)
        mark = "yes" if b.get("available") else "no "
        lines += _hang(f"  {name:<{width}}{mark}  ", str(b.get("reason", "")))
    rest = [(name, why) for name, why in untimed if name not in listed]
    if rest:
        lines.append("not timed")
        lines += [line for name, why in rest for line in _hang(f"  {name:<{width}}", why)]
    for w in result.warnings:
        lines += _hang("WARNING: ", w)
    lines.append(f"({result.seconds:.1f} s)")
    return clean("\n".join(lines))  # student text never reaches a terminal raw


def _hang(lead: str, text: str) -> list[str]:
    """`lead` then `text`, wrapped so that every further line starts under the text's first word."""
    pad = " " * len(lead)
    body = textwrap.wrap(text, width=max(WIDTH - len(lead), 30)) or [""]
    return [lead + body[0], *(pad + line for line in body[1:])]
