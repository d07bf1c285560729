"""The sandbox child's isolation layers and its K1 contract (grad, stub, origins, grading mode),
as root (the uid switch and namespaces) and under an unprivileged uid (the fallbacks)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from tinytorch.milestone07.boundary import open_sandbox as Sandbox
from tinytorch.sandbox import procs, spawn, uids
from tinytorch.sandbox.child import confine

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the uid switch)")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder the sandbox uid may read and write (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="tt-iso-"))
    path.chmod(0o777)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def _write(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _pgrep(mark: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def _wait_for(mark: str, n: int) -> int:
    for _ in range(100):
        if len(_pgrep(mark)) >= n:
            break
        time.sleep(0.05)
    return len(_pgrep(mark))


def _value(box: Sandbox, fn: str = "fused_gelu") -> np.ndarray:
    reply = box.request({"fn": fn, "args": [np.zeros(1, np.float32)], "kwargs": {}}, 10)
    assert reply["status"] == "ok", reply
    return reply["output"]


PROBE = """
import os, socket
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    try:
        open(os.environ["B1_TARGET"], "a").close()  # never set in the child: KeyError
        wrote = 1.0
    except (KeyError, OSError):
        wrote = 0.0
    secret = 1.0 if "B1_SECRET" in os.environ else 0.0
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1).close()
        net = 1.0
    except OSError:
        net = 0.0
    return Tensor(np.array([os.getuid(), secret, net, wrote, len(socket.if_nameindex())], np.float32))
"""


@ROOT_ONLY
def test_as_root_every_layer_is_active_and_the_child_is_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("B1_SECRET", "hunter2")
    with Sandbox(_write(tmp_path, "probe", PROBE)) as box:
        assert box.start()["status"] == "ok"
        uid, secret, net, _wrote, interfaces = _value(box)
        layers = box.isolation
    inactive = {k: v["why"] for k, v in layers.items() if not v["active"]}
    assert inactive == {}, inactive
    assert set(layers) >= {"session", "subreaper", "pdeathsig", "namespaces", "network", "uid",
                           "workdir", "env", "limits"}  # fmt: skip
    assert (secret, net, interfaces) == (0, 0, 1)  # no secret, only lo
    assert uids.RUN_UID_BASE <= uid < uids.RUN_UID_BASE + uids.RUN_UIDS  # its own uid


def test_close_kills_what_the_child_started(tmp_path: Path) -> None:
    mark = f"ISO-{uuid.uuid4().hex}"
    body = PROBE + textwrap.dedent(f"""
    import subprocess
    for _ in range(5):
        subprocess.Popen(["/bin/sh", "-c", "sleep 300; : {mark}"], start_new_session=True)
    """)
    box = Sandbox(_write(tmp_path, "spawner", body))
    assert box.start()["status"] == "ok"
    assert _wait_for(mark, 5) >= 5
    box.close()
    assert _pgrep(mark) == []


def test_without_namespaces_the_tree_kill_still_finds_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    monkeypatch.setattr(spawn, "_NAMESPACES", None)
    mark = f"ISO-{uuid.uuid4().hex}"
    body = PROBE + textwrap.dedent(f"""
    import os, subprocess
    for _ in range(5):
        subprocess.Popen(["/bin/sh", "-c", "sleep 300; : {mark}"], start_new_session=True)
    if os.fork() == 0:  # a double-forked daemon in its own session
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 300; : {mark}"])
        os._exit(0)
    if os.fork() == 0:  # ... and one that also drops the sandbox's token: env -i
        os.setsid()
        if os.fork() == 0:
            os.execv("/usr/bin/env", ["env", "-i", "/bin/sh", "-c", "sleep 300; : {mark}"])
        os._exit(0)
    """)
    with Sandbox(_write(tmp_path, "daemons", body)) as box:
        assert box.start()["status"] == "ok"
        assert box.isolation["namespaces"] == {
            "active": False,
            "why": "turned off (TINYTORCH_SANDBOX_NAMESPACES=0)",
        }
        assert box.isolation["network"]["active"] is False
        assert box.isolation["orphans"]["active"] is True
        assert _wait_for(mark, 7) >= 7
    assert _pgrep(mark) == []
    monkeypatch.setattr(spawn, "_NAMESPACES", None)


def test_grad_and_stub_follow_the_contract(tmp_path: Path) -> None:
    body = """
    import numpy as np
    from tinytorch.core.tensor import Function, Tensor

    class Half(Function):
        def forward(self, x):
            return x * 0.5

        def backward(self, grad_output):
            raise NotImplementedError("Half.backward is yours to write")

    def fused_gelu(x):
        return x * x  # recorded by autograd

    def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
        return Half.apply(cols)

    def im2col(x, kernel_size, stride=1, padding=0):
        raise NotImplementedError("im2col")
    """
    x = np.array([1.0, -2.0, 3.0], np.float32)
    with Sandbox(_write(tmp_path, "grads", body)) as box:
        assert box.start()["functions"]["fused_gelu"] == "ok"
        ok = box.request(
            {"fn": "fused_gelu", "args": [x], "kwargs": {}, "grad": np.ones(3, np.float32)}, 10
        )
        assert ok["status"] == "ok"
        np.testing.assert_allclose(ok["grads"][0], 2 * x)
        back = box.request(
            {
                "fn": "col2im",
                "args": [x, (1, 1, 1, 3), 1],
                "kwargs": {},
                "grad": np.ones(3, np.float32),
            },
            10,
        )
        assert (back["status"], back["phase"], back["stub"]) == (
            "not_implemented",
            "backward",
            "Half.backward",
        )
        fwd = box.request({"fn": "im2col", "args": [x, 1], "kwargs": {}}, 10)
        assert (fwd["status"], fwd["stub"]) == ("not_implemented", "im2col")


DELEGATES = """
from tinytorch.perf.acceleration import fused_gelu  # the bundled reference
from tinytorch.milestone07.references import ref_gelu
"""


@pytest.mark.parametrize("grading", [False, True])
def test_reference_imports_are_reported_and_refused_when_grading(
    tmp_path: Path, grading: bool
) -> None:
    with Sandbox(_write(tmp_path, "delegates", DELEGATES), grading=grading) as box:
        info = box.start()
    if grading:
        assert info["status"] == "import_error"
        assert "cannot be imported while grading" in info["error"]
    else:
        assert info["status"] == "ok"
        assert info["origins"]["fused_gelu"] == "reference" and info["imports_reference"] is True


def test_own_code_is_student_origin(tmp_path: Path) -> None:
    with Sandbox(str(BASE), grading=True) as box:
        info = box.start()
    assert info["status"] == "ok" and info["imports_reference"] is False
    assert set(info["origins"].values()) == {"student"}


def test_memory_limit_is_configurable(tmp_path: Path) -> None:
    body = """
    import numpy as np
    from tinytorch.core.tensor import Tensor
    def fused_gelu(x):
        return Tensor(np.ones(300 << 20, np.uint8)[:1])
    """
    impl = _write(tmp_path, "alloc", body)
    with Sandbox(impl, limits=confine.ChildLimits(memory_bytes=1 << 30)) as box:
        assert _value(box).shape == (1,)
    with Sandbox(impl, limits=confine.ChildLimits(memory_bytes=200 << 20)) as box:
        reply = box.request(
            {"fn": "fused_gelu", "args": [np.zeros(1, np.float32)], "kwargs": {}}, 10
        )
    assert (reply["status"], reply["error"].split(":")[0]) == ("raised", "MemoryError"), reply


def test_bad_limits_argument_is_named() -> None:
    with pytest.raises(TypeError, match="limits must be a ChildLimits or a dict, got int"):
        Sandbox(None, limits=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits keys must be among"):
        Sandbox(None, limits={"memory": 1})
    assert Sandbox(None, limits={"memory_bytes": 1 << 30}).limits.memory_bytes == 1 << 30


# ---- the grader itself under an unprivileged uid ------------------------------------------------
HARNESS = """
import os, sys
from tinytorch.sandbox import procs, spawn, uids
from tinytorch.sandbox.child import confine
blocked = confine.blocked_dirs(spawn.needed_paths(sys.argv[1]))
ok, why = confine.expose(blocked, sys.argv[2]) if blocked else (True, "")
assert ok, why
os.setgroups([]); os.setgid(65534); os.setuid(65534)
os.execv(sys.executable, [sys.executable, "-c", sys.argv[3], *sys.argv[4:]])
"""
RUNNER = """
import json, sys
from tinytorch.milestone07.part_a import run_part_a
r = run_part_a(sys.argv[1], cases=["fused_gelu/zeros", "tiled_matmul/multiple/tile64"], checks=False)
print(json.dumps({"verdict": r.verdict, "statuses": [c.status for c in r.cases]}))
"""


def _as_nobody(shared: Path, impl: str, namespaces: bool) -> dict:
    if os.geteuid() != 0:
        pytest.skip("needs root to start a grader as uid 65534")
    stage = shared / "stage"
    stage.mkdir()
    env = {**os.environ, spawn.NAMESPACES_VAR: "1" if namespaces else "0", "HOME": str(shared)}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", HARNESS,
         str(ROOT / "tinytorch" / "milestone07"), str(stage), RUNNER, impl],
        capture_output=True, text=True, timeout=120, check=False, cwd=shared, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("namespaces", [True, False], ids=["user-namespace", "no-namespace"])
def test_an_unprivileged_grader_still_contains_the_child(shared: Path, namespaces: bool) -> None:
    mark = f"NOBODY-{uuid.uuid4().hex}"
    body = BASE.read_text() + textwrap.dedent(f"""
    import os as _os, signal as _sig, subprocess as _sp
    for _i in range(5):
        _sp.Popen(["/bin/sh", "-c", "sleep 300; : {mark}"], start_new_session=True)
    """)
    if namespaces:  # only a pid namespace keeps a same-uid child from stopping the grader
        body += "\nfor _p in (_os.getppid(), 1):\n    try:\n        _os.kill(_p, _sig.SIGSTOP)\n    except OSError:\n        pass\n"
    impl = shared / "student.py"
    impl.write_text(body)
    impl.chmod(0o644)
    got = _as_nobody(shared, str(impl), namespaces)
    assert got == {"verdict": "PASS", "statuses": ["pass", "pass"]}
    assert _pgrep(mark) == []


@pytest.mark.slow
def test_the_torch_worker_speaks_the_sandbox_protocol() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    from tinytorch.bench.torch_worker import TorchWorker

    worker = TorchWorker(timeout=120)
    try:
        assert worker.ok and worker.version, worker.reason
        assert worker.box.isolation["session"]["active"]  # one child mechanism: the sandbox
        assert worker.time({"op": "gemm", "n": 32, "threads": 1}) > 0
        reply = worker.ask({"op": "nope"})
        assert reply["error"] == "unknown op 'nope'"  # and its CPU time, for tito bench's load
        assert set(reply) == {"error", "cpu_s"} and reply["cpu_s"] >= 0
    finally:
        worker.close()
    assert not worker.ok


GRADER = """
import sys, time
from tinytorch.milestone07.boundary import open_sandbox as Sandbox
box = Sandbox(sys.argv[1])
print(box.start()["status"], box.isolation["namespaces"]["active"], flush=True)
time.sleep(300)
"""


@pytest.mark.exclusive  # another worker's sandbox start sweeps the dead grader's folder first
def test_a_killed_grader_takes_the_whole_child_tree_with_it(tmp_path: Path) -> None:
    mark = f"PDEATH-{uuid.uuid4().hex}"
    body = PROBE + textwrap.dedent(f"""
    import subprocess
    for _ in range(5):
        subprocess.Popen(["/bin/sh", "-c", "sleep 300; : {mark}"], start_new_session=True)
    """)
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER, _write(tmp_path, "spawner", body)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    status, in_namespace = grader.stdout.readline().split()
    if in_namespace != "True":
        grader.kill()
        grader.wait()
        pytest.skip(
            "no pid namespace here: orphans that left the session outlive a SIGKILLed grader"
        )
    assert status == "ok" and _wait_for(mark, 5) >= 5
    grader.kill()  # SIGKILL: no cleanup code runs in the grader
    grader.wait()
    for _ in range(100):
        if not _pgrep(mark):
            break
        time.sleep(0.05)
    assert _pgrep(mark) == []
    stale = list(Path(tempfile.gettempdir()).glob(f"tt-sandbox-{grader.pid}-*"))
    assert stale  # the SIGKILLed grader could not remove its folder ...
    with Sandbox(None) as box:  # ... the next sandbox does
        box.start()
    assert not any(p.exists() for p in stale)


def test_task_requests_take_a_registry_key_or_module_function() -> None:
    with Sandbox(None) as box:
        ok = box.request({"task": "tinytorch.bench.tasks:simd_status", "kwargs": {}}, 120)
        assert ok["status"] == "ok" and isinstance(ok["value"], dict)
        unknown = box.request({"task": "no_such_task", "kwargs": {}}, 30)
        assert unknown == {"status": "raised", "error": "unknown task 'no_such_task'"}


def test_blocked_dirs_names_the_first_folder_others_cannot_enter(shared: Path) -> None:
    private = shared / "home"
    (private / "py" / "lib").mkdir(parents=True)
    private.chmod(0o700)
    (shared / "open" / "lib").mkdir(parents=True)
    got = confine.blocked_dirs([str(private / "py" / "lib"), str(shared / "open" / "lib")])
    assert got == {str(private): {"py"}}


def test_the_orphan_rule_falls_back_to_the_sandbox_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    assert procs.orphan_rule(None)[0] == "nnp"  # this grader runs without no_new_privs
    real = procs._status_field
    monkeypatch.setattr(  # a grader started with no_new_privs (e.g. a hardened container)
        procs, "_status_field", lambda pid, name: "1" if name == "NoNewPrivs" else real(pid, name)
    )
    other = os.getuid() + 1
    assert procs.orphan_rule(other) == (
        "uid",
        f"processes re-parented to the grader running as uid {other} are killed",
    )
    rule, why = procs.orphan_rule(None)
    assert rule is None and "survives" in why  # said in the isolation section, not hidden


def test_a_file_among_other_students_files_is_copied_alone(tmp_path: Path) -> None:
    (tmp_path / "bob.py").write_text("ANSWER = 'bob worked for this'\n")
    (tmp_path / "carol.py").symlink_to("/etc/hostname")
    alice = tmp_path / "alice.py"
    alice.write_text(BASE.read_text() + "\nimport bob  # another student's file\n")
    with Sandbox(str(alice)) as box:
        info = box.start()
        assert sorted(os.listdir(Path(box._root) / "work")) == ["alice.py"]
    assert info["status"] == "import_error" and "No module named 'bob'" in info["error"]


def test_a_folder_submission_brings_its_own_modules(tmp_path: Path) -> None:
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "helpers.py").write_text("SCALE = 0.5\n")
    (folder / "link.py").symlink_to("/etc/hostname")  # never followed into the child's folder
    (folder / "acceleration.py").write_text(
        BASE.read_text() + "\nfrom helpers import SCALE  # a module of the submission's own\n"
    )
    with Sandbox(str(folder / "acceleration.py")) as box:
        info = box.start()
        assert sorted(os.listdir(Path(box._root) / "work")) == ["acceleration.py", "helpers.py"]
    assert info["status"] == "ok" and set(info["functions"].values()) == {"ok"}


NEIGHBOUR = """
import glob, os
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    # another student's grading runs beside this one: find its copy and try to read and rewrite it
    seen = read = wrote = 0
    for path in glob.glob("/tmp/tt-sandbox-*/work/*.py"):
        if os.path.basename(path) == os.path.basename(__file__):
            continue  # this student's own copy
        seen += 1
        try:
            open(path).read()
            read += 1
        except OSError:
            pass
        try:
            with open(path, "a") as fh:
                fh.write("raise NotImplementedError('planted by another student')")
            wrote += 1
        except OSError:
            pass
    return Tensor(np.array([os.getuid(), seen, read, wrote], np.float32))
"""


@ROOT_ONLY
def test_two_gradings_at_once_get_two_uids_and_cannot_touch_each_others_copy(
    shared: Path,
) -> None:
    """Every plain run dropped to uid 65534, so one student's child could rewrite the copy of
    another's submission graded at the same time (found by red-teaming: the victim got
    INCOMPLETE). Each sandbox now draws its own uid."""
    victim = _write(shared, "victim", BASE.read_text())
    with Sandbox(victim) as held, Sandbox(_write(shared, "neighbour", NEIGHBOUR)) as box:
        assert held.start()["status"] == "ok" and box.start()["status"] == "ok"
        uid, seen, read, wrote = _value(box)
        assert uid != held.ids[0]
        assert glob.glob("/tmp/tt-sandbox-*/work/victim.py")  # the copy is there (root sees it)
        assert (read, wrote) == (0, 0), seen  # the neighbour can neither read nor rewrite it
        assert _value(held)[0] == pytest.approx(0.0, abs=1e-6)  # gelu(0): the victim still loads


@ROOT_ONLY
def test_without_a_namespace_what_a_sandbox_uid_leaves_in_shared_folders_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red-teaming: files a submission left in /tmp outlived its run (until the class grader
    could not stage the next student's copy). Where the child has no mount namespace of its own
    (and drops to its pool uid), what that uid owns at the top of the shared folders is removed
    when the sandbox closes; others' files stay, and a link is removed, never its target."""
    shared_folder = tmp_path / "tmp"
    shared_folder.mkdir()
    shared_folder.chmod(0o1777)
    monkeypatch.setattr(confine, "SHARED_FOLDERS", (str(shared_folder),))
    uid = uids.RUN_UID_BASE + 12345
    target = tmp_path / "target"
    target.write_text("kept")
    left = [shared_folder / "file", shared_folder / "dir", shared_folder / "link"]
    left[0].write_text("x")
    (left[1] / "sub").mkdir(parents=True)
    left[2].symlink_to(target)
    for path in [*left, left[1] / "sub"]:
        os.lchown(path, uid, uid)
    (shared_folder / "graders").write_text("root's")
    assert uids.remove_leftovers(None) == 0 and uids.remove_leftovers(4242) == 0
    assert uids.remove_leftovers(uid) == 3
    assert sorted(p.name for p in shared_folder.iterdir()) == ["graders"]
    assert target.read_text() == "kept"


PRIVATE_TMP = """
import errno, glob, os
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    seen = {
        "host_file": os.path.exists("{host_file}"),
        "others": len(glob.glob("/tmp/tt-sandbox-*")),  # its own folder, bound back: 1
        "x11_mark": os.path.exists("{x11}/{mark}"),  # left by the last run of this child
    }
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        with open(os.path.join(folder, "{mark}"), "wb") as fh:
            fh.write(b"x" * 4096)
    os.makedirs("{x11}", exist_ok=True)
    open("{x11}/{mark}", "w").close()
    try:  # RAM no memory limit counts: a tmpfs of 64 MiB
        with open("/dev/shm/{mark}-flood", "wb") as fh:
            for _ in range(100):
                fh.write(b"x" * (1 << 20))
        seen["flood"] = "written"
    except OSError as exc:
        seen["flood"] = errno.errorcode.get(exc.errno, str(exc.errno))
    os.remove("/dev/shm/{mark}-flood")
    code = sum(v << i for i, v in enumerate((seen["host_file"], seen["others"] != 1, seen["x11_mark"])))
    return Tensor(np.array([code, seen["flood"] == "ENOSPC"], np.float32))
"""


def test_a_child_gets_fresh_shared_folders_that_die_with_it(shared: Path) -> None:
    """Red-teaming: a world-writable folder owned by someone else, like /tmp/.X11-unix, kept a
    child's files across restarts (only the top level of the shared folders was cleaned), and
    /dev/shm's files used RAM that no limit counted. In its own mount namespace the child now
    gets a fresh, 64 MiB tmpfs over /tmp, /var/tmp, /dev/shm, ...: it sees none of the host's
    files nor other gradings' folders, nothing it writes reaches the host, and a restart starts
    empty."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no mount namespace for the child: {spawn.namespace_prefix()[1]}")
    mark = f"tt-private-{uuid.uuid4().hex}"
    host_file = Path(tempfile.gettempdir()) / f"{mark}-host"
    host_file.write_text("the grader's")
    x11 = Path(tempfile.mkdtemp(prefix="tt-x11-"))  # like /tmp/.X11-unix: 1777, root's
    x11.chmod(0o1777)
    body = PRIVATE_TMP.replace("{mark}", mark).replace("{host_file}", str(host_file))
    try:
        with Sandbox(_write(shared, "private_tmp", body.replace("{x11}", str(x11)))) as box:
            assert box.start()["status"] == "ok"
            layer = box.isolation["tmp"]
            assert layer["active"] and "/tmp" in layer["why"] and "/dev/shm" in layer["why"], layer
            for run in range(2):
                code, capped = _value(box)
                assert code == 0, f"run {run}: host file, other folders, or last run's mark seen"
                assert capped == 1.0  # the flood hit ENOSPC at 64 MiB
                assert not list(Path("/tmp").glob(f"{mark}")) and not list(x11.iterdir())
                assert not list(Path("/dev/shm").glob(f"{mark}*"))
                box.kill()  # the next request restarts the child
                assert box.start()["status"] == "ok"
            assert box.restarts == 2
    finally:
        host_file.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(x11)], check=False)


def test_private_tmp_binds_back_what_the_child_needs_inside_a_shared_folder() -> None:
    """A CI clone under /tmp keeps its venv there: the paths the child needs inside a shared
    folder are bound back in place (the top-most of nested ones, once), and a shared folder
    that a needed path holds whole, or lies inside, is left uncovered."""
    keep = ["/tmp/clone/.venv", "/tmp/clone/.venv/lib", "/tmp/tt-sandbox-1-x", "/usr/lib", ""]
    plan, whole = confine.tmp_plan(keep, ["/tmp", "/dev/shm", "/tmpfoo"])
    assert plan == {
        "/tmp": ["/tmp/clone/.venv", "/tmp/tt-sandbox-1-x"],
        "/dev/shm": [],
        "/tmpfoo": [],  # a sibling whose name starts with "/tmp" is not inside it
    }
    assert whole == []
    plan, whole = confine.tmp_plan(["/var/tmp", "/"], ["/var/tmp", "/tmp"])
    assert plan == {} and whole == ["/var/tmp", "/tmp"]  # "/" holds everything
    plan, whole = confine.tmp_plan(["/var/tmp/"], ["/var/tmp", "/tmp"])
    assert plan == {"/tmp": []} and whole == ["/var/tmp"]


def test_the_package_folders_are_kept_though_an_editable_install_finds_them_by_a_finder() -> None:
    """A CI clone under /tmp with an editable install: the child found tinytorch through the
    install's finder, not sys.path, so the fresh /tmp kept only tinytorch/milestone07 and every
    child died on import. The package folders themselves are now among the needed paths."""
    import tinytorch.extensions

    import tinytorch
    from tinytorch.sandbox import parent as sandbox

    needed = spawn.needed_paths(str(sandbox._HERE))
    for folder in [*tinytorch.__path__, *tinytorch.extensions.__path__]:
        assert os.path.realpath(folder) in needed, folder
    checkout = str(Path(tinytorch.__path__[0]).parent)
    plan, _whole = confine.tmp_plan([str(sandbox._HERE), *spawn.package_dirs()], [checkout])
    assert tinytorch.__path__[0] in plan[checkout]  # bound back whole, not only milestone07


READS_REFERENCE = """
import os
import numpy as np
import tinytorch
from tinytorch.core.tensor import Tensor

def _size(path):
    try:
        with open(path, "rb") as fh:
            return len(fh.read())
    except OSError:
        return -1

def _copies_nearby():  # a reference reachable from the child's own folder, which it cannot
    found = 0            # list but can guess names in (the mounts staged there)
    root = os.path.dirname(os.getcwd())
    tops = [os.path.join(root, s, f"{n}-{m}") for s in ("stage", "stage-reference")
            for n in range(3) for m in range(4)]
    for top in [root, *tops]:
        for folder, _dirs, files in os.walk(top):
            found += sum(f in ("acceleration.py", "references.py")
                         and _size(os.path.join(folder, f)) > 0 for f in files)
    return found

def fused_gelu(x):
    pkg = tinytorch.__path__[0]
    checkout = os.path.dirname(pkg)
    return Tensor(np.array([
        _copies_nearby(),  # red-teaming found the real tinytorch/ staged in the sandbox folder
        _size(os.path.join(pkg, "perf", "acceleration.py")),  # the bundled reference
        _size(os.path.join(pkg, "milestone07", "references.py")),  # the grader's float64 ones
        _size(os.path.join(pkg, "core", "tensor.py")),  # the package itself: still there
        os.path.exists(os.path.join(checkout, "tests")),  # mutants, a student base
        os.path.exists(os.path.join(checkout, ".git")),  # every version, compressed
    ], np.float64))
"""


@pytest.mark.parametrize("grading", [True, False])
def test_a_grading_child_cannot_read_the_reference_or_the_checkout(
    shared: Path, grading: bool
) -> None:
    """Red-teaming: code that read the reference's source at run time and compiled it with an
    unused name added to each code object had other fingerprints, and passed own-work. In grading
    mode the child's mount namespace now shows the reference's files empty and covers a source
    checkout but for the packages and the venv; a practice run reads them as before."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no mount namespace for the child: {spawn.namespace_prefix()[1]}")
    checkout = spawn.checkout_root()
    with Sandbox(_write(shared, "reads_reference", READS_REFERENCE), grading=grading) as box:
        assert box.start()["status"] == "ok"
        nearby, ref, refs64, tensor, tests, git = _value(box)
        assert tensor > 0  # the child still imports and reads the package
        if grading:
            assert (nearby, ref, refs64) == (0, 0, 0), box.isolation.get("reference")
            if checkout and (Path(checkout) / ".git").exists():
                assert not git, box.isolation.get("reference")
            if checkout and (Path(checkout) / "tests").is_dir():
                # pytest puts tests/ on the import path, and what is on it stays; a grader's
                # process (tito) has no such entry, and then the child sees no tests/
                on_path = os.path.join(checkout, "tests") in map(os.path.realpath, sys.path)
                assert bool(tests) == on_path, box.isolation.get("reference")
            assert box.isolation["reference"]["active"], box.isolation["reference"]
        else:
            assert ref > 1000 and refs64 > 1000 and "reference" not in box.isolation


SYSV_SHM = """
import ctypes
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget({key}, 1 << 20, 0o1666)  # IPC_CREAT | 0666: outlives the process
    return Tensor(np.array([shmid], np.float64))
"""


def test_a_childs_sysv_shared_memory_never_reaches_the_host(shared: Path) -> None:
    """Red-teaming: the child shared the host's IPC namespace, so a SysV segment (or a message
    queue) it made outlived it, readable by the next grading, in RAM no cap counted. The child now
    has an IPC namespace of its own."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no namespaces for the child: {spawn.namespace_prefix()[1]}")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x7E570000 + (uuid.uuid4().int & 0xFFFF)
    try:
        with Sandbox(_write(shared, "sysv_shm", SYSV_SHM.replace("{key}", str(key)))) as box:
            assert box.start()["status"] == "ok"
            (shmid,) = _value(box)
            assert shmid >= 0  # the child made its segment
            assert libc.shmget(key, 0, 0) == -1  # ... in its own namespace: the host has none
        assert libc.shmget(key, 0, 0) == -1
    finally:
        found = libc.shmget(key, 0, 0)
        if found >= 0:
            libc.shmctl(found, 0, None)  # IPC_RMID: never leave one behind


def test_removing_a_sandbox_folder_survives_any_depth(tmp_path: Path) -> None:
    """Red-teaming: 1500 nested folders in the child's own made shutil.rmtree raise
    RecursionError (not OSError, so ignore_errors let it through): that grading was ERROR, and so
    was every later one, whose stale sweep met the same folder."""
    root = tmp_path / "tt-sandbox-1-deep"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(1500):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        procs.remove_tree(str(root))
        assert not root.exists()
    finally:  # left behind, it would break pytest's own cleanup of old temp folders
        subprocess.run(["rm", "-rf", str(root)], check=False)


FILLS_WORKDIR = """
import os
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    written = 0
    try:
        for i in range(8):  # 8 x 20 MiB, each under the 64 MiB file-size limit
            with open(f"fill-{i}.bin", "wb") as fh:
                for _ in range(20):
                    fh.write(b"x" * (1 << 20))
                    written += 1
    except OSError:
        pass
    own = os.path.exists(os.path.basename(__file__))  # its own copy is still beside it
    return Tensor(np.array([written, own], np.float64))
"""


def test_a_childs_workdir_is_a_capped_tmpfs_of_its_own(shared: Path) -> None:
    """Red-teaming: the workdir sat on the host's disk, where only the file-size limit held, so
    many files under it filled the disk (4 x 60 MiB). In its mount namespace the child's workdir
    is a tmpfs of its own, capped at 64 MiB, with the submission's copy moved in."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no mount namespace for the child: {spawn.namespace_prefix()[1]}")
    with Sandbox(_write(shared, "fills_workdir", FILLS_WORKDIR)) as box:
        assert box.start()["status"] == "ok"
        assert box.isolation["workdir"]["active"], box.isolation["workdir"]
        written, own = _value(box)
        assert own == 1.0
        assert 40 <= written <= 64, written  # MiB: stopped by the 64 MiB tmpfs, not at 160
        host_work = Path(box._root) / "work"
        assert not list(host_work.glob("fill-*")), "the child's files reached the host's disk"


READS_A_COPY = """
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    try:
        with open("{copy}", "rb") as fh:
            size = len(fh.read())
    except OSError:
        size = -1
    return Tensor(np.array([size], np.float64))
"""


@ROOT_ONLY
@pytest.mark.parametrize("grading", [True, False])
def test_a_grading_child_sees_no_copy_of_the_reference_elsewhere(
    shared: Path, grading: bool
) -> None:
    """Red-teaming: another clone on the machine (/work/ci) held the reference, and a grading
    child loaded it at its first call, past the own-work fingerprints: PASS. A grading child now
    sees only the system's top-level folders whole; the others are covered but for what it
    needs. A practice child still reads them."""
    if not spawn.namespace_prefix()[0]:
        pytest.skip(f"no mount namespace for the child: {spawn.namespace_prefix()[1]}")
    from tinytorch.release import reference_path

    elsewhere = Path(tempfile.mkdtemp(prefix="tt-another-clone-", dir="/"))
    try:
        elsewhere.chmod(0o755)
        copy = elsewhere / "tinytorch" / "perf" / "acceleration.py"
        copy.parent.mkdir(parents=True)
        copy.write_text(reference_path(17).read_text())
        copy.chmod(0o644)
        copy.parent.chmod(0o755)
        copy.parent.parent.chmod(0o755)
        body = READS_A_COPY.replace("{copy}", str(copy))
        with Sandbox(_write(shared, "reads_a_copy", body), grading=grading) as box:
            assert box.start()["status"] == "ok"
            (size,) = _value(box)
            if grading:
                assert size == -1, box.isolation.get("elsewhere")
                assert box.isolation["elsewhere"]["active"], box.isolation["elsewhere"]
            else:
                assert size == copy.stat().st_size
    finally:
        subprocess.run(["rm", "-rf", str(elsewhere)], check=False)


SLOW_AFTER_A_HANG = """
import time
import numpy as np
from tinytorch.core.tensor import Tensor

time.sleep(0.55)  # every import, the restart's too, takes at least this

def fused_gelu(x):
    if x.data.size == 2:
        while True:
            pass
    time.sleep(1.0)
    return Tensor(np.zeros(x.data.shape, np.float32))
"""


@pytest.mark.slow
@pytest.mark.timing
def test_a_call_after_a_restart_gets_its_whole_timeout(shared: Path) -> None:
    """The restart after a hang imports within the call's timeout, and the call then gets its own:
    when both shared one deadline, a 0.3-0.5 s restart left a 0.5 s case almost nothing (CI
    under load timed out cases that pass). Both sleeps are lower bounds, so the restart and the
    call together take more than the 1.5 s timeout on any machine, however fast: one shared
    deadline always times out, and the elapsed time always exceeds 1.5 s."""
    with Sandbox(_write(shared, "slow_after_hang", SLOW_AFTER_A_HANG)) as box:
        assert box.start()["status"] == "ok"
        hang = {"fn": "fused_gelu", "args": [np.zeros(2, np.float32)], "kwargs": {}}
        assert box.request(hang, 1.0)["status"] == "timeout"
        slow = {"fn": "fused_gelu", "args": [np.zeros(1, np.float32)], "kwargs": {}}
        start = time.perf_counter()
        reply = box.request(slow, 1.5)  # restart (>= 0.55 s) + 1.0 s: more than 1.5 s in all
        assert reply["status"] == "ok", reply
        assert box.restarts == 1 and time.perf_counter() - start > 1.5


# ---- the timeout rule: CPU time, a wall-clock guard for blocking, a crash is a crash ------------
LOAD_KERNELS = """
import os, signal, time
import numpy as np
from tinytorch.core.tensor import Tensor

def fused_gelu(x):
    n = x.data.size
    if n == 1:  # a busy loop
        while True:
            pass
    if n == 2:  # sleeps: almost no CPU
        time.sleep(60)
    if n == 3:  # a segfault
        os.kill(os.getpid(), signal.SIGSEGV)
    if n == 5:  # two processes busy at once, as two BLAS threads are
        if os.fork() == 0:
            while True:
                pass
        while True:
            pass
    if n == 4:  # a fair amount of work: 0.25 s of its own CPU time
        start = time.process_time()
        while time.process_time() - start < 0.25:
            pass
    return Tensor(np.zeros(x.data.shape, np.float32))
"""


def _gelu(box: Sandbox, n: int, timeout: float) -> dict:
    return box.request(
        {"fn": "fused_gelu", "args": [np.zeros(n, np.float32)], "kwargs": {}}, timeout
    )


@pytest.mark.exclusive
@pytest.mark.timing
def test_a_crash_under_a_tiny_budget_on_a_busy_machine_is_a_crash(
    shared: Path, cpu_hogs: Callable[[int], int]
) -> None:
    """The budget of test_timeouts_and_crashes_get_lessons_of_their_own, 0.5 s: under load a
    crash was labelled a timeout, "no answer within 0.5 s", because the restart after it (a
    fresh interpreter importing NumPy: 1.7-1.9 s of wall time with 6 hogs per core) had to fit
    in the call's 0.5 s of wall time, and a dead worker reaches the pipe only once its namespace
    wrappers have noticed. Each crash here after the first follows such a restart."""
    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        cpu_hogs(6)
        for _ in range(3):
            reply = _gelu(box, 3, 0.5)
            assert reply["status"] == "crash", reply
            assert "SIGSEGV" in reply["error"], reply


@pytest.mark.timing
def test_a_sleeping_child_hits_the_wall_guard_and_says_so(shared: Path) -> None:
    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        start = time.monotonic()
        reply = _gelu(box, 2, 0.3)
        took = time.monotonic() - start
    assert reply["status"] == "timeout" and reply["limit"] == "blocked", reply
    assert reply["error"].startswith("blocked: no answer within ")
    assert "of wall time, using little CPU" in reply["error"]
    assert reply["cpu_s"] < 0.3 <= reply["wall_s"] <= took
    assert took < 60  # the guard, not the sleep, ended it


@pytest.mark.exclusive
@pytest.mark.timing
def test_a_busy_loop_hits_the_cpu_bound_and_says_so(
    shared: Path, cpu_hogs: Callable[[int], int]
) -> None:
    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        cpu_hogs(2)
        reply = _gelu(box, 1, 0.3)
    assert reply["status"] == "timeout" and reply["limit"] == "cpu", reply
    assert reply["error"].startswith("no answer within 0.3 s of CPU time"), reply
    assert 0.3 <= reply["cpu_s"] <= reply["wall_s"], reply


@pytest.mark.exclusive
@pytest.mark.timing
def test_a_kernel_within_its_cpu_budget_passes_on_a_busy_machine(
    shared: Path, cpu_hogs: Callable[[int], int]
) -> None:
    """0.25 s of CPU under a 1 s budget, with 6 hogs per core: about 1.75 s of wall time, which
    a wall-clock timeout called a TIMEOUT."""
    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        cpu_hogs(6)
        replies = [_gelu(box, 4, 1.0) for _ in range(3)]
    assert [r["status"] for r in replies] == ["ok"] * 3, replies


def test_the_budget_reads_the_whole_tree_of_a_namespaced_child(shared: Path) -> None:
    """The meter reads the host's pids of the child's tree (the wrapper, the namespace's init and
    the worker), so the worker's CPU is seen though it is pid 2 inside its namespace."""
    from tinytorch.sandbox.parent import Budget

    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        meter = box._meter
        assert meter is not None and meter.ok and len(meter.pids) >= 2, meter.pids
        budget = Budget(meter, 10.0)
        assert _gelu(box, 4, 10.0)["status"] == "ok"
        budget.over()
        assert meter.cpu() - budget.cpu0 >= 0.2  # the 0.25 s of CPU the call spent


@pytest.mark.exclusive
@pytest.mark.timing
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to run two at once")
def test_two_busy_processes_share_the_charge_as_threads_of_one_kernel(shared: Path) -> None:
    """Two processes of the tree busy at once spend 2 s of CPU per second: charged as one, a
    1 s budget still means about 1 s of wall time on a quiet machine, not 0.5 s."""
    with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
        assert box.start()["status"] == "ok"
        reply = _gelu(box, 5, 1.0)
    assert reply["status"] == "timeout" and reply["limit"] == "cpu", reply
    assert reply["wall_s"] >= 0.8, reply  # summed CPU would have stopped it at 0.5 s


@pytest.mark.timing
def test_without_proc_the_timeout_falls_back_to_wall_time(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where nothing of the tree can be read (no /proc: not Linux), the old rule holds: the
    timeout is wall time, and the reply says so ("wall")."""
    real_init = procs.TreeMeter.__init__

    def unreadable(self: procs.TreeMeter, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)
        self.ok = False

    monkeypatch.setattr(procs.TreeMeter, "__init__", unreadable)
    replies = []
    for n in (1, 2):  # a busy loop, a sleep: each in a fresh child (a restart takes its time)
        with Sandbox(_write(shared, "load_kernels", LOAD_KERNELS)) as box:
            assert box.start()["status"] == "ok"
            replies.append(_gelu(box, n, 0.3))
    for reply in replies:
        assert reply["status"] == "timeout" and reply["limit"] == "wall", reply
        assert reply["error"] == "no answer within 0.3 s", reply
        assert 0.3 <= reply["wall_s"] < 5.0, reply
