"""`tito grade`: execute the milestone notebook headless against an implementation and grade it.

Exit codes: 0 pass, 1 not passed or incomplete, 2 usage, 3 a cell raised, 4 timeout, 5 dead kernel,
6 ERROR (the grader itself failed; the --report file still says so).
Grading mode (a secret seed, hidden cases) is the default; --practice turns it off. Part A's
wall-clock budget is `tito milestone run`'s default unless --budget (or -p BUDGET=...) says otherwise.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

from tinytorch.cli.milestone import DEFAULT_BUDGET_S
from tinytorch.cli.validate import positive_seconds
from tinytorch.sandbox.spawn import TRUST_VAR


def parse_param(text: str) -> tuple[str, object]:
    """NAME=VALUE, VALUE a Python literal (else taken as a string)."""
    from tinytorch.grading.grade import UsageError

    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"-p/--param: expected NAME=VALUE, got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def _run(args: argparse.Namespace) -> int:
    # Imported here: nbclient/nbformat cost ~1 s, which every other tito command should not pay.
    from tinytorch.cli.milestone import missing_impl, refused_impl
    from tinytorch.grading.grade import ERROR, USAGE, UsageError, grade
    from tinytorch.render.resultfile import ResultFileError

    if args.trusted_code:
        os.environ[TRUST_VAR] = "1"  # the sandboxes of this run, and every result, say so
    why = None
    if args.impl:  # a link is refused in grading mode, as by tito milestone run (no classmate's)
        why = missing_impl(args.impl) or refused_impl(args.impl, grading=not args.practice)
    if why:
        print(f"tito grade: {why}", file=sys.stderr)
        return USAGE
    try:
        params = dict(parse_param(p) for p in args.param)
        code, result = grade(
            args.notebook,
            impl=args.impl,
            params=params,
            report=args.report,
            executed=args.executed,
            timeout=args.timeout,
            grading=not args.practice,
            budget=args.budget,
        )
    except UsageError as exc:
        print(f"tito grade: {exc}", file=sys.stderr)
        return USAGE
    except ResultFileError as exc:  # the run finished but its result could not be published
        print(f"tito grade: {exc}", file=sys.stderr)
        return ERROR
    where = (
        f" (cell {result['error']['cell']}: {result['error']['ename']})" if result["error"] else ""
    )
    print(
        f"{result['verdict'] or 'NO VERDICT'}: {result['passed']}/{result['total']} cases, "
        f"run {result['status']}{where}, {result['seconds']:.1f} s, exit {code}"
    )
    from tinytorch.render.terminal import render_grade_lines

    lines = render_grade_lines(result)  # root causes first, then cases and checks, then lessons
    if lines:
        print("\n".join(lines))
    return code


TRUSTED_HELP = (
    "grade even where the student's code cannot be isolated (not root, or Python unreadable by "
    "the sandbox uid without namespaces): for code you trust only; every result says so"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade",
        help="execute the milestone notebook headless and grade it",
        description=(
            "Execute NOTEBOOK with nbclient against an implementation of Module 17 and grade it. "
            "Exit codes: 0 pass, 1 not passed or incomplete, 2 usage error, 3 a cell raised, "
            "4 timeout, 5 dead kernel, 6 ERROR (the grader itself failed). Grading mode (a "
            "secret seed and hidden cases) is the default; --practice turns it off."
        ),
    )
    p.add_argument(
        "notebook",
        nargs="?",
        default=None,
        help="notebook to execute (default: the milestone notebook)",
    )
    p.add_argument(
        "--impl",
        metavar="MODULE_OR_PATH",
        help=(
            "module name, or path to a student's .py file, percent file or .ipynb notebook "
            "(default: the notebook's parameter)"
        ),
    )
    p.add_argument("--report", metavar="report.json", help="write the JSON report here")
    p.add_argument(
        "--practice",
        action="store_true",
        help="practice mode: seed 0 and the published cases only (default: grading mode)",
    )
    p.add_argument(
        "--budget",
        type=positive_seconds,
        default=DEFAULT_BUDGET_S,
        metavar="S",
        help=(
            f"wall-clock seconds for the notebook's whole Part A gate, as `tito milestone run`'s "
            f"--budget (default {DEFAULT_BUDGET_S:g}); sets its BUDGET parameter"
        ),
    )
    p.add_argument("--executed", metavar="out.ipynb", help="write the executed notebook here")
    p.add_argument("--trusted-code", action="store_true", help=TRUSTED_HELP)
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds each cell may run before the run stops with exit 4 (default 300)",
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override another parameter of the notebook's parameters cell, e.g. -p PART_B='quick'",
    )
    p.set_defaults(func=_run)
