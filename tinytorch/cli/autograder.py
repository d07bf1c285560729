"""`tito autograder`: build Gradescope's autograder zip; grade one submission on a platform.

    tito autograder gradescope --out autograder.zip [--points FILE] [--part-b]
    tito autograder run {gradescope,prairielearn} [--root DIR] [--points FILE]
                                                (what run_autograder and PrairieLearn call)

Exit status: 0 done (the results file says the verdict), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_USAGE = 0, 2


def _build(args: argparse.Namespace) -> int:
    from tinytorch.classroom.autograder import build_gradescope_zip

    try:
        path = build_gradescope_zip(args.out, points_file=args.points, part_b=args.part_b)
    except (ValueError, TypeError, OSError) as exc:
        print(f"tito autograder gradescope: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {path}: upload it as the assignment's autograder (see the README)")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from tinytorch.classroom.autograder import run_platform

    run_platform(args.platform, args.root, points_file=args.points)
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autograder", help="Gradescope autograder zip; platform grading entry")
    asub = p.add_subparsers(dest="autograder_command", metavar="{gradescope,run}")
    gs = asub.add_parser("gradescope", help="write the Gradescope autograder zip")
    gs.add_argument("--out", required=True, metavar="ZIP", help="the zip to write")
    gs.add_argument("--points", metavar="FILE", help="points per case/check (TOML or JSON)")
    gs.add_argument("--part-b", action="store_true", help="also time Part B (the leaderboard)")
    gs.set_defaults(func=_build)
    run = asub.add_parser("run", help="grade the platform's submission into its results.json")
    run.add_argument("platform", choices=("gradescope", "prairielearn"))
    run.add_argument("--root", metavar="DIR", help="default $AUTOGRADER_ROOT, else /autograder "
                     "(Gradescope) or /grade (PrairieLearn)")  # fmt: skip
    run.add_argument("--points", metavar="FILE", help="points per case/check (TOML or JSON); "
                     "default: the zip's config.json (Gradescope), else the default points")  # fmt: skip
    run.set_defaults(func=_run)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), EXIT_USAGE)[1])
