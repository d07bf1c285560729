"""`tito milestone`: list the milestones and run Milestone 07 (Custom Kernels).

    tito milestone list
    tito milestone run 07 [--impl MODULE_OR_PATH] [--json PATH] [--seed N] [--no-part-b] [--timeout S]
                          [--plots DIR]

Exit status: 0 PASS, 1 NOT PASSED or INCOMPLETE, 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import TextIO

MILESTONES = {
    "07": {
        "title": "Custom Kernels (2024)",
        "aliases": ("07", "7", "kernels", "triton", "metal"),
        "script": "milestones/07_2024_kernels/01_custom_kernels.py",
        "needs": "Modules 01, 06, 09, 14, 17",
    },
}
EXIT_PASS, EXIT_NOT_PASSED, EXIT_USAGE = 0, 1, 2


def resolve(name: str) -> str | None:
    """The milestone number for a number or alias ('07', 'kernels', 'triton', 'metal')."""
    for number, spec in MILESTONES.items():
        if name.lower() in spec["aliases"]:
            return number
    return None


def missing_impl(impl: str) -> str | None:
    """One line saying what --impl names that does not exist (a file or a module), else None.

    A dotted name imports its parent packages to look for the module, never the module itself.
    """
    from tinytorch.milestone07.impl import is_path

    if is_path(impl) or impl.endswith(".ipynb"):
        return None if os.path.exists(impl) else f"--impl: no such file {impl!r}"
    try:
        found = importlib.util.find_spec(impl) is not None
    except ModuleNotFoundError:
        found = False
    except (ImportError, ValueError):  # a broken parent package: the run reports it properly
        return None
    return None if found else f"--impl: no module named {impl!r} (nor a file: no .py, no '/')"


def run_milestone(
    impl: str,
    *,
    seed: int = 0,
    timeout: float = 5.0,
    part_b: bool = True,
    json_path: str | None = None,
    sizes: str = "default",
    out: TextIO | None = None,
    plots: str | None = None,
) -> int:
    """Part A (the verdict), then Part B (context); print both, optionally write JSON; exit code.

    plots=DIR also writes a PNG of where each group's first failing case is wrong.
    """
    from tinytorch.milestone07 import render_part_a, render_part_b, run_part_a, run_part_b, to_json

    out = out or sys.stdout
    why = missing_impl(impl)
    if why:
        print(f"tito milestone run: {why}", file=sys.stderr)
        return EXIT_USAGE
    a = run_part_a(impl, seed=seed, timeout=timeout)
    print(render_part_a(a), file=out, flush=True)
    if plots:
        import matplotlib

        matplotlib.use("Agg")  # files only, whatever display this terminal has
        from tinytorch.viz.failures import save_failure_plots

        try:
            written = save_failure_plots([*a.cases, *getattr(a, "hidden", [])], a.checks, plots)
        except OSError as exc:
            print(f"tito milestone: cannot write --plots {plots}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        names = ", ".join(p.name for p in written) or "none (nothing failed with a drawing)"
        print(f"\ndrawings in {plots}: {names}", file=out, flush=True)
    b = None
    if part_b:
        print("\nPart B: timing (context only, a few seconds)...", file=out, flush=True)
        b = run_part_b(impl, sizes=sizes, part_a=a)
        print(render_part_b(b), file=out, flush=True)
    if json_path:
        from tinytorch.cli.info import environment

        doc = to_json(a, b, environment())
        try:
            with open(json_path, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2)
                fh.write("\n")
        except OSError as exc:
            print(f"tito milestone: cannot write --json {json_path}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"\nwrote {json_path}", file=out)
    return EXIT_PASS if a.verdict == "PASS" else EXIT_NOT_PASSED


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of a milestone run (shared with milestones/07_2024_kernels/01_custom_kernels.py)."""
    from tinytorch.milestone07 import DEFAULT_IMPL

    p.add_argument(
        "--impl",
        default=DEFAULT_IMPL,
        metavar="MODULE_OR_PATH",
        help=f"your Module 17: a module name or a path to a .py file (default {DEFAULT_IMPL})",
    )
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON (for graders)")
    p.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    p.add_argument("--no-part-b", action="store_true", help="skip the Part B timings")
    p.add_argument(
        "--timeout", type=_positive, default=5.0, metavar="S", help="seconds per case (default 5)"
    )
    p.add_argument(
        "--plots",
        metavar="DIR",
        help="write a PNG of where each group's first failing case is wrong into DIR",
    )
    p.add_argument(
        "--part-b-sizes", choices=("default", "quick"), default="default", help=argparse.SUPPRESS
    )


def _run_parsed(args: argparse.Namespace) -> int:
    return run_milestone(
        args.impl,
        seed=args.seed,
        timeout=args.timeout,
        part_b=not args.no_part_b,
        json_path=args.json,
        sizes=args.part_b_sizes,
        plots=args.plots,
    )


def _run(args: argparse.Namespace) -> int:
    number = resolve(args.milestone)
    if number is None:
        known = ", ".join(a for s in MILESTONES.values() for a in s["aliases"])
        print(
            f"tito milestone run: unknown milestone {args.milestone!r} (known: {known})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return _run_parsed(args)


def _list(args: argparse.Namespace) -> int:
    for number, spec in MILESTONES.items():
        aliases = ", ".join(a for a in spec["aliases"] if a != number)
        print(f"{number}  {spec['title']:<24} aliases: {aliases}   needs {spec['needs']}")
        print(f"    tito milestone run {number}    (or python {spec['script']})")
    return EXIT_PASS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("milestone", help="run a milestone (tito milestone run 07)")
    msub = p.add_subparsers(dest="milestone_command", metavar="{run,list}")
    run = msub.add_parser("run", help="run a milestone: 07 (aliases kernels, triton, metal)")
    run.add_argument("milestone", help="07, or an alias: kernels, triton, metal")
    add_run_options(run)
    run.set_defaults(func=_run)
    ls = msub.add_parser("list", help="list the milestones")
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), EXIT_USAGE)[1])


def main_run(argv: list[str] | None = None) -> int:
    """The script entry point: the same options as `tito milestone run 07`."""
    parser = argparse.ArgumentParser(
        prog="01_custom_kernels.py", description="Milestone 07: Custom Kernels (Part A + Part B)"
    )
    add_run_options(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return _run_parsed(args)
