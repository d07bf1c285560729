"""Similarity flags: near-identical normalised token streams, pair by pair and against the reference.

Normalisation: line ends (CR, CRLF) become LF first, so a file saved with CR line ends (one
"line" to `tokenize`, all of it a comment) is compared as what Python runs. Then Python's
`tokenize`: comments, blank lines and indentation are dropped, every identifier becomes ID and
every string STR; keywords, operators and numbers stay; at most MAX_TOKENS tokens per file, which
padding does not spend (normalise: LINE_MAX, FREE_TOKENS, SEEN_MAX). The
code every student starts from (the student edition of Module 17, `tito release 17`) is removed
first: every run of MIN_BLOCK tokens whose hashed shingle the starter also holds is not the
student's work. What is left is compared as its multiset of overlapping GRAM-token shingles
(hashed): the share of shingles the two hold in common, 2|A∩B| / (|A|+|B|), in linear time; where
both streams are at most ALIGN_MAX shingles long, a pair above the threshold is scored by
`difflib.SequenceMatcher(autojunk=False).ratio()` on the shingles (order counts), 0 (nothing
shared) to 1 (the same). Larger files keep the multiset score, so two identical megabyte files
cost milliseconds, not minutes. Where the smaller side has CONTAINED_MIN tokens or more, the
share of its tokens inside runs of MIN_BLOCK tokens the other also holds counts too
(Flag.contained): code added around a copy (30 unused helpers after the reference once) does not
dilute it below the threshold. A file whose stream was cut at MAX_TOKENS is also read whole
(_streamed_hits, nothing stored but the reference's runs it holds) against the reference's own
code: statements of ever new shapes can spend the cap, and then hid a copy placed after them.

Documented thresholds: a pair is flagged at PAIR_THRESHOLD (0.90) or more, a submission against
the reference solution's own (non-starter) code at REFERENCE_THRESHOLD (0.90) or more. A submission
with fewer than MIN_TOKENS tokens of its own (an untouched starter) is not compared. Flags inform
the instructor; they never change a verdict.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import io
import keyword
import tokenize
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import combinations

PAIR_THRESHOLD = 0.90
REFERENCE_THRESHOLD = 0.90
MIN_TOKENS = 40
MIN_BLOCK = 8
GRAM = 4
MAX_TOKENS = 50_000  # per file (Module 17 is ~5,000 tokens): the rest is not compared
FREE_TOKENS = 20_000  # kept as they are; past them a line shaped like SEEN_MAX before is padding
SEEN_MAX = 4
LINE_MAX = 2_000  # tokens kept of one logical line (a 50,000-token literal is padding)
CONTAINED_MIN = 200  # tokens: a smaller side at least this long is also scored by containment
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
    truncated: bool = False  # MAX_TOKENS reached: the rest of the file is not in the stream

    def key(self) -> str:
        # surrogatepass: a lone surrogate (a utf-7 coding line can make one) is a token too
        return hashlib.sha256("\x00".join(self.norm).encode("utf-8", "surrogatepass")).hexdigest()

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
    contained: bool = False  # the score is the share of the smaller side inside the other
    a_lines: set[int] = field(default_factory=set)  # source lines in matching regions
    b_lines: set[int] = field(default_factory=set)

    @property
    def kind(self) -> str:
        return "reference" if self.b == REFERENCE else "pair"


def _kept(line: list[tokenize.TokenInfo], seen: Counter[tuple[str, ...]], kept: int) -> bool:
    """Whether a logical line's tokens join the stream: past FREE_TOKENS kept tokens, a line
    whose shape (names ID, strings STR, numbers NUM) was kept SEEN_MAX times already is padding."""
    shape = tuple("NUM" if t.type == tokenize.NUMBER else _norm(t) for t in line)
    seen[shape] += 1
    return kept < FREE_TOKENS or seen[shape] <= SEEN_MAX


def _norm(tok: tokenize.TokenInfo) -> str:
    if tok.type == tokenize.NAME:
        return tok.string if keyword.iskeyword(tok.string) else "ID"
    return "STR" if tok.type == tokenize.STRING else tok.string


def lf(text: str) -> str:
    """`text` with CR and CRLF line ends made LF: its lines as tokenize counts them (a file saved
    with CR ends is one "line" to tokenize, all of it a comment)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalise(source: str) -> Tokens:
    """The normalised token stream of `source`; where it stops tokenizing (an unterminated string,
    say), the lines before that point, with `error` set.

    Padding cannot push code out of sight: a logical line keeps at most LINE_MAX tokens, and past
    FREE_TOKENS a line shaped like SEEN_MAX lines before it is skipped (a 50,000-token list of
    zeros or 25,000 copies of `x = 1` before a copy of the reference once hid it)."""
    out = Tokens()
    source = lf(source)
    seen: Counter[tuple[str, ...]] = Counter()
    line: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type not in _DROP and len(line) < LINE_MAX:
                line.append(tok)
            if tok.type not in (tokenize.NEWLINE, tokenize.ENDMARKER) or not line:
                continue
            if _kept(line, seen, len(out.norm)):
                out.norm += [_norm(t) for t in line]
                out.lines += [t.start[0] for t in line]
            line = []
            if len(out.norm) >= MAX_TOKENS:
                del out.norm[MAX_TOKENS:], out.lines[MAX_TOKENS:]
                out.truncated = True
                break
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        out.error = f"cannot tokenize: {exc}"  # what came before the error is still compared
    return out


def _gramset(t: Tokens) -> set[int]:
    """The set of `t`'s MIN_BLOCK-token shingles, computed once."""
    cache = t.__dict__.setdefault("_gramset", {})
    if MIN_BLOCK not in cache:
        cache[MIN_BLOCK] = set(t.grams(MIN_BLOCK))
    return cache[MIN_BLOCK]


def _covered(a: Tokens, theirs: set[int]) -> list[bool]:
    """Per token of `a`: inside a run of MIN_BLOCK tokens whose hashed shingle is in `theirs`."""
    keep = [False] * len(a.norm)
    if len(a.norm) < MIN_BLOCK:
        return keep
    for i, gram in enumerate(a.grams(MIN_BLOCK)):
        if gram in theirs:
            keep[i : i + MIN_BLOCK] = [True] * MIN_BLOCK
    return keep


def _shared(a: Tokens, b: Tokens) -> list[bool]:
    """Per token of `a`: inside a run of MIN_BLOCK tokens that `b` also holds (hashed shingles,
    one pass over each stream)."""
    return _covered(a, _gramset(b))


def _inside(small: Tokens, theirs: set[int]) -> float:
    """The share of `small`'s tokens inside runs of MIN_BLOCK tokens whose hashed shingle is in
    `theirs` (the other side's _gramset, or the runs _streamed_hits found)."""
    shared = _covered(small, theirs)
    return sum(shared) / len(shared) if shared else 0.0


def _streamed_hits(source: str, wanted: set[int]) -> set[int]:
    """The MIN_BLOCK-token shingles of all of `source` (no cap, no padding rule) that are in
    `wanted`; nothing else is kept, so a 4 MB file costs time (seconds), not memory."""
    hits: set[int] = set()
    window: deque[str] = deque(maxlen=MIN_BLOCK)
    source = lf(source)
    with contextlib.suppress(tokenize.TokenError, IndentationError, SyntaxError):
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _DROP:
                continue
            window.append(_norm(tok))
            if len(window) == MIN_BLOCK and (h := hash(tuple(window))) in wanted:
                hits.add(h)
    return hits


def without_starter(tokens: Tokens, starter: Tokens) -> Tokens:
    """`tokens` less every run of >= MIN_BLOCK tokens it shares with the starter code."""
    shared = _shared(tokens, starter)
    return Tokens(
        [t for t, s in zip(tokens.norm, shared, strict=True) if not s],
        [line for line, s in zip(tokens.lines, shared, strict=True) if not s],
        tokens.error,
        tokens.truncated,
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


def _ratio(
    a: Tokens, b: Tokens, threshold: float, bags: dict[int, Counter[int]]
) -> tuple[float, bool] | None:
    """The pair's (score, contained) if it reaches `threshold`, else None (linear unless both are
    small). The score is the share of shingles in common; where the smaller side has at least
    CONTAINED_MIN tokens, the share of its tokens inside runs of MIN_BLOCK tokens the larger
    also holds counts too (contained), so junk added around a copy does not dilute it below the
    threshold (runs, not single shingles: a large file of other code covers an honest file's
    4-token shingles, not its 8-token runs)."""
    ga, gb = bags.setdefault(id(a), Counter(a.grams())), bags.setdefault(id(b), Counter(b.grams()))
    na, nb = a.norm and sum(ga.values()), b.norm and sum(gb.values())
    if not na or not nb:
        return None
    small, large = (a, b) if len(a.norm) <= len(b.norm) else (b, a)
    contains = len(small.norm) >= CONTAINED_MIN
    if 2 * min(na, nb) / (na + nb) >= threshold:  # real_quick_ratio: the lengths alone
        score = 2 * sum((ga & gb).values()) / (na + nb)  # quick_ratio: the shared multiset
        if score >= threshold and _aligned(a, b):
            score = difflib.SequenceMatcher(None, a.grams(), b.grams(), autojunk=False).ratio()
        if score >= threshold:
            return score, False
    if contains and (inside := _inside(small, _gramset(large))) >= threshold:
        return inside, True
    return None


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
        got = _ratio(own[reps[key]], ref, reference_threshold, bags)
        if got is not None:
            flags += [Flag(m, REFERENCE, *got) for m in members]
    flagged = {f.a for f in flags if f.b == REFERENCE}
    for key, members in groups.items():  # past the cap: the whole file against the reference
        rep = reps[key]
        if own[rep].truncated and rep not in flagged and len(ref.norm) >= CONTAINED_MIN:
            hits = _streamed_hits(sources[rep], _gramset(ref))
            if (score := _inside(ref, hits)) >= reference_threshold:
                flags += [Flag(m, REFERENCE, score, True) for m in members]
    for ka, kb in combinations(groups, 2):
        got = _ratio(own[reps[ka]], own[reps[kb]], pair_threshold, bags)
        if got is not None:
            flags += [Flag(*sorted((a, b)), *got) for a in groups[ka] for b in groups[kb]]
    flags.sort(key=lambda f: (-f.score, f.a, f.b))
    for f in flags[:MARKED_MAX]:
        f.a_lines, f.b_lines = _regions(own[f.a], ref if f.b == REFERENCE else own[f.b])
    return flags
