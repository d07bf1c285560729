"""Containment of a sandbox child: namespaces, a dropped uid, limits, and killing its whole tree.

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
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinytorch.milestone07.impl import MODULE_FILE

LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
TOKEN_VAR = "TINYTORCH_SANDBOX_TOKEN"
NAMESPACES_VAR = "TINYTORCH_SANDBOX_NAMESPACES"  # "0": do not try unshare (tests, odd hosts)
KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE")
KEEP_PREFIXES = ("LC_", "OMP_", "OPENBLAS_", "MKL_", "GOTO_", "TINYTORCH_", "KMP_")
CPU_GRACE_S = 5  # CPU seconds past the soft limit before the kernel's SIGKILL
MAX_COPY_FILES, MAX_COPY_BYTES = 64, 16 << 20  # a folder submission's .py files copied with it


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


_SUBREAPER: tuple[bool, str] | None = None


def become_subreaper() -> tuple[bool, str]:
    """Make this process (the grader) a child subreaper, once."""
    global _SUBREAPER
    if _SUBREAPER is None:
        _SUBREAPER = prctl(PR_SET_CHILD_SUBREAPER, 1)
    return _SUBREAPER


_NAMESPACES: tuple[list[str], str] | None = None


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


def sandbox_ids() -> tuple[int, int] | None:
    """(uid, gid) to drop to when the grader is root; None as a normal user.

    TINYTORCH_SANDBOX_UID/_GID when set (the class grader's slots set them); else a fresh uid
    per sandbox drawn from the run pool, so that two gradings on one machine (two students
    running `tito milestone run` as root, two Gradescope runs) never share a uid and neither
    can read or rewrite the other's copy; 65534 (nobody) where the pool is not mapped."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    if "TINYTORCH_SANDBOX_UID" in os.environ:
        uid = int(os.environ["TINYTORCH_SANDBOX_UID"])
        return uid, int(os.environ.get("TINYTORCH_SANDBOX_GID", str(uid)))
    if _unmapped([RUN_UID_BASE, RUN_UID_BASE + RUN_UIDS - 1]) is not None:
        return 65534, 65534
    uid = RUN_UID_BASE + secrets.randbelow(RUN_UIDS)
    return uid, uid


RUN_UID_BASE = 1_700_000_000  # the run pool: uids RUN_UID_BASE .. RUN_UID_BASE + RUN_UIDS - 1
RUN_UIDS = 1 << 24  # two sandboxes drawing at once share a uid with odds 1 in 16.8 million


def pool_uid(uid: int | None) -> bool:
    """Whether `uid` is one of the sandbox pools' (a run uid or a slot uid): one no real user has,
    so that whatever it owns was left by a sandbox."""
    if uid is None:
        return False
    slot_base = int(os.environ.get(SLOT_UID_BASE_VAR, str(SLOT_UID_BASE)))
    return RUN_UID_BASE <= uid < RUN_UID_BASE + RUN_UIDS or slot_base <= uid < slot_base + SLOT_UIDS


# The folders every local user may write to. A child that wrote there reached others (one
# grading's files beside another's, a file that outlived its run and blocked the next student's
# staging, a folder like /tmp/.X11-unix that carried state across restarts), and /dev/shm's files
# use RAM no limit counted. In its own mount namespace each child gets fresh ones (private_tmp);
# without one, what its uid left at their top is removed when it closes (remove_leftovers).
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")


def remove_leftovers(uid: int | None) -> int:
    """Remove what a sandbox uid left at the top of the world-writable folders (and the temp
    folder), after its processes are dead; returns how many entries. Files left there outlived
    the run: red-teaming filled the temp folder with them until the class grader could not stage
    the next student. Only a pool uid's entries are touched, never a symlink's target."""
    if not pool_uid(uid):
        return 0
    removed = 0
    for root in dict.fromkeys((tempfile.gettempdir(), *shared_folders())):
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(entry.path)
                else:
                    os.unlink(entry.path)
                removed += 1
            except OSError:
                continue
    return removed


def _unmapped(uids: list[int]) -> int | None:
    """The first of `uids` this user namespace does not map, or None (all are this kernel's)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            ranges = [tuple(map(int, line.split())) for line in fh if line.strip()]
    except OSError:
        return None  # no user namespaces here: every uid is this kernel's own
    for uid in uids:
        if not any(inside <= uid < inside + count for inside, _out, count in ranges):
            return uid
    return None


SLOT_UID_BASE = 1_600_000_000  # the slot pool: uids SLOT_UID_BASE .. SLOT_UID_BASE + SLOT_UIDS - 1
SLOT_UIDS = 1024
SLOT_UID_BASE_VAR = "TINYTORCH_SLOT_UID_BASE"  # moves the pool (e.g. two class runs at once)


def slot_ids(slot: int) -> tuple[int, int]:
    """(uid, gid) of grading slot `slot` in the pool."""
    if not 0 <= slot < SLOT_UIDS:
        raise ValueError(f"slot_ids: slot must be in [0, {SLOT_UIDS}), got {slot!r}")
    base = int(os.environ.get(SLOT_UID_BASE_VAR, str(SLOT_UID_BASE)))
    return base + slot, base + slot


def slot_env(slot: int) -> dict[str, str]:
    """The environment that makes a grader's sandboxes drop to slot `slot`'s uid (sandbox_ids)."""
    uid, gid = slot_ids(slot)
    return {"TINYTORCH_SANDBOX_UID": str(uid), "TINYTORCH_SANDBOX_GID": str(gid)}


def slot_pool_problem(slots: int) -> str:
    """Why `slots` slot uids cannot be used ('' when they can): a passwd entry, or a uid this user
    namespace does not map (a container with a narrow uid map)."""
    import pwd

    if slots > SLOT_UIDS:
        return f"{slots} jobs but only {SLOT_UIDS} uids in the slot pool"
    uids = [slot_ids(slot)[0] for slot in range(slots)]
    for uid in uids:
        try:
            return f"uid {uid} of the slot pool is the user {pwd.getpwuid(uid).pw_name!r}"
        except KeyError:
            pass
    uid = _unmapped(uids)
    return "" if uid is None else f"uid {uid} of the slot pool is not mapped in this user namespace"


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


def private_dir(impl: str | None, ids: tuple[int, int] | None) -> tuple[str, str, str | None]:
    """(root, workdir, impl path inside it): a fresh folder, the submission copied in.

    root is an empty folder the child starts in; workdir (owned by the sandbox uid) holds a copy
    of the student's file, and only for a folder submission (the file is acceleration.py, the
    course's Module 17 file, as `tito release` and the class grader's folders have it) the .py
    files beside it, which it may import. Any other file comes alone: in a folder of many
    students' files (alice.py, bob.py), the others' files never reach the child's folder."""
    _sweep_stale()
    root = tempfile.mkdtemp(prefix=f"tt-sandbox-{os.getpid()}-")
    os.chmod(root, 0o711)
    work = os.path.join(root, "work")
    os.mkdir(work, 0o700)
    copied = None
    if impl is not None and os.path.isfile(impl):  # a .py, a notebook, ...: copied
        src = Path(impl).resolve()
        folder = src.name == MODULE_FILE
        siblings = sorted(p for p in src.parent.glob("*.py") if p != src) if folder else []
        siblings = [p for p in siblings if p.is_file() and not p.is_symlink()][:MAX_COPY_FILES]
        budget = MAX_COPY_BYTES
        for path in [src, *siblings]:
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                if path is src or size <= budget:
                    shutil.copyfile(path, os.path.join(work, path.name))
                    budget -= size
        copied = os.path.join(work, src.name)
    if ids is not None:
        for dirpath, _dirs, files in os.walk(work):
            os.chown(dirpath, *ids)
            for f in files:
                os.chown(os.path.join(dirpath, f), *ids)
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


def remove_tree(path: str) -> None:
    """shutil.rmtree that survives any depth. Python 3.11's rmtree recurses, and its
    RecursionError escapes ignore_errors: a child that nested 1500 folders in its own made that
    grading ERROR, and every later one too (the stale sweep hit the same folder). rm -rf does
    not recurse on a stack."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                ["rm", "-rf", "--", path],
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=300,
            )


# ---- the tree kill (parent side) --------------------------------------------------------------
def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(ppid, pgid, sid, state) from /proc/PID/stat."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()


def _has_token(pid: int, token: bytes) -> bool:
    try:
        return token in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


LIVE: set[int] = set()  # pids of the sandbox children this grader started and has not killed


def _status_field(pid: int, name: str) -> str | None:
    """A field of /proc/PID/status ("NoNewPrivs", "Uid", ...), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def orphan_rule(uid: int | None) -> tuple[str | None, str]:
    """(how a process re-parented to the grader is known for a sandbox's: "nnp", "uid" or None,
    why). uid: the sandbox's uid after its drop (None: it keeps the grader's)."""
    if not LINUX or not os.path.isdir("/proc"):
        return None, "no /proc: only the tree kill's other marks apply"
    mine = _status_field(os.getpid(), "NoNewPrivs")
    if mine == "0":
        return "nnp", "processes re-parented to the grader with no_new_privs set are killed"
    if uid is not None and uid != os.getuid():
        return "uid", f"processes re-parented to the grader running as uid {uid} are killed"
    why = "the grader itself has no_new_privs" if mine == "1" else "no NoNewPrivs in /proc"
    return None, f"{why} and the sandbox keeps its uid: a daemon that sheds every mark survives"


def _adopted(
    table: dict[int, tuple[int, int, int, str]], root_pid: int, uid: int | None
) -> set[int]:
    """The grader's children that it did not start itself: a sandbox's orphans (see orphan_rule)."""
    rule, _why = orphan_rule(uid)
    me, found = os.getpid(), set()
    for pid, (ppid, *_rest) in table.items():
        if ppid != me or pid == root_pid or pid in LIVE or rule is None:
            continue
        if rule == "nnp":
            marked = _status_field(pid, "NoNewPrivs") == "1"
        else:  # its real uid is the sandbox's
            marked = (_status_field(pid, "Uid") or "").split()[:1] == [str(uid)]
        if marked:
            found.add(pid)
    return found


def _members(root_pid: int, token: str, uid: int | None = None) -> set[int]:
    """Every live process that belongs to the child rooted at root_pid (Linux /proc)."""
    mark = f"{TOKEN_VAR}={token}".encode()
    table: dict[int, tuple[int, int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                table[int(entry)] = st
    me = os.getpid()
    found = {root_pid} if root_pid in table else set()
    for pid, (_ppid, pgid, sid, _state) in table.items():
        if pid != me and (sid == root_pid or pgid == root_pid or _has_token(pid, mark)):
            found.add(pid)
    found |= _adopted(table, root_pid, uid)
    grew = True
    while grew:  # descendants of anything found
        grew = False
        for pid, (ppid, *_rest) in table.items():
            if ppid in found and pid not in found and pid != me:
                found.add(pid)
                grew = True
    return found


def kill_tree(proc: subprocess.Popen, token: str, uid: int | None = None) -> None:
    """SIGKILL the child and everything it started; reap what was reparented to the grader.

    uid: the sandbox's uid after its drop (None: the grader's). Repeats until a fresh scan of
    /proc finds nothing of the child's alive (a fork racing the kill, a daemon re-parented to the
    grader by the kill itself)."""
    pid, me = proc.pid, os.getpid()
    LIVE.discard(pid)
    scan = LINUX and os.path.isdir("/proc")
    for round_ in range(50):
        members = _members(pid, token, uid) if scan else set()
        alive = False
        for target in members - {pid}:
            st = _stat(target)
            if st is None:
                continue
            if st[0] == me and st[3] == "Z":  # an orphan that came back to us (subreaper): reap it
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(target, os.WNOHANG)
            elif st[3] != "Z":
                alive = True
        if round_ and not alive:
            return
        for target in members:
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        for target in members - {pid}:  # reap what died and was ours to reap
            st = _stat(target)
            if st is not None and st[0] == me:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(target, 0)
        if round_:
            time.sleep(0.01)


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


def _inside(path: str, folder: str) -> bool:
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
    kept = [p for p in kept if not any(q != p and _inside(p, q) for q in kept)]
    plan: dict[str, list[str]] = {}
    whole: list[str] = []
    for folder in folders:
        if any(_inside(folder, p) for p in kept):
            whole.append(folder)
        else:
            plan[folder] = [p for p in kept if _inside(p, folder)]
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


# Top-level folders a grading child still sees whole: the system (libraries, config, devices)
# and the shared folders, which private_tmp replaces anyway. Every other one (/home, /work, /srv,
# /opt, /mnt, ...) is covered but for the paths the child needs.
SYSTEM_TOPS = ("bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin",
               "sys", "tmp", "usr", "var")  # fmt: skip
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
    """Grading, in our own mount namespace: every top-level folder but the system's is covered
    but for the paths the child needs, so another clone, a class folder or a student's home
    holding a copy of the reference is out of its sight (red-teaming read one in another
    checkout: hide_reference covers only the grader's own)."""
    covered, failed = _cover(other_tops(dropping=dropping), keep, COVER_OPTS)
    why = f"covered {', '.join(covered)} but for what the child needs" if covered else "none"
    return not failed, why + (f"; not: {', '.join(failed)}" if failed else "")


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
        if any(_inside(checkout, os.path.realpath(p)) for p in whole if p):
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
