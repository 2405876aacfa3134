"""Shape fingerprints of code: AST-shape and normalized-text hashes, node-type n-grams, identifier tokens.

The indexer calls `shape_hash` and `exact_hash` for every function, class and method it records, so both are
cheap. The shape of a function is the sequence of its named node types in pre-order with nesting marks, from
one TreeCursor walk: identifier and literal text never enter it, so a copy with renamed variables or changed
constants has the same shape. Type names, not grammar-specific kind ids, keep hashes stable across grammar
releases.

The index's worker processes hash each definition through :class:`Fingerprints`, which keeps, from the same
walk, the definition's :class:`ShapeProfile` in a compact form (:meth:`Fingerprints.encode`, plain Python, no
numpy in the workers) that ``.aries/index.db`` stores with the file; :class:`StoredProfiles` is that form
decoded for one file, the profiles the judgment operations compare without parsing the file again.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tree_sitter import Node

from aries_kernel.codebase.syntax import CLASS_TYPES, JS_FUNCTION_VALUES, node_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CLASS_NODE_TYPES",
    "DEFINITION_TYPES",
    "EXACT_BUDGET",
    "Fingerprints",
    "ShapeProfile",
    "StoredProfiles",
    "Unit",
    "exact_hash",
    "naming_style",
    "node_type_sequence",
    "shape_hash",
    "split_identifier",
    "unit_of",
]

# Class bodies can hold thousands of lines (pandas' DataFrame) whose methods get hashes of their own, so a
# class's shape is its header and the kinds of its members.
CLASS_NODE_TYPES = frozenset(
    {"class_definition", "class_declaration", "abstract_class_declaration", "class", "interface_declaration"}
)
_CLASS_BODY_TYPES = frozenset({"block", "class_body", "interface_body", "object_type"})
# Comments and the insides of string literals never count as shape.
_NOISE_TYPES = frozenset({"comment", "string_content", "string_fragment", "escape_sequence"})
_BRACKETS = frozenset({"(", ")", "{", "}"})
_CAMEL_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")
_DIGEST_SIZE = 16


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).hexdigest()


def _shape_tokens(node: Node, known: dict[int, str | None] | None = None) -> list[str]:
    """Pre-order named node types with "(" and ")" for nesting; comments and string insides left out
    (``known``: see :func:`_walk_types`)."""
    if node.type not in CLASS_NODE_TYPES:
        return _walk_types(node, known)
    tokens = [node.type]
    for child in node.named_children:
        if child.type in _CLASS_BODY_TYPES:
            # Members by kind only: a renamed copy of the class keeps its outline.
            tokens += ["{", *(m.type for m in child.named_children if m.type != "comment"), "}"]
        else:
            tokens += _walk_types(child, known)
    return tokens


def _walk_types(node: Node, known: dict[int, str | None] | None = None) -> list[str]:
    """The tokens of :func:`_shape_tokens` for any node; ``known`` holds the token of each kind id met in this
    node's tree (a node's type and namedness are its kind id's, aliases included)."""
    # One TreeCursor walk builds no large strings and takes about 20% less CPU on pandas than str(node); a
    # node's token is looked up by its kind id (a small int) rather than read from its type and namedness (a
    # new string per node), a fifth less again.
    if known is None:
        known = {}
    cursor = node.walk()
    tokens: list[str] = []
    push = tokens.append
    while True:
        current = cursor.node
        if current is not None:
            try:
                token = known[current.kind_id]
            except KeyError:
                token = known[current.kind_id] = (
                    current.type if current.is_named and current.type not in _NOISE_TYPES else None
                )
            if token is not None:
                push(token)
        if cursor.goto_first_child():
            push("(")
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():  # back at `node`, where this cursor started
                return tokens
            push(")")


def shape_hash(node: Node) -> str:
    """Stable hash of a node's AST shape; identifiers, literals, operators and comments abstracted away."""
    return _digest(" ".join(_shape_tokens(node)).encode())


def exact_hash(text: bytes) -> str:
    """Hash of source text with whitespace normalized, so a pasted copy matches wherever it is indented.

    Blank lines go; each line's blanks between tokens become one space; lines after the first keep their
    indentation relative to the least indented of them (the first line is a node's own line, which starts at
    its first token). Relative indentation survives because it is meaningful in Python.
    """
    lines = text.expandtabs(8).split(b"\n")
    rest = [(len(line) - len(line.lstrip()), b" ".join(line.split())) for line in lines[1:] if line.strip()]
    indent = min((width for width, _ in rest), default=0)
    first = b" ".join(lines[0].split())
    return _digest(b"\n".join([first, *(b" " * (width - indent) + words for width, words in rest)]))


def node_type_sequence(node: Node) -> list[str]:
    """Named node types of a subtree in pre-order, as `shape_hash` sees them, without the nesting marks."""
    return [token for token in _shape_tokens(node) if token not in _BRACKETS]


# Node types get small integer ids (per process) so n-grams pack into one int64: three 16-bit fields.
_TYPE_IDS: dict[str, int] = {}
_UNIGRAM = 1 << 48
# In a stored profile a file's node types are numbered per file, and an n-gram packs into 32 bits: three 10-bit
# fields (no grammar has 1,024 named node types; a file that had would be profiled when asked, not stored).
_LOCAL_TYPES = 1 << 10
_LOCAL_UNIGRAM = 1 << 30
_FIELD = _LOCAL_TYPES - 1
# How many times its own size a file's exact hashes may read (see Fingerprints).
EXACT_BUDGET = 8


@dataclass(frozen=True, slots=True)
class ShapeProfile:
    """Multiset of a subtree's node-type n-grams (unigrams and trigrams, so short snippets still compare),
    as sorted packed codes with their counts."""

    codes: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    total: int

    @classmethod
    def of(cls, node: Node) -> ShapeProfile:
        """Profile of one subtree."""
        import numpy as np  # not at module level: the indexer's worker processes import this module

        type_ids = [_TYPE_IDS.setdefault(t, len(_TYPE_IDS)) for t in node_type_sequence(node)]
        ids = np.array(type_ids, dtype=np.int64)
        trigrams = (ids[:-2] << 32) | (ids[1:-1] << 16) | ids[2:]
        codes, counts = np.unique(np.concatenate([ids | _UNIGRAM, trigrams]), return_counts=True)
        return cls(codes, counts.astype(np.int64), int(counts.sum()))

    def similarities(self, others: Sequence[ShapeProfile | None]) -> npt.NDArray[np.float64]:
        """Weighted Jaccard similarity to each profile (1.0 for identical shapes, 0.0 for nothing shared,
        0.0 for None), vectorized over all their n-grams at once."""
        import numpy as np

        present = [(i, p) for i, p in enumerate(others) if p is not None]
        scores = np.zeros(len(others))
        if present:
            found = self.similarities_to(
                np.concatenate([p.codes for _, p in present]),
                np.concatenate([p.counts for _, p in present]),
                np.repeat(np.arange(len(present)), [len(p.codes) for _, p in present]),
                np.array([p.total for _, p in present], dtype=float),
            )
            scores[[i for i, _ in present]] = found
        return scores

    def similarities_to(
        self,
        codes: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
        owner: npt.NDArray[np.int64],
        totals: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        """Weighted Jaccard similarity to profiles given flat: every profile's ``codes`` and ``counts`` one after
        the other, ``owner`` the profile (0 .. len(totals) - 1) of each code; 0.0 for an empty profile."""
        import numpy as np

        scores = np.zeros(len(totals))
        if not len(totals) or not self.total or not len(codes):
            return scores
        pos = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        hit = self.codes[pos] == codes
        shared = np.minimum(counts[hit], self.counts[pos[hit]])
        inter = np.bincount(owner[hit], weights=shared, minlength=len(totals))
        nonempty = totals > 0
        scores[nonempty] = inter[nonempty] / (self.total + totals[nonempty] - inter[nonempty])
        return scores


# The definitions the judgment operations profile and compare, by node type (see `unit_of`).
_PY_DEFS = frozenset({"function_definition", "class_definition"})
_JS_DEFS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "method_definition",
    }
)
# Go, Rust and Java definitions the index hashes (see lang_go, lang_rust, lang_java); classes by CLASS_TYPES.
_NATIVE_DEFS = frozenset(
    {
        "method_declaration",
        "function_item",
        "constructor_declaration",
        "class_declaration",
        "record_declaration",
    }
)
_NATIVE_CLASSES = frozenset({"record_declaration"})
DEFINITION_TYPES = _PY_DEFS | _JS_DEFS | _NATIVE_DEFS | {"variable_declarator"}


@dataclass
class Unit:
    """A definition, with the nodes the indexer hashes for the same kind of symbol."""

    name: str
    kind: str
    shape_node: Node
    exact_text: bytes

    @property
    def profile(self) -> ShapeProfile:
        return ShapeProfile.of(self.shape_node)


def unit_of(node: Node, python: bool) -> Unit | None:
    """The definition ``node`` is, or None."""
    found = _profiled(node, python)
    if found is None:
        return None
    return Unit(node_text(node.child_by_field_name("name")), found[0], found[1], node.text or b"")


def _profiled(node: Node, python: bool) -> tuple[str, Node] | None:
    """The kind ("function" or "class") of the definition ``node`` is and the node its shape is taken from."""
    defs = _PY_DEFS if python else _JS_DEFS | _NATIVE_DEFS
    if node.type in defs:
        return ("class" if node.type in CLASS_TYPES or node.type in _NATIVE_CLASSES else "function"), node
    if not python and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is not None and value.type in JS_FUNCTION_VALUES:
            return "function", value
    return None


class Fingerprints:
    """A file's definitions hashed (shape and exact hash) and profiled from one walk each, in a worker process.

    The profiles are kept as the judgment operations look them up: by kind ("function" or "class") and by the
    definition's first line, the first definition there (in document order, outermost first) winning, as
    when the operations profiled a parsed file themselves.

    Exact hashes read each definition's whole text, so nested definitions are read once per enclosing one;
    past :data:`EXACT_BUDGET` times the file's size (plus 64 KiB), which ordinary code never nears, a
    definition too long for what is left gets no exact hash (""), so that 5,000 nested classes cost a linear
    read, not a quadratic one. Its shape hash and profile are still taken.
    """

    def __init__(self, python: bool, size: int) -> None:
        self._python = python
        self._budget = EXACT_BUDGET * size + (64 << 10)
        # The shape token of each kind id of the file's grammar (see _walk_types).
        self._tokens: dict[int, str | None] = {}
        # The file's node types, numbered from 0 in order of appearance; the nesting marks, which profiles
        # leave out, as -1.
        self._ids: dict[str, int] = dict.fromkeys(_BRACKETS, -1)
        # (kind, line) -> ((start byte, -end byte), n-gram codes, their counts)
        self._found: dict[tuple[str, int], tuple[tuple[int, int], list[int], list[int]]] = {}

    def hashes(self, definition: Node, shape_node: Node, text: bytes) -> tuple[str, str]:
        """``(shape_hash(shape_node), exact_hash(text))``, profiling ``definition`` on the way."""
        tokens = _shape_tokens(shape_node, self._tokens)
        found = _profiled(definition, self._python)
        if found is not None:
            kind, profiled = found
            key = (kind, definition.start_point[0] + 1)
            order = (definition.start_byte, -definition.end_byte)
            held = self._found.get(key)
            if held is None or order < held[0]:
                same = profiled.id == shape_node.id
                walked = tokens if same else _shape_tokens(profiled, self._tokens)
                self._found[key] = (order, *self._profile(walked))
        if len(text) > self._budget:
            return _digest(" ".join(tokens).encode()), ""
        self._budget -= len(text)
        return _digest(" ".join(tokens).encode()), exact_hash(text)

    def _profile(self, tokens: list[str]) -> tuple[list[int], list[int]]:
        """The n-gram counts of `ShapeProfile.of`, in this file's numbering of node types."""
        known = self._ids
        for kind in sorted(set(tokens).difference(known)):
            known[kind] = len(known) - len(_BRACKETS)
        ids = [i for i in map(known.__getitem__, tokens) if i >= 0]
        unigrams = Counter(ids)
        trigrams = Counter(zip(ids, ids[1:], ids[2:], strict=False))
        codes = [_LOCAL_UNIGRAM | i for i in unigrams]
        codes += [(a << 20) | (b << 10) | c for a, b, c in trigrams]
        return codes, [*unigrams.values(), *trigrams.values()]

    def encode(self) -> tuple[Any, ...] | None:
        """``(node types, function profiles, class profiles)``, each profiles part four ``array("I")`` buffers
        (lines, offsets into the codes, codes, counts); None when the file's types do not fit the packing."""
        types = tuple(kind for kind, i in self._ids.items() if i >= 0)  # in the order of their numbers
        if len(types) > _LOCAL_TYPES:
            return None
        parts = []
        for kind in ("function", "class"):
            lines = sorted(line for k, line in self._found if k == kind)
            offsets, codes, counts = array("I", [0]), array("I"), array("I")
            for line in lines:
                _, found, times = self._found[(kind, line)]
                codes.extend(found)
                counts.extend(times)
                offsets.append(len(codes))
            parts.append((array("I", lines).tobytes(), offsets.tobytes(), codes.tobytes(), counts.tobytes()))
        return (types, *parts)


@dataclass(frozen=True)
class StoredProfiles:
    """One file's profiles of one kind, flat: definition ``lines`` (sorted), ``offsets`` of each one's n-grams in
    ``codes`` (this process's packing, as `ShapeProfile.codes`) and ``counts``, and each one's ``totals``."""

    lines: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    totals: npt.NDArray[np.float64]

    @classmethod
    def decode(cls, types: tuple[str, ...], part: tuple[bytes, bytes, bytes, bytes]) -> StoredProfiles:
        """The profiles of one kind from :meth:`Fingerprints.encode`, the file's types renumbered as this
        process numbers them."""
        import numpy as np

        lines, offsets, local, counts = (np.frombuffer(b, dtype=np.uint32).astype(np.int64) for b in part)
        ids = np.array([_TYPE_IDS.setdefault(t, len(_TYPE_IDS)) for t in types], dtype=np.int64)
        first, second, third = ids[(local >> 20) & _FIELD], ids[(local >> 10) & _FIELD], ids[local & _FIELD]
        codes = np.where(local >= _LOCAL_UNIGRAM, third | _UNIGRAM, (first << 32) | (second << 16) | third)
        return cls.flat(lines, offsets, codes, counts)

    @classmethod
    def of(cls, profiles: dict[int, ShapeProfile]) -> StoredProfiles:
        """The same form for profiles computed in this process, by line."""
        import numpy as np

        lines = sorted(profiles)
        chosen = [profiles[line] for line in lines]
        offsets = np.cumsum([0, *(len(p.codes) for p in chosen)]).astype(np.int64)
        empty = np.zeros(0, dtype=np.int64)
        return cls.flat(
            np.array(lines, dtype=np.int64),
            offsets,
            np.concatenate([p.codes for p in chosen]) if chosen else empty,
            np.concatenate([p.counts for p in chosen]) if chosen else empty,
        )

    @classmethod
    def flat(
        cls,
        lines: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
    ) -> StoredProfiles:
        import numpy as np

        sums = np.concatenate([[0], np.cumsum(counts)])
        return cls(lines, offsets, codes, counts, (sums[offsets[1:]] - sums[offsets[:-1]]).astype(float))

    def rows(self, lines: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The row of each of ``lines`` (-1 where no definition of this kind starts on it)."""
        import numpy as np

        if not len(self.lines):
            return np.full(len(lines), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.lines, lines), len(self.lines) - 1)
        return np.where(self.lines[pos] == lines, pos, -1)


def split_identifier(name: str) -> list[str]:
    """Lower-case word tokens of an identifier: `loadUserConfig`, `load_user_config` -> load, user, config."""
    tokens: list[str] = []
    for chunk in re.split(r"[^A-Za-z0-9]+", name):
        tokens.extend(part.lower() for part in _CAMEL_PARTS.findall(chunk))
    return tokens


def naming_style(name: str) -> str | None:
    """Classify an identifier: snake_case, camelCase, PascalCase, UPPER_CASE, mixed, or None (a single lower
    word says nothing about style)."""
    core = name.strip("_$")
    if not core or not core[0].isalpha():
        return None
    has_lower = any(c.islower() for c in core)
    has_upper = any(c.isupper() for c in core)
    if "_" in core:
        if not has_lower:
            return "UPPER_CASE"
        return "snake_case" if not has_upper else "mixed"
    if not has_upper:
        return None
    if not has_lower:
        return "UPPER_CASE" if len(core) > 1 else None
    return "PascalCase" if core[0].isupper() else "camelCase"
