"""Bounded readers of structured repository data: JSON (with or without comments) and TOML.

A repository's own files (``package.json``, ``tsconfig.json``, ``Cargo.toml``, notebooks) are input an attacker
may write, and the standard parsers recurse once per nesting level: 500 nested brackets in a 1 KB
``Cargo.toml`` raise :class:`RecursionError` out of :mod:`tomllib`. Here the nesting is measured first, in one
linear scan that skips strings and comments, and text nested deeper than :data:`MAX_NESTING` is refused with a
:class:`ValueError` saying so, as is text over :data:`MAX_BYTES`; no real config file comes near either.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

__all__ = ["MAX_BYTES", "MAX_NESTING", "load_json", "load_toml", "nesting"]

# A config or manifest larger than this is reported and not parsed (real ones are a few KB).
MAX_BYTES = 1 << 20
# Brackets nested deeper than this are refused (real configs nest a handful of levels).
MAX_NESTING = 64

# Tokens that may hold a bracket that is not one: strings (and, for TOML, comments), then the brackets. An
# unterminated string runs to the end of the text (or line), so no string is scanned twice: linear in the text.
# (Strings as runs of plain characters between escapes: the same tokens as ``"(?:[^"\\]|\\.)*"?``, matched about
# 30 times faster on long strings such as a notebook's base64 images.)
_JSON_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?(?:"""|\Z)|\'\'\'.*?(?:\'\'\'|\Z)|"(?:[^"\\\n]|\\.)*"?|\'[^\'\n]*\'?|#[^\n]*|[\[\]{}]',
    re.DOTALL,
)


def nesting(text: str, toml: bool = False) -> int:
    """How deep brackets nest in ``text`` (JSON, or TOML with ``toml``), strings and comments left out."""
    depth = deepest = 0
    # JSON: the strings are cut out in one pass in C first, so only the brackets are looped over here (a
    # notebook is mostly strings: one per line of each cell).
    tokens = _TOML_TOKENS.finditer(text) if toml else _BRACKETS.finditer(_JSON_STRINGS.sub("", text))
    for match in tokens:
        char = match.group()
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _check(text: str, toml: bool, max_bytes: int = MAX_BYTES) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValueError(f"too large: {size:,} bytes, over the limit of {max_bytes:,}")
    depth = nesting(text, toml)
    if depth > MAX_NESTING:
        raise ValueError(f"brackets nested {depth} deep, over the limit of {MAX_NESTING}")


def load_json(text: str, max_bytes: int = MAX_BYTES) -> Any:
    """Parse JSON text, refusing text over ``max_bytes`` (:data:`MAX_BYTES`: a config's) or nested past
    :data:`MAX_NESTING`.

    Raises :class:`ValueError` (:class:`json.JSONDecodeError` for text that is not JSON) saying what is wrong.
    """
    _check(text, False, max_bytes)
    return json.loads(text)


def load_toml(text: str) -> dict[str, Any]:
    """Parse TOML text, refusing text over :data:`MAX_BYTES` or nested past :data:`MAX_NESTING`.

    Raises :class:`ValueError` saying what is wrong (:class:`tomllib.TOMLDecodeError` for text that is not TOML).
    """
    _check(text, toml=True)
    return tomllib.loads(text)
