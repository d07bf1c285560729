"""Parent side of starting a sandbox child: namespaces, pdeathsig, the trimmed environment, the
private workdir with a copy of the submission, and the paths the child needs or must not read."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from tinytorch.sandbox import stage
from tinytorch.sandbox.child.confine import LINUX
from tinytorch.sandbox.child.load import MODULE_FILE
from tinytorch.sandbox.procs import TOKEN_VAR, remove_tree

NAMESPACES_VAR = "TINYTORCH_SANDBOX_NAMESPACES"  # "0": do not try unshare (tests, odd hosts)
SUBMISSION_DIR_VAR = "TINYTORCH_SUBMISSION_DIR"  # a folder holding one submission (its helpers)
TRUST_VAR = "TINYTORCH_TRUSTED_CODE"  # "1": grade even where the child is not isolated


class IsolationRefused(RuntimeError):
    """Grading refused to start: the student's code would not be isolated (the message names the
    layer and the fix)."""


KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE")


KEEP_PREFIXES = ("LC_", "OMP_", "OPENBLAS_", "MKL_", "GOTO_", "TINYTORCH_", "KMP_")


def namespace_prefix() -> tuple[list[str], str]:
    """(command prefix, why) for new pid + net namespaces; ([], why not) where refused."""
    global _NAMESPACES
    if _NAMESPACES is not None:
        return _NAMESPACES
    if os.environ.get(NAMESPACES_VAR, "1") == "0":
        _NAMESPACES = [], f"turned off ({NAMESPACES_VAR}=0)"
        return _NAMESPACES
    unshare = shutil.which("unshare")
    if not LINUX or unshare is None:
        _NAMESPACES = [], "no unshare command" if LINUX else "not Linux"
        return _NAMESPACES
    # --ipc: SysV shared memory and message queues, and POSIX ones, outlived the child in the
    # host's IPC namespace (red-teaming): a channel between gradings, and RAM no cap counted.
    base = [unshare, "--pid", "--fork", "--kill-child", "--net", "--ipc", "--mount-proc"]
    tries = [base] if os.geteuid() == 0 else []
    tries.append(base[:1] + ["--user", "--map-root-user"] + base[1:])
    why = ""
    for prefix in tries:
        try:
            done = subprocess.run(
                [*prefix, "true"],
                check=False,
                capture_output=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"unshare failed: {exc}"
            continue
        if done.returncode == 0:
            user = "--user" in prefix
            _NAMESPACES = prefix, "pid+net namespaces" + (" in a user namespace" if user else "")
            return _NAMESPACES
        why = "unshare refused: " + done.stderr.decode(errors="replace").strip()[-200:]
    _NAMESPACES = [], why
    return _NAMESPACES


def pdeath_prefix() -> list[str]:
    """`setpriv --pdeathsig KILL --` where available: the wrapper dies with the grader."""
    setpriv = shutil.which("setpriv") if LINUX else None
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def child_env(
    extra: dict[str, str], home: str, token: str, pythonpath: str, *, trim: bool = True
) -> dict[str, str]:
    """A trimmed environment (no inherited secrets, only what Python and BLAS need); with
    trim=False (no student code in the child) the grader's own, with its import path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not trim or k in KEEP_ENV or k.startswith(KEEP_PREFIXES) and k != TOKEN_VAR
    }
    env.setdefault("PATH", os.defpath)
    if trim:
        env.update(HOME=home, TMPDIR=home, PYTHONNOUSERSITE="1")
    env["PYTHONPATH"] = pythonpath
    env.update(extra)
    env[TOKEN_VAR] = token
    return env


def private_dir(
    impl: str | None, ids: tuple[int, int] | None, *, follow: bool = True
) -> tuple[str, str, str | None]:
    """(root, workdir, impl path inside it): a fresh folder, the submission copied in.

    root is an empty folder the child starts in; workdir (owned by the sandbox uid) holds a copy
    of the student's file, and only for a folder submission (the file is acceleration.py or
    acceleration.ipynb, the course's Module 17 file, as `tito release` and the class grader's
    folders have it) the .py files beside it, which it may import. Any other file comes alone: in a folder of many
    students' files (alice.py, bob.py), the others' files never reach the child's folder.

    So does any file in the folder that TINYTORCH_SUBMISSION_DIR names: the grader sets it for a
    folder that holds one submission only (its own private copy in a class run or on a platform,
    or the folder `--impl DIR` names), so a file the one rule chose for what it defines brings its
    helpers too (red-teaming: kernels.py lost the helper it imported).

    Staged by tinytorch.sandbox.stage (regular files only, within its caps). follow=False (grading
    mode) refuses an `impl` that is itself a symbolic link (StageError) instead of copying the file
    it points to."""
    _sweep_stale()
    root = tempfile.mkdtemp(prefix=f"tt-sandbox-{os.getpid()}-")
    os.chmod(root, 0o711)
    work = os.path.join(root, "work")
    os.mkdir(work, 0o700)
    copied = None
    if impl is not None and os.path.isfile(impl):  # a .py, a notebook, ...: staged
        src = Path(os.path.realpath(impl) if follow else os.path.abspath(impl))
        course_file = src.stem == Path(MODULE_FILE).stem and src.suffix in (".py", ".ipynb")
        one = os.environ.get(SUBMISSION_DIR_VAR)
        siblings = course_file or bool(
            one and os.path.realpath(one) == os.path.realpath(src.parent)
        )
        stage.stage_file(src, work, siblings=siblings, hard_links=follow)
        copied = os.path.join(work, src.name)
    if ids is not None:  # what staging just created, and nothing else
        stage.hand_over(work, ids)
    return root, work, copied


def _sweep_stale() -> None:
    """Remove the folders of graders that died without cleaning up (SIGKILL)."""
    for path in Path(tempfile.gettempdir()).glob("tt-sandbox-*-*"):
        pid = path.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid() or path.is_symlink():
            continue
        with contextlib.suppress(OSError):
            if path.lstat().st_uid != os.geteuid():  # not one of ours (planted by a child?)
                continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            remove_tree(str(path))
        except OSError:
            pass


def reference_files(modules: tuple[str, ...]) -> list[str]:
    """The source and compiled files of `modules` (found, not imported): what a grading child
    must not read."""
    import importlib.util

    out: list[str] = []
    for name in modules:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin or not os.path.isfile(spec.origin):
                continue
            src = Path(spec.origin)
            out.append(str(src))
            out += sorted(str(p) for p in (src.parent / "__pycache__").glob(f"{src.stem}.*.pyc"))
    return [os.path.realpath(p) for p in out]


def checkout_root() -> str | None:
    """The source checkout holding the tinytorch package (its folder has pyproject.toml), or None
    for an installed package: its tests, build folder and git objects hold copies of solutions."""
    dirs = package_dirs()
    if not dirs:
        return None
    root = os.path.dirname(os.path.realpath(dirs[0]))
    return root if os.path.isfile(os.path.join(root, "pyproject.toml")) else None


def package_dirs() -> list[str]:
    """The folders the tinytorch packages come from: tinytorch/, and extensions/ (which a source
    checkout maps as tinytorch.extensions). An editable install finds them through a finder, not
    sys.path, so where the checkout lives in a covered folder (a CI clone under /tmp) they must be
    named to be kept."""
    import importlib.util

    out: list[str] = []
    for name in ("tinytorch", "tinytorch.extensions"):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            out += list(spec.submodule_search_locations or []) if spec else []
    return out


def needed_paths(package_dir: str) -> list[str]:
    """Folders the child must still read after the uid drop: Python, its import path, ours."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, package_dir, *package_dirs()}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    return sorted(os.path.realpath(p) for p in paths)


def trusted() -> bool:
    """Whether the caller said the code is trusted (TINYTORCH_TRUSTED_CODE=1, `--trusted-code`):
    grading then goes on where isolation is missing, and every result says so."""
    return os.environ.get(TRUST_VAR, "") == "1"


def _open_to_others(path: str) -> str | None:
    """The first folder on the way to `path` (itself included) that every user may write to
    without the sticky bit (so another uid could replace what lies below), else None."""
    parts = Path(os.path.realpath(path)).parts
    for i in range(1, len(parts) + 1):
        here = str(Path(*parts[:i]))
        try:
            mode = os.stat(here).st_mode
        except OSError:
            return None
        if mode & 0o002 and not (stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
            return here
    return None


def isolation_problem(needed: list[str] | None = None) -> str | None:
    """Why a grading child would not be isolated here, naming the layer and the fix; None where
    it would be: a uid of its own (the grader is root, and Python is readable by that uid, or a
    mount namespace re-exposes it) and no folder of the grader's Python or packages writable by
    every user. Decided before any student code runs, from what starting a child will do."""
    from tinytorch.sandbox.child.confine import blocked_dirs
    from tinytorch.sandbox.uids import sandbox_ids

    needed = needed if needed is not None else needed_paths(package_dirs()[0])
    prefix, ns_why = namespace_prefix()
    ids = sandbox_ids()
    if ids is not None and (ids[0] == 0 or ids[1] == 0):
        return (
            "isolation (uid): the sandbox uid or gid is pinned to 0 (TINYTORCH_SANDBOX_UID/_GID), "
            "so the student's code would run as root. Fix: unset them"
        )
    if ids is not None and prefix and "--user" in prefix:
        return (
            "isolation (uid): the grader is root but may not create namespaces as root (no "
            "CAP_SYS_ADMIN), only a user namespace, in which the student's code would keep "
            f"root's uid and capabilities. Fix: set {NAMESPACES_VAR}=0 to drop to a uid of its "
            "own without namespaces (with a system Python), grade with CAP_SYS_ADMIN, or set "
            f"{TRUST_VAR}=1 (--trusted-code) for code you trust"
        )
    if ids is None:
        return (
            "isolation (uid): the grader is not root, so the student's code would run as your "
            "own user and could rewrite your Python, its site-packages and your files. Fix: "
            "grade as root (sudo, or in a container), or set "
            f"{TRUST_VAR}=1 (--trusted-code) for code you trust"
        )
    root_mounts = bool(prefix) and "--user" not in prefix
    blocked = blocked_dirs(needed)
    if blocked and not root_mounts:
        return (
            f"isolation (uid): Python and its packages live under {', '.join(sorted(blocked))}, "
            "which other users cannot enter, and without a mount namespace to re-expose them "
            f"(namespaces: {ns_why}) the student's code would keep root's uid. Fix: build the "
            "virtual environment from a system Python (/usr/bin/python3 -m venv), grade where "
            "namespaces are allowed (root with CAP_SYS_ADMIN), or set "
            f"{TRUST_VAR}=1 (--trusted-code) for code you trust"
        )
    for path in needed:
        open_to = _open_to_others(path)
        if open_to:
            return (
                f"isolation (interpreter): {open_to} is writable by every user, so the "
                f"student's code could replace what the grader imports from {path}. Fix: "
                f"chmod o-w {open_to}, or set {TRUST_VAR}=1 (--trusted-code) for code you trust"
            )
    return None


def grading_refusal() -> str | None:
    """isolation_problem, unless the code is trusted (then None: the results say so)."""
    return None if trusted() else isolation_problem()


def visible_to_child(path: str | os.PathLike[str]) -> str | None:
    """Why a grading child could read `path` (a class folder, its results), or None: with the
    root mount namespace the child sees only the system's folders (confine.ALLOWED_TOPS) and its
    own; without one, whatever every user may read."""
    from tinytorch.sandbox.child.confine import ALLOWED_TOPS, inside

    real = os.path.realpath(path)
    prefix, ns_why = namespace_prefix()
    top = Path(real).parts[1] if len(Path(real).parts) > 1 else ""
    checkout = checkout_root()  # covered but for its packages (confine.hide_reference)
    needed = [os.path.realpath(p) for p in needed_paths(package_dirs()[0])]
    kept = [p for p in needed if p != checkout and inside(real, p)]
    if kept:  # the child sees the grader's import path whole (PYTHONPATH=class folder)
        return (
            f"isolation (class folder): {real} lies on the grader's import path ({kept[0]}), "
            "which every student's code can read. Fix: take it off PYTHONPATH and out of the "
            "folder tito runs from, or move the class folder"
        )
    if prefix and "--user" not in prefix and top not in ALLOWED_TOPS:
        return None
    parts = Path(real).parts
    for i in range(1, len(parts)):
        try:
            if not os.stat(str(Path(*parts[:i]))).st_mode & 0o001:
                return None  # a folder on the way that others cannot enter
        except OSError:
            return None
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return None
    if not mode & 0o005:
        return None
    where = f"under /{top}, which the child sees" if prefix else f"namespaces: {ns_why}"
    return (
        f"isolation (class folder): {real} can be read by every user ({where}), so one "
        f"student's code could read a classmate's files. Fix: chmod o-rwx {real}, or move it "
        "under a folder other users cannot enter (e.g. /root), or set "
        f"{TRUST_VAR}=1 (--trusted-code) for code you trust"
    )


_NAMESPACES: tuple[list[str], str] | None = None
