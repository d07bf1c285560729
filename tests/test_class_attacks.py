"""A class of 30 in which 10 students each carry one attack on what runs outside the sandbox
(issue 28), and the 20 honest students get exactly the verdicts they get alone."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from tinytorch.classroom.classgrade import grade_and_report, grade_class
from tinytorch.classroom.similarity import REFERENCE
from tinytorch.milestone07.scoring import Points
from tinytorch.release import reference_path

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BASE = (ROOT / "tests" / "mutants" / "student_base.py").read_text()
BOB = (ROOT / "tests" / "classroom" / "bob.py").read_text()
FUNCS = ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
STUBS = "".join(f"def {f}(*args):\n    raise NotImplementedError\n\n\n" for f in FUNCS)
ZERO = "".join(f"def {f}(*args, **kwargs):\n    return 0\n\n\n" for f in FUNCS)
ESC = "\x1b[2J\x1b[32mPASS 30/30\x1b[0m\x1b]52;c;ZXZpbA==\x07"
HELPED = "from carol_helpers import *  # noqa: F403\n"
HONEST = {"base": BASE, "bob": BOB, "stubs": STUBS, "zero": ZERO, "helped": HELPED}


def _honest(folder: Path, kind: str, student: str) -> None:
    if kind == "helped":  # a folder submission whose file imports a helper beside it
        (folder / student).mkdir()
        (folder / student / "acceleration.py").write_text(HELPED)
        (folder / student / "carol_helpers.py").write_text(BASE)
    else:
        (folder / f"{student}.py").write_text(HONEST[kind])


def _deep(folder: Path, levels: int) -> None:
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(levels):  # past PATH_MAX: each made relative to its parent's descriptor
        os.mkdir("d", dir_fd=fd)
        new = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    os.close(fd)


def _attackers(subs: Path, target: Path) -> None:
    # 1. a link to a module of the grader's environment beside zero-returning kernels
    (subs / "m_link").mkdir()
    (subs / "m_link" / "acceleration.py").write_text(ZERO)
    (subs / "m_link" / "site.py").symlink_to(target)
    # 2. a notebook whose cell source is an integer
    nb = {"cells": [{"id": "a", "cell_type": "code", "source": 7, "metadata": {}, "outputs": [],
                     "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    (subs / "m_intcell.ipynb").write_text(json.dumps(nb))
    # 3. a correct file in a folder nested thousands deep
    (subs / "m_deep").mkdir()
    (subs / "m_deep" / "acceleration.py").write_text(BASE)
    _deep(subs / "m_deep", 3000)
    # 4. a percent file of 8,000 cells (a correct module in its exported cells)
    cells = ["#| default_exp perf.acceleration\n\n# %%\n#| export\n" + BASE + "\n"]
    cells += [f"# %%\nscratch_{i} = {i}\n\n" for i in range(8000)]
    (subs / "m_cells.py").write_text("".join(cells))
    # 5. two identical 1 MB files
    filler = "".join(f"def pad_{i}(a):\n    return a * {i} + {i % 7}\n" for i in range(25000))
    (subs / "m_big1.py").write_text(ZERO + filler)
    (subs / "m_big2.py").write_text(ZERO + filler)
    # 6. a FIFO named .py
    os.mkfifo(subs / "m_fifo.py")
    # 7. a 6 MB valid .py
    (subs / "m_huge.py").write_text(ZERO + "# " + "x" * (6 << 20) + "\n")
    # 8. two entries for one id
    (subs / "m_twice").mkdir()
    (subs / "m_twice" / "acceleration.py").write_text(ZERO)
    (subs / "m_twice.py").write_text(BASE)
    # 9. the reference with CR line ends
    ref = reference_path(17).read_text(encoding="utf-8")
    (subs / "m_cr.py").write_bytes(ref.replace("\n", "\r").encode())
    # 10. escape sequences in every exception message
    (subs / "m_esc.py").write_text(
        "".join(f"def {f}(*a, **k):\n    raise ValueError({ESC!r})\n\n\n" for f in FUNCS)
    )


def _remove_deep(top: Path) -> None:
    fds, names = [os.open(top, os.O_RDONLY)], []
    while True:
        entries = list(os.scandir(fds[-1]))
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        if dirs:
            names.append(dirs[0])
            fds.append(os.open(dirs[0], os.O_RDONLY, dir_fd=fds[-1]))
        elif names:
            os.close(fds.pop())
            os.rmdir(names.pop(), dir_fd=fds[-1])
        else:
            os.close(fds.pop())
            return


def _key(doc: dict) -> tuple:
    s = doc["summary"]
    return doc["verdict"], s["cases_passed"], s["cases_total"], s["checks_passed"]


def test_ten_attackers_do_not_change_twenty_honest_verdicts(tmp_path: Path) -> None:
    alone_subs = tmp_path / "alone"
    alone_subs.mkdir()
    for kind in HONEST:
        _honest(alone_subs, kind, f"h_{kind}")
    alone = grade_class(alone_subs, tmp_path / "alone_out", jobs=2, notebook=True)
    expected = {kind: _key(alone.docs[f"h_{kind}"]) for kind in HONEST}
    assert expected["base"][0] == expected["helped"][0] == "PASS"  # helpers travel with a folder

    subs = tmp_path / "class"
    subs.mkdir()
    honest = {}
    for i in range(20):
        kind = list(HONEST)[i % len(HONEST)]
        honest[f"h{i:02d}"] = kind
        _honest(subs, kind, f"h{i:02d}")
    target = tmp_path / "grader_module.py"
    target.write_text("x = 1\n")
    owner = target.stat().st_uid
    _attackers(subs, target)
    out = tmp_path / "out"
    try:
        report = grade_and_report(subs, out, points=Points(), jobs=2, notebook=True)
    finally:
        _remove_deep(subs / "m_deep")
    docs = report.run.docs
    for student, kind in honest.items():
        assert _key(docs[student]) == expected[kind], student
    assert target.stat().st_uid == owner
    assert docs["m_link"]["verdict"] == expected["zero"][0]  # its own kernels, nothing else
    assert any("site.py: a symbolic link" in w for w in docs["m_link"]["warnings"])
    assert docs["m_intcell"]["verdict"] == "NOT_PASSED"  # cannot be imported: its own result
    assert docs["m_deep"]["verdict"] == "PASS"
    assert docs["m_cells"]["verdict"] == "PASS"
    assert docs["m_fifo"]["verdict"] == "INCOMPLETE" and "FIFO" in docs["m_fifo"]["error"]
    assert docs["m_huge"]["verdict"] == "NOT_PASSED" and "too large" in docs["m_huge"]["error"]
    assert docs["m_twice"]["verdict"] == expected["zero"][0]  # the folder, sorted first, is graded
    assert any("m_twice.py" in n and "keep one" in n for n in report.notes)
    pairs = {(f.a, f.b) for f in report.flags}
    assert ("m_big1", "m_big2") in pairs and ("m_cr", REFERENCE) in pairs
    assert report.phases["similarity"] < 30
    text = (out / "gradebook.csv").read_text() + (out / "class_report.html").read_text()
    text += (out / "results" / "m_esc.json").read_text()
    assert "\x1b" not in text and "\x07" not in text and "\\u001b" not in text
    with open(out / "gradebook.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 31  # 20 honest, 11 ids of 10 attacks
