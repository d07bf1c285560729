"""Grading fails closed where isolation is missing, and a grading child sees an allow-list of the
filesystem: Python and its packages, its own stage, the system's folders, and nothing else.

Before: with namespaces off and Python under /root/.pyenv, the child kept root's uid, wrote a
.pth file into the grader's site-packages and forged its PASS; a class folder under /var was read
whole by a loader that ran a classmate's file (PASS 60/60)."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tinytorch.milestone07.boundary import open_sandbox as Sandbox
from tinytorch.sandbox import spawn, uids
from tinytorch.sandbox.child import confine

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the uid switch)")

READS_THE_CLASS = """
import os
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    seen = 0.0
    try:
        seen += len(os.listdir({folder!r}))
    except OSError:
        seen -= 1
    try:
        with open({victim!r}) as fh:
            seen += 100 * len(fh.read())
    except OSError:
        seen -= 1
    return Tensor(np.full(x.data.shape, seen, np.float32))
"""


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder the sandbox uid may read (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="tt-closed-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _no_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    monkeypatch.setattr(spawn, "_NAMESPACES", None)


def _python_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where Python lives under /root/.pyenv: a folder the sandbox uid cannot enter."""
    monkeypatch.setattr(confine, "blocked_dirs", lambda paths: {"/root": {".pyenv"}})


@ROOT_ONLY
def test_grading_refuses_to_start_where_the_child_would_keep_roots_uid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_namespaces(monkeypatch)
    _python_unreadable(monkeypatch)
    monkeypatch.delenv(spawn.TRUST_VAR, raising=False)
    why = spawn.isolation_problem()
    assert why and why.startswith("isolation (uid)") and "/usr/bin/python3 -m venv" in why
    with Sandbox(str(BASE), grading=True) as box, pytest.raises(spawn.IsolationRefused):
        box.start()
    with Sandbox(str(BASE), grading=False) as box:  # practice on a student's machine goes on
        assert box.start()["status"] == "ok"


def test_grading_refuses_to_start_where_the_grader_is_not_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(uids, "sandbox_ids", lambda: None)
    why = spawn.isolation_problem()
    assert why and "not root" in why and spawn.TRUST_VAR in why


def test_grading_refuses_a_world_writable_folder_above_the_grader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    open_dir = tmp_path / "open"
    (open_dir / "site-packages").mkdir(parents=True)
    open_dir.chmod(0o777)  # no sticky bit: any uid may replace site-packages
    monkeypatch.setattr(uids, "sandbox_ids", lambda: (1_700_000_001, 1_700_000_001))
    monkeypatch.setattr(confine, "blocked_dirs", lambda paths: {})
    why = spawn.isolation_problem([str(open_dir / "site-packages")])
    assert why and why.startswith("isolation (interpreter)") and str(open_dir) in why
    open_dir.chmod(0o1777)  # sticky, like /tmp: a file of ours cannot be replaced
    assert spawn.isolation_problem([str(open_dir / "site-packages")]) is None


@ROOT_ONLY
def test_a_trusted_run_goes_on_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_namespaces(monkeypatch)
    _python_unreadable(monkeypatch)
    monkeypatch.setenv(spawn.TRUST_VAR, "1")
    with Sandbox(str(BASE), grading=True) as box:
        box.start()
        assert box.isolation["trusted"]["active"] is False
        assert "TINYTORCH_TRUSTED_CODE=1" in box.isolation["trusted"]["why"]


@ROOT_ONLY
def test_the_cli_routes_refuse_with_one_line_naming_the_layer_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tinytorch.cli.main import main

    _no_namespaces(monkeypatch)
    _python_unreadable(monkeypatch)
    monkeypatch.delenv(spawn.TRUST_VAR, raising=False)
    assert main(["milestone", "run", "07", "--grading", "--impl", str(BASE), "--no-part-b"]) == 2
    assert "isolation (uid)" in capsys.readouterr().err
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(BASE, subs / "alice.py")
    assert main(["grade-class", str(subs), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "refused: isolation (uid)" in err and "--trusted-code" in err
    assert not (tmp_path / "out" / "gradebook.csv").exists()


def _class_under(top: str) -> Iterator[tuple[Path, Path]]:
    made = not os.path.isdir(top)
    os.makedirs(top, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="tt-class-", dir=top))
    try:
        folder.chmod(0o755)
        victim = folder / "bob.py"
        victim.write_text("def tiled_matmul(a, b, tile_size=64):\n    return a @ b\n")
        victim.chmod(0o644)
        yield folder, victim
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if made:
            shutil.rmtree(top, ignore_errors=True)


TOPS = ["/var", "/srv", "/home", "/opt"]


@ROOT_ONLY
@pytest.mark.parametrize("top", TOPS)
def test_a_grading_child_cannot_list_or_read_a_class_folder_with_namespaces(
    shared: Path, top: str
) -> None:
    prefix, why = spawn.namespace_prefix()
    if not prefix or "--user" in prefix:
        pytest.skip(f"no root mount namespace for the child here: {why}")
    for folder, victim in _class_under(top):
        assert spawn.visible_to_child(folder) is None
        impl = shared / "reader.py"
        impl.write_text(
            textwrap.dedent(READS_THE_CLASS.format(folder=str(folder), victim=str(victim)))
        )
        with Sandbox(str(impl), grading=True) as box:
            assert box.start()["status"] == "ok"
            reply = box.request(
                {"fn": "fused_gelu", "args": [np.zeros(1, np.float32)], "kwargs": {}}, 10
            )
            assert reply["status"] == "ok", reply
            assert float(reply["output"][0]) == -2.0, (top, box.isolation.get("elsewhere"))
        with Sandbox(str(impl), grading=False) as box:  # the probe works: practice reads it
            box.start()
            reply = box.request(
                {"fn": "fused_gelu", "args": [np.zeros(1, np.float32)], "kwargs": {}}, 10
            )
            assert float(reply["output"][0]) > 0


@ROOT_ONLY
@pytest.mark.parametrize("top", TOPS)
def test_without_namespaces_a_readable_class_folder_is_refused_and_a_closed_one_is_unread(
    shared: Path, top: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_namespaces(monkeypatch)
    monkeypatch.delenv(spawn.TRUST_VAR, raising=False)
    for folder, victim in _class_under(top):
        refused = spawn.isolation_problem() or spawn.visible_to_child(folder)
        assert refused, "a world-readable class folder must refuse the run"
        folder.chmod(0o700)  # the fix the refusal names
        assert spawn.visible_to_child(folder) is None
        if spawn.isolation_problem():  # Python unreadable by the sandbox uid: grading refuses
            continue
        impl = shared / "reader.py"
        impl.write_text(
            textwrap.dedent(READS_THE_CLASS.format(folder=str(folder), victim=str(victim)))
        )
        with Sandbox(str(impl), grading=True) as box:
            assert box.start()["status"] == "ok"
            reply = box.request(
                {"fn": "fused_gelu", "args": [np.zeros(1, np.float32)], "kwargs": {}}, 10
            )
            assert float(reply["output"][0]) == -2.0


def test_grade_class_keeps_classmates_results_from_other_users(tmp_path: Path) -> None:
    from tinytorch.classroom.classgrade import grade_class

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "mia").mkdir()
    (subs / "mia" / "notes.txt").write_text("no code")
    grade_class(subs, tmp_path / "out", jobs=1)
    for name in ("", "results", "logs"):  # the gradebook and report too (red-teaming read them)
        assert (tmp_path / "out" / name).stat().st_mode & 0o077 == 0


def test_tito_grade_refuses_a_link_in_grading_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: it followed a link to a classmate's file and graded that file: PASS, exit 0."""
    from tinytorch.cli.main import main

    link = tmp_path / "acceleration.py"
    link.symlink_to(BASE)
    assert main(["grade", "--impl", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err


def test_root_with_only_a_user_namespace_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-teaming: root without CAP_SYS_ADMIN fell back to `unshare --user --map-root-user`,
    whose child kept root's uid and capabilities, wrote a .pth into site-packages and forged a
    classmate's PASS."""
    monkeypatch.setattr(uids, "sandbox_ids", lambda: (1_700_000_001, 1_700_000_001))
    monkeypatch.setattr(
        spawn, "namespace_prefix", lambda: (["unshare", "--user", "--map-root-user"], "user ns")
    )
    why = spawn.isolation_problem()
    assert why and "user namespace" in why and spawn.NAMESPACES_VAR in why


def test_a_sandbox_uid_pinned_to_root_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uids, "sandbox_ids", lambda: (0, 0))
    why = spawn.isolation_problem()
    assert why and "pinned to 0" in why


def test_a_class_folder_on_the_graders_import_path_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Red-teaming: PYTHONPATH=the class folder kept it whole in every child's view."""
    monkeypatch.setattr(spawn, "needed_paths", lambda package_dir: [str(tmp_path)])
    (tmp_path / "subs").mkdir()
    why = spawn.visible_to_child(tmp_path / "subs")
    assert why and "import path" in why


def test_each_class_run_draws_its_own_block_of_slot_uids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-teaming: two class runs at once, without namespaces, both used slot uid 1600000000,
    and one run's child read the other's staged copy."""
    monkeypatch.delenv(uids.SLOT_UID_BASE_VAR, raising=False)
    bases = {uids.run_slot_base() for _ in range(20)}
    assert len(bases) > 1
    for base in bases:
        assert uids.SLOT_UID_BASE <= base and base + uids.SLOT_UIDS <= uids.RUN_UID_BASE
        env = uids.slot_env(3, base)
        assert env["TINYTORCH_SANDBOX_UID"] == str(base + 3)
        monkeypatch.setenv(uids.SLOT_UID_BASE_VAR, env[uids.SLOT_UID_BASE_VAR])
        assert uids.pool_uid(base + 3)  # the milestone process knows its pool: leftovers swept
