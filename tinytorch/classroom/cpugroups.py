"""Equal CPU shares for students graded side by side: one cgroup per grading slot.

Without it, a submission that starts a few hundred busy loops takes the machine from whoever is
graded beside it: the per-case timeouts are wall clock, so a correct but slow neighbour timed out
(red-teaming: PASS alone, NOT PASSED next to 240 `sh` loops). CFS shares CPU between groups before
it shares it between the tasks inside a group, so with each slot's whole tree (its milestone run,
the sandbox and whatever the submission starts) in its own group, a slot gets its share however
many tasks the submission runs. The submission cannot leave the group: it runs as an unprivileged
uid and the group's files are root's.

Where no cpu controller can be written (not root, a read-only /sys/fs/cgroup in a container),
`CpuGroups.active` is False and `why` says why; the class grader then regrades alone any student
that hit a wall-clock limit beside others (classgrade.py), which does not need this.

cgroup v1 (a `cpu` hierarchy): <mount>/<own path>/tinytorch-grade-<pid>/slot<N>, cpu.shares 1024.
cgroup v2: the same under the unified mount, cpu.weight 100, with "+cpu" enabled on the way
down; v2 refuses controllers below a group that still holds processes (the grader itself, unless
it is the root), and that refusal is reported as `why`.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from tinytorch.sandbox import procs

PREFIX = "tinytorch-grade-"
V1_SHARES = "1024"  # cpu.shares default: every slot the same
V2_WEIGHT = "100"  # cpu.weight default


def _mountinfo_roots(mountinfo: str) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """(v1 cpu mount, v2 mount) as (mount root, mount point) from /proc/self/mountinfo text."""
    v1 = v2 = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype = fields[3], fields[4], tail[0]
        if fstype == "cgroup" and "cpu" in tail[2].split(",") and v1 is None:
            v1 = (root, point)
        elif fstype == "cgroup2" and v2 is None:
            v2 = (root, point)
    return v1, v2


def _own_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """(v1 cpu path, v2 path) of this process, from /proc/self/cgroup text."""
    v1 = v2 = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hid, controllers, path = parts
        if controllers == "" and v2 is None:
            v2 = path
        elif "cpu" in controllers.split(",") and v1 is None:
            v1 = path
    return v1, v2


def _under(mount: tuple[str, str], path: str) -> Path | None:
    root, point = mount
    if path == root or root == "/":
        rel = path.lstrip("/") if root == "/" else ""
    elif path.startswith(root.rstrip("/") + "/"):
        rel = path[len(root.rstrip("/")) + 1 :]
    else:
        return None  # our group is outside what this mount shows
    return Path(point) / rel


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def _pids(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_members(group: Path) -> int:
    """SIGKILL every process in `group`; how many there were."""
    return procs.kill_pids(_pids(group))


def _empty(group: Path, wait_s: float) -> bool:
    """Kill every process in `group` until a look finds none (a process that forks between the
    look and the kill leaves a child for the next pass); False if `wait_s` passed first."""
    end = time.monotonic() + wait_s
    while _kill_members(group):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _empty_and_remove(group: Path, wait_s: float = 5.0) -> bool:
    """Empty `group`, then rmdir it (a group that still holds a dying process refuses rmdir);
    False if that took longer than `wait_s`."""
    end = time.monotonic() + wait_s
    while _empty(group, max(end - time.monotonic(), 0.0)):
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > end:
                return False
            time.sleep(0.02)
    return False


class CpuGroups:
    """One CPU cgroup per slot, or none (active False, why says why).

    proc: where to read self/cgroup and self/mountinfo (tests point it at fake files)."""

    def __init__(self, slots: int, *, proc: str | Path = "/proc") -> None:
        self.slots = int(slots)
        self.active = False
        self.why = ""
        self.version = 0
        self.parent: Path | None = None
        self.groups: list[Path] = []
        try:
            self._create(Path(proc))
        except OSError as exc:
            self._remove_all()
            self.why = f"cannot create CPU cgroups: {exc.strerror or exc} ({exc.filename or ''})"

    def _create(self, proc: Path) -> None:
        if not hasattr(os, "getuid") or not Path(proc, "self", "cgroup").exists():
            self.why = "no cgroups on this system"
            return
        v1_mount, v2_mount = _mountinfo_roots(Path(proc, "self", "mountinfo").read_text())
        v1_path, v2_path = _own_paths(Path(proc, "self", "cgroup").read_text())
        if v1_mount and v1_path is not None and (base := _under(v1_mount, v1_path)):
            self.version, knob, value = 1, "cpu.shares", V1_SHARES
        elif v2_mount and v2_path is not None and (base := _under(v2_mount, v2_path)):
            self.version, knob, value = 2, "cpu.weight", V2_WEIGHT
            if "cpu" not in (base / "cgroup.controllers").read_text().split():
                self.why = f"cgroup v2 offers no cpu controller at {base}"
                return
        else:
            self.why = "no cpu cgroup hierarchy is mounted"
            return
        if not os.access(base, os.W_OK):
            self.why = f"cannot write {base} (CPU cgroups need root or a delegated group)"
            return
        self._sweep(base)
        self.parent = base / f"{PREFIX}{os.getpid()}"
        self.parent.mkdir(mode=0o755)
        if self.version == 2:
            _write(base / "cgroup.subtree_control", "+cpu")
            _write(self.parent / "cgroup.subtree_control", "+cpu")
        for slot in range(self.slots):
            group = self.parent / f"slot{slot}"
            group.mkdir(mode=0o755)
            _write(group / knob, value)
            self.groups.append(group)
        self.active = True
        self.why = f"cgroup v{self.version}: a group per slot, {knob} {value} each"

    @staticmethod
    def _sweep(base: Path) -> None:
        """Remove the groups of class graders that died without removing theirs."""
        for old in base.glob(f"{PREFIX}*"):
            pid = old.name.removeprefix(PREFIX)
            if not pid.isdigit() or Path(f"/proc/{pid}").exists():
                continue
            for group in old.glob("slot*"):
                _empty_and_remove(group, wait_s=1.0)
            with contextlib.suppress(OSError):
                old.rmdir()

    def prefix(self, slot: int) -> list[str]:
        """argv words that put the command that follows into the slot's group before it runs
        (its pid is written from inside, so nothing it starts can be outside), or []."""
        if not self.active:
            return []
        procs = self.groups[slot] / "cgroup.procs"
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]

    def clear(self, slot: int) -> int:
        """Kill whatever is still running in the slot's group (after a student's run), until
        none is left; the number of processes the first look found."""
        if not self.active:
            return 0
        left = len(_pids(self.groups[slot]))
        _empty(self.groups[slot], wait_s=5.0)
        return left

    def _remove_all(self) -> None:
        for group in self.groups:
            _empty_and_remove(group)
        if self.parent is not None:
            with contextlib.suppress(OSError):
                self.parent.rmdir()
        self.groups = []

    def close(self) -> None:
        """Kill what is left in every group and remove them."""
        self._remove_all()
        self.active = False
