"""A class folder: one entry per student, resolved to the file the milestone grades.

An entry is a `.py` file, a `.ipynb` notebook, or a folder, whose graded file is chosen by the
one rule of tinytorch.sandbox.choose (read once: the folder's files are staged here). The student id is the entry's name
(without its suffix). Anything else is listed as not a submission, with the reason.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from tinytorch.milestone07.cases import GRADED_NAMES
from tinytorch.sandbox import stage
from tinytorch.sandbox.choose import REFUSED, keep_candidates, submission

MAX_ID = 128  # results/<id>.json, logs/<id>.side-by-side.log and their temporary names stay
# well under a file name's 255 bytes (a 250-character name once stopped a class run)
_SAFE_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.@+-]{{0,{MAX_ID - 1}}}")


@dataclass(frozen=True)
class Submission:
    """One student's entry: `impl` is what `--impl` gets; `entry` is the folder entry itself."""

    student: str
    entry: Path
    impl: Path | None  # None: nothing gradeable was found (see `problem`)
    problem: str = ""
    # a folder's files, read once when it was resolved; a str: its graded file was refused (why)
    staged: stage.Staged | str | None = None

    @property
    def kind(self) -> str:
        if self.impl is None:
            return "none"
        return "notebook" if self.impl.suffix == ".ipynb" else "py"

    def mtime(self) -> float:
        """The newest modification time of anything in the entry (a resubmission re-grades);
        a bounded scan that follows no link (stage.scan)."""
        try:
            if not self.entry.is_dir() or self.entry.is_symlink():
                return self.entry.lstat().st_mtime
            return max((e.st.st_mtime for e in stage.scan(self.entry).files), default=0.0)
        except OSError:
            return 0.0


def find_module(folder: Path, *, notebook: bool = True) -> tuple[Path | None, str]:
    """The graded file of a submission folder, chosen by the one rule (classroom.choose) from
    what was read once (`snapshot`); (None, why) if none. Links and special files are never read.
    `notebook` is kept for callers; notebooks are always candidates."""
    staged = snapshot(folder)
    if isinstance(staged, str):
        return None, staged
    return folder / (staged.chosen or ""), ""


def snapshot(folder: Path, hard_links: stage.Links = False) -> stage.Staged | str:
    """A folder submission read once (stage.collect: regular files only, no link followed, within
    the caps): its .py and .ipynb files, reduced to the chosen file and the .py files beside it
    (choose.submission); a str says why nothing is graded."""
    try:
        found = stage.collect(folder, keep=keep_candidates, hard_links=hard_links)
    except stage.StageError as exc:
        return str(exc)
    return submission(found, GRADED_NAMES)


def resolve_entry(
    entry: Path, *, notebook: bool = True, hard_links: stage.Links = False
) -> Submission | None:
    """One folder entry as a Submission; None for entries that are not student submissions."""
    if entry.name.startswith((".", "_")):
        return None
    try:
        st = entry.lstat()  # never stat through a link, never open a FIFO
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        staged = snapshot(entry, hard_links)
        refused = isinstance(staged, str) and staged.startswith(REFUSED)
        if refused and "symbolic link" not in staged:  # too large, a hard link: NOT PASSED
            return Submission(entry.name, entry, entry, staged=staged.removeprefix(REFUSED))
        if isinstance(staged, str):
            return Submission(entry.name, entry, None, staged)
        return Submission(entry.name, entry, entry / (staged.chosen or ""), staged=staged)
    if entry.suffix in (".py", ".ipynb") and stat.S_ISLNK(st.st_mode):
        why = "a symbolic link, not a file: copy the submission itself into the folder"
        return Submission(entry.stem, entry, None, why)
    if stat.S_ISLNK(st.st_mode) and os.path.isdir(entry):  # stat only: opens nothing
        why = "a symbolic link to a folder: copy the submission itself into the class folder"
        return Submission(entry.name, entry, None, why)
    if entry.suffix in (".py", ".ipynb") and not stat.S_ISREG(st.st_mode):
        return Submission(entry.stem, entry, None, stage.refusal(st, entry.name))
    if entry.suffix == ".py":
        return Submission(entry.stem, entry, entry)
    if entry.suffix == ".ipynb":
        return Submission(entry.stem, entry, entry)
    return None


def discover(
    folder: str | Path,
    *,
    notebook: bool = True,
    skipped: list[str] | None = None,
    hard_links: stage.Links = False,
) -> list[Submission]:
    """Every student entry of `folder`, sorted by student id; raises ValueError on a bad folder.

    An entry whose name is not a usable student id raises too, unless `skipped` is given: then
    it is left out and said there, so one odd file name does not stop a whole class's run."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"SUBMISSIONS: {folder} is not a folder (expected one entry per student)")
    found = [s for e in sorted(folder.iterdir()) if (s := resolve_entry(e, hard_links=hard_links))]
    subs: list[Submission] = []
    for s in found:
        # logs/<id>.side-by-side.log is another student's log when regraded alone
        if _SAFE_ID.fullmatch(s.student) and not s.student.endswith(".side-by-side"):
            subs.append(s)
            continue
        why = (
            f"SUBMISSIONS: {s.entry.name!r} is not a usable student id "
            f"(letters, digits and _ . @ + - only, at most {MAX_ID}, not ending .side-by-side)"
        )
        if skipped is None:
            raise ValueError(why)
        skipped.append(f"not graded: {why.removeprefix('SUBMISSIONS: ')}; rename it to grade it")
    kept: list[Submission] = []
    seen: dict[str, Path] = {}
    for s in subs:  # sorted by entry name: `mallory` comes before `mallory.py`
        if s.student in seen:
            why = (
                f"SUBMISSIONS: {seen[s.student].name} and {s.entry.name} are both student "
                f"{s.student!r}; {seen[s.student].name} is graded, keep one"
            )
            if skipped is None:
                raise ValueError(why)
            skipped.append(f"not graded: {why.removeprefix('SUBMISSIONS: ')}")
            continue
        seen[s.student] = s.entry
        kept.append(s)
    return kept


def source_text(path: Path) -> str:
    """The Python source that is graded: the file, or a notebook's (or marked percent file's)
    exported cells, as the milestone reads them; the raw text if that fails."""
    from tinytorch.sandbox.child.exports import exported_source

    try:
        return exported_source(path)
    except Exception:  # noqa: BLE001 - a SubmissionError, or any parse failure: never the run
        try:
            return stage.read_file(path).decode("utf-8", errors="replace")
        except OSError:
            return ""
