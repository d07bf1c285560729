"""`tito release N --out DIR`: write the student edition of course module N into DIR."""

from __future__ import annotations

import argparse
import sys

from tinytorch.release import RELEASABLE, make_student_source, write_student_edition


def _run(args: argparse.Namespace) -> int:
    if args.module not in RELEASABLE:
        available = ", ".join(str(n) for n in sorted(RELEASABLE))
        print(
            f"tito release: module {args.module} has no student edition (available: {available})",
            file=sys.stderr,
        )
        return 2
    try:
        target = write_student_edition(args.module, args.out)
    except (OSError, ValueError) as exc:
        print(f"tito release: {exc}", file=sys.stderr)
        return 1
    print(f"wrote the student edition of module {args.module}: {target}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "release",
        help="write the student edition of a module (solutions replaced by stubs)",
        description=(
            "Copy a module's reference source with every '### BEGIN SOLUTION' ... "
            "'### END SOLUTION' region replaced by raise NotImplementedError(hint). "
            f"Modules with a student edition: {', '.join(str(n) for n in sorted(RELEASABLE))}."
        ),
    )
    p.add_argument("module", type=int, help="course module number, e.g. 17")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if needed)")
    p.set_defaults(func=_run)


__all__ = ["make_student_source", "register"]
