"""`tito bench`: placeholder until its issue lands."""

from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    print("tito bench is not implemented yet in this checkout", file=sys.stderr)
    return 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="(not implemented yet)")
    p.set_defaults(func=_run)
