"""`tito milestone`: list the milestones and run Milestone 07 (Custom Kernels).

    tito milestone list
    tito milestone run 07 [--impl MODULE_OR_PATH] [--json PATH] [--seed N]
                          [--no-part-b | --part-b | --part-b-only] [--verbose] [--timeout S]
                          [--grading] [--budget S] [--memory-limit MB] [--plots DIR]
                          [--format {json,prairielearn} [--points FILE]]

Exit status: 0 PASS, 1 NOT PASSED or INCOMPLETE, 2 usage error, 3 ERROR (the grader itself failed;
the --json file still says so).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import TextIO

from tinytorch.cli.parser import SuggestingParser
from tinytorch.cli.validate import megabytes, positive_seconds
from tinytorch.milestone07.results import (  # noqa: F401 (exit statuses, re-exported)
    EXIT_ERROR,
    EXIT_NOT_PASSED,
    EXIT_PASS,
    EXIT_USAGE,
    exit_code,
)

MILESTONES = {
    "07": {
        "title": "Custom Kernels (2024)",
        "aliases": ("07", "7", "kernels", "triton", "metal"),
        "script": "milestones/07_2024_kernels/01_custom_kernels.py",
        "needs": "Modules 01, 06, 09, 14, 17",
    },
}
DEFAULT_BUDGET_S = 300.0  # wall-clock seconds for the whole of Part A


def resolve(name: str) -> str | None:
    """The milestone number for a number or alias ('07', 'kernels', 'triton', 'metal')."""
    for number, spec in MILESTONES.items():
        if name.lower() in spec["aliases"]:
            return number
    return None


class _UsageError(ValueError):
    """A bad argument found by run_part_a: exit 2, no result file."""


def folder_impl(impl: str) -> tuple[str, str | None]:
    """(the file to grade, None) for a folder, chosen by the one rule every route uses
    (tinytorch.sandbox.choose: acceleration.py or .ipynb, else the only file that defines the
    graded functions); (impl, why) when the rule names none; (impl, None) for anything else."""
    if not os.path.isdir(impl):
        return impl, None
    if os.path.islink(impl.rstrip("/") or "/"):
        return impl, (
            f"--impl: {impl!r} is a symbolic link to a folder: name the folder itself (a link "
            "may lead to another student's files)"
        )
    from tinytorch.classroom.submissions import snapshot

    staged = snapshot(Path(impl))
    if isinstance(staged, str):
        return impl, f"--impl: the folder {impl!r}: {staged}"
    return os.path.join(impl, staged.chosen or ""), None


def folder_copy(folder: str) -> tuple[str, str]:
    """(the chosen file as the student named it, the same file in a private copy of ours) for
    `--impl DIR`: the folder is read once (the snapshot the choice is made on) and graded from
    that copy, never from the student's path again (red-teaming swapped a folder for a
    classmate's between two reads: PASS on the classmate's code). The copy is the one folder
    that holds a single submission, so the chosen file's helpers come with it; it is removed
    when the process exits. Raises _UsageError when the rule now names nothing."""
    import atexit
    import shutil
    import tempfile

    from tinytorch.classroom.submissions import snapshot
    from tinytorch.sandbox import stage
    from tinytorch.sandbox.spawn import SUBMISSION_DIR_VAR

    staged = snapshot(Path(folder))
    if isinstance(staged, str):
        raise _UsageError(f"--impl: the folder {folder!r}: {staged}")
    copy = tempfile.mkdtemp(prefix="tt-impl-")
    atexit.register(shutil.rmtree, copy, True)
    stage.write(staged, copy)
    os.environ[SUBMISSION_DIR_VAR] = copy  # the sandbox stages the chosen file's helpers
    return os.path.join(folder, staged.chosen or ""), os.path.join(copy, staged.main or "")


GRADABLE_SUFFIXES = (".py", ".ipynb")  # a module (or jupytext percent file), a notebook


def unsupported_impl(impl: str) -> str | None:
    """One line saying why an existing file that --impl names cannot be Module 17 (it is neither
    a .py module nor an .ipynb notebook: acceleration.txt, a README), else None. A folder, a
    module name and a path that does not exist are missing_impl's to judge."""
    if not os.path.lexists(impl) or os.path.isdir(impl) or impl.endswith(GRADABLE_SUFFIXES):
        return None
    return (
        f"--impl: {impl!r} is not a Module 17 file: name a .py module, an .ipynb notebook, a "
        "folder holding one, or a module name"
    )


def missing_impl(impl: str) -> str | None:
    """One line saying what --impl names that does not exist (a file or a module), else None.

    A dotted name imports its parent packages to look for the module, never the module itself.
    """
    from tinytorch.sandbox.child.load import is_path

    if os.path.isdir(impl):
        return folder_impl(impl)[1]
    if is_path(impl) or impl.endswith(".ipynb"):
        return None if os.path.lexists(impl) else f"--impl: no such file {impl!r}"
    try:
        found = importlib.util.find_spec(impl) is not None
    except ModuleNotFoundError:
        found = False
    except (ImportError, ValueError):  # a broken parent package: the run reports it properly
        return None
    return None if found else f"--impl: no module named {impl!r} (nor a file: no .py, no '/')"


def refused_impl(impl: str, *, grading: bool) -> str | None:
    """One line saying why the file --impl names is not graded, else None: a special file (a FIFO
    would block), a file over the size cap, or, in grading mode, a symbolic link (it may point to
    a classmate's file; the class grader refuses it too). Checked from lstat, opening nothing.
    In grading mode, first: where the student's code would not be isolated (fail closed:
    tinytorch.sandbox.spawn.isolation_problem), the layer and the fix."""
    import stat

    from tinytorch.sandbox import spawn, stage
    from tinytorch.sandbox.child.load import is_path

    if grading and (why := spawn.grading_refusal()):
        return why
    if not (is_path(impl) or impl.endswith(".ipynb")):
        return None
    try:
        st = os.lstat(impl)
        if stat.S_ISLNK(st.st_mode) and grading:
            return (
                f"--impl: {impl!r} is a symbolic link; in grading mode the submission's own "
                "file is graded: copy it in place of the link"
            )
        st = os.stat(impl)  # practice mode: a link to the student's own file is fine
    except OSError as exc:
        return f"--impl: cannot read {impl!r}: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return None
    why = stage.refusal(st, os.path.basename(impl), hard_links=not grading)
    return f"--impl: {why}" if why else None


def run_milestone(
    impl: str,
    *,
    seed: int | None = None,
    timeout: float = 5.0,
    part_b: bool = True,
    part_b_if_incomplete: bool = False,
    grading: bool = False,
    budget: float | None = DEFAULT_BUDGET_S,
    memory_limit: int | None = None,
    json_path: str | None = None,
    sizes: str = "default",
    out: TextIO | None = None,
    fmt: str = "json",
    plots: str | None = None,
    points_file: str | None = None,
    verbose: bool = False,
    part_b_only: bool = False,
) -> int:
    """Part A (the verdict), then Part B (context); print both, optionally write JSON; exit code.

    verbose: every case and check in the report, not only the failing ones. part_b_only: rerun
    Part B alone (its kernels still checked against Part A first, quietly); the exit code and
    --json are still Part A's. An INCOMPLETE Module 17 skips Part B (its timings would be of the
    few functions written), unless part_b_if_incomplete or part_b_only asks for it. When the
    reader of `out` goes away (`| head`), the run ends quietly: no more output, no Part B.

    plots=DIR also writes a PNG of where each group's first failing case is wrong. The --json file
    is removed before any student code runs and published (tmp file + rename)
    after every student process is gone. A bug of the grader's own ends in verdict ERROR, exit 3,
    with the file written all the same.
    """
    from tinytorch.render.resultfile import ResultFile, ResultFileError
    from tinytorch.safe_text import CleanStream, clean_tree

    out = CleanStream(out or sys.stdout)  # the student's text reaches the terminal cleaned
    err = CleanStream(sys.stderr)  # and so do the file names and errors said on stderr
    why = unsupported_impl(impl) or missing_impl(impl) or refused_impl(impl, grading=grading)
    if why:
        print(f"tito milestone run: {why}", file=err)
        return EXIT_USAGE
    shown = None  # the student's own name for the file graded from our copy of their folder
    if os.path.isdir(impl):
        try:
            shown, impl = folder_copy(impl)
        except _UsageError as exc:
            print(f"tito milestone run: {exc}", file=err)
            return EXIT_USAGE
    points = None
    if fmt == "prairielearn":  # read before any grading: a bad points file is a usage error
        from tinytorch.milestone07.scoring import load_points

        try:
            points = load_points(points_file)
        except (ValueError, TypeError) as exc:
            print(f"tito milestone run: {exc}", file=err)
            return EXIT_USAGE
    elif points_file is not None:
        print("tito milestone run: --points goes with --format prairielearn (the milestone "
              "JSON holds statuses, not points)", file=err)  # fmt: skip
        return EXIT_USAGE
    target = None
    if json_path:
        try:
            target = ResultFile(json_path, what="--json").claim()
        except ResultFileError as exc:
            print(f"tito milestone: {exc}", file=err)
            return EXIT_USAGE
    if plots:  # the grader's folder before any student code runs: a student cannot make it
        try:
            Path(plots).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            print(f"tito milestone run: --plots: cannot use {plots}: {exc}", file=err)
            return EXIT_USAGE
    from tinytorch.milestone07.boundary import preload

    preload(part_b=part_b)  # all the grader will import, before any student code runs
    try:
        doc = _graded(
            impl, seed, timeout, part_b, grading, budget, memory_limit, sizes, out, plots,
            verbose=verbose, part_b_only=part_b_only,
            part_b_if_incomplete=part_b_if_incomplete or part_b_only, shown=shown,
        )  # fmt: skip
    except _UsageError as exc:
        print(f"tito milestone: {exc}", file=err)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 (a grader bug: verdict ERROR, never a bare traceback)
        doc = _error_document(impl, seed, grading, timeout, exc)
        print(f"tito milestone: {doc.get('error')}", file=err)
    doc = clean_tree(doc)  # and the JSON (its `output` fields) too
    code = exit_code(str(doc.get("verdict")))  # from the milestone document, before any
    # conversion to another format (e.g. PrairieLearn's), which only changes what the file holds
    if points is not None:  # PrairieLearn's external-grader results.json (issue 11)
        from tinytorch.render.platforms import prairielearn_results

        doc = prairielearn_results(doc, points)
    if target is not None:
        try:
            target.publish_json(doc)
        except ResultFileError as exc:
            print(f"tito milestone: {exc}", file=err)
            return EXIT_ERROR
        print(f"\nwrote {target.path}", file=out)
    return code


def _graded(
    impl: str,
    seed: int | None,
    timeout: float,
    part_b: bool,
    grading: bool,
    budget: float | None,
    memory_limit: int | None,
    sizes: str,
    out: TextIO,
    plots: str | None = None,
    *,
    verbose: bool = False,
    part_b_only: bool = False,
    part_b_if_incomplete: bool = False,
    shown: str | None = None,
) -> dict:
    from tinytorch.bench.part_b import run_part_b
    from tinytorch.milestone07 import run_part_a
    from tinytorch.profiling.environment import environment
    from tinytorch.render.json_doc import to_json
    from tinytorch.render.terminal import render_part_a, render_part_b

    try:  # a ValueError out of run_part_a is its argument checks: it catches its own bugs
        a = run_part_a(
            impl,
            seed=seed,
            timeout=timeout,
            grading=grading,
            budget=budget,
            memory_limit=memory_limit,
        )
    except ValueError as exc:
        raise _UsageError(str(exc)) from exc
    if shown is not None:  # graded from our copy; reported under the student's own path
        a.impl = shown
    if part_b_only:
        print(f"Part A (not shown, --part-b-only): {a.verdict.replace('_', ' ')}", file=out)
    else:
        print(render_part_a(a, verbose=verbose), file=out, flush=True)
    if plots:
        import matplotlib

        matplotlib.use("Agg")  # files only, whatever display this terminal has
        from tinytorch.render.resultfile import ResultFile
        from tinytorch.viz.failures import failure_pngs

        written = []
        try:  # each as the --json file is written: a link planted at its name is replaced
            for name, png in failure_pngs([*a.cases, *getattr(a, "hidden", [])], a.checks):
                ResultFile(Path(plots) / name, what="--plots").claim().publish(png)
                written.append(Path(plots) / name)
        except OSError as exc:
            raise _UsageError(f"cannot write --plots {plots}: {exc}") from exc
        names = ", ".join(p.name for p in written) or "none (nothing failed with a drawing)"
        print(f"\ndrawings in {plots}: {names}", file=out, flush=True)
    b = None
    gone = getattr(out, "broken", False)  # the reader left (`| head`): nobody would see Part B
    if a.verdict == "INCOMPLETE" and part_b and not part_b_if_incomplete and not gone:
        print(
            "\nPart B (timings) skipped: Module 17 is not finished; --part-b times what is written",
            file=out,
            flush=True,
        )
        part_b = False
    if part_b and not gone and a.verdict != "ERROR" and a.load_error is None:
        print("\nPart B: timing (context only, a few seconds)...", file=out, flush=True)
        try:
            b = run_part_b(
                impl, sizes=sizes, part_a=a, progress=lambda line: print(line, file=out, flush=True)
            )
        except Exception as exc:  # noqa: BLE001 (context only: the verdict stands)
            a.warnings.append(f"Part B failed inside the grader: {type(exc).__name__}: {exc}")
            print(f"Part B failed inside the grader: {type(exc).__name__}: {exc}", file=out)
        else:
            print(render_part_b(b), file=out, flush=True)
    return to_json(a, b, environment())


def _error_document(
    impl: str, seed: int | None, grading: bool, timeout: float, exc: BaseException
) -> dict:
    """The ERROR result for a grader bug outside run_part_a, built with as little as possible."""
    try:
        from tinytorch.milestone07 import CASES
        from tinytorch.milestone07.part_a import error_result
        from tinytorch.render.json_doc import to_json

        a = error_result(impl, seed if seed is not None else -1, CASES, timeout, exc)
        a.grading = grading
        return to_json(a, None, None)
    except Exception as again:  # noqa: BLE001 (the schema code itself is what broke)
        error = f"internal grader error: {type(exc).__name__}: {exc} (then {again!r})"
        return {"schema_version": None, "milestone": "07", "verdict": "ERROR", "error": error}


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of a milestone run (shared with milestones/07_2024_kernels/01_custom_kernels.py)."""
    from tinytorch.milestone07 import DEFAULT_IMPL

    p.add_argument(
        "--impl",
        default=DEFAULT_IMPL,
        metavar="MODULE_OR_PATH",
        help=(
            "your Module 17: a module name, a .py file (a jupytext percent file grades its "
            f"#| export cells), or an .ipynb notebook (default {DEFAULT_IMPL})"
        ),
    )
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON (for graders)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="data seed (default 0; with --grading a fresh secret one, printed after the run)",
    )
    p.add_argument(
        "--grading",
        action="store_true",
        help="grading mode: a fresh secret seed and hidden cases besides the published 30",
    )
    p.add_argument(
        "--budget",
        type=positive_seconds,
        default=DEFAULT_BUDGET_S,
        metavar="S",
        help="wall-clock seconds for the whole of Part A (default 300); past it the rest time out",
    )
    p.add_argument(
        "--memory-limit",
        type=megabytes,
        default=None,
        metavar="MB",
        help="address-space limit of the student's process, in MB",
    )
    p.add_argument(
        "--format",
        choices=("json", "prairielearn"),
        default="json",
        help="what --json writes: the milestone's JSON (default) or PrairieLearn's results.json",
    )
    p.add_argument(
        "--points",
        metavar="FILE",
        help="with --format prairielearn: points per case/check (TOML or JSON, as grade-class)",
    )
    p.add_argument("--no-part-b", action="store_true", help="skip the Part B timings")
    p.add_argument(
        "--part-b",
        action="store_true",
        help="run Part B even when Module 17 is INCOMPLETE (it is skipped then by default)",
    )
    p.add_argument(
        "--part-b-only",
        action="store_true",
        help="rerun Part B alone: its table only (Part A still runs first, unprinted, so that a "
        "kernel that fails it is not credited)",
    )
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="list every case and deeper check, not only the failing ones",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=5.0,
        metavar="S",
        help="seconds per case (default 5)",
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
    for flag in ("part_b_only", "part_b"):
        if getattr(args, flag) and args.no_part_b:
            said = "--" + flag.replace("_", "-")
            print(f"tito milestone run: {said} and --no-part-b contradict", file=sys.stderr)
            return EXIT_USAGE
    return run_milestone(
        args.impl,
        seed=args.seed,
        timeout=args.timeout,
        part_b=not args.no_part_b,
        part_b_if_incomplete=args.part_b,
        grading=args.grading,
        budget=args.budget,
        memory_limit=args.memory_limit,
        json_path=args.json,
        sizes=args.part_b_sizes,
        fmt=args.format,
        plots=args.plots,
        points_file=args.points,
        verbose=args.verbose,
        part_b_only=args.part_b_only,
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
    parser = SuggestingParser(
        prog="01_custom_kernels.py", description="Milestone 07: Custom Kernels (Part A + Part B)"
    )
    add_run_options(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    from tinytorch.safe_text import flush_quietly

    code = _run_parsed(args)
    flush_quietly(sys.stdout)  # now, not at exit: a reader gone (`| head`) prints no traceback
    return code
