"""Gradescope's autograder zip and the grading entry point that Gradescope and PrairieLearn run.

`build_gradescope_zip` writes setup.sh, run_autograder, the package source and the points config.
`run_platform("gradescope")` grades what is in ROOT/submission (ROOT: $AUTOGRADER_ROOT, default
/autograder) and writes ROOT/results/results.json; `run_platform("prairielearn")` grades
ROOT/student (default /grade) into ROOT/results/results.json. Both grade in grading mode and always
write a results file: a submission that cannot be graded gets score 0 and says why. Started as root
(as both platforms start it), the milestone process stays root, as in the class grader, so that its
sandbox can give the student's code a uid of its own: one that can neither signal the milestone nor
write where the milestone writes its result. (Dropping the milestone to an unprivileged user once
gave the student's code the milestone's own uid: on a host without namespaces it wrote a PASS
result and SIGKILLed the milestone, 60/60 on Gradescope.)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any

import psutil

from tinytorch.classroom.runner import ONE_THREAD, error_doc, grade_submission
from tinytorch.classroom.submissions import snapshot
from tinytorch.milestone07.scoring import Points, load_points
from tinytorch.render.platforms import gradescope_results, prairielearn_results
from tinytorch.safe_text import clean_tree
from tinytorch.sandbox import spawn, stage
from tinytorch.sandbox.choose import REFUSED

VENV = "/opt/tinytorch"
# Gradescope's default container: 768 MB and half a vCPU. The whole tree (this process, the
# milestone run, the student's process) is stopped at TREE_LIMIT_MB, sampled every 50 ms; the
# student's process cannot even reach that: its address space is capped at CHILD_MEMORY_MB, so a
# memory bomb is a MemoryError in one case (a named result), not the container's OOM killer.
TREE_LIMIT_MB = 700.0
CHILD_MEMORY_MB = 512
# One BLAS thread (runner.ONE_THREAD): half a vCPU gains nothing from more, and OpenBLAS reserves
# about 40 MB of address space per thread, sized by the host's CPU count, which would eat
# CHILD_MEMORY_MB.
WALL_LIMIT_S = 480.0  # under Gradescope's default 10 min timeout
ROOTS = {"gradescope": ("/autograder", "submission"), "prairielearn": ("/grade", "student")}
_REPO = Path(__file__).resolve().parents[2]
_SOURCE_PARTS = ("pyproject.toml", "README.md", "tinytorch", "extensions")

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip g++
python3 -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10+ is needed"'
python3 -m venv {VENV}
{VENV}/bin/pip install --no-cache-dir /autograder/source/tinytorch-src
chmod -R a+rX {VENV}  # the student's code runs under a uid of its own (the sandbox's)
"""

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this once per submission. TINYTORCH_PYTHON and AUTOGRADER_ROOT are for testing.
# From /: `-m` puts the working folder first on sys.path, and no student file may be imported.
cd / && exec "${{TINYTORCH_PYTHON:-{VENV}/bin/python}}" -m tinytorch.cli.main autograder run gradescope
"""


def build_gradescope_zip(
    out: str | Path, *, points_file: str | Path | None = None, part_b: bool = False
) -> Path:
    """Write the autograder zip (setup.sh and run_autograder at its root); the zip's path."""
    points = load_points(points_file)  # fail here, not in Gradescope, on a bad points file
    config = {
        "part_b": part_b,
        "points": {"case": points.case, "check": points.check, "hidden_case": points.hidden_case},
        "overrides": points.overrides,
    }
    missing = [part for part in _SOURCE_PARTS if not (_REPO / part).exists()]
    if missing:  # e.g. a non-editable install: the package is there, pyproject.toml is not
        raise FileNotFoundError(
            f"cannot build the autograder zip: {', '.join(missing)} not found in {_REPO}; "
            "setup.sh installs the package from that source, so build the zip from a checkout "
            "of the repository (or an editable install: pip install -e .)"
        )
    out = Path(out)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)
        zf.writestr("config.json", json.dumps(config, indent=2) + "\n")
        for part in _SOURCE_PARTS:
            path = _REPO / part
            files = [path] if path.is_file() else sorted(path.rglob("*"))
            for f in files:
                if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".so", ".o"):
                    zf.write(f, f"tinytorch-src/{f.relative_to(_REPO)}")
    return out


def run_zip_locally(
    zip_path: str | Path,
    root: str | Path,
    files: dict[str, str],
    *,
    prefix: tuple[str, ...] = (),
    timeout: float = 900.0,
) -> subprocess.CompletedProcess:
    """Run an autograder zip as Gradescope would, on a tree of our own (the tests, the benchmark).

    ROOT/source is the unzipped zip, ROOT/submission holds `files` (name -> text), and
    `[*prefix, bash, ROOT/source/run_autograder]` runs with AUTOGRADER_ROOT=ROOT and this
    interpreter (TINYTORCH_PYTHON). Its results are ROOT/results/results.json.
    """
    root = Path(root).absolute()  # run_autograder starts from /
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text, encoding="utf-8")
    (root / "submission").mkdir(exist_ok=True)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "TINYTORCH_PYTHON": sys.executable}
    return subprocess.run(
        [*prefix, "bash", str(root / "source" / "run_autograder")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _config(root: Path) -> tuple[Points, bool]:
    path = root / "source" / "config.json"
    if not path.exists():
        return Points(), False
    raw = json.loads(path.read_text(encoding="utf-8"))
    base = raw.get("points", {})
    return Points(**base, overrides=raw.get("overrides", {})), bool(raw.get("part_b", False))


def who_grades() -> str:
    """Who runs the milestone, and so the student's code (results.json's "user")."""
    if os.geteuid() == 0:
        return "as root: the sandbox gives the student's code a uid of its own"
    return f"as uid {os.geteuid()}: the student's code shares it (only namespaces keep them apart)"


def grade_platform_submission(
    folder: Path, *, part_b: bool = False, wall_timeout: float = WALL_LIMIT_S
) -> tuple[dict[str, Any], str]:
    """Grade the submission found in `folder` (any accepted format); (doc, how it was run)."""
    if not folder.is_dir() or folder.is_symlink():
        return error_doc(str(folder), "INCOMPLETE", f"no submission folder {folder}"), ""
    # Read once (tinytorch.sandbox.stage: regular files only, never through a link, within the
    # caps) and chosen by the one rule (tinytorch.sandbox.choose) from those bytes; the folder
    # holding the chosen file travels with it (a helper module beside it still imports), and the
    # sandbox hands its own copy of them to the student's uid.
    staged = snapshot(folder)
    if isinstance(staged, str):  # the rule's file refused (too large, ...) or no file at all
        verdict = "NOT_PASSED" if staged.startswith(REFUSED) else "INCOMPLETE"
        return error_doc(folder.name, verdict, staged), ""
    impl = folder / (staged.chosen or "")
    how = who_grades()
    private = Path(tempfile.mkdtemp(prefix="tinytorch-grade-"))
    try:
        (private / "submission").mkdir(mode=0o700)
        stage.write(staged, private / "submission")
        copy = private / "submission" / impl.name
        env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_ROOT",)}
        env.update(ONE_THREAD, HOME=str(private))
        env[spawn.SUBMISSION_DIR_VAR] = str(private / "submission")  # one student's: its helpers
        own_mb = psutil.Process().memory_info().rss / 2**20  # the tree's limit counts us too
        doc, _run = grade_submission(
            copy,
            private,
            part_b=part_b,
            wall_timeout=wall_timeout,
            max_tree_mb=TREE_LIMIT_MB - own_mb,
            memory_limit_mb=CHILD_MEMORY_MB,
            env=env,
        )
        doc["impl"] = impl.name
        doc["graded_file"] = staged.chosen
        doc.setdefault("warnings", [])
        if staged.note():
            doc["warnings"].append(staged.note())
        return doc, how
    finally:
        shutil.rmtree(private, ignore_errors=True)


def run_platform(
    platform: str, root: str | Path | None = None, *, points_file: str | Path | None = None
) -> Path:
    """Grade ROOT's submission and write ROOT/results/results.json; never raises for a student.

    points_file (e.g. PrairieLearn's /grade/tests/points.toml) overrides ROOT/source/config.json's
    points; a bad one is a grader error (results.json says so, not gradable)."""
    if platform not in ROOTS:
        raise ValueError(f"platform must be one of {sorted(ROOTS)}, got {platform!r}")
    default_root, sub_dir = ROOTS[platform]
    root = Path(root or os.environ.get("AUTOGRADER_ROOT") or default_root)
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    how = ""
    try:
        points, part_b = _config(root)
        if points_file is not None:
            points = load_points(points_file)
        refused = spawn.grading_refusal()  # fail closed: the student's code is not isolated
        if refused:
            doc = error_doc(str(root / sub_dir), "ERROR", f"grading refused: {refused}")
        else:
            doc, how = grade_platform_submission(root / sub_dir, part_b=part_b)
    except Exception as exc:  # noqa: BLE001 - any grader failure still yields results.json
        traceback.print_exc()
        points, doc = Points(), error_doc(str(root / sub_dir), "ERROR", f"grader error: {exc}")
    grader = doc.setdefault("grader", {})
    grader["seconds"] = round(time.monotonic() - start, 3)
    own_mb = psutil.Process().memory_info().rss / 2**20  # this process, beside the graded tree
    grader["tree_peak_mb"] = round(own_mb + grader.get("peak_mb", 0.0), 1)
    if platform == "gradescope":
        out = gradescope_results(doc, points)
        out["extra_data"] = {
            "verdict": doc["verdict"],
            "grading": doc.get("grading"),
            "seed": doc.get("seed"),
            "peak_mb": grader["tree_peak_mb"],
            "seconds": grader["seconds"],
            "user": how,
            "graded_file": doc.get("graded_file"),
        }
    else:
        out = prairielearn_results(doc, points)
    out = clean_tree(out)  # the student's text, shown by the platform, without escapes
    path = results / "results.json"
    tmp = results / ".results.json.tmp"
    tmp.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print(out.get("output", ""))
    print(
        f"\n[autograder] verdict {doc['verdict']}, {grader['seconds']:.1f} s, peak memory of the "
        f"process tree {grader['tree_peak_mb']:.0f} MB, graded {how or 'nothing'}; wrote {path}"
    )
    return path
