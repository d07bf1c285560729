"""Similarity flags: near-identical normalised token streams, pair by pair and against the reference.

Normalisation: line ends (CR, CRLF) become LF first, so a file saved with CR line ends (one
"line" to `tokenize`, all of it a comment) is compared as what Python runs. Then Python's
`tokenize`: comments, blank lines and indentation are dropped, every identifier becomes ID and
every string STR; keywords, operators and numbers stay; at most MAX_TOKENS tokens per file. The
code every student starts from (the student edition of Module 17, `tito release 17`) is removed
first: every run of MIN_BLOCK tokens whose hashed shingle the starter also holds is not the
student's work. What is left is compared as its multiset of overlapping GRAM-token shingles
(hashed): the share of shingles the two hold in common, 2|A∩B| / (|A|+|B|), in linear time; where
both streams are at most ALIGN_MAX shingles long, a pair above the threshold is scored by
`difflib.SequenceMatcher(autojunk=False).ratio()` on the shingles (order counts), 0 (nothing
shared) to 1 (the same). Larger files keep the multiset score, so two identical megabyte files
cost milliseconds, not minutes.

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
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

PAIR_THRESHOLD = 0.90
REFERENCE_THRESHOLD = 0.90
MIN_TOKENS = 40
MIN_BLOCK = 8
GRAM = 4
MAX_TOKENS = 50_000  # per file (Module 17 is ~5,000 tokens): the rest is not compared
ALIGN_MAX = 3000  # shingles: longer streams are scored and marked from hashed shingles only
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

    def grams(self, size: int = GRAM) -> list[int]:
        """The overlapping `size`-token shingles, hashed (one for a shorter stream); computed
        once per size."""
        cache = self.__dict__.setdefault("_grams", {})
        if size not in cache:
            norm = self.norm
            if len(norm) < size:
                cache[size] = [hash(tuple(norm))] if norm else []
            else:
                cache[size] = [hash(tuple(norm[i : i + size])) for i in range(len(norm) - size + 1)]
        return cache[size]


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
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _DROP:
                continue
            if len(out.norm) >= MAX_TOKENS:
                break
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


def _shared(a: Tokens, b: Tokens) -> list[bool]:
    """Per token of `a`: inside a run of MIN_BLOCK tokens that `b` also holds (hashed shingles,
    one pass over each stream)."""
    theirs = set(b.grams(MIN_BLOCK))
    keep = [False] * len(a.norm)
    if len(a.norm) < MIN_BLOCK:
        return keep
    for i, gram in enumerate(a.grams(MIN_BLOCK)):
        if gram in theirs:
            keep[i : i + MIN_BLOCK] = [True] * MIN_BLOCK
    return keep


def without_starter(tokens: Tokens, starter: Tokens) -> Tokens:
    """`tokens` less every run of >= MIN_BLOCK tokens it shares with the starter code."""
    shared = _shared(tokens, starter)
    return Tokens(
        [t for t, s in zip(tokens.norm, shared, strict=True) if not s],
        [line for line, s in zip(tokens.lines, shared, strict=True) if not s],
        tokens.error,
    )


def _aligned(a: Tokens, b: Tokens) -> bool:
    return max(len(a.norm), len(b.norm)) - GRAM + 1 <= ALIGN_MAX


def _regions(a: Tokens, b: Tokens) -> tuple[set[int], set[int]]:
    """Source lines of each side inside a run of >= MIN_BLOCK tokens the other holds."""
    if _aligned(a, b):  # small enough: difflib's matching blocks, in order
        sm = difflib.SequenceMatcher(None, a.grams(), b.grams(), autojunk=False)
        a_lines: set[int] = set()
        b_lines: set[int] = set()
        for m in sm.get_matching_blocks():
            if m.size and m.size + GRAM - 1 >= MIN_BLOCK:
                a_lines.update(a.lines[m.a : m.a + m.size + GRAM - 1])
                b_lines.update(b.lines[m.b : m.b + m.size + GRAM - 1])
        return a_lines, b_lines
    a_shared, b_shared = _shared(a, b), _shared(b, a)
    return (
        {line for line, s in zip(a.lines, a_shared, strict=True) if s},
        {line for line, s in zip(b.lines, b_shared, strict=True) if s},
    )


def _ratio(a: Tokens, b: Tokens, threshold: float, bags: dict[int, Counter[int]]) -> float | None:
    """The pair's score if it reaches `threshold`, else None (linear unless both are small)."""
    ga, gb = bags.setdefault(id(a), Counter(a.grams())), bags.setdefault(id(b), Counter(b.grams()))
    na, nb = a.norm and sum(ga.values()), b.norm and sum(gb.values())
    if not na or not nb or 2 * min(na, nb) / (na + nb) < threshold:
        return None  # real_quick_ratio: the lengths alone
    score = 2 * sum((ga & gb).values()) / (na + nb)  # quick_ratio: the shared multiset
    if score < threshold:
        return None
    if _aligned(a, b):
        score = difflib.SequenceMatcher(None, a.grams(), b.grams(), autojunk=False).ratio()
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
    bags: dict[int, Counter[int]] = {}  # shingle multisets, by id of the token stream
    for key, members in groups.items():
        flags += [Flag(a, b, 1.0) for a, b in combinations(members, 2)]
        score = _ratio(own[reps[key]], ref, reference_threshold, bags)
        if score is not None:
            flags += [Flag(m, REFERENCE, score) for m in members]
    for ka, kb in combinations(groups, 2):
        score = _ratio(own[reps[ka]], own[reps[kb]], pair_threshold, bags)
        if score is not None:
            flags += [Flag(*sorted((a, b)), score) for a in groups[ka] for b in groups[kb]]
    flags.sort(key=lambda f: (-f.score, f.a, f.b))
    for f in flags[:MARKED_MAX]:
        f.a_lines, f.b_lines = _regions(own[f.a], ref if f.b == REFERENCE else own[f.b])
    return flags
