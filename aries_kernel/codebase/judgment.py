"""Judgment operations of `codebase`: similar patterns, duplication, consistency, placement and conventions.

These are the questions an agent asks before writing new code: does this exist already, does it look like the
code around it, where does it belong, and how does this repository usually do X. `JudgmentMixin` answers them
from the index that `Codebase` builds (symbol table with shape and exact hashes, sources, communities,
PageRank), from the definitions' shape profiles and the conventions the index's workers found when they parsed
each file (stored apart from the records), and from tree-sitter parses of snippets (and of the files the index
holds nothing for, cached by content). Style profiles live in :mod:`.style`, convention rules
in :mod:`.conventions`, shared tree helpers in :mod:`.syntax`.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
import textwrap
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aries_kernel.codebase.conventions import CONVENTION_RULES, canonical_topic, scan_topics
from aries_kernel.codebase.extract import content_hash
from aries_kernel.codebase.languages import family
from aries_kernel.codebase.shapes import (
    DEFINITION_TYPES,
    ShapeProfile,
    StoredProfiles,
    Unit,
    exact_hash,
    shape_hash,
    split_identifier,
    unit_of,
)
from aries_kernel.codebase.style import StyleProfile, percentile_rank, style_profile
from aries_kernel.codebase.syntax import nodes_of
from aries_kernel.redact import redact
from aries_kernel.words import STOP_WORDS, stem

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

    from aries_kernel.codebase.definitions import Definitions

__all__ = ["JudgmentMixin"]

_LANGUAGE_ALIASES = {
    "python": "python",
    "py": "python",
    "javascript": "javascript",
    "js": "javascript",
    "jsx": "javascript",
    "typescript": "typescript",
    "ts": "typescript",
    "tsx": "tsx",
    "go": "go",
    "golang": "go",
    "rust": "rust",
    "rs": "rust",
    "java": "java",
}
_CRITERIA = ("naming", "structure", "imports")
_PROFILE_BATCH = 200  # files whose stored profiles are read and compared at a time
_SIGNATURE_KINDS = {
    "def": ("function", "method"),
    "function": ("function", "method"),
    "func": ("function", "method"),
    "fn": ("function", "method"),
    "method": ("method",),
    "class": ("class",),
    "interface": ("interface",),
    "type": ("type",),
    "enum": ("enum",),
    "var": ("variable",),
    "let": ("variable",),
    "const": ("variable", "function"),
    "variable": ("variable",),
}
# fmt: off
# Words of any description of code, beside the English ones.
_STOPWORDS = STOP_WORDS | frozenset(
    ["new", "code", "module", "file", "files", "function", "functions", "class", "something"]
)


def _walk(node: Node) -> Iterator[Node]:
    """Named nodes of a subtree in pre-order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _units(root: Node, python: bool) -> list[Unit]:
    """Outermost definitions, hashed the way the indexer hashes symbols (see `extract._symbols`)."""
    units: list[Unit] = []
    stack = [root]
    while stack:
        node = stack.pop()
        unit = unit_of(node, python)
        if unit is not None:
            units.append(unit)
            continue
        stack.extend(reversed(node.named_children))
    return units


def _definition_shapes(tree: Tree, language: str, kind: str) -> dict[int, ShapeProfile]:
    """Shape profile of every definition of `kind` ("class" or "function") in a file, by the line the index
    records for it (the index's workers keep the same, see `shapes.Fingerprints`; this serves files the index
    holds none for)."""
    python = language == "python"
    out: dict[int, ShapeProfile] = {}
    for node in nodes_of(tree, language, DEFINITION_TYPES):
        line = node.start_point[0] + 1
        if line not in out:
            unit = unit_of(node, python)
            if unit is not None and unit.kind == kind:
                out[line] = unit.profile
    return out


def _decoded(value: Any, kind: str) -> StoredProfiles | None:
    """The stored profiles of `kind` in a file's stored value (see `shapes.Fingerprints.encode`), or None when
    it holds none (its node types did not fit) or is not of that form."""
    if not (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], tuple)):
        return None
    part = value[1] if kind == "function" else value[2]
    if not (isinstance(part, tuple) and len(part) == 4 and all(type(b) is bytes and len(b) % 4 == 0 for b in part)):
        return None
    try:
        profiles = StoredProfiles.decode(value[0], part)
    except (IndexError, TypeError, ValueError):
        return None
    offsets = profiles.offsets
    ok = len(offsets) == len(profiles.lines) + 1 and offsets[0] == 0 and offsets[-1] == len(profiles.codes)
    return profiles if ok and len(profiles.counts) == len(profiles.codes) and np.all(np.diff(offsets) >= 0) else None


def _similarities(target: ShapeProfile, profiles: StoredProfiles, lines: np.ndarray) -> np.ndarray:
    """`target`'s similarity to the definition of one file's `profiles` starting on each of `lines` (0.0 where
    none does)."""
    rows = profiles.rows(lines)
    found = rows >= 0
    rows = rows[found]
    starts, sizes = profiles.offsets[rows], profiles.offsets[rows + 1] - profiles.offsets[rows]
    # The n-grams of each chosen row, one run after another.
    steps = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    picked = np.repeat(starts, sizes) + steps
    totals = np.zeros(len(lines))
    totals[found] = profiles.totals[rows]
    owner = np.repeat(np.flatnonzero(found), sizes)
    return target.similarities_to(profiles.codes[picked], profiles.counts[picked], owner, totals)


def _conventions_ok(value: Any, topic: str) -> bool:
    """A file's stored conventions, holding ``topic``'s: some topics' (pattern, line, source line) hits (the index's
    workers store :data:`.conventions.INDEXED_TOPICS`', a first call for another topic all of them)."""
    return (
        isinstance(value, dict)
        and topic in value
        and set(value) <= set(CONVENTION_RULES)
        and all(
            isinstance(hits, tuple)
            and all(
                type(h) is tuple and len(h) == 3 and type(h[0]) is str and type(h[1]) is int and type(h[2]) is str
                for h in hits
            )
            for hits in value.values()
        )
    )


def _tokens(text: str) -> list[str]:
    """Search tokens of text or code: identifier parts, lower-cased, stop words dropped, lightly stemmed."""
    return [token for word in _WORD.findall(text) for token in _word_tokens(word)]


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


@functools.lru_cache(maxsize=1 << 16)
def _word_tokens(word: str) -> tuple[str, ...]:
    """Tokens of one word; cached because code repeats its words endlessly."""
    return tuple(stem(t) for t in split_identifier(word) if len(t) > 1 and t not in _STOPWORDS)


class JudgmentMixin:
    """Operations called before writing new code; mixed into `Codebase`, which supplies the index.

    The host class provides `wait_ready`, `symbol_table`, `source`, `language_of`, `parse`, `list_files`,
    `top_files`, `communities`, and the judgment data it keeps (`_judgment_data`, `_save_judgment`).
    """

    if TYPE_CHECKING:

        def wait_ready(self) -> None: ...
        def symbol_table(self, hashes: bool = True) -> pd.DataFrame: ...
        def _definitions(self) -> Definitions: ...
        def source(self, file: str) -> str: ...
        def language_of(self, file: str) -> str | None: ...
        def parse(self, source: bytes, language: str) -> Tree: ...
        def list_files(self) -> pd.DataFrame: ...
        def top_files(self, limit: int = 20) -> pd.DataFrame: ...
        def communities(self) -> pd.DataFrame: ...
        def _file(self, file: Any) -> str: ...
        def _judgment_data(self, kind: str, files: list[str]) -> dict[str, Any]: ...
        def _save_judgment(self, kind: str, rows: list[tuple[str, str, Any]]) -> None: ...

        _records: Any
        _graph: Any
        _lock: Any

    # ----------------------------------------------------------------------------------------- shared helpers

    def _judgment_store(self) -> dict[tuple[str, str], Any]:
        cache = self.__dict__.get("_judgment_cache_store")
        if cache is None:
            cache = self.__dict__["_judgment_cache_store"] = {}
        return cache

    def _per_file(self, kind: str, file: str, build: Callable[[str, str], Any]) -> Any:
        """`build(source text, language)` for an indexed file, cached until the file's content changes;
        None when the file cannot be read."""
        language = self.language_of(file)
        try:
            text = self.source(file)
        except (OSError, UnicodeDecodeError, RuntimeError):
            return None
        if language is None:
            return None
        digest = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()
        cache = self._judgment_store()
        hit = cache.get((kind, file))
        if hit is not None and hit[0] == digest:
            return hit[1]
        value = build(text, language)
        cache[(kind, file)] = (digest, value)
        return value

    def _tree(self, text: str, language: str) -> Tree:
        return self.parse(text.encode("utf-8"), language)

    def _shapes_of(self, file: str, kind: str) -> dict[int, ShapeProfile]:
        shapes: dict[int, ShapeProfile] | None = self._per_file(
            f"shapes:{kind}",
            file,
            lambda text, language: _definition_shapes(self._tree(text, language), language, kind),
        )
        return shapes or {}

    def _repo_languages(self) -> list[str]:
        """The indexed files' languages, most files first; from the graph, which holds every file not skipped
        with its language (so a warm start's records are not read for it)."""
        with self._lock:
            counts = Counter(self._graph.language.values())
        return [str(lang) for lang, _ in counts.most_common() if lang]

    def _parse_snippet(
        self, snippet: str, language: str | None, prefer: str | None = None
    ) -> tuple[Tree, str]:
        """Parse a snippet in the given language, or else in the first language that parses it cleanly:
        `prefer`, then the repository's languages by file count (fewest syntax errors if none parses)."""
        if not snippet.strip():
            raise ValueError("The snippet is empty; pass the source code to check as a string.")
        # Code copied from inside a class or block keeps its indentation, which Python would reject.
        source = textwrap.dedent(snippet).encode("utf-8")
        if language is not None:
            lang = _LANGUAGE_ALIASES.get(language.lower())
            if lang is None:
                raise ValueError(
                    f"Unknown language {language!r}; use one of: python, javascript, typescript, tsx, go, "
                    "rust, java."
                )
            return self.parse(source, lang), lang
        candidates = ([prefer] if prefer else []) + self._repo_languages()
        candidates += ["python", "typescript", "javascript"]
        candidates = list(dict.fromkeys(candidates))
        best: tuple[int, Tree, str] | None = None
        for lang in candidates:
            tree = self.parse(source, lang)
            errors = (
                sum(1 for n in _walk(tree.root_node) if n.is_error or n.is_missing)
                if tree.root_node.has_error
                else 0
            )
            if errors == 0:
                return tree, lang
            if best is None or errors < best[0]:
                best = (errors, tree, lang)
        assert best is not None
        return best[1], best[2]

    def _snippet_definitions(self, snippet: str, language: str | None) -> tuple[list[Unit], str]:
        tree, lang = self._parse_snippet(snippet, language)
        units = _units(tree.root_node, lang == "python")
        if not units:
            root = tree.root_node
            units = [Unit("<snippet>", "statements", root, snippet.strip().encode("utf-8"))]
        return units, lang

    def _shape_candidates(
        self, definitions: Definitions, unit: Unit, language: str, exclude: np.ndarray | None = None
    ) -> np.ndarray:
        """The rows of the definitions of the unit's kind in a compatible language, within a plausible size of
        the unit, that have a shape hash (and are not marked in ``exclude``)."""
        kinds = ["class"] if unit.kind == "class" else ["function", "method"]
        languages = [lang for lang in set(definitions.language) if family(lang) == family(language)]
        size = unit.shape_node.end_point[0] - unit.shape_node.start_point[0] + 1
        span = definitions.end_line - definitions.line + 1
        mask = (
            definitions.isin("kind", kinds)
            & definitions.isin("language", languages)
            & (span >= size / 3 - 2)
            & (span <= size * 3 + 2)
            & (definitions.shape_hash != b"")
        )
        if exclude is not None:
            mask &= ~exclude
        return np.flatnonzero(mask)

    def _shape_scores(
        self, definitions: Definitions, unit: Unit, language: str, exclude: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, similarity, same_shape)`` of every candidate definition for `unit` (similarity 1.0 where the
        shape hashes are equal), from the profiles the index stored (the files it holds none for are parsed),
        a batch of files at a time so that only those files' profiles are in memory."""
        rows = self._shape_candidates(definitions, unit, language, exclude)
        same = definitions.shape_hash[rows] == shape_hash(unit.shape_node).encode("ascii")
        others = np.flatnonzero(~same)
        lines = definitions.line[rows]
        scores = np.where(same, 1.0, 0.0)
        # "statements" (a snippet that defines nothing) has no profiled definition to compare with.
        if unit.kind in ("function", "class") and len(others):
            target = unit.profile
            names, inverse = np.unique(definitions.file[rows[others]], return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
            for first in range(0, len(names), _PROFILE_BATCH):
                batch = [str(f) for f in names[first : first + _PROFILE_BATCH]]
                profiles = self._profiles_of(batch, unit.kind)
                for i, name in enumerate(batch, start=first):
                    at = others[order[bounds[i] : bounds[i + 1]]]
                    scores[at] = _similarities(target, profiles.pop(name), lines[at])
        return rows, scores, same

    def _profiles_of(self, files: list[str], kind: str) -> dict[str, StoredProfiles]:
        """The profiles of `kind` ("function" or "class") of each file's definitions: as stored by the index,
        or else from a parse of the file."""
        stored = self._judgment_data("profiles", files)
        out: dict[str, StoredProfiles] = {}
        for file in files:
            found = _decoded(stored.get(file), kind)
            out[file] = found if found is not None else StoredProfiles.of(self._shapes_of(file, kind))
        return out

    # ------------------------------------------------------------------------- find_similar_patterns

    def find_similar_patterns(
        self, pattern: str, limit: int = 10, mode: str = "name", language: str | None = None
    ) -> pd.DataFrame:
        """Symbols like `pattern`, best first: columns name, kind, file, line, score, plus one per mode.

        mode="name": Jaccard of identifier tokens (`loadUserConfig` ~ `load_config`); extra column `matched`.
        mode="signature": a kind and name filter such as "def load_*", "class *Error", "async function" or
        "function *(req, res)"; score favours names that the pattern's literal part covers more; column
        `signature`.
        mode="shape": `pattern` is a code snippet; score is the AST-shape similarity of its first definition
        to every function (or class) of the repository, 1.0 for an identical shape hash; column `same_shape`.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if not pattern or not pattern.strip():
            raise ValueError(
                "The pattern is empty; pass a name, a signature such as 'def load_*', or a snippet."
            )
        self.wait_ready()
        definitions = self._definitions()
        columns = ["name", "kind", "file", "line", "score"]
        if mode == "name":
            wanted = set(split_identifier(pattern))
            scored: dict[str, tuple[float, str]] = {}
            for name in set(definitions.name):
                tokens = set(split_identifier(str(name)))
                union = tokens | wanted
                scored[name] = (
                    len(tokens & wanted) / len(union) if union else 0.0,
                    ", ".join(sorted(tokens & wanted)),
                )
            score = np.fromiter((scored[n][0] for n in definitions.name), float, len(definitions))
            rows = np.flatnonzero(score > 0)
            out = definitions.frame(rows, columns[:-1]).assign(
                score=score[rows], matched=[scored[n][1] for n in definitions.name[rows]]
            )
            extra = ["matched"]
        elif mode == "signature":
            out = self._signature_matches(definitions, pattern)
            extra = ["signature"]
        elif mode == "shape":
            units, lang = self._snippet_definitions(pattern, language)
            rows, score, same = self._shape_scores(definitions, units[0], lang)
            keep = score > 0
            out = definitions.frame(rows[keep], columns[:-1]).assign(score=score[keep], same_shape=same[keep])
            extra = ["same_shape"]
        else:
            raise ValueError(f"Unknown mode {mode!r}; use 'name', 'signature' or 'shape'.")
        out = out.sort_values(["score", "file", "line"], ascending=[False, True, True], kind="stable")
        return out[columns + extra].head(limit).reset_index(drop=True)

    @staticmethod
    def _signature_matches(definitions: Definitions, pattern: str) -> pd.DataFrame:
        words = pattern.strip().split(None, 2)
        want_async = bool(words) and words[0] == "async"
        if want_async:
            words = words[1:]
        kinds: tuple[str, ...] | None = None
        if words and words[0].lower() in _SIGNATURE_KINDS:
            kinds = _SIGNATURE_KINDS[words[0].lower()]
            words = words[1:]
        name_glob = " ".join(words) or "*"
        params = None
        if "(" in name_glob:
            name_glob, _, rest = name_glob.partition("(")
            params = "(" + rest
            name_glob = name_glob.strip() or "*"
        mask = np.ones(len(definitions), dtype=bool)
        if kinds is not None:
            mask &= definitions.isin("kind", kinds)
        rows = np.flatnonzero(definitions.named(lambda n: fnmatch.fnmatchcase(n, name_glob), among=mask))
        out = definitions.frame(rows, ["name", "kind", "file", "line", "signature"])
        if want_async:
            out = out[out["signature"].str.contains(r"\basync\b", regex=True, na=False)]
        if params is not None:
            compact = re.sub(r"\s+", "", params)
            out = out[
                out["signature"].map(
                    lambda s: fnmatch.fnmatchcase(re.sub(r"\s+", "", str(s)), "*" + compact + "*")
                )
            ]
        literal = len(name_glob.replace("*", "").replace("?", ""))
        scores = out["name"].map(lambda n: round(literal / max(len(str(n)), 1), 3) if literal else 1.0)
        return out.assign(score=scores.clip(upper=1.0))

    # ------------------------------------------------------------------------- detect_duplication

    def detect_duplication(
        self, snippet: str, threshold: float = 0.75, language: str | None = None
    ) -> pd.DataFrame:
        """Repository definitions that duplicate the snippet's definitions, most similar first.

        The snippet's top-level definitions are compared (the whole snippet when it defines nothing),
        parsed as `language` or as the repository language that parses it cleanly. kind "exact": the same
        text once whitespace is normalized (exact hash). kind "structural": the same AST shape with
        identifiers and literals abstracted (shape hash, similarity 1.0), or a shape similarity of at least
        `threshold` (weighted Jaccard of node-type n-grams). Columns: file, name, line, end_line, kind,
        similarity, snippet_name (which definition of the snippet matched).
        """
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.wait_ready()
        units, lang = self._snippet_definitions(snippet, language)
        definitions = self._definitions()
        shown = ["file", "name", "line", "end_line"]
        rows: list[pd.DataFrame] = []
        for unit in units:
            same_text = definitions.exact_hash == exact_hash(unit.exact_text).encode("ascii")
            exact = definitions.frame(np.flatnonzero(same_text), shown)
            rows.append(exact.assign(kind="exact", similarity=1.0, snippet_name=unit.name))
            found, similarity, _ = self._shape_scores(definitions, unit, lang, exclude=same_text)
            close = similarity >= threshold
            scored = definitions.frame(found[close], shown).assign(similarity=similarity[close])
            rows.append(scored.assign(kind="structural", snippet_name=unit.name))
        columns = ["file", "name", "line", "end_line", "kind", "similarity", "snippet_name"]
        out = (
            pd.concat([r[columns] for r in rows], ignore_index=True)
            if rows
            else pd.DataFrame(columns=columns)
        )
        out["similarity"] = out["similarity"].astype(float).round(3)
        out = out.sort_values(["similarity", "kind", "file", "line"], ascending=[False, True, True, True])
        return out.reset_index(drop=True)

    # ------------------------------------------------------------------------- is_consistent_with

    def is_consistent_with(
        self,
        snippet: str,
        reference: str | Sequence[str],
        criteria: str | Sequence[str] = "all",
        language: str | None = None,
        max_files: int = 400,
    ) -> pd.DataFrame:
        """How far `snippet` departs from the style of `reference`; findings with an overall deviation 0..1.

        reference: a file path (relative, absolute, or a unique suffix), a list of them, or a language name
        ("python", "typescript", ...: its `max_files` highest-PageRank files); a path the index does not hold
        raises CodebaseError. criteria: "all" or any of "naming" (snake_case / camelCase / PascalCase of
        functions, classes, variables, parameters), "structure" (function length, nesting depth, docstrings,
        type annotations) and "imports" (import form and path: from-import vs import, ESM vs CommonJS,
        relative vs absolute).

        A finding's deviation says how much rarer the snippet's choice is in the reference than the
        reference's dominant choice: 0 when it matches the dominant style, 1 when the reference never does it,
        0.18 for the minority side of a 55/45 split; for lengths and nesting, how far into the reference's top
        quartile the snippet falls. The overall deviation is the mean over criteria of each criterion's mean
        finding deviation; it is in `df.attrs["deviation"]` and in the first row (criterion "overall").
        Columns: criterion, finding, expected, observed, deviation.
        """
        chosen = self._chosen_criteria(criteria)
        self.wait_ready()
        files = self._reference_files(reference, max_files)
        ref_language = Counter(self.language_of(f) for f in files).most_common(1)[0][0]
        tree, lang = self._parse_snippet(snippet, language, prefer=ref_language)
        observed = style_profile(tree, lang)
        expected = StyleProfile()
        for file in files:
            prof = self._per_file("profile", file, lambda text, lg: style_profile(self._tree(text, lg), lg))
            if prof is not None:
                expected.merge(prof)

        findings: list[dict[str, Any]] = []
        if "naming" in chosen:
            for role in ("function", "class", "variable", "constant", "parameter"):
                findings += self._categorical_finding(
                    "naming", f"{role} names", expected.names.get(role, []), observed.names.get(role, [])
                )
        if "structure" in chosen:
            findings += self._numeric_finding(
                "structure", "function length (lines)", expected.lengths, observed.lengths
            )
            findings += self._numeric_finding(
                "structure", "nesting depth", expected.nesting, observed.nesting
            )
            findings += self._categorical_finding(
                "structure", "docstrings", expected.documented, observed.documented
            )
            findings += self._categorical_finding(
                "structure", "type annotations", expected.typed, observed.typed
            )
        if "imports" in chosen:
            findings += self._categorical_finding(
                "imports", "import form", expected.import_form, observed.import_form
            )
            findings += self._categorical_finding(
                "imports", "import path", expected.import_path, observed.import_path
            )

        columns = ["criterion", "finding", "expected", "observed", "deviation"]
        table = pd.DataFrame(findings, columns=columns)
        per_criterion = (
            table.groupby("criterion")["deviation"].mean() if not table.empty else pd.Series(dtype=float)
        )
        overall = round(float(per_criterion.mean()), 3) if len(per_criterion) else 0.0
        summary = {
            "criterion": "overall",
            "finding": f"snippet vs {self._describe_reference(reference, files)}",
            "expected": ", ".join(f"{c} {per_criterion[c]:.2f}" for c in per_criterion.index)
            or "nothing to compare",
            "observed": f"{len(table)} findings",
            "deviation": overall,
        }
        table = table.sort_values("deviation", ascending=False, kind="stable")
        out = pd.concat([pd.DataFrame([summary]), table], ignore_index=True)[columns]
        out["deviation"] = out["deviation"].astype(float).round(3)
        out.attrs["deviation"] = overall
        return out

    @staticmethod
    def _chosen_criteria(criteria: str | Sequence[str]) -> set[str]:
        chosen = {criteria} if isinstance(criteria, str) else set(criteria)
        if "all" in chosen:
            return set(_CRITERIA)
        unknown = chosen - set(_CRITERIA)
        if unknown or not chosen:
            raise ValueError(
                f"Unknown criteria {sorted(unknown)}; use 'all' or any of {', '.join(_CRITERIA)}."
            )
        return chosen

    def _reference_files(self, reference: str | Sequence[str], max_files: int) -> list[str]:
        listing = self.list_files()
        known = set(listing["file"])
        if isinstance(reference, str):
            lang = _LANGUAGE_ALIASES.get(reference.lower())
            if lang is not None and reference not in known:
                langs = {lang, "tsx"} if lang == "typescript" else {lang}
                files: list[str] = [str(f) for f in listing[listing["language"].isin(langs)]["file"]]
                if not files:
                    raise ValueError(f"The repository has no {reference} files to compare with.")
                if len(files) > max_files:
                    ranked = self.top_files(limit=len(known))
                    order = {f: i for i, f in enumerate(ranked["file"])}
                    files = sorted(files, key=lambda f: order.get(f, len(order)))[:max_files]
                return files
            reference = [reference]
        # Codebase._file accepts relative, absolute and unique-suffix paths and explains a miss.
        return [self._file(item) for item in reference]

    @staticmethod
    def _describe_reference(reference: str | Sequence[str], files: list[str]) -> str:
        if isinstance(reference, str) and reference.lower() in _LANGUAGE_ALIASES and len(files) != 1:
            return f"{len(files)} {reference} files"
        return ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")

    @staticmethod
    def _categorical_finding(
        criterion: str, aspect: str, reference: list[tuple[str, str]], observed: list[tuple[str, str]]
    ) -> list[dict[str, Any]]:
        if not reference or not observed:
            return []
        counts = Counter(style for _, style in reference)
        total = sum(counts.values())
        dominant, top = counts.most_common(1)[0]
        deviation = sum(1 - counts.get(style, 0) / top for _, style in observed) / len(observed)
        odd = sorted({style for _, style in observed if style != dominant})
        shown = ", ".join(f"{label} ({style})" for label, style in observed[:4])
        if len(observed) > 4:
            shown += f", and {len(observed) - 4} more"
        finding = (
            f"{aspect}: {' and '.join(odd)} where the reference uses {dominant}"
            if odd
            else f"{aspect}: consistent ({dominant})"
        )
        return [
            {
                "criterion": criterion,
                "finding": finding,
                "expected": f"{dominant} ({top / total:.0%} of {total})",
                "observed": shown,
                "deviation": deviation,
            }
        ]

    @staticmethod
    def _numeric_finding(
        criterion: str, aspect: str, reference: list[tuple[str, int]], observed: list[tuple[str, int]]
    ) -> list[dict[str, Any]]:
        if not reference or not observed:
            return []
        values = [v for _, v in reference]
        ranks = [percentile_rank(values, v) for _, v in observed]
        deviations = [max(0.0, (r - 0.75) / 0.25) for r in ranks]
        worst = int(np.argmax(ranks))
        label, value = observed[worst]
        finding = (
            f"{aspect}: {label} is above {ranks[worst]:.0%} of the reference"
            if deviations[worst] > 0
            else f"{aspect}: within the reference's usual range"
        )
        return [
            {
                "criterion": criterion,
                "finding": finding,
                "expected": f"median {np.median(values):g}, 90th percentile {np.percentile(values, 90):g}",
                "observed": ", ".join(f"{n} {v}" for n, v in observed[:4]),
                "deviation": sum(deviations) / len(deviations),
            }
        ]

    # ------------------------------------------------------------------------- suggest_location

    def suggest_location(self, description: str, limit: int = 3) -> pd.DataFrame:
        """Communities where code described by `description` would fit, best first.

        Each community is a document made of its files' path tokens (weight 3), symbol names (2) and comment
        and docstring words (1); communities are ranked by BM25 against the description's tokens. confidence
        is the share of the description's (IDF-weighted) terms the community matches, scaled by its score
        relative to the best. Columns: community, label, files (its best-matching files), confidence, score,
        rationale.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        query = list(dict.fromkeys(_tokens(description)))
        # Show the user's own words in the rationale, not their stems.
        shown = {stem(t): t for t in reversed(split_identifier(description))}
        if not query:
            raise ValueError(
                f"The description {description!r} has no searchable words; describe what the code does."
            )
        self.wait_ready()
        communities = self.communities()
        columns = ["community", "label", "files", "confidence", "score", "rationale"]
        if communities.empty:
            return pd.DataFrame(columns=columns)
        definitions = self._definitions()
        names_by_file: defaultdict[str, list[str]] = defaultdict(list)
        for file, name in zip(definitions.file, definitions.name, strict=True):
            names_by_file[file].append(name)
        file_terms = {f: self._location_terms(f, names_by_file.get(f, [])) for f in communities["file"]}
        groups = communities.groupby("community", sort=False)
        docs: dict[Any, Counter[str]] = {}
        for community, members in groups:
            bag: Counter[str] = Counter()
            for f in members["file"]:
                bag.update(file_terms[f])
            docs[community] = bag
        scores, idf = _bm25(query, docs)
        best = max(scores.values()) if scores else 0.0
        total_idf = sum(idf.values()) or 1.0
        rows = []
        for community, members in groups:
            score = scores[community]
            if score <= 0:
                continue
            matched = [t for t in query if docs[community].get(t)]
            coverage = sum(idf[t] for t in matched) / total_idf
            ranked = sorted(
                members["file"],
                key=lambda f: -sum(file_terms[f].get(t, 0) * idf[t] for t in query),
            )
            top = ranked[0]
            top_terms = [t for t in query if file_terms[top].get(t)]
            words = ", ".join(repr(shown.get(t, t)) for t in matched)
            rows.append(
                {
                    "community": community,
                    "label": members["label"].iloc[0],
                    "files": ", ".join(ranked[:3]),
                    "confidence": round(coverage * score / best, 3),
                    "score": round(score, 3),
                    "rationale": (
                        f"matches {words} across {len(members)} file{'s' if len(members) != 1 else ''}; "
                        f"best file {top}"
                        + (f" ({', '.join(shown.get(t, t) for t in top_terms)})" if top_terms else "")
                    ),
                }
            )
        out = pd.DataFrame(rows, columns=columns)
        out = out.sort_values(["score", "confidence"], ascending=False, kind="stable")
        return out.head(limit).reset_index(drop=True)

    def _location_terms(self, file: str, names: Iterable[str]) -> Counter[str]:
        terms: Counter[str] = Counter()
        for token in _tokens(file.replace("/", " ").rsplit(".", 1)[0]):
            terms[token] += 3
        for name in names:
            for token in _tokens(str(name)):
                terms[token] += 2
        words = self._per_file(
            "comments", file, lambda text, lang: Counter(_tokens(_comment_text(text, lang)))
        )
        if words:
            terms.update(words)
        return terms

    # ------------------------------------------------------------------------- find_convention

    def find_convention(self, topic: str, limit: int = 5, max_files: int = 40) -> pd.DataFrame:
        """The repository's recurring patterns for `topic`, drawn from its `max_files` highest-PageRank files.

        Topics: "error handling" (aliases errors, exceptions), "logging" (log), "imports", "async" (await,
        promises), "api calls" (http, api, requests, fetch). Columns: pattern, count (occurrences), files (how
        many files use it), share (of scanned files), example ("file:line: source line" from the best-ranked
        file using it). Sorted by files, then count.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        name = canonical_topic(topic)
        self.wait_ready()
        ranked = [f for f in self.top_files(limit=max_files)["file"] if self.language_of(f) is not None]
        conventions = self._conventions_of(ranked, name)
        found: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
        for file in ranked:
            for pattern, line, code in conventions.get(file, {}).get(name, ()):
                found[pattern].append((file, line, code))
        columns = ["pattern", "count", "files", "share", "example"]
        rows = []
        for pattern, hits in found.items():
            file, line, code = hits[0]
            n_files = len({h[0] for h in hits})
            rows.append(
                {
                    "pattern": pattern,
                    "count": len(hits),
                    "files": n_files,
                    "share": round(n_files / max(len(ranked), 1), 3),
                    "example": f"{file}:{line}: {code}",
                }
            )
        out = pd.DataFrame(rows, columns=columns)
        out = out.sort_values(["files", "count", "pattern"], ascending=[False, False, True], kind="stable")
        return out.head(limit).reset_index(drop=True)


    def _conventions_of(self, files: list[str], topic: str) -> dict[str, dict[str, tuple[tuple[str, int, str], ...]]]:
        """The hits of ``topic`` (and maybe others) in each file: as the index's workers found them in the tree
        they parsed (:data:`.conventions.INDEXED_TOPICS`), or else (another topic, or an index.db written before
        they scanned) scanned now, all topics at once, and stored for the next call and the next kernel, unless
        the file's text is not the indexed content or a hit's text holds what looks like a credential (index.db
        keeps no such text)."""
        stored = self._judgment_data("conventions", files)
        found = {f: v for f, v in stored.items() if _conventions_ok(v, topic)}
        new: list[tuple[str, str, Any]] = []
        for file in files:
            if file in found:
                continue
            hits = self._per_file(
                "conventions",
                file,
                lambda text, lg: (
                    text,
                    {t: tuple(h) for t, h in scan_topics(self._tree(text, lg), text, lg).items()},
                ),
            )
            if hits is None:
                continue
            text, found[file] = hits
            digest = self._records.digest(file)
            texts = [part for topic in found[file].values() for h in topic for part in (h[0], h[2])]
            if content_hash(text.encode("utf-8")) == digest and all(redact(t) == t for t in texts):
                new.append((file, digest, found[file]))
        if new:
            self._save_judgment("conventions", new)
        return found


_PY_COMMENTS = re.compile(r"#([^\n]*)|\"\"\"([\s\S]*?)\"\"\"|'''([\s\S]*?)'''")
_JS_COMMENTS = re.compile(r"//([^\n]*)|/\*([\s\S]*?)\*/")  # also Go's, Rust's and Java's


def _comment_text(text: str, language: str) -> str:
    pattern = _PY_COMMENTS if language == "python" else _JS_COMMENTS
    return " ".join(part for match in pattern.findall(text) for part in match if part)


def _bm25(
    query: list[str], docs: dict[Any, Counter[str]], k1: float = 1.2, b: float = 0.75
) -> tuple[dict[Any, float], dict[str, float]]:
    """BM25 score of each document for the query terms, and the IDF of each term."""
    keys = list(docs)
    lengths = np.array([sum(docs[k].values()) for k in keys], dtype=float)
    avg = lengths.mean() if len(lengths) and lengths.mean() > 0 else 1.0
    n = len(keys)
    tf = np.array([[docs[k].get(t, 0) for t in query] for k in keys], dtype=float).reshape(n, len(query))
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / avg)
    scores = (tf * (k1 + 1) / (tf + norm[:, None]) * idf).sum(axis=1)
    return dict(zip(keys, scores.tolist(), strict=True)), dict(zip(query, idf.tolist(), strict=True))
