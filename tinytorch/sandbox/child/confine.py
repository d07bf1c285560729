"""Child side of containment: what the sandbox child does to itself before the student's import.

Limits, the uid drop, no_new_privs, private /tmp and workdir, and (in its own mount namespace)
hiding the reference and every top folder but the system's. The parent side is in
`tinytorch.sandbox.spawn` (starting the child), `tinytorch.sandbox.procs` (its process tree) and
`tinytorch.sandbox.uids` (uid pools). The layers, all together:

Layers (each reported in `Sandbox.isolation` as active or not, and why):
- session: the child leads its own session and process group (always).
- subreaper: the grader is a child subreaper (Linux prctl), so orphans come back to it.
- pdeathsig: the child (and the `unshare` wrapper) die with SIGKILL when the grader dies (Linux).
- namespaces: `unshare --pid --fork --net --ipc --mount-proc` (as root) or with `--user --map-root-user`
  (unprivileged user namespaces): nothing outlives pid 1 of the namespace, and there is no network.
  Refused (e.g. a container without CAP_SYS_ADMIN) or TINYTORCH_SANDBOX_NAMESPACES=0: off, and the
  tree kill below does the work.
- mounts: where Python lives under a folder others cannot enter (e.g. /root/.pyenv), the child's
  own mount namespace covers that folder with a tmpfs exposing only what it needs; without a
  mount namespace the uid drop is then skipped (reported).
- reference, elsewhere (grading mode): in that mount namespace the bundled reference's files read
  as empty, a source checkout is covered but for the packages and the venv (`hide_reference`),
  and so is every top-level folder but the system's (`hide_elsewhere`).
- tmp: in that mount namespace, a fresh size-capped tmpfs over every folder all local users may
  write to (/tmp, /var/tmp, /dev/shm, ...): nothing the child writes there reaches the machine,
  other gradings or its own next start (`private_tmp`).
- uid: as root, the child drops to an unprivileged uid/gid before it imports the student's
  module, with no_new_privs; as a normal user it keeps its uid (off, "not root"). Each sandbox
  draws a fresh uid from the run pool (`sandbox_ids`: RUN_UID_BASE + a random offset, gid the
  same, no passwd entry; 65534, `nobody`, where the pool is not mapped), so that two gradings on
  one machine never share one. TINYTORCH_SANDBOX_UID / TINYTORCH_SANDBOX_GID pin it: the class
  grader (tito grade-class --jobs N) gives each slot its uid from the slot pool (`slot_ids`:
  SLOT_UID_BASE + slot). Either way no student's process can read or write another's workdir,
  nor signal or ptrace its processes.
- workdir and env: a fresh private folder holding a copy of the submission (in the mount
  namespace, on a capped tmpfs of its own: `private_workdir`); a trimmed environment.
- limits: RLIMIT_AS / CPU / FSIZE / NPROC, and no core dumps.
The tree kill (`kill_tree`) finds what the child started by session, process group, ancestry and
a per-sandbox token in the environment, SIGKILLs it all and reaps what was reparented to us.
A process can shed all of those (setsid, a double fork, `env -i`), but not no_new_privs, which
every sandbox child sets and every process it starts inherits: as the subreaper, the grader
adopts such a daemon, so any process re-parented to it with no_new_privs set that is not a live
sandbox child of its own is killed with the tree (`orphan_rule`; where the grader itself runs
with no_new_privs, the sandbox uid marks them instead).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LINUX = sys.platform.startswith("linux")


PR_SET_PDEATHSIG = 1


PR_SET_CHILD_SUBREAPER = 36


PR_SET_NO_NEW_PRIVS = 38


CPU_GRACE_S = 5  # CPU seconds past the soft limit before the kernel's SIGKILL


@dataclass(frozen=True)
class ChildLimits:
    """Resource limits set in the child before the student's module is imported (None: unset)."""

    memory_bytes: int | None = 2 << 30  # RLIMIT_AS
    cpu_seconds: int | None = 900  # RLIMIT_CPU, over the child's whole life
    file_bytes: int | None = 64 << 20  # RLIMIT_FSIZE
    processes: int | None = 256  # RLIMIT_NPROC beyond the uid's current count (+4 per CPU)


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def prctl(option: int, arg: int) -> tuple[bool, str]:
    if not LINUX:
        return False, "not Linux"
    try:
        rc = _libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0)
    except (OSError, AttributeError) as exc:
        return False, f"prctl unavailable: {exc}"
    if rc != 0:
        return False, os.strerror(ctypes.get_errno())
    return True, "set"


# ---- child side -------------------------------------------------------------------------------
def set_limits(limits: ChildLimits, uid: int | None) -> dict[str, Any]:
    """Set the child's rlimits (call before the student's module is imported)."""
    import resource

    done: dict[str, Any] = {}

    def cap(name: str, which: int, value: int | None, grace: int = 0) -> None:
        if value is None:
            done[name] = "unset"
            return
        try:
            resource.setrlimit(which, (value, value + grace))
            done[name] = value
        except (ValueError, OSError) as exc:
            done[name] = f"refused: {exc}"

    cap("core", resource.RLIMIT_CORE, 0)
    cap("memory_bytes", resource.RLIMIT_AS, limits.memory_bytes)
    # soft < hard: at the limit SIGXCPU ends the child with a name; one that ignores it is
    # SIGKILLed CPU_GRACE_S later (with soft == hard the kernel sends a bare SIGKILL at once)
    cap("cpu_seconds", resource.RLIMIT_CPU, limits.cpu_seconds, CPU_GRACE_S)
    cap("file_bytes", resource.RLIMIT_FSIZE, limits.file_bytes)
    procs = limits.processes
    if procs is not None and LINUX:  # counted per real uid: room beyond what that uid runs now
        procs += _count_processes(os.getuid() if uid is None else uid) + 4 * (os.cpu_count() or 1)
    if hasattr(resource, "RLIMIT_NPROC"):
        cap("processes", resource.RLIMIT_NPROC, procs)
    return done


def _count_processes(uid: int) -> int:
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry}/task"))
    return n


def drop_privileges(ids: tuple[int, int] | None) -> tuple[bool, str]:
    """no_new_privs, then (as root) setgroups([]) + setgid + setuid; the result for the report."""
    nnp, why = prctl(PR_SET_NO_NEW_PRIVS, 1)
    if ids is None:
        return False, f"the grader is not root (no_new_privs {why})"
    uid, gid = ids
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(f"setuid({uid}) did not take")
    return True, f"uid {uid}, gid {gid}" + (", no_new_privs" if nnp else f" (no_new_privs {why})")


MS_BIND, MS_REC, MS_NOSUID, MS_NODEV = 4096, 16384, 2, 4


SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
MNT_DETACH = 2


PRIVATE_TMP_OPTS = "mode=1777,size=64m,nr_inodes=16384"  # each: 64 MiB, 16K files at most


def shared_folders() -> list[str]:
    """The world-writable folders of SHARED_FOLDERS that exist here, symlinks resolved, once."""
    out: list[str] = []
    for path in SHARED_FOLDERS:
        real = os.path.realpath(path)
        with contextlib.suppress(OSError):
            if os.path.isdir(real) and os.stat(real).st_mode & 0o002 and real not in out:
                out.append(real)
    return out


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies below it (both already resolved)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def private_workdir(work: str, ids: tuple[int, int] | None) -> tuple[bool, str]:
    """In our own mount namespace: the workdir's files moved onto a fresh tmpfs of its own (the
    sandbox uid's, 0700, capped like the shared folders). On the host's disk, only RLIMIT_FSIZE
    held, per file, so a child could fill the disk with many files under the cap (red-teaming:
    4 x 60 MiB)."""
    try:
        files = {}
        for entry in os.scandir(work):
            if entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as fh:
                    files[entry.name] = fh.read()
        owner = f",uid={ids[0]},gid={ids[1]}" if ids else ""
        opts = PRIVATE_TMP_OPTS.replace("mode=1777", "mode=0700") + owner
        _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, opts)
        for name, data in files.items():
            path = os.path.join(work, name)
            with open(path, "wb") as fh:
                fh.write(data)
            if ids:
                os.chown(path, *ids)
    except OSError as exc:
        return False, f"on the host's disk: {exc}"
    return True, f"private {work}, {len(files)} files copied in, on its own tmpfs ({opts})"


def tmp_plan(keep: list[str], folders: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """({shared folder to cover: the kept paths inside it, top-most only}, [folders left alone
    because a kept path is the folder itself])."""
    kept = sorted({p.rstrip("/") or "/" for p in keep if p})
    kept = [p for p in kept if not any(q != p and inside(p, q) for q in kept)]
    plan: dict[str, list[str]] = {}
    whole: list[str] = []
    for folder in folders:
        if any(inside(folder, p) for p in kept):
            whole.append(folder)
        else:
            plan[folder] = [p for p in kept if inside(p, folder)]
    return plan, whole


def _cover(folders: list[str], keep: list[str], opts: str) -> tuple[list[str], list[str]]:
    """A fresh tmpfs (`opts`) over each of `folders`, the paths of `keep` inside one bound back at
    their place first (tmp_plan); ([covered], [folder (why not)])."""
    plan, whole = tmp_plan([os.path.realpath(p) for p in keep if p and os.path.isdir(p)], folders)
    covered, failed = [], [f"{folder} (needed whole)" for folder in whole]
    for folder, inside in plan.items():
        fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in inside]
        try:
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, opts)
            try:
                for fd, path in zip(fds, inside, strict=True):
                    os.makedirs(path, exist_ok=True)
                    _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            except OSError:
                _unmount(folder)
                raise
            covered.append(folder)
        except OSError as exc:
            failed.append(f"{folder} ({exc})")
        finally:
            for fd in fds:
                os.close(fd)
    return covered, failed


def private_tmp(keep: list[str]) -> tuple[bool, str]:
    """In our own mount namespace: a fresh, size-capped tmpfs over each shared folder, so what the
    child writes there dies with its namespace and it sees no one else's files. The paths in
    `keep` that live inside one (the sandbox's own folder, Python, our package: /tmp/fresh/.venv
    in a CI clone) are bound back at their place first. A folder whose binds fail is uncovered
    again, and the answer says so."""
    covered, failed = _cover(shared_folders(), keep, PRIVATE_TMP_OPTS)
    why = f"fresh {', '.join(covered)} ({PRIVATE_TMP_OPTS})" if covered else "none covered"
    return not failed and bool(covered), why + (f"; not: {', '.join(failed)}" if failed else "")


# The allow-list: the top-level folders a grading child still sees whole are the system's
# programs, libraries, configuration and devices. /tmp is replaced by private_tmp. Every other
# one, whatever its name (/var, /srv, /home, /opt, /mnt, /run, /work, ...), is covered but for the
# paths the child needs (Python, its packages, its own stage): a class folder under /var was read
# whole by a loader that then ran a classmate's file (red-teaming).
ALLOWED_TOPS = ("bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "sys",
                "usr")  # fmt: skip
SYSTEM_TOPS = (*ALLOWED_TOPS, "tmp")  # tmp: covered by private_tmp instead


COVER_OPTS = "mode=0755,size=64k,nr_inodes=4096"


def other_tops(root: str = "/", *, dropping: bool = True) -> list[str]:
    """The top-level folders of `root` that are not SYSTEM_TOPS and hold something (links left
    alone); `dropping` (the child will run as its own uid): only those others may enter. Each
    mount costs ~2 ms here, on every start."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(root, name)
        if name in SYSTEM_TOPS or os.path.islink(path) or not os.path.isdir(path):
            continue
        with contextlib.suppress(OSError):
            if dropping and not os.stat(path).st_mode & 0o001:
                continue
            with os.scandir(path) as entries:
                if next(entries, None) is not None:
                    out.append(path)
    return out


def hide_elsewhere(keep: list[str], *, dropping: bool = True) -> tuple[bool, str]:
    """Grading, in our own mount namespace: every top-level folder but the allow-list's
    (ALLOWED_TOPS) is covered but for the paths the child needs, so another clone, a class
    folder (under /var too) or a student's home holding a copy of the reference or a
    classmate's file is out of its sight (red-teaming read one in another checkout:
    hide_reference covers only the grader's own)."""
    covered, failed = _cover(other_tops(dropping=dropping), keep, COVER_OPTS)
    why = f"covered {', '.join(covered)} but for what the child needs" if covered else "none"
    return not failed, why + (f"; not: {', '.join(failed)}" if failed else "")


def hide_reference(
    files: list[str], checkout: str | None, keep: list[str], whole: list[str]
) -> tuple[bool, str]:
    """Grading, in our own mount namespace (before the uid drop): each of `files` (the bundled
    reference, source and bytecode) reads as empty, and a source checkout is covered like the
    shared folders (`_cover`), with only the paths of `keep` inside it (the packages, a venv)
    bound back: its tests, build folder and git objects are gone. The child could read any of
    them, compile the solution at run time and disguise its code objects past the own-work
    fingerprints (red-teaming). The checkout on the import path itself needs only its packages;
    a folder in `whole` (the folder a module name is imported from) keeps it whole."""
    done = []
    if checkout:
        kept = [p for p in keep if p and os.path.realpath(p) != checkout]
        if any(inside(checkout, os.path.realpath(p)) for p in whole if p):
            done.append(f"checkout {checkout} kept whole (a module is imported from it)")
        else:
            _covered, failed = _cover([checkout], kept, COVER_OPTS)
            if failed:
                return False, "; ".join(failed)
            done.append(f"checkout {checkout} covered but for what the child needs")
    hidden = 0
    try:
        for path in files:
            if os.path.isfile(path):
                _mount("/dev/null", path, None, MS_BIND, None)
                hidden += 1
    except OSError as exc:
        return False, str(exc)
    return True, "; ".join([f"{hidden} reference files read as empty", *done])


def blocked_dirs(paths: list[str]) -> dict[str, set[str]]:
    """{folder others cannot enter: {its entries on the way to a needed path}}."""
    out: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for i in range(1, len(parts)):
            folder = str(Path(*parts[:i]))
            try:
                mode = os.stat(folder).st_mode
            except OSError:
                break
            if not mode & 0o001:
                out.setdefault(folder, set()).add(parts[i])
                break
    return out


def _mount(src: str, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
    """mount(2); OSError naming both paths when it fails."""
    args = [s.encode() if s is not None else None for s in (src, dst, fstype)]
    rc = _libc().mount(*args, ctypes.c_ulong(flags), data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} on {dst}: {os.strerror(err)}")


def _unmount(path: str) -> None:
    _libc().umount2(path.encode(), MNT_DETACH)


def expose(blocked: dict[str, set[str]], stage: str) -> tuple[bool, str]:
    """In our own mount namespace (as root): cover each blocked folder with an empty tmpfs that
    others may enter, holding bind mounts of only the entries the child needs (e.g. /root/.pyenv
    under /root): the interpreter stays readable after the uid drop; the rest stays hidden."""
    try:
        for n, (folder, entries) in enumerate(sorted(blocked.items())):
            staged = []
            for m, entry in enumerate(sorted(entries)):
                src = os.path.join(folder, entry)
                dst = os.path.join(stage, f"{n}-{m}")
                os.makedirs(dst, exist_ok=True)
                _mount(src, dst, None, MS_BIND | MS_REC, None)
                staged.append((entry, dst))
            _mount("tmpfs", folder, "tmpfs", 0, "mode=0755,size=64k")
            for entry, dst in staged:
                os.makedirs(os.path.join(folder, entry), exist_ok=True)
                _mount(dst, os.path.join(folder, entry), None, MS_BIND | MS_REC, None)
            # The staged binds sit in the sandbox's own folder, which the child can walk: left
            # mounted, stage/0-2 showed the real tinytorch/ past hide_reference's /dev/null
            # (red-teaming read the reference there). Bound back, they are not needed.
            for _entry, dst in staged:
                _unmount(dst)
    except OSError as exc:
        return False, str(exc)
    return True, "exposed " + ", ".join(
        f"{f}/{{{','.join(sorted(e))}}}" for f, e in blocked.items()
    )
