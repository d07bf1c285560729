"""Students graded side by side share the CPU fairly, and a verdict never carries a neighbour's load.

Red-teaming: a submission that starts a hundred busy loops, each in its own session, failed a
correct but slow student graded beside it (PASS alone, NOT PASSED beside it: its calls timed out).
Two defences, each tested here: a CPU cgroup per grading slot (cpugroups.py), and the regrade
alone of any result that hit a wall-clock limit while others were graded (classgrade.py).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tinytorch.classroom import classgrade
from tinytorch.classroom.cpugroups import CpuGroups, _mountinfo_roots, _own_paths, _under
from tinytorch.classroom.runner import error_doc

# The two class runs measure who gets the CPU: nothing else may run beside them (`exclusive`).
# The rest read /proc, count a cgroup's members or fake the grader: they run beside other tests.
pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"  # a correct Module 17
FUNCS = ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
WRAP = "\n\nfor _n in {funcs!r}:\n    globals()[_n] = _wrap(globals()[_n])\n"

# Correct, and slow: 0.05 s of CPU on every call (alone, each call takes ~0.05 s of its 1 s).
SLOW_HONEST = """

import time as _t


def _wrap(f):
    def g(*a, **k):
        end = _t.process_time() + 0.05
        while _t.process_time() < end:
            pass
        return f(*a, **k)
    return g
"""
# Takes the machine: 100 busy loops, each its own session (so, with autogroup, its own
# scheduling group), kept alive by answering each call just inside the case timeout. It hogs
# until {until} (wall clock, which crosses the sandbox): as long as the side-by-side round can
# last (the Part A budget, half the class run's wall timeout). After that it answers wrongly at once, so its own alone
# regrade, with no neighbour left to hurt, does not spend a second budget hogging.
HOG = """

import subprocess as _sp
import time as _t

_HOGS = []


def _wrap(f):
    def g(*a, **k):
        if _t.time() > {until!r}:
            return Tensor(np.zeros(1))
        while len(_HOGS) < 100:
            try:
                _HOGS.append(_sp.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True))
            except OSError:
                break
        _t.sleep(0.5)
        return f(*a, **k)
    return g
"""

V1_HYBRID = (  # /proc/self/mountinfo of a cgroup v1 machine (this kind), trimmed
    "30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "33 30 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "34 30 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "41 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)
V2_ONLY = "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def _hog(wall_timeout: int) -> str:
    """The hog, for a class run with this wall timeout (each student's Part A budget is half)."""
    return HOG.format(until=time.time() + wall_timeout // 2)


def _class(tmp_path: Path, **students: str) -> Path:
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, extra in students.items():
        (subs / f"{name}.py").write_text(BASE.read_text() + extra + WRAP.format(funcs=FUNCS))
    return subs


def _live_groups() -> CpuGroups:
    groups = CpuGroups(2)
    if not groups.active:
        pytest.skip(f"no writable CPU cgroup here: {groups.why}")
    return groups


def test_the_cpu_hierarchy_and_our_place_in_it_are_read_from_proc() -> None:
    v1, v2 = _mountinfo_roots(V1_HYBRID)
    assert v1 == ("/", "/sys/fs/cgroup/cpu") and v2 == ("/", "/sys/fs/cgroup/unified")
    assert _mountinfo_roots(V2_ONLY) == (None, ("/", "/sys/fs/cgroup"))
    assert _own_paths("2:cpuacct:/\n1:cpu:/grader\n0::/user.slice\n") == ("/grader", "/user.slice")
    assert _own_paths("1:cpu,cpuacct:/a/b\n") == ("/a/b", None)
    assert _under(("/", "/sys/fs/cgroup/cpu"), "/a/b") == Path("/sys/fs/cgroup/cpu/a/b")
    # A mount that shows only a subtree (a container's cgroup): paths below its root map into it.
    assert _under(("/docker/x", "/sys/fs/cgroup"), "/docker/x/y") == Path("/sys/fs/cgroup/y")
    assert _under(("/docker/x", "/sys/fs/cgroup"), "/other") is None


def test_no_cgroup_filesystem_is_an_inactive_layer_that_says_why(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text("0::/\n")
    (tmp_path / "self" / "mountinfo").write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
    groups = CpuGroups(2, proc=tmp_path)
    assert not groups.active and "no cpu cgroup hierarchy" in groups.why
    assert groups.prefix(0) == [] and groups.clear(0) == 0


def test_a_slot_group_holds_the_command_and_everything_it_starts() -> None:
    groups = _live_groups()
    try:
        cmd = [*groups.prefix(1), "sh", "-c", "sleep 60 & exec sleep 60"]
        proc = subprocess.Popen(cmd, start_new_session=True)
        deadline = time.monotonic() + 10
        while len(pids := (groups.groups[1] / "cgroup.procs").read_text().split()) < 2:
            assert time.monotonic() < deadline, pids
            time.sleep(0.02)
        assert str(proc.pid) in pids
        assert (groups.groups[0] / "cgroup.procs").read_text().split() == []
        assert groups.clear(1) == 2  # both sleeps, the one in the background too
        assert proc.wait(10) == -9
    finally:
        groups.close()
    assert groups.parent is not None and not groups.parent.exists()


FORK_CHAIN = "import os\nwhile True:\n    if os.fork():\n        os._exit(0)\n"  # always moving


def test_clearing_a_slot_catches_a_process_that_keeps_forking_away() -> None:
    """Red-teaming: a process that forks and lets its parent exit, over and over, outran a
    single kill of the group's members (2 runs in 10 left it running in the slot's group, where
    it would take the next student's share). clear() looks again until the group is empty."""
    import sys

    groups = _live_groups()
    try:
        for _ in range(20):
            subprocess.run([*groups.prefix(0), sys.executable, "-c", FORK_CHAIN], check=True)
            time.sleep(0.05)
            assert groups.clear(0) >= 1
            time.sleep(0.05)
            assert (groups.groups[0] / "cgroup.procs").read_text().split() == []
    finally:
        groups.close()


@pytest.mark.exclusive
def test_a_busy_neighbour_takes_only_its_own_slots_share(tmp_path: Path) -> None:
    """With the cgroups, the slow honest student passes beside the hog without needing the alone
    regrade: the hog's hundred loops share one slot's CPU. (Without them it timed out.)"""
    _live_groups().close()
    # A 15 s budget, as below: beside the hog in her own slot's share she needs about 5 s of it.
    subs = _class(tmp_path, alice=SLOW_HONEST, mallory=_hog(30))
    run = classgrade.grade_class(subs, tmp_path / "out", jobs=2, case_timeout=1.0, wall_timeout=30)
    alice = run.docs["alice"]
    assert alice["verdict"] == "PASS", classgrade.hit_wall_clock(alice)
    assert alice["grader"]["cpu_group"]["active"] is True
    assert "regraded_alone" not in alice["grader"]  # it never timed out beside the hog
    assert run.docs["mallory"]["verdict"] == "NOT_PASSED"


class _NoGroups(CpuGroups):
    """What a machine without writable cgroups gets."""

    def __init__(self, slots: int, **_kw: Any) -> None:
        self.slots, self.active, self.why, self.groups, self.parent = slots, False, "none", [], None


@pytest.mark.exclusive
def test_without_cgroups_a_starved_student_is_regraded_alone_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The floor: beside the hog, with no CPU cgroup, the slow honest student's calls time out;
    its result hit a wall-clock limit, so it is regraded alone, and that PASS is what is kept."""
    monkeypatch.setattr(classgrade, "CpuGroups", _NoGroups)
    # A 15 s budget: starved beside the hog she spends it; alone she needs about 5 s of it.
    subs = _class(tmp_path, alice=SLOW_HONEST, mallory=_hog(30))
    run = classgrade.grade_class(subs, tmp_path / "out", jobs=2, case_timeout=1.0, wall_timeout=30)
    alice = run.docs["alice"]
    assert alice["verdict"] == "PASS", classgrade.hit_wall_clock(alice)
    # Whether the hog's loops were up while alice ran depends on start-up order (the rule
    # itself is pinned by the fake-grader test below); where they were, she was regraded.
    again = alice["grader"].get("regraded_alone")
    if again is not None:
        assert "timed out while 2 students were graded side by side" in again["why"]
        assert again["side_by_side"]["verdict"] != "PASS"  # beside the hog it did not pass
        assert alice["seed"] == again["side_by_side"]["seed"]  # the same cases, alone
        assert "TIMEOUT" in (tmp_path / "out" / again["side_by_side_log"]).read_text()  # kept
        assert "TIMEOUT" not in (tmp_path / "out" / "logs" / "alice.log").read_text()  # alone
    assert any("share the CPU unchecked" in w for w in run.warnings)


def _fake_grading(
    monkeypatch: pytest.MonkeyPatch, slow_first: set[str]
) -> tuple[list[tuple[str, int]], list[int | None]]:
    """grade_submission replaced: a student in `slow_first` times out on its first grading and
    passes on the next. Returns, per grading in order, (student, how many gradings were
    running) and the seed it was asked for."""
    seen: list[tuple[str, int]] = []
    seeds: list[int | None] = []
    running = [0]

    def fake(copy: Path, private: Path, **kw: Any) -> tuple[dict[str, Any], None]:
        running[0] += 1
        seen.append((copy.stem, running[0]))
        seeds.append(kw.get("seed"))
        drawn = 1000 + sum(map(ord, copy.stem))  # the seed the milestone "draws" for it
        time.sleep(0.2)  # long enough for side-by-side gradings to overlap
        timed_out = copy.stem in slow_first and [s for s, _ in seen].count(copy.stem) == 1
        doc = error_doc(str(copy), "NOT_PASSED" if timed_out else "PASS", "")
        doc["seed"] = kw.get("seed") or drawn
        doc["cases"] = [{"name": "gelu/0", "status": "timeout" if timed_out else "pass"}]
        running[0] -= 1
        return doc, None

    monkeypatch.setattr(classgrade, "grade_submission", fake)
    monkeypatch.setattr(classgrade, "CpuGroups", _NoGroups)
    return seen, seeds


@pytest.mark.parametrize("jobs", [1, 3])
def test_only_a_timed_out_result_graded_beside_others_is_regraded_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    seen, seeds = _fake_grading(monkeypatch, slow_first={"ann"})
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "ben", "cat"):
        (subs / f"{name}.py").write_text("x = 1\n")
    shown: list[str] = []
    run = classgrade.grade_class(
        subs, tmp_path / "out", jobs=jobs, progress=lambda s, d, t: shown.append(s)
    )
    assert sorted(shown) == ["ann", "ben", "cat"]  # each student reported once
    names = [s for s, _ in seen]
    if jobs == 1:  # already alone: the timeout stands
        assert names.count("ann") == 1 and run.docs["ann"]["verdict"] == "NOT_PASSED"
        assert "regraded_alone" not in run.docs["ann"]["grader"]
        return
    assert names.count("ann") == 2 and names.count("ben") == names.count("cat") == 1
    assert names[-1] == "ann" and seen[-1][1] == 1  # last, and nothing else was running
    assert max(n for _, n in seen[:-1]) > 1  # the first round really ran side by side
    ann = run.docs["ann"]
    assert ann["verdict"] == "PASS"
    assert ann["grader"]["regraded_alone"]["side_by_side"]["verdict"] == "NOT_PASSED"
    assert "gelu/0 timed out while 3 students" in ann["grader"]["regraded_alone"]["why"]
    # The regrade grades the same cases: the first round's secret seed, not a second draw.
    assert seeds[:-1] == [None, None, None]  # the first round: each drew its own
    assert seeds[-1] == 1000 + sum(map(ord, "ann"))  # ann's first draw, again


def test_a_result_that_hit_no_wall_clock_limit_says_so() -> None:
    doc = error_doc("x.py", "NOT_PASSED", "")
    assert classgrade.hit_wall_clock(doc) == ""
    doc["checks"] = [{"name": "tiling", "status": "timeout"}]
    assert classgrade.hit_wall_clock(doc) == "tiling timed out"
    doc = error_doc("x.py", "ERROR", "")
    doc["grader"] = {"killed": "timeout"}
    assert "wall timeout" in classgrade.hit_wall_clock(doc)


def test_an_import_that_does_not_finish_in_time_is_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starved neighbour's import can run past the start timeout too: its cases are timeouts
    (so the class grader regrades the student alone), not errors of the module's."""
    from tinytorch.milestone07.part_a import run_part_a
    from tinytorch.sandbox import parent as sandbox

    monkeypatch.setattr(sandbox, "START_TIMEOUT_S", 1.0)
    slow = tmp_path / "slow_import.py"
    slow.write_text("import time\n\ntime.sleep(20)\n" + BASE.read_text())
    result = run_part_a(str(slow), cases=["fused_gelu"], checks=False)
    assert result.verdict == "NOT_PASSED"
    assert {c.status for c in result.cases} == {"timeout"}, {c.detail for c in result.cases}
