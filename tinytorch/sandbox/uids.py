"""The uid pools: a fresh unprivileged uid per sandbox (the run pool), one per class-grading slot
(the slot pool), and the sweep of what a pool uid left behind in shared folders."""

from __future__ import annotations

import os
import secrets
import tempfile

from tinytorch.sandbox.child.confine import shared_folders
from tinytorch.sandbox.procs import remove_tree


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


SLOT_BLOCKS = (RUN_UID_BASE - SLOT_UID_BASE) // SLOT_UIDS  # disjoint blocks below the run pool


def run_slot_base() -> int:
    """The first slot uid of one class run: TINYTORCH_SLOT_UID_BASE where set, else a block drawn
    at random below the run pool, so two class runs at once (without namespaces) never share a
    slot's uid (red-teaming: a second run's child read the first's staged copy under uid
    1600000000)."""
    if SLOT_UID_BASE_VAR in os.environ:
        return int(os.environ[SLOT_UID_BASE_VAR])
    return SLOT_UID_BASE + SLOT_UIDS * secrets.randbelow(SLOT_BLOCKS)


def slot_ids(slot: int, base: int | None = None) -> tuple[int, int]:
    """(uid, gid) of grading slot `slot` in the pool that starts at `base` (default: the
    environment's TINYTORCH_SLOT_UID_BASE, else SLOT_UID_BASE)."""
    if not 0 <= slot < SLOT_UIDS:
        raise ValueError(f"slot_ids: slot must be in [0, {SLOT_UIDS}), got {slot!r}")
    if base is None:
        base = int(os.environ.get(SLOT_UID_BASE_VAR, str(SLOT_UID_BASE)))
    return base + slot, base + slot


def slot_env(slot: int, base: int | None = None) -> dict[str, str]:
    """The environment that makes a grader's sandboxes drop to slot `slot`'s uid (sandbox_ids),
    and lets them know the pool (pool_uid)."""
    uid, gid = slot_ids(slot, base)
    env = {"TINYTORCH_SANDBOX_UID": str(uid), "TINYTORCH_SANDBOX_GID": str(gid)}
    if base is not None:
        env[SLOT_UID_BASE_VAR] = str(base)
    return env


def slot_pool_problem(slots: int, base: int | None = None) -> str:
    """Why `slots` slot uids cannot be used ('' when they can): a passwd entry, or a uid this user
    namespace does not map (a container with a narrow uid map)."""
    import pwd

    if slots > SLOT_UIDS:
        return f"{slots} jobs but only {SLOT_UIDS} uids in the slot pool"
    uids = [slot_ids(slot, base)[0] for slot in range(slots)]
    for uid in uids:
        try:
            return f"uid {uid} of the slot pool is the user {pwd.getpwuid(uid).pw_name!r}"
        except KeyError:
            pass
    uid = _unmapped(uids)
    return "" if uid is None else f"uid {uid} of the slot pool is not mapped in this user namespace"
