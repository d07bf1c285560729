"""The one sanitiser for student-controlled text on its way to a person.

A student's exception messages, file names, printed output and source reach the terminal, logs,
gradebook.csv, JSON `output` fields and the class report. Red-teaming put 330 raw ESC and 55 BEL
bytes on `tito milestone run`'s stdout: they cleared the screen, drew a fake green "PASS 30/30",
wrote the clipboard (OSC 52) and hid text, while the JSON said NOT_PASSED. `clean` removes every
escape sequence (CSI, OSC, DCS/PM/APC/SOS, 7- and 8-bit) and then every other control character
but tab and newline (so also CR, which overwrites a line, and BEL), the Unicode bidirectional
overrides and marks that reorder what is shown, the invisible characters (zero widths, soft
hyphen, BOM, line and paragraph separators) and lone surrogates, which no UTF-8 file can hold. Every renderer in tinytorch/render/ and the class grader use
it; none keeps its own.
"""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

_SEQUENCES = re.compile(
    r"""
      (?:\x1b\]|\x9d) [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?   # OSC ... BEL or ST (OSC 52)
    | (?:\x1b[P^_X]|[\x90\x98\x9e\x9f]) [^\x1b\x9c]* (?:\x1b\\|\x9c)?   # DCS, SOS, PM, APC
    | (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]?                    # CSI (colours, cursor, clear)
    | \x1b [ -/]* [0-~]?                                       # any other ESC sequence
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 and C1 controls but tab and newline
    "\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb"
    "\ud800-\udfff]"  # lone surrogates: they cannot be written as UTF-8 (a report once failed)
)  # invisible and bidirectional marks, line/paragraph separators, zero widths, soft hyphen, BOM


def clean(text: str) -> str:
    """`text` without escape sequences or control characters (tab and newline are kept)."""
    if not isinstance(text, str):
        text = str(text)
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def clean_tree(obj: Any) -> Any:
    """A JSON-like value with every string in it (keys too) cleaned; other values unchanged."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_tree(v) for v in obj]
    return obj


class CleanStream:
    """A text stream that cleans everything written to it (the terminal report's `out`).

    When the reader goes away (`tito milestone run 07 | head`), writing raises BrokenPipeError:
    the stream then says so in `broken`, sends the rest to /dev/null (so that neither this write
    nor Python's flush at exit prints a traceback) and the run goes on quietly to its verdict.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(clean(text))
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        self.broken = True
        silence(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: TextIO) -> None:
    """Point `stream`'s file descriptor at /dev/null: what is still buffered, and what is written
    later, goes nowhere instead of raising BrokenPipeError again (at exit, too)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a StringIO): nothing to flush at exit
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def flush_quietly(stream: TextIO) -> None:
    """Flush `stream` now, as the end of a command (not at exit, where a reader that went away
    would print a traceback); a BrokenPipeError silences it instead."""
    try:
        stream.flush()
    except BrokenPipeError:
        silence(stream)
