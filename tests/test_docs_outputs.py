"""No documented command overwrites another's output: two different commands in the README and
docs/ never write the same path (`--json`, `--report`, `--executed`, `--out`, ...). Before, the
instructor flow's `tito grade --report grades/alice.json` overwrote the `grades/alice.json` that
`tito milestone run --json` had just written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WRITES = ("--json", "--report", "--executed", "--out", "--plots", "-o")
FENCE = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def documented_commands() -> list[str]:
    out = []
    for page in PAGES:
        for block in FENCE.findall(page.read_text(encoding="utf-8")):
            text = re.sub(r"\\\n\s*", " ", block)  # a command continued over lines is one
            out += [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    return [c for c in out if c]


def written_by(command: str) -> list[str]:
    words = command.split()
    found = []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in WRITES:
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if value and not value.isupper():
                found.append(value.rstrip("/"))
    return found


def test_the_scan_finds_the_instructor_outputs() -> None:
    written = {p for c in documented_commands() for p in written_by(c)}
    assert "grades/alice.json" in written and "grades" in written, sorted(written)


def test_no_two_documented_commands_write_the_same_path() -> None:
    writers: dict[str, set[str]] = {}
    for command in documented_commands():
        for path in written_by(command):
            writers.setdefault(path, set()).add(command)
    clashes = {p: sorted(c) for p, c in writers.items() if len(c) > 1}
    assert clashes == {}, clashes
