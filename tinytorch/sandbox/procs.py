"""The one home of process-tree control: the grader as subreaper, finding a sandbox child's whole
tree (session, group, ancestry, token, no_new_privs orphans) and killing it.

Used by the Sandbox for its child, and by the class grader for each student's run and for a
slot's leftovers (see the layers in `tinytorch.sandbox.child.confine`).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tinytorch.sandbox.child.confine import LINUX, PR_SET_CHILD_SUBREAPER, prctl

TOKEN_VAR = "TINYTORCH_SANDBOX_TOKEN"


def become_subreaper() -> tuple[bool, str]:
    """Make this process (the grader) a child subreaper, once."""
    global _SUBREAPER
    if _SUBREAPER is None:
        _SUBREAPER = prctl(PR_SET_CHILD_SUBREAPER, 1)
    return _SUBREAPER


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


def _members(root_pid: int, token: str, uid: int | None = None, *, light: bool = False) -> set[int]:
    """Every live process that belongs to the child rooted at root_pid (Linux /proc). light:
    session, group and descendants only, from /proc/PID/stat (no environ read for the token, no
    adopted orphans): a few ms, for a meter that looks often; the kill always looks everywhere."""
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
        ours = sid == root_pid or pgid == root_pid or (not light and _has_token(pid, mark))
        if pid != me and ours:
            found.add(pid)
    if not light:
        found |= _adopted(table, root_pid, uid)
    grew = True
    while grew:  # descendants of anything found
        grew = False
        for pid, (ppid, *_rest) in table.items():
            if ppid in found and pid not in found and pid != me:
                found.add(pid)
                grew = True
    return found


def kill_pids(pids: Iterable[Any]) -> int:
    """SIGKILL each process (a pid, or a psutil.Process, which checks the pid was not reused);
    one already gone or not ours is skipped. Returns how many were asked for."""
    count = 0
    for target in pids:
        count += 1
        if isinstance(target, int):
            with contextlib.suppress(OSError):  # gone, or not ours
                os.kill(target, signal.SIGKILL)
        else:
            with contextlib.suppress(Exception):  # psutil.NoSuchProcess, AccessDenied, ...
                target.kill()
    return count


def kill_session(proc: subprocess.Popen, members: Iterable[Any] = ()) -> None:
    """SIGKILL a child started in its own session: its process group, then `members` (what was
    seen in its tree, which may have left the group), then reap the child itself."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    kill_pids(members)
    proc.wait()


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


_SUBREAPER: tuple[bool, str] | None = None


# ---- what a child's tree spends (parent side) --------------------------------------------------
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
RESCAN_S = 0.5  # how often a meter looks for processes the tree started since its last scan
RESCAN_MIN_S = 0.2  # and at most this often when asked to (the request looked blocked)


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime + cutime + cstime of PID (all its threads, and the children it reaped)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return sum(int(f) for f in fields[11:15])  # stat fields 14-17, after "pid (comm)"
    except (ValueError, IndexError):
        return None


def _thread_sched(pid: int) -> dict[int, int] | None:
    """{tid: nanoseconds on a CPU + nanoseconds runnable but waiting for one} over PID's live
    threads (/proc/PID/task/TID/schedstat), or None where the kernel keeps no schedstat."""
    out: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            run, wait, _slices = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, its schedstat is not: none in this kernel
            continue  # the thread has gone
        except (OSError, ValueError):
            continue
        out[int(tid)] = int(run) + int(wait)
    return out


class TreeMeter:
    """What one sandbox child's process tree has spent, read from the host's /proc.

    The child may live in its own pid namespace (unshare --fork: the Popen pid is the wrapper,
    pid 1 inside is our init, the worker its child): every pid here is the host's, found as
    `kill_tree` finds them (session, group, token, adopted orphans, descendants). `cpu()` is the
    tree's CPU seconds (every thread; children it reaped included, so a forked helper counts);
    `active_ns()` sums, over the live threads, time on a CPU plus time runnable but waiting for
    one: the time a busy machine takes from the child, which must never count as the child's
    sleeping. `ok` is False without /proc (not Linux): nothing is measured there.
    """

    def __init__(self, root_pid: int, token: str, uid: int | None = None) -> None:
        self.root_pid, self.token, self.uid = root_pid, token, uid
        self.ok = LINUX and os.path.isdir(f"/proc/{root_pid}")
        self.schedstat = self.ok
        self.pids: set[int] = {root_pid}
        self._scanned = -math.inf
        self._peak = 0  # ticks: the most seen (a member reaped outside the tree takes its share)

    def rescan(self, every: float = RESCAN_S) -> bool:
        """Look for the tree's processes again, unless the last look is under `every` seconds
        old; True when one was found that was not known before."""
        now = time.monotonic()
        if not (self.ok and now - self._scanned >= every):
            return False
        before = self.pids
        light = _members(self.root_pid, self.token, self.uid, light=True)
        self.pids = light | {self.root_pid}
        self._scanned = now
        return bool(self.pids - before)

    def cpu(self, rescan: bool = True) -> float:
        """CPU seconds the tree has used since it started (never less than a reading before)."""
        if not self.ok:
            return 0.0
        if rescan:
            self.rescan()
        ticks = 0
        for pid in list(self.pids):
            got = _cpu_ticks(pid)
            if got is None:
                self.pids.discard(pid)
            else:
                ticks += got
        self._peak = max(self._peak, ticks)
        return self._peak * _TICK_S

    def dying(self, members: set[int]) -> bool:
        """True when one of `members` (pids seen alive earlier) has exited or is a zombie: the
        tree is ending (a worker that crashed), though its wrappers may not have noticed yet."""
        if not self.ok:
            return False
        for pid in members:
            st = _stat(pid)
            if st is None or st[3] in ("Z", "X"):
                return True
        return False

    def active_ns(self) -> dict[int, int] | None:
        """{tid: CPU + run-queue nanoseconds} over the tree's live threads; None without
        schedstat (the kernel's CONFIG_SCHED_INFO) or /proc."""
        if not (self.ok and self.schedstat):
            return None
        out: dict[int, int] = {}
        for pid in list(self.pids):
            got = _thread_sched(pid)
            if got is None:
                self.schedstat = False
                return None
            out.update(got)
        return out
