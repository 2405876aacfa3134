"""Bounded patterns for Grep and Glob: regular expressions and globs that cannot run unbounded.

Both run on the ``regex`` package rather than ``re``. Its syntax is a superset of Python's (what models write,
backreferences and lookaround included), and every match call takes ``timeout=``, so a pattern that backtracks
catastrophically (``(a+)+$`` on a long run of a's) stops when the call's :class:`Budget` is spent instead of
running for hours. google-re2 would be linear-time, but it refuses backreferences and lookaround.

Globs are translated by one left-to-right pass: the closing ``]`` of every ``[`` comes from a table built
right to left, so 16,000 unclosed ``[`` cost 16,000 steps, not 16,000² as in ``fnmatch.translate``. Patterns
longer than :data:`MAX_PATTERN_CHARS` are refused before any of this.
"""

from __future__ import annotations

import time

import regex

__all__ = [
    "MAX_PATTERN_CHARS",
    "Budget",
    "PatternError",
    "PatternTimeout",
    "compile_file_filter",
    "compile_glob",
    "compile_regex",
]

MAX_PATTERN_CHARS = 1000


class PatternError(ValueError):
    """A pattern that cannot be used; the message says what is wrong with it."""


class PatternTimeout(Exception):
    """A tool call's matching time ran out."""


class Budget:
    """Seconds of matching left for one tool call; :meth:`search` and :meth:`fullmatch` draw on it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._deadline = time.monotonic() + seconds

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise PatternTimeout
        return left

    def search(self, pattern: regex.Pattern[str], text: str) -> bool:
        """Whether ``pattern`` occurs in ``text``; raises :class:`PatternTimeout` when the budget is spent."""
        try:
            return pattern.search(text, timeout=self._left()) is not None
        except TimeoutError:
            raise PatternTimeout from None

    def fullmatch(self, pattern: regex.Pattern[str], text: str) -> bool:
        """Whether ``pattern`` matches all of ``text``, within the budget."""
        try:
            return pattern.fullmatch(text, timeout=self._left()) is not None
        except TimeoutError:
            raise PatternTimeout from None


def _checked(pattern: object, what: str) -> str:
    if not isinstance(pattern, str):
        raise PatternError(f"the {what} must be a string, not {type(pattern).__name__} ({pattern!r}).")
    if pattern == "":
        raise PatternError(f"the {what} is empty.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            f"the {what} is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,} are allowed."
        )
    if "\0" in pattern:
        raise PatternError(f"the {what} contains a NUL byte.")
    return pattern


def compile_regex(pattern: object, ignore_case: bool = False) -> regex.Pattern[str]:
    """A regular expression in Python syntax, refused with the engine's reason when it does not compile."""
    text = _checked(pattern, "regular expression")
    try:
        return regex.compile(text, regex.V0 | (regex.IGNORECASE if ignore_case else 0))
    except (regex.error, OverflowError, RecursionError) as exc:
        raise PatternError(f"bad regular expression {text!r}: {exc}") from None


# What can look past a line's ends (lookaround, inline flags such as (?-m), absolute anchors): with these, a
# search of a whole file could miss a match that a search of one of its lines finds.
_LINE_BLIND = ("(?", "\\A", "\\Z", "\\z", "\\G")


def compile_file_filter(pattern: str, ignore_case: bool = False) -> regex.Pattern[str] | None:
    """``pattern`` for one search of a whole file's lines joined by ``\\n`` (multiline mode), or None.

    For patterns without lookaround, inline flags or absolute anchors, a line that matches on its own is also
    a match in the joined text (``^`` and ``$`` match at each ``\\n``, ``\\b`` sees ``\\n`` as a non-word
    character like the line's edge), so a file with no match there has no matching line, and Grep skips it
    with one timed call instead of one per line. Call after :func:`compile_regex` accepted the pattern.
    """
    if any(marker in pattern for marker in _LINE_BLIND):
        return None
    return regex.compile(pattern, regex.V0 | regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0))


def compile_glob(pattern: object) -> regex.Pattern[str]:
    """A glob over ``/``-separated paths: ``*`` and ``?`` stay within one folder, ``[...]`` is a character
    class (``[!...]`` negated) and a ``**`` part matches any number of folders."""
    text = _checked(pattern, "glob pattern")
    parts = text.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment(part))
        if not last:
            out.append("/")
    try:
        return regex.compile("".join(out), regex.V0 | regex.DOTALL)
    except regex.error as exc:  # a reversed range such as [z-a]
        raise PatternError(f"bad glob pattern {text!r}: {exc}") from None


def _segment(part: str) -> str:
    """One path part of a glob as a regular expression, in time linear in its length."""
    size = len(part)
    closing = [-1] * (size + 1)  # closing[i]: the first ']' at or after i
    for i in range(size - 1, -1, -1):
        closing[i] = i if part[i] == "]" else closing[i + 1]
    out: list[str] = []
    i = 0
    while i < size:
        char = part[i]
        if char == "*":
            out.append("[^/]*")
            while i + 1 < size and part[i + 1] == "*":  # a run of stars is one star
                i += 1
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            start = i + 1
            if start < size and part[start] == "!":
                start += 1
            if start < size and part[start] == "]":  # a ']' first in the class is a member
                start += 1
            end = closing[start]
            if end < 0:
                out.append(regex.escape("["))
            else:
                body = part[i + 1 : end]
                negate = body[:1] == "!"
                members = "".join(c if c == "-" else regex.escape(c) for c in (body[1:] if negate else body))
                out.append(f"[^/{members}]" if negate else f"[{members}]")
                i = end
        else:
            out.append(regex.escape(char))
        i += 1
    return "".join(out)
