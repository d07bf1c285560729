"""Staging a submission: the one way any entry point copies what a student handed in.

`tito milestone run --impl` (a file, or a folder's `acceleration.py` and its helpers), the class
grader and the Gradescope / PrairieLearn entry points all read the student's files through this
module, often as root. It trusts nothing it was handed:

- Only regular files are read. A symbolic link is never followed (every path component is opened
  with O_NOFOLLOW, relative to its folder's descriptor), and a FIFO, device or socket is refused
  from its lstat without being opened (opening a FIFO blocks). What was opened is checked again
  with fstat on the descriptor: still a regular file, one link (a hard link to a file elsewhere,
  e.g. a module of the grader's own environment, has two), and under the size cap.
- Copies are created here (O_CREAT | O_EXCL | O_NOFOLLOW); hand_over gives what was created to the
  sandbox's uid with fchown on each descriptor: root changes the owner and mode of nothing else.
- Walking a folder is iterative, never recursive, and bounded: MAX_DEPTH levels, MAX_SCAN
  entries looked at, MAX_FILES files and MAX_TOTAL_BYTES copied, MAX_FILE_BYTES per file.
- Whatever is not copied is named in `Staged.skipped`; a correct file beside junk is still staged.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 4 << 20  # one file: the graded file past this is NOT PASSED, "file too large"
MAX_TOTAL_BYTES = 8 << 20  # everything staged from one submission
MAX_FILES = 64  # files staged from one submission
MAX_DEPTH = 8  # folder levels below the submission's folder
MAX_SCAN = 4096  # folder entries looked at in one submission
# internal_links walks a whole class folder: a link hidden past one submission's bounds (12
# levels down, behind 4,100 files, in .git) once got a classmate's own file refused
CLASS_MAX_DEPTH = 1024
CLASS_MAX_SCAN = 200_000  # entries: about 0.5 s of lstat; only files with several names are kept

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_DIR = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_DIRECTORY", 0)


class StageError(OSError):
    """A file that is not staged; the message says which and why."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


# Which files with more than one link may be read: True (a practice run, as the student), or
# the (st_dev, st_ino, st_nlink) of files whose every name lies inside the class folder
# (internal_links: a link made since is a new st_nlink, refused).
Links = bool | Collection[tuple[int, int, int]]


def refusal(
    st: os.stat_result, name: str, *, max_bytes: int = MAX_FILE_BYTES, hard_links: Links = False
) -> str:
    """Why a file with this (l)stat is not staged, or "" when it may be read (see Links)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{name}: {_kind(st.st_mode)}, not a regular file"
    allowed = hard_links is True or (
        not isinstance(hard_links, bool) and (st.st_dev, st.st_ino, st.st_nlink) in hard_links
    )
    if st.st_nlink > 1 and not allowed:
        return f"{name}: a hard link (shares its data with another file)"
    if st.st_size > max_bytes:
        return (
            f"{name}: file too large ({st.st_size / 2**20:.1f} MB, over the "
            f"{max_bytes / 2**20:g} MB cap)"
        )
    return ""


def _read_fd(fd: int, name: str, max_bytes: int, hard_links: Links = False) -> bytes:
    why = refusal(os.fstat(fd), name, max_bytes=max_bytes, hard_links=hard_links)
    if why:
        raise StageError(why)
    chunks, size = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:  # grew while read
            raise StageError(f"{name}: file too large (over the {max_bytes / 2**20:g} MB cap)")
    return b"".join(chunks)


def _open_at(dir_fd: int | None, name: str, flags: int) -> int:
    return os.open(name, flags, dir_fd=dir_fd) if dir_fd is not None else os.open(name, flags)


def read_file(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES, hard_links: Links = False
) -> bytes:
    """The bytes of one regular file, never through a link (the last component; a folder above it
    may be one: the caller named it). Raises StageError naming the file and why."""
    path = os.fspath(path)
    name = os.path.basename(path) or path
    try:
        why = refusal(os.lstat(path), name, max_bytes=max_bytes, hard_links=hard_links)
        if why:
            raise StageError(why)
        fd = os.open(path, _READ)
    except StageError:
        raise
    except OSError as exc:
        raise StageError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    try:
        return _read_fd(fd, name, max_bytes, hard_links)
    finally:
        os.close(fd)


@dataclass
class Entry:
    """A regular file found in a submission folder: its path relative to the folder, its lstat."""

    rel: str
    st: os.stat_result

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


@dataclass
class Scan:
    """What a folder holds: its regular files (sorted by path) and what was passed over. Given
    `on_file`, each regular file goes to it instead and nothing is kept (a class folder is
    walked so, where one student's entry can hold 200,000 names of 250 KB each)."""

    files: list[Entry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cut: bool = False  # some folder went unseen: past the bounds, or it could not be read
    on_file: Callable[[str, os.stat_result], None] | None = field(default=None, repr=False)

    def file(self, path: str, st: os.stat_result) -> None:
        if self.on_file is None:
            self.files.append(Entry(path, st))
        else:
            self.on_file(path, st)

    def skip(self, why: str, *, unseen: bool = False) -> None:
        self.cut = self.cut or unseen
        if self.on_file is None:
            self.skipped.append(why)


def _skip_dir(name: str) -> bool:
    return name in ("__pycache__", ".ipynb_checkpoints", ".git")


def scan(
    folder: str | os.PathLike[str],
    *,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_SCAN,
    every_dir: bool = False,
    on_file: Callable[[str, os.stat_result], None] | None = None,
) -> Scan:
    """Every regular file under `folder`, iteratively, following no link and opening no file;
    links, special files, folders past `max_depth` and entries past `max_entries` are named in
    `skipped`; __pycache__, .git and .ipynb_checkpoints are passed over unless `every_dir`.
    on_file: see Scan. Raises StageError when `folder` itself cannot be opened as a folder."""
    out = Scan(on_file=on_file)
    try:
        root = os.open(os.fspath(folder), _DIR)
    except OSError as exc:
        raise StageError(f"{os.fspath(folder)}: not a folder ({exc.strerror or exc})") from None
    todo: list[tuple[int, str, int]] = [(root, "", 0)]  # (folder fd, relative path, depth)
    seen = 0
    try:
        while todo:
            fd, rel, depth = todo.pop()
            try:
                entries = _listing(fd, rel, out)
                for entry in entries:
                    seen += 1
                    if seen > max_entries:
                        out.skip(f"{rel or '.'}: past {max_entries} entries, the rest", unseen=True)
                        break
                    sub = _one(fd, entry, f"{rel}{entry.name}", depth, max_depth, out, every_dir)
                    if sub is not None:
                        todo.append((sub, f"{rel}{entry.name}/", depth + 1))
            finally:
                os.close(fd)
            if seen > max_entries:
                break
    finally:
        for fd, _rel, _depth in todo:
            os.close(fd)
    out.files.sort(key=lambda e: e.rel)
    return out


def _listing(fd: int, rel: str, out: Scan) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        out.skip(f"{rel or '.'}: cannot be listed ({exc.strerror or exc})", unseen=True)
        return []


def _one(
    fd: int,
    entry: os.DirEntry[str],
    path: str,
    depth: int,
    max_depth: int,
    out: Scan,
    every_dir: bool = False,
) -> int | None:
    """File `entry` of the folder `fd` into `out`; a subfolder to walk is returned opened."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        out.file(path, st)
    elif not stat.S_ISDIR(st.st_mode):
        out.skip(f"{path}: {_kind(st.st_mode)}, not a regular file")
    elif _skip_dir(entry.name) and not every_dir:
        pass
    elif depth + 1 > max_depth:  # max_depth 0: only the folder's own files are wanted
        if max_depth:
            out.skip(f"{path}/: deeper than {max_depth} folder levels", unseen=True)
    else:
        try:
            return os.open(entry.name, _DIR, dir_fd=fd)
        except OSError as exc:
            out.skip(f"{path}/: cannot be opened ({exc.strerror or exc})", unseen=True)
    return None


@dataclass
class Linked:
    """A file with more than one name in a class folder."""

    entries: set[str] = field(default_factory=set)  # the class folder's entries holding a name
    names: list[str] = field(default_factory=list)  # the first SHOWN_NAMES names, shortened
    seen: int = 0  # names found


SHOWN_NAMES = 4


def internal_links(
    folder: str | os.PathLike[str],
) -> tuple[dict[tuple[int, int, int], Linked], bool]:
    """(the files under `folder` with more than one link that may be read, whether the class
    scan was cut short). Keys are (st_dev, st_ino, st_nlink). A file qualifies when every name
    of it was found inside `folder` (a student's archive hard-linked a classmate's file: tar does
    so without a word), or when the scan was cut (past CLASS_MAX_DEPTH or CLASS_MAX_SCAN, or an
    unreadable folder), where its other names may lie: a link hidden there must not get a
    classmate's own file refused. Reading such a file reads the class folder's own bytes; root
    changes the owner of no original (hand_over gives only its copies away)."""
    linked: dict[tuple[int, int, int], Linked] = {}

    def visit(rel: str, st: os.stat_result) -> None:
        if st.st_nlink > 1:
            one = linked.setdefault((st.st_dev, st.st_ino, st.st_nlink), Linked())
            one.seen += 1
            one.entries.add(rel.split("/", 1)[0])
            if len(one.names) < SHOWN_NAMES:
                one.names.append(rel if len(rel) <= 120 else f"{rel[:57]}...{rel[-60:]}")

    found = scan(
        folder, max_depth=CLASS_MAX_DEPTH, max_entries=CLASS_MAX_SCAN, every_dir=True, on_file=visit
    )
    return {k: v for k, v in linked.items() if v.seen == k[2] or found.cut}, found.cut


def read_under(
    folder: str | os.PathLike[str],
    rel: str,
    *,
    max_bytes: int = MAX_FILE_BYTES,
    hard_links: Links = False,
) -> bytes:
    """The bytes of `folder/rel`, every component below `folder` opened with O_NOFOLLOW (a link
    swapped in after a scan is refused too). Raises StageError."""
    parts = rel.split("/")
    fds: list[int] = []
    try:
        fd = os.open(os.fspath(folder), _DIR)
        fds.append(fd)
        for part in parts[:-1]:
            fd = os.open(part, _DIR, dir_fd=fd)
            fds.append(fd)
        st = os.lstat(parts[-1], dir_fd=fd)
        why = refusal(st, rel, max_bytes=max_bytes, hard_links=hard_links)
        if why:
            raise StageError(why)
        fd = os.open(parts[-1], _READ, dir_fd=fd)
        fds.append(fd)
        return _read_fd(fd, rel, max_bytes, hard_links)
    except StageError:
        raise
    except OSError as exc:
        raise StageError(f"{rel}: cannot be read ({exc.strerror or exc})") from None
    finally:
        for fd in fds:
            os.close(fd)


@dataclass
class Staged:
    """What was staged: the files copied (paths relative to the destination) and the skipped."""

    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)  # rel -> bytes, for `write`
    main: str | None = None  # the graded file among `files`, once chosen
    chosen: str | None = None  # the graded file's path in the submission as handed in

    def note(self) -> str:
        """One line for a result's warnings: what was not staged, or ""."""
        if not self.skipped:
            return ""
        shown = "; ".join(self.skipped[:8])
        more = f" (and {len(self.skipped) - 8} more)" if len(self.skipped) > 8 else ""
        return f"not staged from the submission: {shown}{more}"


def collect(
    folder: str | os.PathLike[str],
    *,
    main: str | None = None,
    keep: Callable[[Entry], bool] | None = None,
    max_depth: int = MAX_DEPTH,
    max_files: int = MAX_FILES,
    max_total: int = MAX_TOTAL_BYTES,
    max_file: int = MAX_FILE_BYTES,
    hard_links: Links = False,
) -> Staged:
    """Read a submission folder's files into memory within the caps: `main` (relative path: the
    graded file; read first, its refusal raises StageError) then every file `keep` accepts.
    Nothing is written; `write` puts the result in place."""
    found = scan(folder, max_depth=max_depth)
    staged = Staged(skipped=list(found.skipped))
    total = 0
    if main is not None:
        blob = read_under(folder, main, max_bytes=max_file, hard_links=hard_links)
        staged.blobs[main] = blob
        total = len(blob)
    for entry in found.files:
        if entry.rel == main or (keep is not None and not keep(entry)):
            continue
        if len(staged.blobs) >= max_files:
            staged.skipped.append(f"{entry.rel}: past the {max_files}-file cap")
            continue
        why = refusal(entry.st, entry.rel, max_bytes=max_file, hard_links=hard_links)
        if not why and total + entry.st.st_size > max_total:
            why = f"{entry.rel}: past the {max_total / 2**20:g} MB cap on a submission"
        if why:
            staged.skipped.append(why)
            continue
        try:
            blob = read_under(folder, entry.rel, max_bytes=max_file, hard_links=hard_links)
        except StageError as exc:
            staged.skipped.append(str(exc))
            continue
        staged.blobs[entry.rel] = blob
        total += len(blob)
    staged.files = sorted(staged.blobs)
    return staged


def write(staged: Staged, dest: str | os.PathLike[str]) -> list[str]:
    """Write `staged.blobs` under `dest` (an existing folder of ours), creating every file and
    folder here (never through a link; hand_over gives them to another uid). Returns the paths
    written, relative to `dest`."""
    root = os.open(os.fspath(dest), _DIR)
    try:
        made: dict[str, int] = {"": root}
        try:
            for rel in sorted(staged.blobs):
                parts = rel.split("/")
                parent = ""
                for part in parts[:-1]:
                    here = f"{parent}{part}/"
                    if here not in made:
                        os.mkdir(part, 0o700, dir_fd=made[parent])
                        made[here] = os.open(part, _DIR, dir_fd=made[parent])
                    parent = here
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                fd = os.open(parts[-1], flags, 0o600, dir_fd=made[parent])
                try:
                    view = memoryview(staged.blobs[rel])
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
        finally:
            for key, fd in made.items():
                if key:
                    os.close(fd)
    finally:
        os.close(root)
    return sorted(staged.blobs)


def iter_regular(folder: str | os.PathLike[str], suffix: str) -> Iterator[Entry]:
    """The regular files under `folder` whose names end in `suffix` (bounded scan, no links)."""
    try:
        found = scan(folder)
    except StageError:
        return
    yield from (e for e in found.files if e.name.endswith(suffix))


def stage_file(
    path: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    siblings: bool = False,
    hard_links: bool = False,
) -> Staged:
    """Stage one submission file into `dest`: the file itself (a refusal raises StageError) and,
    with `siblings`, the `.py` files beside it (a folder submission's helpers), within the caps."""
    path = Path(path)
    if siblings:
        staged = collect(
            path.parent,
            main=path.name,
            keep=lambda e: "/" not in e.rel and e.name.endswith(".py"),
            max_depth=0,
        )
    else:
        staged = Staged(blobs={path.name: read_file(path, hard_links=hard_links)})
        staged.files = [path.name]
    write(staged, dest)
    return staged


def hand_over(folder: str | os.PathLike[str], owner: tuple[int, int]) -> None:
    """Give `folder` (one of ours) and the files and folders below it to `owner`, each through
    a descriptor opened with O_NOFOLLOW: a link or special file found there is left alone."""
    todo = [os.open(os.fspath(folder), _DIR)]
    while todo:
        fd = todo.pop()
        try:
            os.fchown(fd, *owner)
            for entry in _listing(fd, "", Scan()):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    todo.append(os.open(entry.name, _DIR, dir_fd=fd))
                elif stat.S_ISREG(st.st_mode):
                    sub = os.open(entry.name, _READ, dir_fd=fd)
                    try:
                        os.fchown(sub, *owner)
                    finally:
                        os.close(sub)
        finally:
            os.close(fd)
