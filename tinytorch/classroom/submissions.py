"""A class folder: one entry per student, resolved to the file the milestone grades.

An entry is a `.py` file, a `.ipynb` notebook (with `notebook=True`), or a folder holding
`acceleration.py` (or, with `notebook=True`, one notebook). The student id is the entry's name
(without its suffix). Anything else is listed as not a submission, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tinytorch.sandbox.child.load import MODULE_FILE

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*")


@dataclass(frozen=True)
class Submission:
    """One student's entry: `impl` is what `--impl` gets; `entry` is the folder entry itself."""

    student: str
    entry: Path
    impl: Path | None  # None: nothing gradeable was found (see `problem`)
    problem: str = ""

    @property
    def kind(self) -> str:
        if self.impl is None:
            return "none"
        return "notebook" if self.impl.suffix == ".ipynb" else "py"

    def mtime(self) -> float:
        """The newest modification time of anything in the entry (a resubmission re-grades)."""
        paths = [self.entry] if self.entry.is_file() else list(self.entry.rglob("*"))
        return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def _own_file(path: Path, folder: Path) -> bool:
    """A regular file of the submission itself: not a symbolic link (the grader, as root, would
    read whatever it points to) and inside the folder."""
    return (
        path.is_file() and not path.is_symlink() and path.resolve().is_relative_to(folder.resolve())
    )


def find_module(folder: Path, *, notebook: bool) -> tuple[Path | None, str]:
    """The gradeable file inside a submission folder, searched recursively; (None, why) if none.
    Symbolic links are never graded."""
    found = sorted(p for p in folder.rglob(MODULE_FILE) if _own_file(p, folder))
    if found:
        return found[0], ""
    py = sorted(p for p in folder.rglob("*.py") if _own_file(p, folder))
    if len(py) == 1:
        return py[0], ""
    if notebook:
        nbs = sorted(
            p
            for p in folder.rglob("*.ipynb")
            if ".ipynb_checkpoints" not in p.parts and _own_file(p, folder)
        )
        if len(nbs) == 1:
            return nbs[0], ""
        if len(nbs) > 1:
            return None, f"{len(nbs)} notebooks and no {MODULE_FILE}: cannot tell which to grade"
    if len(py) > 1:
        return None, f"{len(py)} .py files and none named {MODULE_FILE}"
    what = f"{MODULE_FILE}, a .py file or a notebook" if notebook else f"{MODULE_FILE}"
    return None, f"no {what} in the folder"


def resolve_entry(entry: Path, *, notebook: bool) -> Submission | None:
    """One folder entry as a Submission; None for entries that are not student submissions."""
    if entry.name.startswith((".", "_")):
        return None
    if entry.is_dir():
        impl, why = find_module(entry, notebook=notebook)
        return Submission(entry.name, entry, impl, why)
    if entry.suffix in (".py", ".ipynb") and entry.is_symlink():
        why = "a symbolic link, not a file: copy the submission itself into the folder"
        return Submission(entry.stem, entry, None, why)
    if entry.suffix == ".py":
        return Submission(entry.stem, entry, entry)
    if entry.suffix == ".ipynb":
        if notebook:
            return Submission(entry.stem, entry, entry)
        return Submission(entry.stem, entry, None, "a notebook: grade notebooks with --notebook")
    return None


def discover(
    folder: str | Path, *, notebook: bool = False, skipped: list[str] | None = None
) -> list[Submission]:
    """Every student entry of `folder`, sorted by student id; raises ValueError on a bad folder.

    An entry whose name is not a usable student id raises too, unless `skipped` is given: then
    it is left out and said there, so one odd file name does not stop a whole class's run."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"SUBMISSIONS: {folder} is not a folder (expected one entry per student)")
    found = [s for e in sorted(folder.iterdir()) if (s := resolve_entry(e, notebook=notebook))]
    subs: list[Submission] = []
    for s in found:
        if _SAFE_ID.fullmatch(s.student):
            subs.append(s)
            continue
        why = (
            f"SUBMISSIONS: {s.entry.name!r} is not a usable student id "
            "(letters, digits and _ . @ + - only)"
        )
        if skipped is None:
            raise ValueError(why)
        skipped.append(f"not graded: {why.removeprefix('SUBMISSIONS: ')}; rename it to grade it")
    seen: dict[str, Path] = {}
    for s in subs:
        if s.student in seen:
            raise ValueError(
                f"SUBMISSIONS: {seen[s.student].name} and {s.entry.name} are both student "
                f"{s.student!r}; keep one"
            )
        seen[s.student] = s.entry
    return subs


def source_text(path: Path) -> str:
    """The Python source that is graded: the file, or a notebook's (or marked percent file's)
    exported cells, as the milestone reads them; the raw text if that fails."""
    from tinytorch.sandbox.child.exports import SubmissionError, exported_source

    try:
        return exported_source(path)
    except (SubmissionError, OSError):
        return path.read_text(encoding="utf-8", errors="replace")
