"""Parent side of starting a sandbox child: namespaces, pdeathsig, the trimmed environment, the
private workdir with a copy of the submission, and the paths the child needs or must not read."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tinytorch.sandbox import stage
from tinytorch.sandbox.child.confine import LINUX
from tinytorch.sandbox.child.load import MODULE_FILE
from tinytorch.sandbox.procs import TOKEN_VAR, remove_tree

NAMESPACES_VAR = "TINYTORCH_SANDBOX_NAMESPACES"  # "0": do not try unshare (tests, odd hosts)


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
    of the student's file, and only for a folder submission (the file is acceleration.py, the
    course's Module 17 file, as `tito release` and the class grader's folders have it) the .py
    files beside it, which it may import. Any other file comes alone: in a folder of many
    students' files (alice.py, bob.py), the others' files never reach the child's folder.

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
        stage.stage_file(src, work, siblings=src.name == MODULE_FILE, hard_links=follow)
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


_NAMESPACES: tuple[list[str], str] | None = None
