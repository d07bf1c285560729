"""Result files nobody else can write: the one home for how graders publish a verdict to disk.

Every result file (`tito milestone run --json`, `tito grade --report` and `--executed`) goes
through `ResultFile`:

1. `claim()` before any student code runs: an old file at the path is removed (a stale PASS never
   survives a run that dies), and the folder is checked to be writable (a usage error, not a lost
   result at the end);
2. `publish(data)` after every student process is dead (every Sandbox's close() has returned):
   the bytes go to a fresh temporary file in the same folder, are flushed to disk, and one
   os.replace() renames it into place. A reader sees the old state or the whole new file, never a
   half-written one, and whatever a student process wrote at the path during the run is replaced.

The caller derives the exit code from the same document it publishes, so the two always agree.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


class ResultFileError(OSError):
    """The result path cannot be claimed or written: names the path and why."""


class ResultFile:
    """One result path, claimed at the start of a run and published once at its end."""

    def __init__(self, path: str | os.PathLike[str], *, what: str = "result") -> None:
        if not str(path):
            raise ResultFileError(f"{what}: expected a file path, got an empty string")
        self.path = Path(os.path.abspath(path))
        self.what = what
        self.published = False

    def claim(self) -> ResultFile:
        """Remove an old file at the path and make sure its folder exists and is writable."""
        if self.path.is_dir():
            raise ResultFileError(f"{self.what}: {self.path} is a folder, expected a file path")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise ResultFileError(f"{self.what}: cannot use {self.path}: {exc}") from exc
        if not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise ResultFileError(f"{self.what}: the folder {self.path.parent} is not writable")
        return self

    def publish(self, data: bytes | str) -> None:
        """Write `data` to a temporary file beside the path, then rename it into place."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        try:
            fd, tmp = tempfile.mkstemp(
                dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
            )
        except OSError as exc:
            raise ResultFileError(f"{self.what}: cannot write {self.path}: {exc}") from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; a grader's result is for others to read
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise ResultFileError(f"{self.what}: cannot write {self.path}: {exc}") from exc
        self.published = True

    def publish_json(self, doc: Any) -> None:
        """`doc` as indented JSON with a final newline (default=str for stray non-JSON values)."""
        self.publish(json.dumps(doc, indent=2, default=str) + "\n")


def claim_all(paths: dict[str, str | os.PathLike[str] | None]) -> dict[str, ResultFile]:
    """Claim every given path ({what: path or None}); raises ResultFileError on the first bad one."""
    return {what: ResultFile(p, what=what).claim() for what, p in paths.items() if p}
