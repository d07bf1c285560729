"""`tito info`: the environment that timings and grades depend on."""

from __future__ import annotations

import argparse
import json

from tinytorch.profiling.environment import environment


def _run(args: argparse.Namespace) -> int:
    env = environment()
    if args.json:
        print(json.dumps(env, indent=2))
        return 0
    print(f"tinytorch {env['tinytorch']}  Python {env['python']}  numpy {env['numpy']}")
    print(f"platform  {env['platform']} ({env['machine']})")
    if not env["blas"]:
        print("BLAS      none reported by threadpoolctl")
    for lib in env["blas"]:
        print(
            f"{lib['api']:<9} {lib['library']} {lib['version']} ({lib['arch']}), {lib['threads']} threads"
        )
    for row in env["backends"]:
        mark = "yes" if row["available"] else "no "
        print(f"{row['name']:<9} {mark}  {row['reason']}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print Python, NumPy, BLAS, compiler and GPU backends")
    p.add_argument("--json", action="store_true", help="print the same facts as JSON")
    p.set_defaults(func=_run)
