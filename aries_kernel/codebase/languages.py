"""Which files are source code, in which language, and the tree-sitter parsers and queries for each language.

Grammars and compiled queries are built once per process (the indexer's worker processes build their own).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Parser, QueryCursor, Tree

__all__ = [
    "EXTENSIONS",
    "LANGUAGES",
    "family",
    "get_language",
    "get_parser",
    "get_query",
    "language_for_path",
    "parse",
]

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".ipynb": "python",  # a notebook's code cells, read as Python (see .notebooks)
}
LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")
# Grammars whose extraction lives in a module of its own (lang_go, lang_rust, lang_java), by their wheel.
_NATIVE_GRAMMARS = {"go": "tree_sitter_go", "rust": "tree_sitter_rust", "java": "tree_sitter_java"}

# One query per language, run once per file: every capture the extractor needs comes from a single tree walk
# in C, which is far cheaper than walking the tree node by node from Python. Used names are not captured here:
# a regex over the text finds them at a quarter of the cost of a node per identifier. Python needs no query:
# see extract._python_captures.
_JS_QUERY = """
(import_statement) @import
(export_statement source: (string)) @import
(call_expression function: (identifier) @_require arguments: (arguments . (string) @require)
  (#eq? @_require "require"))
(call_expression function: (import) arguments: (arguments . (string) @require))
(function_declaration) @def
(generator_function_declaration) @def
(class_declaration) @def
(method_definition) @def
(program (lexical_declaration (variable_declarator) @var))
(program (variable_declaration (variable_declarator) @var))
(program (export_statement declaration: (lexical_declaration (variable_declarator) @var)))
(program (export_statement declaration: (variable_declaration (variable_declarator) @var)))
[(arrow_function) (function_expression) (generator_function) (class)] @scope
"""

_TS_EXTRA = """
(import_statement (import_require_clause source: (string) @require))
(abstract_class_declaration) @def
(interface_declaration) @def
(type_alias_declaration) @def
(enum_declaration) @def
"""

_QUERIES = {
    "javascript": _JS_QUERY,
    "typescript": _JS_QUERY + _TS_EXTRA,
    "tsx": _JS_QUERY + _TS_EXTRA,
}


def family(language: str) -> str:
    """Languages whose files can use each other's names and code: JavaScript with TypeScript (and TSX), every
    other language alone."""
    return "js" if language in ("javascript", "typescript", "tsx") else language


def language_for_path(path: str) -> str | None:
    """The language of a source file by its extension (``.d.ts`` is TypeScript), or None for other files."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    # PurePosixPath(path).suffix, without building a path object (called for every file of every walk).
    return EXTENSIONS.get(name[dot:].lower()) if 0 < dot < len(name) - 1 else None


@cache
def get_language(name: str) -> Language:
    """The tree-sitter grammar for one of :data:`LANGUAGES`."""
    from tree_sitter import Language

    if name == "python":
        import tree_sitter_python

        return Language(tree_sitter_python.language())
    if name == "javascript":
        import tree_sitter_javascript

        return Language(tree_sitter_javascript.language())
    if name in ("typescript", "tsx"):
        import tree_sitter_typescript

        typescript = tree_sitter_typescript.language_typescript  # type: ignore[attr-defined]
        tsx = tree_sitter_typescript.language_tsx  # type: ignore[attr-defined]
        return Language(typescript() if name == "typescript" else tsx())
    if name in _NATIVE_GRAMMARS:
        import importlib

        return Language(importlib.import_module(_NATIVE_GRAMMARS[name]).language())
    raise ValueError(f"No tree-sitter grammar for language {name!r}; known: {', '.join(LANGUAGES)}")


@cache
def get_parser(name: str) -> Parser:
    """A parser for ``name``, one per process and language (parsers are reused, never shared across threads)."""
    from tree_sitter import Parser

    return Parser(get_language(name))


@cache
def get_query(name: str) -> QueryCursor:
    """A cursor over the compiled extraction query for JavaScript, TypeScript or TSX (one per process)."""
    from tree_sitter import Query, QueryCursor

    return QueryCursor(Query(get_language(name), _QUERIES[name]))


def parse(source: bytes, language: str) -> Tree:
    """Parse ``source`` with a fresh parser (safe to call from any thread)."""
    from tree_sitter import Parser

    return Parser(get_language(language)).parse(source)
