"""The order the suite's workers take the tests in (tests/conftest.py): `exclusive` tests first, back
to back, then the modules longest first by tests/durations.json, each module's tests together."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from conftest import DURATIONS, suite_order

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class _Item:  # what suite_order reads of a pytest.Item
    nodeid: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.marks else None


def _ids(items: list[_Item]) -> list[str]:
    return [i.nodeid for i in items]


def test_exclusive_tests_come_first_then_the_longest_modules_each_kept_whole() -> None:
    items = [
        _Item("tests/test_a.py::one"),
        _Item("tests/test_a.py::two"),
        _Item("tests/test_b.py::shared"),
        _Item("tests/test_b.py::alone", {"exclusive"}),
        _Item("tests/test_b.py::shared_too"),
        _Item("tests/test_c.py::one"),
        _Item("tests/test_d.py::alone", {"exclusive"}),
        _Item("tests/test_new.py::one"),
    ]
    seconds = {"tests/test_a.py": 5.0, "tests/test_b.py": 1.0, "tests/test_c.py": 40.0,
               "tests/test_d.py": 2.0}  # fmt: skip
    assert _ids(suite_order(items, seconds)) == [
        "tests/test_d.py::alone",  # modules with exclusive tests, longest first
        "tests/test_b.py::alone",  # its exclusive test before its others, which keep their order
        "tests/test_b.py::shared",
        "tests/test_b.py::shared_too",
        "tests/test_new.py::one",  # not measured yet: before every measured module
        "tests/test_c.py::one",
        "tests/test_a.py::one",
        "tests/test_a.py::two",
    ]


def test_without_durations_the_collection_order_stands_but_exclusives_lead() -> None:
    items = [_Item("tests/test_a.py::x"), _Item("tests/test_b.py::y", {"exclusive"}),
             _Item("tests/test_c.py::z")]  # fmt: skip
    assert _ids(suite_order(items, {})) == [
        "tests/test_b.py::y",
        "tests/test_a.py::x",
        "tests/test_c.py::z",
    ]


def test_the_durations_file_names_only_test_modules_that_exist() -> None:
    seconds = json.loads(DURATIONS.read_text())
    assert seconds, "tests/durations.json is empty"
    missing = [m for m in seconds if not (ROOT / m).is_file()]
    assert missing == [], f"tests/durations.json names modules that are gone: {missing}"
    assert all(isinstance(s, (int, float)) and s >= 0 for s in seconds.values())


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_write_durations_sums_each_module_and_a_collect_only_run_writes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "durations.json"
    node = "tests/test_suite_order.py::test_without_durations_the_collection_order_stands_but_exclusives_lead"  # fmt: skip
    done = _pytest(node, "--write-durations", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    written = json.loads(out.read_text())
    assert (
        list(written) == ["tests/test_suite_order.py"] and written["tests/test_suite_order.py"] >= 0
    )
    out.unlink()
    done = _pytest(node, "--collect-only", "--write-durations", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not out.exists(), "a --collect-only run wrote durations"
