"""Adversarial submissions against the sandbox's transport and containment (issue 9, B1's half).

Each attack is a correct student module (tests/mutants/student_base.py) plus a hostile addition,
graded by a separate `tito milestone run 07 --no-part-b --json` process. Each asserts: the exact
exit code and verdict; the result file still the same a moment after the grader exited; no
process of the attack left (a unique mark in their command lines); no payload run in the grader
(the payload writes a marker file); bounded time and grader memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
PACKAGE_FILE = ROOT / "tinytorch" / "milestone07" / "references.py"
MAX_RSS_KB = 400_000  # the grader itself; a 3 GiB frame must not get near
RUNNER = """
import resource, sys
from tinytorch.cli.main import main
code = main(["milestone", "run", "07", "--impl", sys.argv[1], "--no-part-b", "--json", sys.argv[2],
             "--timeout", "2"])
# VmHWM: this process's own peak (ru_maxrss would also carry the forking pytest worker's size)
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print("MAXRSS=%s" % (hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
      file=sys.stderr)
sys.exit(code)
"""


@dataclass
class Run:
    code: int
    verdict: str | None
    doc: dict
    seconds: float
    maxrss_kb: int
    stderr: str
    stdout: str = ""


@pytest.fixture
def drop() -> Iterator[Path]:
    """A folder anyone may write (the sandbox child runs as `nobody` under root)."""
    path = Path(tempfile.mkdtemp(prefix="tt-attack-"))
    path.chmod(0o777)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def _pgrep(mark: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def grade(
    tmp: Path,
    body: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    *,
    leaves_processes: bool = False,
) -> Run:
    """Grade BASE + body in a grader process of its own. leaves_processes: the attack starts
    processes meant to outlive the grader; the result file is read again 1.5 s later."""
    impl = tmp / "attack.py"
    impl.write_text(BASE.read_text() + body)
    impl.chmod(0o644)
    out = tmp / "result.json"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(impl), str(out)],
        check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    seconds = time.monotonic() - start
    rss = [int(line[7:]) for line in done.stderr.splitlines() if line.startswith("MAXRSS=")]
    assert rss, f"the grader did not finish normally ({done.returncode}): {done.stderr[-2000:]}"
    text = out.read_text() if out.exists() else ""
    if leaves_processes:
        time.sleep(1.5)  # anything left behind would rewrite the file now
        assert (out.read_text() if out.exists() else "") == text, "the result file changed later"
    doc = json.loads(text) if text else {}
    verdict = doc.get("verdict")
    return Run(done.returncode, verdict, doc, seconds, rss[-1], done.stderr, done.stdout)


def _case_status(run: Run, name: str) -> str:
    return next(c["status"] for c in run.doc["cases"] if c["name"] == name)


def _check(run: Run, name: str) -> dict:
    return next(c for c in run.doc["checks"] if c["name"] == name)


def _bounded(run: Run, seconds: float = 60) -> None:
    assert run.seconds < seconds, run.seconds
    assert run.maxrss_kb < MAX_RSS_KB, run.maxrss_kb


PAYLOAD = """
class Payload:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))
"""


def test_object_array_output_with_a_reduce_payload(tmp_path: Path, drop: Path) -> None:
    marker = drop / "payload-ran"
    body = PAYLOAD.format(marker=str(marker)) + (
        "\ndef fused_gelu(x):\n    t = Tensor(np.zeros(1))\n"
        "    t.data = np.array([Payload()] * 3, dtype=object)\n    return t\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _case_status(run, "fused_gelu/zeros") == "fail"
    assert not marker.exists()
    _bounded(run)


def test_reduce_payload_appended_to_the_audit_records(tmp_path: Path, drop: Path) -> None:
    marker = drop / "payload-ran"
    body = PAYLOAD.format(marker=str(marker)) + (
        "\n_ok = tiled_matmul\ndef tiled_matmul(a, b, tile_size=64):\n"
        "    from tinytorch.sandbox.child import audit\n"
        "    audit.RECORDS.append(Payload())\n    return _ok(a, b, tile_size)\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    audit = _check(run, "tiling audit")
    assert audit["status"] == "fail" and "tampered" in audit["detail"], audit
    assert not marker.exists()
    _bounded(run)


FORGE = """
import os as _os, stat as _stat
def _pipes():  # every pipe this process holds, found through /proc/self/fd
    for name in _os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and _stat.S_ISFIFO(_os.fstat(int(name)).st_mode):
                yield int(name)
        except OSError:
            pass
_ok_gelu = fused_gelu
def fused_gelu(x):
    for fd in _pipes():
        try:
            _os.write(fd, {data})
        except OSError:
            pass
    return _ok_gelu(x)
"""


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x04\x95" + b"garbage" * 50,  # a pickle-looking frame
        b"TTW1" + (2**31).to_bytes(4, "little") + (3 << 30).to_bytes(8, "little"),  # 3 GiB
    ],
    ids=["garbage", "huge"],
)
def test_frames_forged_into_the_reply_pipe(tmp_path: Path, data: bytes) -> None:
    run = grade(tmp_path, FORGE.format(data=repr(data)))
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _case_status(run, "fused_gelu/zeros") in ("protocol", "fail")
    assert all(c["status"] == "pass" for c in run.doc["cases"] if c["group"] != "fused_gelu")
    _bounded(run)


def test_a_well_formed_frame_with_another_id(tmp_path: Path) -> None:
    from tinytorch.sandbox.child import protocol as wire

    body = FORGE.format(data=repr(wire.encode(999, {"status": "raised", "error": "forged"})))
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    gelu = [c for c in run.doc["cases"] if c["group"] == "fused_gelu"]
    assert {c["status"] for c in gelu} == {"protocol"}
    assert "a reply to request 999" in gelu[0]["detail"] and "channel" in gelu[0]["lesson"]
    assert all(c["blame"] == ["fused_gelu"] for c in gelu)
    assert "PROTOCOL" in run.stdout  # the terminal report names it too
    _bounded(run)


def _left_with(mark: str) -> list[int]:
    """Processes whose environment or command line holds `mark` (what an attack left running)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            for part in ("environ", "cmdline"):
                try:
                    if mark.encode() in Path(f"/proc/{entry}/{part}").read_bytes():
                        found.append(int(entry))
                        break
                except OSError:
                    pass
    return found


FORGE_REPLY = """
import os as _os, sys as _sys
from tinytorch.sandbox.child import protocol as _wire
_ok_gelu = fused_gelu
def fused_gelu(x):
    if _arr(x).shape == (8, 9):  # the zeros case: answer it with a frame of our own
        frame = _sys._getframe()
        while frame is not None and "msg_id" not in frame.f_locals:  # the child's request loop
            frame = frame.f_back
        _wire.write_frame(frame.f_locals["rep_fd"], frame.f_locals["msg_id"], {forged!r})
        _os._exit(0)
    return _ok_gelu(x)
"""


@pytest.mark.parametrize(
    "forged",
    [
        {"status": []},
        {"status": "raised"},
        {"status": "ok"},
        {"status": "not_tensor"},
        {"status": "timeout", "error": "forged"},
        {"status": "unloadable", "error": "forged"},
    ],
    ids=["list_status", "raised_no_error", "ok_no_output", "not_tensor_no_type", "timeout",
         "unloadable"],
)  # fmt: skip
def test_a_forged_reply_with_the_right_id_is_a_protocol_failure(
    tmp_path: Path, forged: dict
) -> None:
    mark = f"FORGED-{uuid.uuid4().hex}"
    run = grade(tmp_path, FORGE_REPLY.format(forged=forged), env={"TINYTORCH_MARK": mark})
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    case = next(c for c in run.doc["cases"] if c["name"] == "fused_gelu/zeros")
    assert case["status"] == "protocol" and "malformed reply" in case["detail"], case
    assert case["blame"] == ["fused_gelu"]
    assert all(c["status"] == "pass" for c in run.doc["cases"] if c["group"] != "fused_gelu")
    assert _left_with(mark) == []
    _bounded(run)


def test_an_output_far_larger_than_asked_for(tmp_path: Path) -> None:
    body = (
        "\ndef fused_gelu(x):\n    return Tensor(np.zeros((x.data.size + 10) * 1000, np.float32))\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _case_status(run, "fused_gelu/zeros") == "protocol"
    _bounded(run)


def test_a_slightly_wrong_shape_stays_a_named_failure(tmp_path: Path) -> None:
    body = "\n_g = fused_gelu\ndef fused_gelu(x):\n    return Tensor(np.concatenate([_g(x).data.ravel()] * 2))\n"
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _case_status(run, "fused_gelu/zeros") == "fail"


ORPHANS = """
import subprocess as _sp
for _i in range(20):
    _sp.Popen(["/bin/sh", "-c", "sleep 300; : {mark}"], start_new_session=True,
              stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)
"""


def test_twenty_orphans_do_not_outlive_the_grader(tmp_path: Path) -> None:
    mark = f"ORPHAN-{uuid.uuid4().hex}"
    run = grade(tmp_path, ORPHANS.format(mark=mark), leaves_processes=True)
    assert (run.code, run.verdict) == (0, "PASS")
    assert _pgrep(mark) == []
    _bounded(run)


DAEMON = """
import os as _os
_first = _os.fork()
if _first == 0:  # a daemon that sheds every mark: its own session, a double fork, no environment
    _os.setsid()
    if _os.fork() == 0:
        _os.execv("/usr/bin/env", ["env", "-i", "/bin/sh", "-c", "sleep 300; : {mark}"])
    _os._exit(0)
_os.waitpid(_first, 0)
"""


@pytest.mark.parametrize("namespaces", ["1", "0"], ids=["namespaces", "no_namespaces"])
def test_a_double_forked_daemon_with_a_clean_environment_is_killed(
    tmp_path: Path, namespaces: str
) -> None:
    mark = f"DAEMON-{uuid.uuid4().hex}"
    env = {"TINYTORCH_SANDBOX_NAMESPACES": namespaces}
    run = grade(tmp_path, DAEMON.format(mark=mark), env=env, leaves_processes=True)
    assert (run.code, run.verdict) == (0, "PASS")
    layer = run.doc["isolation"]["orphans"]
    assert layer["active"] is True and "no_new_privs" in layer["why"], layer
    assert _pgrep(mark) == []
    _bounded(run)


def test_killpg_at_import_does_not_touch_the_grader(tmp_path: Path) -> None:
    body = "\nimport os as _os, signal as _sig\n_os.killpg(_os.getpgrp(), _sig.SIGKILL)\n"
    run = grade(tmp_path, body)
    assert run.code == 1 and run.verdict == "NOT_PASSED"  # the student's own import died
    assert {c["status"] for c in run.doc["cases"]} == {"error"}
    _bounded(run)


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL", "SIGTERM"])
def test_signals_to_the_parent_are_refused(tmp_path: Path, sig: str) -> None:
    body = (
        "\nimport os as _os, signal as _sig\n"
        f"for _p in (_os.getppid(), 1):\n    try:\n        _os.kill(_p, _sig.{sig})\n"
        "    except OSError:\n        pass\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (0, "PASS")
    _bounded(run, 30)


def test_a_stopped_child_is_killed_at_its_timeout(tmp_path: Path) -> None:
    body = (
        "\nimport os as _os, signal as _sig\n"
        "def fused_gelu(x):\n    _os.kill(_os.getpid(), _sig.SIGSTOP)\n"
    )
    run = grade(tmp_path, body, leaves_processes=True)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _case_status(run, "fused_gelu/zeros") == "timeout"
    _bounded(run, 40)


def test_a_leftover_cannot_kill_the_next_graders_children(tmp_path: Path) -> None:
    mark = f"KILLER-{uuid.uuid4().hex}"
    killer = (
        "\nimport subprocess as _sp\n"
        "_sp.Popen(['/bin/sh', '-c', 'while :; do pkill -9 -f python; sleep 0.05; done; : "
        + mark
        + "'], start_new_session=True, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)\n"
    )
    first = grade(tmp_path, killer, leaves_processes=True)
    assert (first.code, first.verdict) == (1, "NOT_PASSED")  # it kills its own child too
    assert _pgrep(mark) == []
    (tmp_path / "next").mkdir()
    second = grade(tmp_path / "next", "")
    assert (second.code, second.verdict) == (0, "PASS")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only the uid switch protects files")
def test_writing_the_package_and_the_result_folder_is_refused(tmp_path: Path, drop: Path) -> None:
    before = hashlib.sha256(PACKAGE_FILE.read_bytes()).hexdigest()
    body = (
        "\nimport os as _os\n"
        f"for _p in ({str(PACKAGE_FILE)!r}, {str(tmp_path / 'result.json')!r}, "
        f"{str(tmp_path / 'forged.json')!r}):\n"
        "    try:\n        with open(_p, 'a') as _f:\n            _f.write('# pwned')\n"
        f"        open({str(drop / 'wrote')!r} + _os.path.basename(_p), 'w').close()\n"
        "    except OSError:\n        pass\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (0, "PASS")
    assert hashlib.sha256(PACKAGE_FILE.read_bytes()).hexdigest() == before
    assert not (tmp_path / "forged.json").exists()
    assert list(drop.iterdir()) == []


def test_a_memory_bomb_is_a_named_failure(tmp_path: Path) -> None:
    body = "\ndef fused_gelu(x):\n    big = np.ones(5 << 30, dtype=np.uint8)\n    return Tensor(big[:1])\n"
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    case = next(c for c in run.doc["cases"] if c["name"] == "fused_gelu/zeros")
    assert case["status"] == "error" and "MemoryError" in case["detail"], case
    _bounded(run)


def test_a_bounded_fork_bomb(tmp_path: Path) -> None:
    mark = f"FORK-{uuid.uuid4().hex}"
    body = (
        "\nimport os as _os, subprocess as _sp\n_n = 0\n"
        "try:\n    for _i in range(2000):\n"
        f"        _sp.Popen(['/bin/sh', '-c', 'sleep 300; : {mark}'], stdout=_sp.DEVNULL)\n"
        "        _n += 1\nexcept OSError:\n    pass\n"
    )
    run = grade(tmp_path, body, timeout=180, leaves_processes=True)
    assert run.code in (0, 1)  # an import that ran out of processes may or may not finish
    assert _pgrep(mark) == []
    _bounded(run, 120)


WHOLE = (  # a whole-matrix product, then a trick to hide it from the audit
    "\ndef tiled_matmul(a, b, tile_size=64):\n    out = Tensor(np.matmul(_arr(a), _arr(b)))\n"
    "    {trick}\n    return out\n"
)


@pytest.mark.parametrize(
    ("trick", "status", "says"),
    [
        ("audit.RECORDS.clear()", "fail", "tampered with: the audit's record list was changed"),
        ("audit.record = lambda *a, **k: None", "fail", "audit.record was replaced"),
        ("audit.AuditArray = np.ndarray", "fail", "audit.AuditArray was replaced"),
        ("audit.AuditArray.__array_ufunc__ = None", "error", "does not support ufuncs"),
        (
            "audit.AuditArray.__getitem__ = np.ndarray.__getitem__",
            "fail",
            "__getitem__ was replaced",
        ),
        ("audit.RECORDS[:] = [('matmul', ((2, 2), (2, 2)))]", "fail", "record list was changed"),
        ("audit._LOG[:] = []", "fail", "tampered"),
        ("np.array_equal = lambda *a, **k: True", "fail", "numpy.array_equal was replaced"),
        ("pass", "fail", "larger than the tile"),  # the plain cheat
    ],
    ids=["clear", "record", "class", "method", "getitem", "fake", "log", "numpy", "plain"],
)
def test_audit_tampering_is_a_failure(tmp_path: Path, trick: str, status: str, says: str) -> None:
    trick = "from tinytorch.sandbox.child import audit; " + trick
    run = grade(tmp_path, WHOLE.format(trick=trick))
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    audit = _check(run, "tiling audit")
    assert audit["status"] == status and says in audit["detail"], audit


def test_mutation_hidden_by_patching_array_equal(tmp_path: Path) -> None:
    body = (
        "\nnp.array_equal = lambda *a, **k: True\n_g = fused_gelu\n"
        "def fused_gelu(x):\n    y = _g(x)\n    x.data[...] = 0\n    return y\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    assert _check(run, "inputs not mutated")["status"] == "fail"


def test_output_floods_are_discarded(tmp_path: Path) -> None:
    body = (
        "\nimport os as _os, sys as _sys\n_chunk = b'x' * (1 << 20)\n"
        "for _i in range(100):\n    _os.write(1, _chunk)\n    _os.write(2, _chunk)\n"
        "print('y' * (50 << 20))\nprint('z' * (50 << 20), file=_sys.stderr)\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (0, "PASS")
    _bounded(run)


def test_the_child_never_loads_the_references_or_the_grader(tmp_path: Path) -> None:
    body = (
        "\nimport sys as _sys\n_g = fused_gelu\n"
        "def fused_gelu(x):\n"
        "    leaked = [m for m in ('tinytorch.milestone07.references', 'tinytorch.milestone07.part_a',\n"
        "              'tinytorch.perf.acceleration') if m in _sys.modules]\n"
        "    return _g(x) if not leaked else Tensor(np.full(x.shape, len(leaked), np.float32))\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (0, "PASS")


def test_a_product_the_audit_cannot_see_is_not_observed_with_a_lesson(tmp_path: Path) -> None:
    body = (
        "\ndef tiled_matmul(a, b, tile_size=64):\n"
        "    return Tensor(_arr(a).view(np.ndarray) @ _arr(b).view(np.ndarray))\n"
    )
    run = grade(tmp_path, body)
    audit = _check(run, "tiling audit")
    assert audit["status"] == "not_observed" and audit["blame"] == ["tiled_matmul"]
    assert "np.matmul" in audit["lesson"]  # the verdict rule for not_observed is CheckResult.ok's


def test_a_tensor_whose_data_raises_is_a_named_error(tmp_path: Path) -> None:
    body = (
        "\nclass Sneaky(Tensor):\n    @property\n    def data(self):\n"
        "        raise RuntimeError('gotcha')\n    @data.setter\n    def data(self, v):\n"
        "        pass\n"
        "def fused_gelu(x):\n    return Sneaky(np.zeros(1))\n"
    )
    run = grade(tmp_path, body)
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    case = next(c for c in run.doc["cases"] if c["name"] == "fused_gelu/zeros")
    assert case["status"] == "error" and "gotcha" in case["detail"], case


def test_protocol_is_a_result_status_of_its_own() -> None:
    from tinytorch.milestone07.results import CaseResult, PartAResult
    from tinytorch.render.json_doc import SCHEMA
    from tinytorch.render.terminal import MARK

    case_enum = SCHEMA["properties"]["cases"]["items"]["properties"]["status"]["enum"]
    check_enum = SCHEMA["properties"]["checks"]["items"]["properties"]["status"]["enum"]
    assert "protocol" in case_enum and "protocol" in check_enum and MARK["protocol"] == "PROTOCOL"
    broken = CaseResult("fused_gelu/zeros", "fused_gelu", "", "protocol", None, None, "", "", 0.0)
    result = PartAResult("NOT_PASSED", "x.py", 0, [broken], [], [], 0.0)
    assert result.stalled() == {"fused_gelu"}  # Part B does not time a function that broke it


# ---- products the audit cannot see, limits, ptrace (issue 9 audit gap 9) -------------------------
THROUGH_TORCH = """
import torch as _torch
def tiled_matmul(a, b, tile_size=64):  # copied into torch, multiplied there
    A = _torch.tensor(_arr(a).tolist(), dtype=_torch.float32)
    B = _torch.tensor(_arr(b).tolist(), dtype=_torch.float32)
    return Tensor((A @ B).numpy())
"""
THROUGH_SIMD = """
from tinytorch.extensions import simd as _simd
assert _simd.available()[0], _simd.available()[1]  # built at import, not inside a timed call
def tiled_matmul(a, b, tile_size=64):  # the bundled C++ kernel
    A = np.array(_arr(a).tolist(), dtype=np.float32)
    return Tensor(_simd.matmul(A, np.array(_arr(b).tolist(), dtype=np.float32)))
"""


def _simd_or_skip() -> None:
    from tinytorch.extensions import simd

    ok, why = simd.available()
    if not ok:
        pytest.skip(f"the C++ SIMD kernels are not available here: {why}")


@pytest.mark.parametrize("through", ["torch", "simd"])
def test_a_product_through_torch_or_the_simd_kernels_is_not_observed(
    tmp_path: Path, drop: Path, through: str
) -> None:
    if through == "torch":
        pytest.importorskip("torch", reason="torch is not installed")
    else:
        _simd_or_skip()
    body = THROUGH_TORCH if through == "torch" else THROUGH_SIMD
    run = grade(tmp_path, body, env={"TINYTORCH_CACHE_DIR": str(drop)})  # a cache nobody may write
    assert (run.code, run.verdict) == (1, "NOT_PASSED")
    audit = _check(run, "tiling audit")
    assert audit["status"] == "not_observed" and "could not be verified" in audit["detail"], audit
    assert all(c["status"] == "pass" for c in run.doc["cases"])  # right answers, unseen tiling
    _bounded(run, 120)


def _limited(tmp_path: Path, body: str, **limits: int) -> tuple[dict, list[int]]:
    """One fused_gelu call in a Sandbox with the given limits; (reply, processes left after)."""
    from tinytorch.milestone07.boundary import open_sandbox as Sandbox

    mark = f"LIMIT-{uuid.uuid4().hex}"
    impl = tmp_path / "limited.py"
    impl.write_text(BASE.read_text() + body)
    with Sandbox(str(impl), {"TINYTORCH_MARK": mark}, limits=limits) as box:
        assert box.start()["status"] == "ok"
        reply = box.request(
            {"fn": "fused_gelu", "args": [np.zeros(3, np.float32)], "kwargs": {}}, 60
        )
    return reply, _left_with(mark)


def test_the_cpu_seconds_limit_is_a_named_failure(tmp_path: Path) -> None:
    body = "\ndef fused_gelu(x):\n    while True:\n        pass\n"
    start = time.monotonic()
    reply, left = _limited(tmp_path, body, cpu_seconds=2)
    assert reply["status"] == "crash" and "SIGXCPU" in reply["error"], reply
    assert time.monotonic() - start < 40  # the CPU limit, not the 60 s timeout, ended it
    assert left == []


def test_the_file_size_limit_is_a_named_failure(tmp_path: Path) -> None:
    body = (
        "\ndef fused_gelu(x):\n    with open('big.bin', 'wb') as f:\n"
        "        f.write(b'x' * (3 << 20))\n    return Tensor(x)\n"
    )
    reply, left = _limited(tmp_path, body, file_bytes=1 << 20)
    assert reply["status"] == "raised" and "File too large" in reply["error"], reply
    assert left == []


PTRACE = """
import ctypes as _ct, os as _os
_libc = _ct.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [_ct.c_long, _ct.c_long, _ct.c_void_p, _ct.c_void_p]
for _pid in sorted({{_os.getppid(), 1, *[int(p) for p in _os.listdir("/proc") if p.isdigit()]}}):
    if _pid in (0, _os.getpid()):
        continue
    if _libc.ptrace(16, _pid, None, None) == 0:  # PTRACE_ATTACH: someone to read or rewrite
        open({marker!r} + str(_pid), "w").close()
        _libc.ptrace(17, _pid, None, None)  # PTRACE_DETACH
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the uid drop is what refuses ptrace")
def test_ptrace_of_the_grader_is_refused(tmp_path: Path, drop: Path) -> None:
    marker = str(drop / "attached-")
    run = grade(tmp_path, PTRACE.format(marker=marker))
    assert (run.code, run.verdict) == (0, "PASS")
    assert run.doc["isolation"]["uid"]["active"] and run.doc["isolation"]["namespaces"]["active"]
    assert list(drop.iterdir()) == []  # not the grader, not the namespace's pid 1, nobody
    _bounded(run)
