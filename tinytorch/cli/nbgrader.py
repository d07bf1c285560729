"""`tito nbgrader`: Milestone 07 as an nbgrader assignment (tinytorch/classroom/nbgrader_*.py).

    tito nbgrader init       [--course DIR]   nbgrader_config.py and assignments/source/
    tito nbgrader generate   [--course DIR] [--points FILE]
                                              stage the source assignment, then
                                              `nbgrader generate_assignment` (release/)
    tito nbgrader autograde  [--course DIR] [--student ID ...]
                                              `nbgrader autograde`: graded in our sandbox
    tito nbgrader feedback   [--course DIR] [--student ID ...]
                                              `nbgrader generate_feedback` (feedback/)
    tito nbgrader export     [--course DIR] [--to FILE]
                                              `nbgrader export`: the gradebook as CSV

Every nbgrader step runs nbgrader's own CLI from the course folder (DIR, default the current
one), where nbgrader_config.py is. Exit status: nbgrader's; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

EXIT_USAGE = 2
INSTALL = ".venv/bin/pip install -e '.[nbgrader]'"


def _nbgrader(course: Path, *argv: str) -> int:
    """Run `nbgrader ARGV` in `course`; its exit status."""
    if importlib.util.find_spec("nbgrader") is None:
        print(f"tito nbgrader: nbgrader is not installed: {INSTALL}", file=sys.stderr)
        return EXIT_USAGE
    if not (course / "nbgrader_config.py").is_file():
        print(f"tito nbgrader: --course {course}: no nbgrader_config.py: run `tito nbgrader "
              "init` first", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    cmd = [sys.executable, "-m", "nbgrader", *argv]
    # nbgrader runs `alembic` (its gradebook's migrations) from PATH: put this interpreter's
    # bin/ first, as activating the venv would
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path}
    return subprocess.run(cmd, cwd=course, env=env, check=False).returncode


def _init(args: argparse.Namespace) -> int:
    from tinytorch.classroom.nbgrader_assignment import ROOT, init_course

    try:
        config = init_course(args.course)
    except (OSError, FileExistsError) as exc:
        print(f"tito nbgrader init: --course {args.course}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {config} and {Path(args.course) / ROOT / 'source'}/")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from tinytorch.classroom.nbgrader_assignment import write_source
    from tinytorch.classroom.nbgrader_layout import ASSIGNMENT
    from tinytorch.milestone07.scoring import load_points

    try:
        points = load_points(args.points)
        notebook = write_source(args.course, points)
    except (ValueError, TypeError, OSError) as exc:
        print(f"tito nbgrader generate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote the source assignment {notebook}")
    return _nbgrader(Path(args.course), "generate_assignment", ASSIGNMENT, "--force")


def _students(args: argparse.Namespace) -> list[str]:
    return [f"--student={s}" for s in args.student or []]


def _autograde(args: argparse.Namespace) -> int:
    from tinytorch.classroom.nbgrader_layout import ASSIGNMENT

    return _nbgrader(Path(args.course), "autograde", ASSIGNMENT, "--force", *_students(args))


def _feedback(args: argparse.Namespace) -> int:
    from tinytorch.classroom.nbgrader_layout import ASSIGNMENT

    argv = ["generate_feedback", ASSIGNMENT, "--force", *_students(args)]
    return _nbgrader(Path(args.course), *argv)


def _export(args: argparse.Namespace) -> int:
    to = Path(args.to).resolve()
    if to.exists() and to.is_dir():
        print(f"tito nbgrader export: --to {args.to} is a folder", file=sys.stderr)
        return EXIT_USAGE
    return _nbgrader(Path(args.course), "export", f"--to={to}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "nbgrader",
        help="Milestone 07 as an nbgrader assignment, autograded in the sandbox",
        description=__doc__.split("\n\n")[0],
    )
    steps = p.add_subparsers(dest="nbgrader_command", metavar="STEP", required=True)

    def step(name: str, func, text: str) -> argparse.ArgumentParser:
        q = steps.add_parser(name, help=text)
        q.add_argument("--course", default=".", metavar="DIR",
                       help="the folder holding nbgrader_config.py (default: this one)")  # fmt: skip
        q.set_defaults(func=func)
        return q

    step("init", _init, "write nbgrader_config.py and assignments/source/")
    q = step("generate", _generate, "stage Milestone 07 and run nbgrader generate_assignment")
    q.add_argument("--points", metavar="FILE", help="points per case/check (TOML or JSON)")
    for name, func, text in (
        ("autograde", _autograde, "nbgrader autograde, each notebook graded in the sandbox"),
        ("feedback", _feedback, "nbgrader generate_feedback: the lesson-first report as HTML"),
    ):
        q = step(name, func, text)
        q.add_argument("--student", action="append", metavar="ID", help="only this student")
    q = step("export", _export, "nbgrader export: the gradebook as CSV")
    q.add_argument("--to", default="grades.csv", metavar="FILE",
                   help="the CSV file (default grades.csv, in the current folder)")  # fmt: skip
