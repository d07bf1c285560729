"""The CLI's argument parser: argparse's, plus "did you mean" for a mistyped flag.

argparse reports a flag it does not know from the top-level parser, with the top-level usage
(`tito: error: unrecognized arguments: --no-partb`), even when the flag was meant for a
subcommand. Here the error comes from the subcommand that was chosen, with its own usage and the
nearest of its flags (`did you mean --no-part-b?`). Python 3.14's `suggest_on_error` suggests
choices only, and Python 3.14 only.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence


class SuggestingParser(argparse.ArgumentParser):
    """An ArgumentParser whose "unrecognized arguments" error comes from the subcommand chosen
    and names its nearest flag. Subparsers made through `add_subparsers().add_parser` are of
    this class too (argparse makes them with type(self))."""

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = _chosen(self, parsed)
            owner.error(f"unrecognized arguments: {' '.join(extras)}{suggestion(owner, extras)}")
        return parsed


def suggestion(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """' (did you mean --x?)' for the first unknown flag close to one of `parser`'s shown
    flags, else ''."""
    known = [
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
        if flag.startswith("--")
    ]
    for extra in extras:
        if extra.startswith("--"):
            near = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1, cutoff=0.6)
            if near:
                return f" (did you mean {near[0]}?)"
    return ""


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand parser that `parsed` went through (`parser` itself if none)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(parsed, subs[0].dest, None) if subs and subs[0].dest else None
        if name not in (subs[0].choices if subs else {}):
            return parser
        parser = subs[0].choices[name]
