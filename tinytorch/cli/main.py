"""`tito`: the course CLI. Each subcommand lives in its own module with `register(subparsers)`."""

from __future__ import annotations

import argparse
import sys

from tinytorch import __version__
from tinytorch.cli import (
    autograder,
    bench,
    grade,
    grade_class,
    info,
    milestone,
    nbgrader,
    release,
)
from tinytorch.cli.parser import SuggestingParser

SUBCOMMANDS = (info, milestone, grade, bench, release, grade_class, autograder, nbgrader)
EXIT_READER_GONE = 141  # what a shell reports for a command ended by SIGPIPE (128 + 13)


def build_parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(
        prog="tito",
        description="TinyTorch course CLI: run milestones, grade notebooks, benchmark kernels.",
    )
    parser.add_argument("--version", action="version", version=f"tito (tinytorch) {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors and 0 on --help/--version
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from tinytorch.safe_text import flush_quietly, silence

    try:
        code = int(args.func(args) or 0)
    except BrokenPipeError:  # `tito ... | head`: the reader left; end quietly, as `cat` would
        silence(sys.stdout)
        return EXIT_READER_GONE
    flush_quietly(sys.stdout)  # what is still buffered; the status stays the command's own
    return code


if __name__ == "__main__":
    sys.exit(main())
