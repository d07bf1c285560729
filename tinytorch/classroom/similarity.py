"""Similarity flags: near-identical normalised token streams, pair by pair and against the reference.

Normalisation (Python's `tokenize`): comments, blank lines and indentation are dropped, every
identifier becomes ID and every string STR; keywords, operators and numbers stay. The code every
student starts from (the student edition of Module 17, `tito release 17`) is removed first: runs of
at least MIN_BLOCK tokens shared with it are not the student's work. What is left is compared as
its sequence of overlapping GRAM-token shingles (4 tokens: far fewer repeats than single tokens,
which keeps difflib ~30x faster) with `difflib.SequenceMatcher(autojunk=False).ratio()`, 0
(nothing shared) to 1 (the same).

Documented thresholds: a pair is flagged at PAIR_THRESHOLD (0.90) or more, a submission against
the reference solution's own (non-starter) code at REFERENCE_THRESHOLD (0.90) or more. A submission
with fewer than MIN_TOKENS tokens of its own (an untouched starter) is not compared. Flags inform
the instructor; they never change a verdict.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import keyword
import tokenize
from dataclasses import dataclass, field
from itertools import combinations

PAIR_THRESHOLD = 0.90
REFERENCE_THRESHOLD = 0.90
MIN_TOKENS = 40
MIN_BLOCK = 8
GRAM = 4
MARKED_MAX = 20  # flags (best first) whose matching regions are computed for the side-by-side
REFERENCE = "(reference solution)"

_DROP = {
    tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
    tokenize.ENCODING, tokenize.ENDMARKER,
}  # fmt: skip


@dataclass
class Tokens:
    """A normalised token stream and the source line (1-based) each token came from."""

    norm: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    error: str = ""  # why the source could not be tokenized (then the stream is empty)

    def key(self) -> str:
        return hashlib.sha256("\x00".join(self.norm).encode()).hexdigest()

    def grams(self) -> list[str]:
        """The overlapping GRAM-token shingles (one for a stream shorter than GRAM)."""
        if len(self.norm) < GRAM:
            return ["\x01".join(self.norm)] if self.norm else []
        return ["\x01".join(self.norm[i : i + GRAM]) for i in range(len(self.norm) - GRAM + 1)]


@dataclass
class Flag:
    """One flagged pair; `b` is REFERENCE for a near-copy of the reference solution."""

    a: str
    b: str
    score: float
    a_lines: set[int] = field(default_factory=set)  # source lines in matching regions
    b_lines: set[int] = field(default_factory=set)

    @property
    def kind(self) -> str:
        return "reference" if self.b == REFERENCE else "pair"


def normalise(source: str) -> Tokens:
    """The normalised token stream of `source` (empty, with `error`, if it does not tokenize)."""
    out = Tokens()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _DROP:
                continue
            if tok.type == tokenize.NAME:
                text = tok.string if keyword.iskeyword(tok.string) else "ID"
            elif tok.type == tokenize.STRING:
                text = "STR"
            else:
                text = tok.string
            out.norm.append(text)
            out.lines.append(tok.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        return Tokens(error=f"cannot tokenize: {exc}")
    return out


def _blocks(a: Tokens, b: Tokens) -> list[tuple[int, int, int]]:
    """Shared runs of >= MIN_BLOCK tokens as (start in a, start in b, tokens)."""
    sm = difflib.SequenceMatcher(None, a.grams(), b.grams(), autojunk=False)
    runs = [(m.a, m.b, m.size + GRAM - 1) for m in sm.get_matching_blocks() if m.size]
    return [r for r in runs if r[2] >= MIN_BLOCK]


def without_starter(tokens: Tokens, starter: Tokens) -> Tokens:
    """`tokens` less every run of >= MIN_BLOCK tokens it shares with the starter code."""
    keep = [True] * len(tokens.norm)
    for start, _b, size in _blocks(tokens, starter):
        keep[start : start + size] = [False] * size
    return Tokens(
        [t for t, k in zip(tokens.norm, keep, strict=True) if k],
        [line for line, k in zip(tokens.lines, keep, strict=True) if k],
        tokens.error,
    )


def _regions(a: Tokens, b: Tokens) -> tuple[set[int], set[int]]:
    a_lines: set[int] = set()
    b_lines: set[int] = set()
    for sa, sb, size in _blocks(a, b):
        a_lines.update(a.lines[sa : sa + size])
        b_lines.update(b.lines[sb : sb + size])
    return a_lines, b_lines


def _ratio(a: Tokens, b: Tokens, threshold: float) -> float | None:
    sm = difflib.SequenceMatcher(None, a.grams(), b.grams(), autojunk=False)
    if sm.real_quick_ratio() < threshold or sm.quick_ratio() < threshold:
        return None  # upper bounds already below the threshold
    score = sm.ratio()
    return score if score >= threshold else None


def similarity_flags(
    sources: dict[str, str],
    reference: str,
    starter: str,
    *,
    pair_threshold: float = PAIR_THRESHOLD,
    reference_threshold: float = REFERENCE_THRESHOLD,
) -> list[Flag]:
    """Flags over `sources` (student -> Python source), best score first.

    Identical normalised streams are grouped and compared once, so a class of many copies stays
    cheap; every pair inside a group is still flagged (score 1.0).
    """
    start = normalise(starter)
    own = {s: without_starter(normalise(src), start) for s, src in sources.items()}
    ref = without_starter(normalise(reference), start)
    groups: dict[str, list[str]] = {}
    for student, toks in sorted(own.items()):
        if len(toks.norm) >= MIN_TOKENS:
            groups.setdefault(toks.key(), []).append(student)
    flags: list[Flag] = []
    reps = {key: members[0] for key, members in groups.items()}
    for key, members in groups.items():
        flags += [Flag(a, b, 1.0) for a, b in combinations(members, 2)]
        score = _ratio(own[reps[key]], ref, reference_threshold)
        if score is not None:
            flags += [Flag(m, REFERENCE, score) for m in members]
    for ka, kb in combinations(groups, 2):
        score = _ratio(own[reps[ka]], own[reps[kb]], pair_threshold)
        if score is not None:
            flags += [Flag(*sorted((a, b)), score) for a in groups[ka] for b in groups[kb]]
    flags.sort(key=lambda f: (-f.score, f.a, f.b))
    for f in flags[:MARKED_MAX]:
        f.a_lines, f.b_lines = _regions(own[f.a], ref if f.b == REFERENCE else own[f.b])
    return flags
