"""Similarity flags: what the code does, compared pair by pair, function by function, and against
the reference.

Normalisation goes through the AST, so the spelling of code does not hide a copy. Line ends (CR,
CRLF) become LF first. The file is parsed (`ast.parse`, its warnings silenced), bare constants
(docstrings, `...`) are dropped, and each statement (a compound statement's header alone) is
printed back by `ast.unparse` in one spelling (numbers by value, so 0x10 and 16 are one token; no
formatting, no comments) and tokenized by one rule for both paths (_canonical): identifiers ID,
strings STR, `;` and grouping parentheses dropped (a "(" right after a name, string, ")" or "]"
is a call's and stays), `elif` as `else: if`. The identifiers themselves are kept beside the
stream (Tokens.names), so a flag can say whether the names were changed too. Code that does not
parse falls back to `tokenize` through the same rule: a file that does not parse (a helper the
child never imports) is parsed top-level block by block and only its broken blocks are
tokenized; a statement `ast.unparse` cannot print (nested past the recursion limit) is tokenized
from its lines; a file over AST_MAX_BYTES (padding: Module 17 is about 20 KB) is tokenized
whole, which bounds the parser's memory (about 330 bytes per byte of source) and time. At most
MAX_TOKENS tokens per file, which padding does not spend (LINE_MAX per statement; past
FREE_TOKENS a statement shaped like SEEN_MAX before it is skipped).

The code every student starts from (the student edition of Module 17, `tito release 17`) is
removed first: every run of MIN_BLOCK tokens whose hashed shingle the starter also holds is not
the student's work. What is left is compared as its multiset of overlapping GRAM-token shingles
(hashed): the share of shingles the two hold in common, 2|A∩B| / (|A|+|B|), in linear time; where
both streams are at most ALIGN_MAX shingles long, a pair above the threshold is scored by
`difflib.SequenceMatcher(autojunk=False).ratio()` on the shingles (order counts). Where the
smaller side has CONTAINED_MIN tokens or more, the share of its tokens inside runs of MIN_BLOCK
tokens the other also holds counts too: code added around a copy does not dilute it. A file whose
stream was cut at MAX_TOKENS is also read whole (_streamed_hits) against the reference's code.

Per function: every function of FUNC_MIN tokens or more of its own (a solution, not a one-line
helper; the starter's signatures and docstrings are not its own) is scored on its own: the share
of its tokens inside runs of FUNC_BLOCK tokens that another file holds, both read with each name
written as how far back it was last used in its function (_backrefs: renaming does not hide a
copy, and NumPy code that only shares the shape of its lines, `ID [ ID : ID + ID ]`, does not
match). A reference function or a classmate's function copied whole into a file of other code
is flagged though the file as a whole is far from the threshold (three reference functions in
a classmate's file: 78% of the reference). A function is scored in full against a file only
where the file holds enough of its runs to reach the threshold (a set intersection), so a class
of 200 stays in seconds.

Each flag names its kind: "verbatim" (the same code with the same names, however it is spelled),
"renamed" (the same code, its names changed) or "contained" (a copy inside other code, as a whole
file or function by function; Flag.functions names them).

Documented thresholds: a pair is flagged at PAIR_THRESHOLD (0.90) or more, a submission against
the reference solution's own (non-starter) code at REFERENCE_THRESHOLD (0.90) or more, a function
at the same thresholds. A submission with fewer than MIN_TOKENS tokens of its own (an untouched
starter) is not compared. Flags inform the instructor; they never change a verdict.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
import io
import keyword
import re
import tokenize
import warnings
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations, pairwise

PAIR_THRESHOLD = 0.90
REFERENCE_THRESHOLD = 0.90
MIN_TOKENS = 40
MIN_BLOCK = 8
GRAM = 4
MAX_TOKENS = 50_000  # per file (Module 17 is ~5,000 tokens): the rest is not compared
FREE_TOKENS = 20_000  # kept as they are; past them a line shaped like SEEN_MAX before is padding
SEEN_MAX = 4
LINE_MAX = 2_000  # tokens kept of one statement (a 50,000-token literal is padding)
CONTAINED_MIN = 200  # tokens: a smaller side at least this long is also scored by containment
FUNC_BLOCK = 16  # a function is scored by runs this long (8 match honest NumPy code too often)
FAR = 64  # tokens: a name used again further back than this reads "@64"
FUNC_MIN = 100  # tokens of a function's own: scored on its own (a solution, not a helper)
AST_MAX_BYTES = 128 << 10  # parsed (about 45 MB while parsed); a larger file or block: tokenize
ALIGN_MAX = 3000  # shingles: longer streams are scored and marked from hashed shingles only
MARKED_MAX = 20  # flags (best first) whose matching regions are computed for the side-by-side
REFERENCE = "(reference solution)"
KINDS = ("verbatim", "renamed", "contained")

_DROP = {
    tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
    tokenize.ENCODING, tokenize.ENDMARKER,
}  # fmt: skip
# Python 3.12 splits f-strings into several tokens: the whole f-string is one STR, as before
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_DROP |= {getattr(tokenize, n) for n in ("FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}
_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")  # statement lists, in source order
_BLOCK_WORD = {"orelse": "else", "finalbody": "finally"}  # the keyword that opens such a list
_TOP_BLOCK = re.compile(r"(?:def|class|async)\b|@")  # a line that opens a top-level block
_ATOM_BEFORE = {"ID", ")", "]", "STR"}  # "(" after these is a call's, not a group


@dataclass
class Tokens:
    """A normalised token stream, the source line (1-based) each token came from, the spelled
    token beside each (the identifier where the stream says ID), and the functions in it."""

    norm: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    error: str = ""  # why (part of) the source could not be read (what came before is kept)
    truncated: bool = False  # MAX_TOKENS reached: the rest of the file is not in the stream
    names: list[str] = field(default_factory=list)  # as norm, identifiers spelled; [] = norm
    funcs: list[tuple[str, int, int]] = field(default_factory=list)  # (qualname, start, end)

    def key(self) -> str:
        # surrogatepass: a lone surrogate (a utf-7 coding line can make one) is a token too
        return hashlib.sha256("\x00".join(self.norm).encode("utf-8", "surrogatepass")).hexdigest()

    def named(self) -> Tokens:
        """The stream with identifiers as spelled (for verbatim against renamed)."""
        return Tokens(self.names or self.norm, self.lines)

    def part(self, start: int, end: int) -> Tokens:
        return Tokens(self.norm[start:end], self.lines[start:end])

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
    """One flagged pair; `b` is REFERENCE for a copy of the reference solution. `kind` is one of
    KINDS; `functions` names the functions found copied where the kind is "contained" function
    by function (the reference's, or "student: name")."""

    a: str
    b: str
    score: float
    kind: str = "verbatim"
    functions: list[str] = field(default_factory=list)
    a_lines: set[int] = field(default_factory=set)  # source lines in matching regions
    b_lines: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Flag kind: {self.kind!r} is not one of {KINDS}")

    @property
    def contained(self) -> bool:
        """The score is the share of the smaller side (or of its functions) inside the other."""
        return self.kind == "contained"

    @property
    def against(self) -> str:
        return "reference" if self.b == REFERENCE else "pair"


# ---- one statement at a time: (normalised, spelled, line) tokens ---------------------------------

_Tok = tuple[str, str, int]


@dataclass
class _Unit:
    """One statement (a compound statement's header alone) as tokens; where a function starts
    (`opens`, its qualified name) and how many functions end after it (`closes`)."""

    toks: list[_Tok]
    opens: str = ""
    closes: int = 0


def _number(text: str) -> str:
    """A number literal by value (0x10, 0o20, 1_6 and 16 are one token; 1e3 is 1000.0), as
    `ast.unparse` prints it; as spelled where Python cannot read it back (over 4,300 digits)."""
    try:
        try:
            return repr(int(text, 0))
        except ValueError:
            return repr(float(text)) if text[-1:] not in "jJ" else repr(complex(text))
    except (ValueError, OverflowError):
        return text


def _norm(tok: tokenize.TokenInfo) -> str:
    if tok.type == tokenize.NAME:
        return tok.string if keyword.iskeyword(tok.string) else "ID"
    if tok.type == tokenize.NUMBER:
        return _number(tok.string)
    return "STR" if tok.type in (tokenize.STRING, _FSTRING_START) else tok.string


def _canonical(raw: list[tokenize.TokenInfo], line: int | None, first: int = 1) -> list[_Tok]:
    """One statement's tokens, spelled one way whichever path read them: names ID, strings STR,
    numbers by value, `;` and grouping parentheses dropped (a "(" right after a name, a string,
    ")" or "]" is a call's and stays; any other only groups: `((x))` is `x`, `(a + b) * c` is
    `a + b * c`, `return (a, b)` is `return a, b`), `elif` as `else: if`. Every token on source
    line `line`, or where it is (`first` the source line of the text's line 1)."""
    out: list[_Tok] = []
    parens: list[bool] = []  # per open "(": kept (a call's)
    for tok in raw:
        if tok.type in _DROP or tok.string == ";":
            continue
        at = line if line is not None else tok.start[0] + first - 1
        norm = _norm(tok)
        if norm == "(":
            parens.append(bool(out) and out[-1][0] in _ATOM_BEFORE)
            if not parens[-1]:
                continue
        elif norm == ")" and parens and not parens.pop():
            continue
        elif norm == "elif":
            out += [("else", "else", at), (":", ":", at)]
            norm = "if"
        out.append((norm, tok.string, at))
    return out


def lf(text: str) -> str:
    """`text` with CR and CRLF line ends made LF: its lines as tokenize counts them (a file saved
    with CR ends is one "line" to tokenize, all of it a comment)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _noop(toks: list[_Tok]) -> bool:
    """A statement that does nothing: a docstring or other bare string, `...`, a bare number
    (the AST path drops these as Expr(Constant))."""
    return all(t[0] == "STR" for t in toks) or (
        len(toks) == 1 and (toks[0][0] == "..." or toks[0][0][:1].isdigit())
    )


def _token_units(text: str, first: int, errors: list[str]) -> Iterator[_Unit]:
    """Logical lines of `text` (its line 1 is source line `first`) by `tokenize`, at most LINE_MAX
    tokens each, spelled as _canonical spells them, functions found by their indentation; why it
    stopped, if it did, goes to `errors`."""
    line: list[tokenize.TokenInfo] = []
    scopes: list[tuple[int, str, bool]] = []  # open `def` and `class` lines: (column, name, def)

    def unit(raw: list[tokenize.TokenInfo]) -> Iterator[_Unit]:
        col = raw[0].start[1]
        closes = 0
        while scopes and scopes[-1][0] >= col:
            closes += scopes.pop()[2]
        if closes:
            yield _Unit([], closes=closes)
        words = [t.string for t in raw[:3]]
        opens = ""
        if words[:1] in (["def"], ["class"]) or words[:2] == ["async", "def"]:
            at = words.index("class") if "class" in words[:1] else words.index("def")
            if at + 1 < len(raw) and raw[at + 1].type == tokenize.NAME:
                scopes.append((col, raw[at + 1].string, words[at] == "def"))
                opens = ".".join(n for _c, n, _d in scopes) if scopes[-1][2] else ""
        toks = _canonical(raw, None, first)
        if opens or not _noop(toks):
            yield _Unit(toks, opens=opens)

    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in _DROP and len(line) < LINE_MAX:
                line.append(tok)
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and line:
                yield from unit(line)
                line = []
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        errors.append(f"cannot tokenize: {exc}")
    if line:
        yield from unit(line)  # what came before the error is still compared
    if closes := sum(d for _c, _n, d in scopes):
        yield _Unit([], closes=closes)


def _unparsed(node: ast.AST, line: int) -> list[_Tok] | None:
    """`node` printed by `ast.unparse` and tokenized, every token on source line `line`; None
    where it cannot be printed (nested past the recursion limit, a huge integer)."""
    try:
        text = ast.unparse(node)
        return _canonical(list(tokenize.generate_tokens(io.StringIO(text).readline)), line)
    except (RecursionError, ValueError, MemoryError, tokenize.TokenError, SyntaxError):
        return None


def _segment(lines: list[str], start: int, end: int) -> str:
    """Source lines `start`..`end` (1-based, inclusive) of `lines`, as one text."""
    return "\n".join(lines[start - 1 : max(start, end)]) + "\n"


class _Walk:
    """The statements of a parsed tree (whose line 1 is source line `first`) as units, printed
    back one by one; a statement that cannot be printed is read by tokenize from its lines."""

    def __init__(self, lines: list[str], first: int, errors: list[str]) -> None:
        self.lines, self.first, self.errors = lines, first, errors
        self.names: list[str] = []  # enclosing classes and functions, for qualified names

    def body(self, stmts: list[ast.AST]) -> Iterator[_Unit]:
        for stmt in stmts:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring, `...` or a bare number: does nothing
            yield from self.stmt(stmt)

    def _line(self, node: ast.AST, default: int) -> int:
        return getattr(node, "lineno", default - self.first + 1) + self.first - 1

    def _fallback(self, node: ast.AST, line: int, end: int) -> Iterator[_Unit]:
        text = _segment(self.lines, line, end)
        yield from _token_units(text, line, self.errors)

    def stmt(self, node: ast.AST, default: int = 1) -> Iterator[_Unit]:
        line = self._line(node, default)
        blocks = [
            (f, getattr(node, f)) for f in _BLOCKS if isinstance(getattr(node, f, None), list)
        ]
        if not blocks:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                node = copy.copy(node)
                node.simple = 1  # `(x): int` is `x: int` spelled another way
            toks = _unparsed(node, line)
            if toks is None:
                yield from self._fallback(node, line, self._line_end(node, line))
            else:
                yield _Unit(toks)
            return
        head = copy.copy(node)
        for name, _stmts in blocks:
            setattr(head, name, [])
        toks = _unparsed(head, line)
        func = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if named:
            self.names.append(node.name)
        opens = ".".join(self.names) if func else ""
        if toks is None:  # the header's own lines, up to its first statement
            first_stmt = next((s for _n, b in blocks for s in b), None)
            end = self._line(first_stmt, line) - 1 if first_stmt is not None else line
            units = list(self._fallback(node, line, end)) or [_Unit([])]
            units[0].opens = opens
            yield from units
        else:
            yield _Unit(toks, opens=opens)
        for name, stmts in blocks:
            if name in _BLOCK_WORD and stmts:
                at = self._line(stmts[0], line)
                yield _Unit([(_BLOCK_WORD[name], _BLOCK_WORD[name], at), (":", ":", at)])
            if name in ("handlers", "cases"):
                for sub in stmts:
                    yield from self.stmt(sub, default=line)
            else:
                yield from self.body(stmts)
        if named:
            self.names.pop()
        if func:
            yield _Unit([], closes=1)

    def _line_end(self, node: ast.AST, line: int) -> int:
        end = getattr(node, "end_lineno", None)
        return end + self.first - 1 if end is not None else line


def _parsed(text: str) -> ast.Module | None:
    """`text` parsed, or None (a syntax error, null bytes, nesting past the parser's limit);
    warnings about the student's code (invalid escapes) are not the grader's to print."""
    if len(text) > AST_MAX_BYTES:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _blocks(lines: list[str]) -> Iterator[tuple[int, int]]:
    """(first, last) source lines of each top-level block: a new one starts at a line that opens
    a definition or a decorator at column 0 (not one after a decorator)."""
    start, after_decorator = 1, False
    for i, line in enumerate(lines, start=1):
        if _TOP_BLOCK.match(line):
            if i > start and not after_decorator:
                yield start, i - 1
                start = i
            after_decorator = line.startswith("@")
        elif line.strip() and not line.startswith((" ", "\t", "#")):
            after_decorator = False
    if start <= len(lines):
        yield start, len(lines)


def _units(source: str, errors: list[str]) -> Iterator[_Unit]:
    """Every statement of `source` as units: through the AST where it parses; a file that does
    not, top-level block by block (through the AST where the block parses); a file over
    AST_MAX_BYTES by tokenize alone (spelled alike by _canonical, in linear time)."""
    text = lf(source)
    if len(text) > AST_MAX_BYTES:
        yield from _token_units(text, 1, errors)
        return
    lines = text.split("\n")
    tree = _parsed(text)
    if tree is not None:
        yield from _Walk(lines, 1, errors).body(tree.body)
        return
    for start, end in _blocks(lines):
        block = _segment(lines, start, end)
        tree = _parsed(block)
        if tree is not None:
            yield from _Walk(lines, start, errors).body(tree.body)
        else:
            yield from _token_units(block, start, errors)


def _kept(line: list[_Tok], seen: Counter[tuple[str, ...]], kept: int) -> bool:
    """Whether a statement's tokens join the stream: past FREE_TOKENS kept tokens, a statement
    whose shape (names ID, strings STR, numbers NUM) was kept SEEN_MAX times already is padding."""
    shape = tuple("NUM" if t[0][:1].isdigit() else t[0] for t in line)
    seen[shape] += 1
    return kept < FREE_TOKENS or seen[shape] <= SEEN_MAX


def normalise(source: str) -> Tokens:
    """The normalised token stream of `source`; where part of it cannot be read (an unterminated
    string, say), what could be read, with `error` set.

    Padding cannot push code out of sight: a statement keeps at most LINE_MAX tokens, and past
    FREE_TOKENS a statement shaped like SEEN_MAX before it is skipped (a 50,000-token list of
    zeros or 25,000 copies of `x = 1` before a copy of the reference once hid it)."""
    if not isinstance(source, str):
        raise TypeError(f"source: expected the decoded text (str), got {type(source).__name__}")
    out = Tokens()
    errors: list[str] = []
    seen: Counter[tuple[str, ...]] = Counter()
    open_funcs: list[tuple[str, int]] = []
    for unit in _units(source, errors):
        if unit.opens:
            open_funcs.append((unit.opens, len(out.norm)))
        line = unit.toks[:LINE_MAX]
        if line and _kept(line, seen, len(out.norm)):
            out.norm += [t[0] for t in line]
            out.names += [t[1] if t[0] == "ID" else t[0] for t in line]
            out.lines += [t[2] for t in line]
        for _ in range(min(unit.closes, len(open_funcs))):
            name, start = open_funcs.pop()
            out.funcs.append((name, start, len(out.norm)))
        if len(out.norm) >= MAX_TOKENS:
            del out.norm[MAX_TOKENS:], out.lines[MAX_TOKENS:], out.names[MAX_TOKENS:]
            out.truncated = True
            break
    out.funcs += [(name, start, len(out.norm)) for name, start in reversed(open_funcs)]
    out.funcs = [(n, s, min(e, len(out.norm))) for n, s, e in out.funcs if s < len(out.norm)]
    out.error = errors[0] if errors else ""
    return out


def _gramset(t: Tokens, size: int = MIN_BLOCK) -> set[int]:
    """The set of `t`'s `size`-token shingles, computed once per size."""
    cache = t.__dict__.setdefault("_gramset", {})
    if size not in cache:
        cache[size] = set(t.grams(size))
    return cache[size]


def _covered(a: Tokens, theirs: set[int], size: int = MIN_BLOCK) -> list[bool]:
    """Per token of `a`: inside a run of `size` tokens whose hashed shingle is in `theirs`."""
    keep = [False] * len(a.norm)
    if len(a.norm) < size:
        return keep
    for i, gram in enumerate(a.grams(size)):
        if gram in theirs:
            keep[i : i + size] = [True] * size
    return keep


def _shared(a: Tokens, b: Tokens) -> list[bool]:
    """Per token of `a`: inside a run of MIN_BLOCK tokens that `b` also holds (hashed shingles,
    one pass over each stream)."""
    return _covered(a, _gramset(b))


def _inside(small: Tokens, theirs: set[int], size: int = MIN_BLOCK) -> float:
    """The share of `small`'s tokens inside runs of `size` tokens whose hashed shingle is in
    `theirs` (the other side's _gramset, or the runs _streamed_hits found)."""
    shared = _covered(small, theirs, size)
    return sum(shared) / len(shared) if shared else 0.0


def _streamed_hits(source: str, wanted: dict[int, set[int]]) -> dict[int, set[int]]:
    """Per run length (the keys of `wanted`), the shingles of all of `source` (no cap, no padding
    rule), normalised as `normalise` does, that are in `wanted`; nothing else is kept, and a large
    file is parsed block by block, so a 4 MB file costs time (seconds), not memory."""
    hits: dict[int, set[int]] = {size: set() for size in wanted}
    window: deque[str] = deque(maxlen=max(wanted))
    for unit in _units(source, []):
        for tok in unit.toks:
            window.append(tok[0])
            for size, grams in wanted.items():
                if len(window) >= size:
                    h = hash(tuple(window)[-size:]) if size < len(window) else hash(tuple(window))
                    if h in grams:
                        hits[size].add(h)
    return hits


def without_starter(tokens: Tokens, starter: Tokens) -> Tokens:
    """`tokens` less every run of >= MIN_BLOCK tokens it shares with the starter code; its
    functions' spans move with what is kept."""
    shared = _shared(tokens, starter)
    kept_before = [0]  # kept_before[i]: tokens kept before index i
    for s in shared:
        kept_before.append(kept_before[-1] + (not s))
    names = tokens.names or tokens.norm
    return Tokens(
        [t for t, s in zip(tokens.norm, shared, strict=True) if not s],
        [line for line, s in zip(tokens.lines, shared, strict=True) if not s],
        tokens.error,
        tokens.truncated,
        [n for n, s in zip(names, shared, strict=True) if not s],
        [(name, kept_before[a], kept_before[b]) for name, a, b in tokens.funcs],
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


class _Names:
    """Whether two streams that matched still match with identifiers as spelled: "verbatim" where
    they do (the shared multiset of shingles at the threshold), "renamed" where only the
    normalised streams did. Streams with the same spelled tokens are answered without counting."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.keys: dict[int, str] = {}  # by id of the stream
        self.bags: dict[str, Counter[int]] = {}
        self.answers: dict[tuple[str, str], str] = {}

    def _key(self, t: Tokens) -> str:
        if id(t) not in self.keys:
            self.keys[id(t)] = t.named().key()
        return self.keys[id(t)]

    def kind(self, a: Tokens, b: Tokens, contained: bool = False) -> str:
        if contained:
            return "contained"
        ka, kb = sorted((self._key(a), self._key(b)))
        if ka == kb:
            return "verbatim"
        if (ka, kb) not in self.answers:
            ga = self.bags.setdefault(self._key(a), Counter(a.named().grams()))
            gb = self.bags.setdefault(self._key(b), Counter(b.named().grams()))
            na, nb = sum(ga.values()), sum(gb.values())
            same = bool(na and nb) and 2 * sum((ga & gb).values()) / (na + nb) >= self.threshold
            self.answers[ka, kb] = "verbatim" if same else "renamed"
        return self.answers[ka, kb]


def _backrefs(t: Tokens) -> Tokens:
    """`t` with each identifier written as how many identifiers back the same name was last used
    in its function (outside functions: in the stretch between them), "new" where it was not, at
    most FAR: a function renamed whole reads the same, and code that only shares the shape of
    its lines (every slice `a[i : i + t]` is `ID [ ID : ID + ID ]`) does not. Local: a line added
    or cut changes only the uses around it. Function by function scoring reads this stream."""
    cache = t.__dict__
    if "_backrefs" not in cache:
        names = t.names or t.norm
        outer: list[tuple[int, int]] = []  # outermost functions (nested ones are inside them)
        for _n, start, end in sorted(t.funcs, key=lambda f: (f[1], -f[2])):
            if not outer or start >= outer[-1][1]:
                outer.append((start, end))
        cuts = sorted({0, len(t.norm), *(i for span in outer for i in span)})
        norm: list[str] = []
        for lo, hi in pairwise(cuts):  # one outermost function, or a stretch between them
            last: dict[str, int] = {}
            for tok, name in zip(t.norm[lo:hi], names[lo:hi], strict=True):
                if tok != "ID":
                    norm.append(tok)
                    continue
                back = len(norm) - last[name] if name in last else 0
                norm.append(f"@{min(back, FAR)}" if back else "new")
                last[name] = len(norm) - 1
        cache["_backrefs"] = Tokens(norm, t.lines, funcs=t.funcs)
    return cache["_backrefs"]


def _functions(t: Tokens) -> list[tuple[str, Tokens]]:
    """`t`'s functions of FUNC_MIN tokens or more, each as its own stream, names written as how
    far back they were last used (_backrefs)."""
    refs = _backrefs(t)
    return [(name, refs.part(s, e)) for name, s, e in t.funcs if e - s >= FUNC_MIN]


def _copied(
    funcs: list[tuple[str, Tokens]], theirs: set[int], threshold: float
) -> tuple[float, list[str]] | None:
    """(share, names) of the functions in `funcs` at `threshold` or more inside runs of
    MIN_BLOCK tokens of `theirs`, the share over all their tokens; None if none is."""
    got = [(name, f, _inside(f, theirs, FUNC_BLOCK)) for name, f in funcs]
    hit = [(name, f, s) for name, f, s in got if s >= threshold]
    if not hit:
        return None
    total = sum(len(f.norm) for _n, f, _s in hit)
    return sum(s * len(f.norm) for _n, f, s in hit) / total, [name for name, _f, _s in hit]


def _function_pairs(
    own: dict[str, Tokens], threshold: float, done: set[tuple[str, str]]
) -> dict[tuple[str, str], tuple[float, list[tuple[str, str]]]]:
    """Pairs of streams (keys of `own`, sorted, not in `done`) where a function of one is inside
    the other: {(ka, kb): (share, [(owner's key, function's name), ...])}. A function's tokens
    inside runs of FUNC_BLOCK are at most FUNC_BLOCK per shared run, so only a file holding
    `threshold` x len / FUNC_BLOCK of its runs (a set intersection, in C) is scored in full."""
    found: dict[tuple[str, str], list[tuple[tuple[str, str], int, float]]] = {}
    for key, toks in own.items():
        for name, func in _functions(toks):
            runs, need = _gramset(func, FUNC_BLOCK), threshold * len(func.norm) / FUNC_BLOCK
            for other, theirs in own.items():
                pair = (key, other) if key < other else (other, key)
                if other == key or pair in done:
                    continue
                grams = _gramset(_backrefs(theirs), FUNC_BLOCK)
                if len(runs & grams) < need:
                    continue
                if (share := _inside(func, grams, FUNC_BLOCK)) >= threshold:
                    found.setdefault(pair, []).append(((key, name), len(func.norm), share))
    out = {}
    for pair, hits in found.items():
        total = sum(n for _o, n, _s in hits)
        out[pair] = (sum(n * s for _o, n, s in hits) / total, [o for o, _n, _s in hits])
    return out


def similarity_flags(
    sources: dict[str, str],
    reference: str,
    starter: str,
    *,
    pair_threshold: float = PAIR_THRESHOLD,
    reference_threshold: float = REFERENCE_THRESHOLD,
) -> list[Flag]:
    """Flags over `sources` (student -> the Python source as the child runs it, already read and
    decoded: classgrade's staged bytes; nothing here opens a file), best score first.

    Identical normalised streams are grouped and compared once, so a class of many copies stays
    cheap; every pair inside a group is still flagged (score 1.0).
    """
    if not isinstance(sources, dict):
        raise TypeError(
            f"sources: expected a dict of student -> text, not {type(sources).__name__}"
        )
    for arg, text in (("reference", reference), ("starter", starter), *sources.items()):
        if not isinstance(text, str):
            raise TypeError(f"{arg}: expected the decoded text (str), not {type(text).__name__}")
    start = normalise(starter)
    read: dict[str, Tokens] = {}  # by source text: copies of one file are read once
    for src in (reference, *sources.values()):
        if src not in read:
            read[src] = without_starter(normalise(src), start)
    own, ref = {s: read[src] for s, src in sources.items()}, read[reference]
    groups: dict[str, list[str]] = {}
    for student, toks in sorted(own.items()):
        if len(toks.norm) >= MIN_TOKENS:
            groups.setdefault(toks.key(), []).append(student)
    flags: list[Flag] = []
    reps = {key: members[0] for key, members in groups.items()}
    bags: dict[int, Counter[int]] = {}  # shingle multisets, by id of the token stream
    pair_names, ref_names = _Names(pair_threshold), _Names(reference_threshold)
    ref_funcs = _functions(ref)
    for key, members in groups.items():
        flags += [
            Flag(a, b, 1.0, pair_names.kind(own[a], own[b])) for a, b in combinations(members, 2)
        ]
        rep = own[reps[key]]
        if (got := _ratio(rep, ref, reference_threshold, bags)) is not None:
            flags += [
                Flag(m, REFERENCE, got[0], ref_names.kind(own[m], ref, got[1])) for m in members
            ]
        elif copied := _copied(
            ref_funcs, _gramset(_backrefs(rep), FUNC_BLOCK), reference_threshold
        ):
            flags += [Flag(m, REFERENCE, copied[0], "contained", copied[1]) for m in members]
    flagged = {f.a for f in flags if f.b == REFERENCE}
    for key, members in groups.items():  # past the cap: the whole file against the reference
        rep = reps[key]
        if own[rep].truncated and rep not in flagged and len(ref.norm) >= CONTAINED_MIN:
            wanted = {MIN_BLOCK: _gramset(ref), FUNC_BLOCK: _gramset(ref, FUNC_BLOCK)}
            hits = _streamed_hits(sources[rep], wanted)
            if (score := _inside(ref, hits[MIN_BLOCK])) >= reference_threshold:
                flags += [Flag(m, REFERENCE, score, "contained") for m in members]
            elif copied := _copied(ref_funcs, hits[FUNC_BLOCK], reference_threshold):
                flags += [Flag(m, REFERENCE, copied[0], "contained", copied[1]) for m in members]
    whole: set[tuple[str, str]] = set()
    for ka, kb in combinations(groups, 2):
        got = _ratio(own[reps[ka]], own[reps[kb]], pair_threshold, bags)
        if got is not None:
            whole.add((ka, kb) if ka < kb else (kb, ka))
            for a in groups[ka]:
                for b in groups[kb]:
                    kind = pair_names.kind(own[a], own[b], got[1])
                    flags.append(Flag(*sorted((a, b)), got[0], kind))
    by_key = {key: own[rep] for key, rep in reps.items()}
    for (ka, kb), (score, owners) in _function_pairs(by_key, pair_threshold, whole).items():
        for a in groups[ka]:
            for b in groups[kb]:
                named = [f"{a if k == ka else b}: {name}" for k, name in owners]
                flags.append(Flag(*sorted((a, b)), score, "contained", named))
    flags.sort(key=lambda f: (-f.score, f.a, f.b))
    for f in flags[:MARKED_MAX]:
        f.a_lines, f.b_lines = _regions(own[f.a], ref if f.b == REFERENCE else own[f.b])
    return flags
