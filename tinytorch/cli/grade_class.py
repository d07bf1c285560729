"""`tito grade-class`: grade a whole class folder in parallel (see tinytorch/classroom).

    tito grade-class SUBMISSIONS --out DIR [--jobs N] [--part-b] [--force] [--trusted-code]
                     [--points FILE] [--timeout S] [--wall-timeout S]

Exit status: 0 every student graded (whatever their verdicts), 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tinytorch.cli.grade import TRUSTED_HELP
from tinytorch.cli.validate import positive

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tinytorch.classroom.classgrade import Tally, grade_and_report, usable_cpus
    from tinytorch.milestone07.scoring import load_points
    from tinytorch.sandbox.spawn import TRUST_VAR, grading_refusal, trusted, visible_to_child

    if args.trusted_code:
        os.environ[TRUST_VAR] = "1"  # every milestone run inherits it, and every result says so
    why = grading_refusal() or (None if trusted() else visible_to_child(args.submissions))
    if why:
        print(f"tito grade-class: refused: {why}", file=sys.stderr)
        return EXIT_USAGE
    try:
        points = load_points(args.points)
    except (ValueError, TypeError) as exc:
        print(f"tito grade-class: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    jobs = args.jobs or usable_cpus()
    bar: dict[str, Any] = {}

    def on_start(tally: Tally) -> None:
        print(f"grading {tally.total - tally.done} of {tally.total} submissions with {jobs} jobs "
              f"({tally.done} already graded; --force regrades them)", flush=True)  # fmt: skip
        bar["tqdm"] = tqdm(total=tally.total, initial=tally.done, unit="student", file=sys.stderr)
        bar["tqdm"].set_postfix_str(f"passes {tally.passes}")

    def progress(student: str, doc: dict[str, Any], tally: Tally) -> None:
        bar["tqdm"].set_postfix_str(f"passes {tally.passes}, last {student}: {doc['verdict']}")
        bar["tqdm"].update(1)

    def close_bar() -> None:
        if "tqdm" in bar:
            bar.pop("tqdm").close()

    try:
        result = grade_and_report(
            args.submissions,
            out,
            points=points,
            jobs=jobs,
            part_b=args.part_b,
            force=args.force,
            case_timeout=args.timeout,
            wall_timeout=args.wall_timeout,
            progress=progress,
            on_start=on_start,
        )
    except ValueError as exc:
        print(f"tito grade-class: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        close_bar()
    from tinytorch.safe_text import clean

    for note in result.notes:
        print(f"note: {clean(note)}")
    counts: dict[str, int] = {}
    for row in result.rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    print(f"{len(result.rows)} students: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))  # fmt: skip
    for student, why in not_graded(result.run.docs):
        print(f"not graded: {clean(student)}: {clean(why)}")
    print(f"{len(result.flags)} similarity flags")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.phases.items()))
    print(f"wrote {out / 'gradebook.csv'}, {result.report} and {out / 'results'}/")
    return EXIT_INTERRUPTED if result.run.interrupted else EXIT_OK


def not_graded(docs: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(student, why) for each student whose submission was not graded: no file chosen, a file
    refused, or a grader error (their row's points are 0 of the maximum)."""
    out = []
    for student, doc in sorted(docs.items()):
        if doc.get("verdict") == "ERROR" or (not doc.get("graded_file") and doc.get("error")):
            out.append((student, str(doc.get("error") or doc.get("verdict") or "no result")))
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade-class",
        help="grade a class folder in parallel: gradebook, class report, similarity flags",
    )
    p.add_argument("submissions", metavar="SUBMISSIONS", help="a folder, one entry per student")
    p.add_argument("--out", required=True, metavar="DIR", help="where results and reports go")
    p.add_argument("--jobs", type=positive(int), metavar="N", help="parallel students "
                   "(default: the usable CPUs)")  # fmt: skip
    p.add_argument("--notebook", action="store_true",
                   help="kept for old scripts: notebooks are graded by default")  # fmt: skip
    p.add_argument("--part-b", action="store_true", help="also run the Part B timings")
    p.add_argument("--force", action="store_true", help="regrade students already graded")
    p.add_argument("--trusted-code", action="store_true", help=TRUSTED_HELP)
    p.add_argument("--points", metavar="FILE", help="points per case/check (TOML or JSON)")
    p.add_argument("--timeout", type=positive(float), metavar="S",
                   help="seconds per case (the milestone's --timeout, default 5)")  # fmt: skip
    p.add_argument("--wall-timeout", type=positive(float), default=300.0, metavar="S",
                   help="seconds for one student's whole run before it is stopped (default 300)")  # fmt: skip
    p.set_defaults(func=run)
