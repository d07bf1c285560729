"""`tito grade-class`: grade every submission of a class folder in parallel, resumably.

Layout of the output folder DIR:
    results/<student>.json   the milestone's JSON for that student (plus "grader": the run itself)
    logs/<student>.log       what the milestone run printed
    gradebook.csv            one row per student (formats.GRADEBOOK_COLUMNS)
    class_report.html        self-contained; its figures are also figures/*.png

Each student's file is read into memory when the run starts and graded from a fresh private copy
(DIR/.work/<student>, mode 0700), and each result is kept in memory once graded: a submission that
rewrites files on disk changes neither what another student is graded on nor another student's
gradebook row. As root, each of the N concurrent grading slots has its own unprivileged uid
(uids.slot_ids), so the sandboxes' workdirs (mode 0700, owned by the slot's uid) of students
graded at the same time are closed to each other. As a normal user every student's process runs
as that user: concurrent students are then not kept from each other's files (README).

Side by side, students also share the CPU. Each slot's whole tree runs in its own CPU cgroup where
one can be made (cpugroups.py), so a submission that starts hundreds of busy loops takes only its
own slot's share. Whether or not that held, a student graded beside others whose result hit a
wall-clock limit (a case timeout, a budget spent, the run's wall timeout) is regraded alone once
the others are done, and the alone result is the one kept: the per-case timeouts are wall clock,
and a verdict must not carry a neighbour's load.
"""

from __future__ import annotations

import codecs
import concurrent.futures as cf
import contextlib
import csv
import hashlib
import importlib.util
import io
import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
import tokenize
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinytorch.classroom.cpugroups import CpuGroups
from tinytorch.classroom.runner import ONE_THREAD, WALL_TIMEOUT_S, error_doc, grade_submission
from tinytorch.classroom.similarity import normalise
from tinytorch.classroom.submissions import Submission, discover, snapshot, source_text
from tinytorch.milestone07.scoring import Points
from tinytorch.render.platforms import GRADEBOOK_COLUMNS, gradebook_row
from tinytorch.safe_text import clean_tree
from tinytorch.sandbox import spawn, stage, uids
from tinytorch.sandbox.child.exports import has_nbdev_markers


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


@dataclass
class Tally:
    """What the progress bar shows: students done (resumed ones included) and PASSes among them."""

    total: int
    done: int = 0
    passes: int = 0

    def add(self, doc: dict[str, Any]) -> None:
        self.done += 1
        self.passes += doc.get("verdict") == "PASS"


@dataclass
class ClassRun:
    """What a class run did: every student's doc, in student order, and what was skipped."""

    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # student -> graded Python source
    resumed: list[str] = field(default_factory=list)
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)

    def rows(self, points: Points) -> list[dict[str, Any]]:
        return [gradebook_row(s, d, points) for s, d in sorted(self.docs.items())]


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def write_gradebook(path: Path, rows: list[dict[str, Any]]) -> None:
    """gradebook.csv with GRADEBOOK_COLUMNS, one row per student."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=GRADEBOOK_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def run_options(
    *, notebook: bool, part_b: bool, case_timeout: float | None, wall_timeout: float
) -> dict[str, Any]:
    """The options that change a student's result, stored in its doc["grader"]["options"].

    Points are not among them: the gradebook scores every doc, resumed or not, with this run's
    points (formats.gradebook_row), so a new points file needs no regrading."""
    return {
        "notebook": bool(notebook),
        "part_b": bool(part_b),
        "timeout": case_timeout,
        "wall_timeout": wall_timeout,
    }


def staged_sha256(blob: stage.Staged | str) -> str:
    """The digest of what a student is graded on (every staged file, by name), or of why not."""
    h = hashlib.sha256()
    if isinstance(blob, str):
        h.update(b"refused\0" + blob.encode("utf-8", "replace"))
    else:
        for name in sorted(blob.blobs):
            h.update(
                name.encode("utf-8", "replace") + b"\0" + hashlib.sha256(blob.blobs[name]).digest()
            )
    return h.hexdigest()


def _load_done(
    path: Path, sub: Submission, options: dict[str, Any], staged: str | None = None
) -> dict[str, Any] | None:
    """A previous result that is newer than the submission and was graded with the same
    options, if it reads back; given `staged` (staged_sha256), of the same files too: a
    resubmission whose files carry old times (an archive can) is regraded."""
    try:
        if path.stat().st_mtime <= sub.mtime():
            return None
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    if not (isinstance(doc, dict) and "verdict" in doc):
        return None
    grader = doc.get("grader")
    if not (isinstance(grader, dict) and grader.get("options") == options):
        return None
    return doc if staged is None or grader.get("staged_sha256") == staged else None


def hit_wall_clock(doc: dict[str, Any]) -> str:
    """What in a result depended on wall-clock time, or "": a case or check that timed out (a
    budget spent shows as timed-out cases too), or the run stopped at its wall timeout."""
    if (doc.get("grader") or {}).get("killed") == "timeout":
        return "the run was stopped at its wall timeout"
    for key in ("cases", "hidden_cases", "checks"):
        for item in doc.get(key) or []:
            if isinstance(item, dict) and item.get("status") == "timeout":
                return f"{item.get('name', key)} timed out"
    return ""


def _seed_of(doc: dict[str, Any]) -> int | None:
    """The secret data seed a milestone result was graded with; None where the run left none
    (the runner's own error docs, e.g. a run stopped at its wall timeout, say seed 0)."""
    seed = doc.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) and seed > 0 else None


def _snapshot(sub: Submission, inside: stage.Links = False) -> stage.Staged | str:
    """What this student is graded on, read once (tinytorch.sandbox.stage: regular files only,
    no link followed, within the caps): the file, or for a folder submission what discover read
    (the chosen file and the `.py` helpers beside it). A str says why the file itself is not
    graded (e.g. "file too large"). Nothing after this opens the student's files again.
    inside: the files with several names that may be read (stage.internal_links)."""
    if sub.impl is None:
        return sub.problem or "nothing to grade"
    if sub.staged is not None:
        return sub.staged
    try:
        if sub.entry.is_dir() and not sub.entry.is_symlink():  # discover read it already
            return snapshot(sub.entry, inside)
        blob = stage.read_file(sub.impl, hard_links=inside)
        return stage.Staged(
            files=[sub.impl.name], blobs={sub.impl.name: blob}, main=sub.impl.name,
            chosen=sub.impl.name,
        )  # fmt: skip
    except OSError as exc:
        return str(exc)


def _shared_files(
    inside: dict[tuple[int, int, int], stage.Linked], entries: dict[str, str]
) -> dict[str, str]:
    """student -> a note for each hard-linked file that more than one student's entry holds.
    entries: a class folder entry's name -> its student (discover's; a roster.csv is none)."""
    notes: dict[str, str] = {}
    for one in inside.values():
        students_here = {entries[top] for top in one.entries if top in entries}
        if len(students_here) > 1:
            more = f" and {one.seen - len(one.names)} more" if one.seen > len(one.names) else ""
            note = (f"{', '.join(sorted(one.names))}{more} are one file (hard links in the class "
                    "folder): each is graded on it; look at who wrote it")  # fmt: skip
            for student in students_here:
                notes[student] = note
    return notes


def grade_class(
    submissions: str | Path,
    out: str | Path,
    *,
    jobs: int | None = None,
    notebook: bool = True,
    part_b: bool = False,
    force: bool = False,
    case_timeout: float | None = None,
    wall_timeout: float = WALL_TIMEOUT_S,
    progress: Callable[[str, dict[str, Any], Tally], None] | None = None,
    on_start: Callable[[Tally], None] | None = None,
) -> ClassRun:
    """Grade every entry of `submissions` into `out`; Ctrl-C stops and keeps what is done.

    `on_start(tally)` is called once (tally.done: the students resumed, tally.passes: their
    PASSes), then `progress(student, doc, tally)` per graded student, the tally updated.
    """
    skipped: list[str] = []
    if not Path(submissions).is_dir():
        raise ValueError(f"SUBMISSIONS: {submissions} is not a folder (expected one per student)")
    inside, cut = stage.internal_links(submissions)  # hard links that may be read
    subs = discover(submissions, skipped=skipped, hard_links=set(inside))
    out = Path(out)
    results, logs, work = out / "results", out / "logs", out / ".work"
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)  # the gradebook and the class report (classmates' code): nobody else's
    for d in (results, logs):  # classmates' results and logs: no student's process reads them
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        d.chmod(0o700)
    work.mkdir(mode=0o700, parents=True, exist_ok=True)
    work.chmod(0o700)  # the grader's copies: no student's process needs to read them
    run = ClassRun()
    run.warnings += skipped
    unisolated = spawn.isolation_problem() or spawn.visible_to_child(submissions)
    trusted_note = f"graded with --trusted-code ({spawn.TRUST_VAR}=1): {unisolated}"
    if unisolated and not spawn.trusted():  # fail closed (tito grade-class says so first)
        raise ValueError(f"refused: {unisolated}")
    if unisolated:
        run.warnings.append(trusted_note)
    options = run_options(
        notebook=notebook, part_b=part_b, case_timeout=case_timeout, wall_timeout=wall_timeout
    )
    todo: list[tuple[Submission, stage.Staged | str]] = []
    shared = _shared_files(inside, {sub.entry.name: sub.student for sub in subs})
    run.warnings += sorted(set(shared.values()))
    if cut:
        run.warnings.append(
            f"SUBMISSIONS holds more than {stage.CLASS_MAX_SCAN} entries or "
            f"{stage.CLASS_MAX_DEPTH} folder levels (or a folder that cannot be read): a file "
            "with several names is graded, as its other names may lie there"
        )
    allowed = set(inside)
    digests_in: dict[str, str] = {}  # student -> staged_sha256 of what they are graded on
    for sub in subs:
        blob = _snapshot(sub, allowed)  # what this student is graded on and compared by, read once
        if isinstance(blob, stage.Staged) and sub.impl is not None:
            main = blob.blobs[sub.impl.name]
            helpers = {name: b for name, b in blob.blobs.items() if name != sub.impl.name}
            with warnings.catch_warnings(record=True) as caught:  # main thread, before the pool
                warnings.simplefilter("always")
                run.sources[sub.student] = _source(sub, main, helpers)
            if caught:  # counted, not repeated: 50,000 duplicate cell ids printed 100,000 lines
                first = str(caught[0].message)[:160]
                run.warnings.append(
                    f"{sub.student}: {len(caught)} warnings reading the submission, not shown "
                    f"(the first: {first})"
                )
        digests_in[sub.student] = staged_sha256(blob)
        path = results / f"{sub.student}.json"
        done = None if force else _load_done(path, sub, options, digests_in[sub.student])
        if done is not None:
            run.docs[sub.student] = done
            run.resumed.append(sub.student)
        else:
            todo.append((sub, blob))
    tally = Tally(len(subs))
    for doc in run.docs.values():  # the resumed students count as done, their PASSes as passes
        tally.add(doc)
    if on_start:
        on_start(tally)
    stop = threading.Event()
    digests: dict[str, str] = {}
    jobs = jobs or usable_cpus()
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(jobs):
        slots.put(slot)
    own_uids = uids.sandbox_ids() is not None  # root: a uid per slot, when the pool is usable
    slot_base = uids.run_slot_base()  # this run's own block of slot uids
    if own_uids and (why := uids.slot_pool_problem(jobs, slot_base)):
        own_uids = False
        run.warnings.append(f"concurrent students share one sandbox uid: {why}")

    extra_env = ONE_THREAD if jobs > 1 else {}  # side by side: one BLAS thread each
    groups = CpuGroups(jobs)
    if jobs > 1 and not groups.active:
        run.warnings.append(
            f"students graded side by side share the CPU unchecked ({groups.why}); "
            "one that hits a wall-clock limit is regraded alone"
        )

    def one(sub: Submission, blob: stage.Staged | str, seed: int | None = None) -> dict[str, Any]:
        if sub.impl is None:
            return error_doc(str(sub.entry), "INCOMPLETE", sub.problem or "nothing to grade")
        if isinstance(blob, str):  # the file itself was refused: too large, a FIFO, ...
            return error_doc(str(sub.entry), "NOT_PASSED", f"not graded: {blob}")
        private = work / sub.student
        shutil.rmtree(private, ignore_errors=True)
        try:
            private.mkdir(mode=0o700, parents=True)
            stage.write(blob, private)
            copy = private / sub.impl.name
        except OSError as exc:  # a full disk: this student is ERROR, the class run goes on
            return error_doc(str(sub.entry), "ERROR", f"the grader could not stage a copy: {exc}")
        slot = slots.get()
        try:
            doc, _run = grade_submission(
                copy,
                private,
                part_b=part_b,
                case_timeout=case_timeout,
                wall_timeout=wall_timeout,
                stop=stop,
                log_path=logs / f"{sub.student}.log",
                env={
                    **os.environ,
                    **extra_env,
                    **(uids.slot_env(slot, slot_base) if own_uids else {}),
                    spawn.SUBMISSION_DIR_VAR: str(private),  # one student's files: its helpers
                },
                prefix=groups.prefix(slot),
                seed=seed,
            )
        finally:
            groups.clear(slot)  # whatever the student left running, before the next one
            slots.put(slot)
        doc["impl"] = str(sub.impl)
        doc["graded_file"] = blob.chosen or sub.impl.name
        for note in (blob.note(), shared.get(sub.student, ""), trusted_note if unisolated else ""):
            if note:
                doc.setdefault("warnings", []).append(note)
        doc.setdefault("grader", {})["cpu_group"] = {"active": groups.active, "why": groups.why}
        shutil.rmtree(private, ignore_errors=True)
        return doc

    def record(sub: Submission, doc: dict[str, Any]) -> None:
        doc = clean_tree(doc)  # a log tail or an error may hold the student's escape sequences
        doc.setdefault("grader", {})["options"] = options
        doc["grader"]["staged_sha256"] = digests_in[sub.student]
        run.docs[sub.student] = doc
        path = results / f"{sub.student}.json"
        _write_json(path, doc)
        digests[sub.student] = _digest(path)
        tally.add(doc)
        if progress:
            progress(sub.student, doc, tally)

    # Side by side first; a result that hit a wall-clock limit there waits for its alone regrade.
    first: dict[str, tuple[dict[str, Any], str]] = {}  # student -> (side-by-side doc, why)

    def side_by_side(sub: Submission, doc: dict[str, Any]) -> None:
        why = hit_wall_clock(doc) if jobs > 1 else ""
        if why:
            first[sub.student] = (doc, why)
        else:
            record(sub, doc)

    with ctrl_c_sets(stop):  # Ctrl-C stops the run at its next poll (ctrl_c_sets)
        try:
            _drain(jobs, todo, one, side_by_side, stop)
            again = [(sub, blob) for sub, blob in todo if sub.student in first]

            def alone(sub: Submission, doc: dict[str, Any]) -> None:
                before, why = first[sub.student]
                keep = ("verdict", "summary", "seed", "isolation", "grader")
                doc.setdefault("grader", {})["regraded_alone"] = {
                    "why": f"{why} while {jobs} students were graded side by side",
                    "side_by_side": {k: before.get(k) for k in keep},
                    "side_by_side_log": f"logs/{sub.student}.side-by-side.log",
                }
                record(sub, doc)

            for sub, _blob in again:  # the alone run writes the log again: keep the first
                log = logs / f"{sub.student}.log"
                if log.exists():
                    os.replace(log, logs / f"{sub.student}.side-by-side.log")

            def same_cases(sub: Submission, blob: stage.Staged | str) -> dict[str, Any]:
                # The regrade grades the same cases: with a fresh seed, a submission that hangs
                # whenever it does not like its hidden cases would get a second draw.
                return one(sub, blob, seed=_seed_of(first[sub.student][0]))

            _drain(1, again, same_cases, alone, stop)
        except KeyboardInterrupt:
            run.interrupted = True
        finally:
            groups.close()
    for student, digest in digests.items():  # a result rewritten by a later submission
        path = results / f"{student}.json"
        if _digest(path) != digest:
            _write_json(path, run.docs[student])
            run.warnings.append(f"results/{student}.json was changed during the run; restored")
    shutil.rmtree(work, ignore_errors=True)
    return run


@contextlib.contextmanager
def ctrl_c_sets(stop: threading.Event) -> Iterator[None]:
    """While open, Ctrl-C (SIGINT) sets `stop` instead of raising KeyboardInterrupt; a second
    Ctrl-C raises as usual. A KeyboardInterrupt raised wherever the main thread happens to be can
    land inside concurrent.futures.wait while it holds a future's lock: the worker finishing that
    future then blocks on the lock and the pool's shutdown waits for it forever (a class run that
    hung on Ctrl-C under load). Off the main thread, where Python allows no handler, nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    before = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _drain(
    workers: int,
    items: list[tuple[Submission, stage.Staged | str]],
    one: Callable[[Submission, stage.Staged | str], dict[str, Any]],
    done: Callable[[Submission, dict[str, Any]], None],
    stop: threading.Event,
) -> None:
    """Grade `items` on `workers` threads, handing each finished (submission, doc) to `done` in
    this thread. Once `stop` is set (Ctrl-C, ctrl_c_sets) nothing more starts, the running
    gradings kill their trees (their docs are dropped), what finished before is still handed on,
    and KeyboardInterrupt is raised here, between polls."""
    if stop.is_set():
        raise KeyboardInterrupt

    def guarded(sub: Submission, blob: stage.Staged | str) -> dict[str, Any] | None:
        return None if stop.is_set() else one(sub, blob)  # None: stopped before it started

    def hand(fut: cf.Future) -> None:
        sub = futures[fut]
        try:
            doc = fut.result()
        except Exception as exc:  # noqa: BLE001 (a bug of ours: one ERROR row, not a dead run)
            doc = error_doc(str(sub.entry), "ERROR", f"internal grader error: {exc!r}")
        if doc is not None and (doc.get("grader") or {}).get("killed") != "interrupted":
            done(sub, doc)

    pool = cf.ThreadPoolExecutor(max_workers=max(1, workers))
    futures = {pool.submit(guarded, sub, blob): sub for sub, blob in items}
    pending = set(futures)
    try:
        while pending and not stop.is_set():
            finished, pending = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for fut in finished:
                hand(fut)
    except KeyboardInterrupt:  # a Ctrl-C outside ctrl_c_sets
        stop.set()
    if stop.is_set():
        for fut in pending:
            fut.cancel()
    pool.shutdown(wait=True)
    if stop.is_set():
        for fut in pending:
            if not fut.cancelled():
                hand(fut)
        raise KeyboardInterrupt


@dataclass
class ClassReport:
    """A class run with its outputs written: gradebook, similarity flags, report, and the seconds
    each phase took (grading, similarity, report)."""

    run: ClassRun
    rows: list[dict[str, Any]]
    flags: list[Any]  # similarity.Flag, best first
    report: Path
    notes: list[str]
    phases: dict[str, float]


def grade_and_report(
    submissions: str | Path, out: str | Path, *, points: Points, part_b: bool = False, **kwargs: Any
) -> ClassReport:
    """`tito grade-class`: grade_class(**kwargs), then gradebook.csv, the similarity flags and
    class_report.html, timing each phase."""
    from tinytorch.classroom.class_report import write_report
    from tinytorch.classroom.similarity import similarity_flags
    from tinytorch.release import make_student_source, reference_path

    out = Path(out)
    start = time.perf_counter()
    run = grade_class(submissions, out, part_b=part_b, **kwargs)
    graded = time.perf_counter()
    rows = run.rows(points)
    write_gradebook(out / "gradebook.csv", rows)  # the grades first: nothing after can lose them
    notes = list(run.warnings)
    reference = reference_path(17).read_text(encoding="utf-8")
    try:
        flags = similarity_flags(run.sources, reference, make_student_source(reference))
    except Exception as exc:  # noqa: BLE001 (a bug of ours on one student's text: not the class's)
        flags = []
        notes.append(f"similarity failed, so nothing is flagged: {exc!r}")
    compared = time.perf_counter()
    if run.interrupted:
        notes.append("interrupted: students not yet graded are missing from this report")
    report = write_report(
        out, run.docs, rows, flags, run.sources, reference, part_b=part_b, notes=notes
    )
    phases = {
        "grading": graded - start,
        "similarity": compared - graded,
        "report": time.perf_counter() - compared,
    }
    return ClassReport(run, rows, flags, report, notes, phases)


# Codecs whose decoding time grows with the square of the input (a 4 MB punycode file took over
# half an hour in the grader's own process): decoded for similarity only up to SLOW_CODEC_MAX.
SLOW_CODECS = ("punycode", "idna")
SLOW_CODEC_MAX = 64 << 10  # bytes: about 0.1 s of punycode; a Module 17 file is about 20 KB


def _as_imported(blob: bytes) -> str:
    """`blob` decoded as Python's import decodes a .py (its coding line honoured: utf-7 must not
    hide the code), within bounds; UTF-8 where that fails or would take too long."""
    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(blob).readline)
        if codecs.lookup(encoding).name in SLOW_CODECS and len(blob) > SLOW_CODEC_MAX:
            raise ValueError(f"{encoding}: too slow to decode at {len(blob)} bytes")
        return importlib.util.decode_source(blob)
    except (SyntaxError, LookupError, ValueError):  # ValueError: any UnicodeError (punycode)
        return blob.decode("utf-8", errors="replace")


def _source(sub: Submission, main: bytes, helpers: dict[str, bytes] | None = None) -> str:
    """What similarity compares: the source the student's process runs, read from what was
    staged (`main`, the graded file; `helpers`, a folder submission's other files), never from the
    student's path again (a file swapped after grading must not be what similarity reads). A
    notebook or a .py with nbdev markers: its exported cells (has_nbdev_markers decides, on the
    file read as UTF-8, as the child's loader does); any other .py as import reads it. A folder
    submission's helper files follow, each under a comment naming it: code moved into a helper
    is compared too (red-teaming: a reference copy in kernels.py, imported by acceleration.py,
    went unseen)."""
    if sub.impl is None:
        return ""
    if sub.impl.suffix == ".ipynb" or has_nbdev_markers(main.decode("utf-8", errors="replace")):
        text = _exported_from_bytes(sub.impl.name, main)
    else:
        text = _as_imported(main)
    rest = [(n, _as_imported(b)) for n, b in sorted((helpers or {}).items()) if n.endswith(".py")]
    # one that does not tokenize (a lone `"""`) would swallow every file after it: those go last
    rest.sort(key=lambda nt: bool(normalise(nt[1]).error))
    return text + "".join(f"\n# ---- {name}\n{helper}" for name, helper in rest)


def _exported_from_bytes(name: str, blob: bytes) -> str:
    """A notebook's (or marked percent file's) exported source, from the staged bytes: written to
    a private folder of ours and read there (source_text), so the student's path is not opened."""
    with tempfile.TemporaryDirectory(prefix="tt-similarity-") as tmp:
        os.chmod(tmp, 0o700)
        path = Path(tmp) / name
        path.write_bytes(blob)
        return source_text(path)
