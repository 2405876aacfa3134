"""Per-file extraction: read, check, parse and pull out symbols, imports and used names as plain data.

This module runs inside the indexer's worker processes, so it imports only tree-sitter and the shape hashes,
and returns dicts of str/int/tuple that pickle cheaply and store as-is in ``.aries/index.db``.

A record has ``status`` "indexed", "partial" (parsed with syntax errors: what parsed is kept) or "skipped"
(nothing usable: binary, not decodable, too large, unreadable, not a regular file, not parsed), and a human
``reason`` for the last two. Nothing a file holds makes extraction raise: every failure becomes such a record.

Python files are decoded by their PEP 263 declaration (``# -*- coding: latin-1 -*-``) and parsed as UTF-8, so
lines stay right and the text the index holds is Unicode. Text that could carry a credential (signatures,
import specifiers, used names) is stored through :func:`aries_kernel.redact.redact`, so a key in a source file
does not reach ``.aries/index.db``.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import io
import re
import tokenize
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aries_kernel.codebase.conventions import INDEXED_TOPICS, scan_topics
from aries_kernel.codebase.languages import get_parser, get_query
from aries_kernel.codebase.notebooks import (
    PYTHON_LANGUAGES,
    cell_label,
    file_cap,
    is_notebook,
    notebook_source,
)
from aries_kernel.codebase.shapes import Fingerprints
from aries_kernel.codebase.syntax import enclosing
from aries_kernel.redact import redact
from aries_kernel.rootfs import RefusedPathError, read_regular

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

__all__ = [
    "Record",
    "content_hash",
    "decode_source",
    "extract_file",
    "extract_source",
    "read_checked",
    "read_source",
    "skipped_record",
]

Record = dict[str, Any]

_BINARY_PROBE = 8192
_ERROR_LINE = re.compile(r"syntax error at line (\d+),")
# Names a file mentions, for reference edges. Words in comments and strings count too: a file that names
# another's symbol in prose still points at it, and this costs a fraction of capturing every identifier node.
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SIGNATURE_MAX = 240
_PY_KEYWORD = re.compile(rb"\b(?:def|class|import|from)\b")
_PY_STATEMENTS = {
    "function_definition": "def",
    "class_definition": "def",
    "import_statement": "import",
    "import_from_statement": "import",
    "future_import_statement": "import",
}
_PY_LOCAL_SCOPES = frozenset({"function_definition", "lambda"})
_PY_CLASS = frozenset({"class_definition"})
_JS_LOCAL_SCOPES = frozenset(
    {
        "function_declaration",
        "function_expression",
        "arrow_function",
        "method_definition",
        "generator_function_declaration",
        "generator_function",
        "function",
    }
)
_JS_CLASS = frozenset({"class_declaration", "class", "abstract_class_declaration"})
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_KINDS = {
    "function_definition": "function",
    "class_definition": "class",
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "method_definition": "method",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
# TypeScript syntax newer than the grammar wheel (0.23.2): variance annotations on type parameters
# (`<in out T>`) and `export type * from`; and, in JavaScript too, import attributes on a re-export
# (`export { x } from "./x.js" with { ... }`; the grammars take them on imports only). Read for parsing only,
# with the keywords blanked to spaces of the same length, so every byte offset and line stays where it was
# (see _mask_newer_syntax).
_TS_VARIANCE = re.compile(rb"[<,]\s*(?:const\s+)?((?:in\s+)?(?:out\s+)?)(?=[A-Za-z_$])")
_TS_EXPORT_TYPE_STAR = re.compile(rb"\bexport\s+(type)\s*\*")
_EXPORT_ATTRIBUTES = re.compile(rb"""\bfrom\s*(?:"[^"\n]*"|'[^'\n]*')\s*((?:with|assert)\s*\{[^{}]*\})""")
_TS_NOT_CODE = frozenset({"comment", "string", "string_fragment", "template_string", "regex", "jsx_text"})
# Hashes are for code that can be duplicated; declarations of types and variables get none.
_HASHED_KINDS = frozenset({"function", "class", "method"})


def content_hash(data: bytes) -> str:
    """The key of a file's content in the index."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_source(root: str, rel: str, max_bytes: int) -> bytes:
    """Read at most ``max_bytes + 1`` bytes of the regular file ``rel`` under ``root`` (see
    :func:`aries_kernel.rootfs.read_regular`; one seam, so tests can simulate an unreadable file when running as
    root)."""
    return read_regular(Path(root), rel, max_bytes, walked=True)[0]


def decode_source(data: bytes, language: str) -> str:
    """The text of a source file: UTF-8, or for Python the encoding its PEP 263 declaration names.

    Raises :class:`UnicodeDecodeError` (or :class:`LookupError` for a declared codec that is not a text
    encoding) when the bytes do not decode.
    """
    return _decode(data, language)[0]


def _decode(data: bytes, language: str) -> tuple[str, bytes]:
    """The text and its UTF-8 bytes (``data`` itself unless another encoding is declared), to parse."""
    encoding = _declared_encoding(data) if language == "python" else None
    if encoding is None:
        return data.decode("utf-8"), data
    text = data.decode(encoding)
    return text, text.encode("utf-8")


def _declared_encoding(data: bytes) -> str | None:
    """The encoding a Python file declares, when it is not UTF-8 (None: read it as UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:  # no valid declaration: the UTF-8 decode reports where the bytes go wrong
        return None
    name = codecs.lookup(encoding).name
    return None if name in ("utf-8", "utf-8-sig") else name


def read_checked(root: str, rel: str, language: str, max_bytes: int) -> bytes | Record:
    """The content of the file ``rel`` under ``root``, or the skipped record saying why it cannot be read
    (refused, unreadable, over ``max_bytes``, or for a notebook its :func:`.notebooks.file_cap`), never an
    exception."""
    max_bytes = file_cap(rel, max_bytes)
    try:
        data = read_source(root, rel, max_bytes)
    except RefusedPathError as exc:
        return skipped_record(rel, language, str(exc))
    except OSError as exc:  # the system's: an "unreadable" record is not cached, as a chmod can lift it
        denied = exc.errno in (errno.EACCES, errno.EPERM)
        reason = "permission denied" if denied else exc.strerror or str(exc)
        return skipped_record(rel, language, f"unreadable: {reason}")
    if len(data) > max_bytes:
        return skipped_record(rel, language, f"too large: over the limit of {max_bytes:,} bytes")
    return data


def extract_file(root: str, rel: str, language: str, max_bytes: int, hashes: bool = False) -> Record:
    """Read and extract the file ``rel`` under ``root`` in this process (the index parses in worker processes,
    see :mod:`.parse_workers`); problems become a skipped record, never an exception."""
    data = read_checked(root, rel, language, max_bytes)
    return extract_source(rel, language, data, hashes, max_bytes) if isinstance(data, bytes) else data


def extract_source(
    rel: str, language: str, data: bytes, hashes: bool = False, max_bytes: int | None = None
) -> Record:
    """Check and extract already-read content; a notebook (``.ipynb``) is read as its code cells' Python, whose
    size is held to ``max_bytes`` (None: no limit), and its record also has ``cells``: ``(index, cell id,
    first line, last line)`` of each code cell in that text.

    With ``hashes`` (as the index's workers extract), definitions get their shape and exact hashes, and the
    record has ``profiles``: the definitions' shape profiles (:meth:`.shapes.Fingerprints.encode`, None when the
    file's node types do not fit it), and ``conventions``: the hits of the convention topics the workers scan
    for, both of which the index stores apart from the record. Without, the hashes are None (pending) and there is neither.
    """
    if is_notebook(rel):
        return _notebook_record(rel, data, hashes, max_bytes)
    if b"\0" in data[:_BINARY_PROBE]:
        return skipped_record(rel, language, "binary file (contains NUL bytes)", data)
    try:
        text, utf8 = _decode(data, language)
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        encoding = "UTF-8" if exc.encoding.replace("-", "").lower() == "utf8" else exc.encoding
        return skipped_record(
            rel,
            language,
            f"not {encoding} text (byte 0x{exc.object[exc.start]:02x} at line {line}); re-save it as UTF-8",
            data,
        )
    except (LookupError, UnicodeError, ValueError) as exc:
        return skipped_record(rel, language, f"not decodable: {exc}", data)
    return _parsed(rel, language, data, text, utf8, hashes)


def _parsed(rel: str, language: str, raw: bytes, text: str, utf8: bytes, hashes: bool) -> Record:
    """:func:`_extract`, a failure of the parse made a skipped record."""
    try:
        return _extract(rel, language, raw, text, utf8, hashes)
    except (RecursionError, MemoryError) as exc:
        return skipped_record(
            rel, language, f"not parsed: {type(exc).__name__} (nested too deeply or too big)", raw
        )
    except Exception as exc:  # one file's parse failure must not stop the index
        return skipped_record(rel, language, f"not parsed: {type(exc).__name__}: {exc}", raw)


def _notebook_record(rel: str, raw: bytes, hashes: bool, max_bytes: int | None) -> Record:
    """The record of a notebook: its code cells' Python text extracted as a Python file's, lines mapped to cells
    by ``cells``; a notebook that cannot be read, or is not Python, is skipped with the reason."""
    try:
        notebook = notebook_source(raw.decode("utf-8"), len(raw))
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        reason = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at line {line}); re-save it as UTF-8"
        return skipped_record(rel, "python", reason, raw)
    except (ValueError, RecursionError) as exc:
        return skipped_record(rel, "python", f"not a readable notebook: {exc}", raw)
    if notebook.language not in PYTHON_LANGUAGES:
        reason = f"a {notebook.language} notebook (its kernelspec); only Python notebooks are indexed"
        return skipped_record(rel, "python", reason, raw)
    text = notebook.text
    if max_bytes is not None and len(text) > max_bytes and len(code := text.encode()) > max_bytes:
        reason = f"too large: its code cells hold {len(code):,} bytes, over the limit of {max_bytes:,}"
        return skipped_record(rel, "python", reason, raw)
    record = _parsed(rel, "python", raw, text, text.encode("utf-8"), hashes)
    if record["status"] == "skipped":
        return record
    record["cells"] = tuple((c.index, c.cell_id, c.first_line, c.last_line) for c in notebook.cells)
    found = _ERROR_LINE.match(record["reason"]) if record["status"] == "partial" else None
    cell = notebook.cell_at(int(found.group(1))) if found else None
    if found and cell is not None:  # the line of the cell, not of the notebook's code as one text
        line = int(found.group(1)) - cell.first_line + 1
        record["reason"] = (
            f"syntax error in cell {cell_label(cell)} at line {line}{record['reason'][found.end(1) :]}"
        )
    return record


def _extract(rel: str, language: str, raw: bytes, text: str, data: bytes, hashes: bool) -> Record:
    """The record of a decoded file; ``data`` is its UTF-8 encoding (parsed), ``raw`` its bytes (hashed)."""
    tree = get_parser(language).parse(data)
    root = tree.root_node
    python = language == "python"
    first_error = _first_error(root) if root.has_error else None
    masked = (
        _mask_newer_syntax(root, data, language) if first_error and language in _MASKED_LANGUAGES else None
    )
    type_exports: frozenset[int] = frozenset()
    if masked is not None:
        # Parse without the newer syntax; signatures and hashes still read the file's own bytes.
        tree = get_parser(language).parse(masked[0])
        root, type_exports = tree.root_node, masked[1]
    # Redacting the whole text once tells whether this file holds a credential; only then are the stored
    # strings redacted one by one (before truncation, so no key prefix survives a cut signature).
    clean = redact(text)
    secret = clean != text
    fingerprints = Fingerprints(python, len(data)) if hashes else None
    if language in _NATIVE_EXTRACTORS:
        symbols, imports = _native_extractor(language)(root, data, fingerprints, secret)
    else:
        captures = _python_captures(root, data) if python else get_query(language).captures(root)
        symbols = _symbols(captures, data, python, fingerprints, secret)
        imports = (
            _python_imports(captures.get("import", ())) if python else _js_imports(captures, type_exports)
        )
    uses = set(_IDENTIFIER.findall(text))
    if secret:
        uses &= set(_IDENTIFIER.findall(clean))  # drops a key's fragments, adds none of the markers' words
        imports = tuple((redact(i[0]), tuple(redact(n) for n in i[1]), *i[2:]) for i in imports)
    record: Record = {
        "file": rel,
        "language": language,
        "status": "indexed",
        "reason": "",
        "hash": content_hash(raw),
        "size": len(raw),
        "loc": data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1),
        "symbols": symbols,
        "imports": imports,
        "uses": " ".join(sorted(uses)),  # one string, not one per name: a quarter of the load time
    }
    if fingerprints is not None:
        record["profiles"] = fingerprints.encode()
        record["conventions"] = _conventions(tree, text, language, secret)
    if first_error is not None:
        record["status"] = "partial"
        if root.has_error:
            line, column = _first_error(root)
            record["reason"] = f"syntax error at line {line}, column {column}: indexed what parsed"
        else:
            line, column = first_error
            record["reason"] = (
                f"syntax error at line {line}, column {column}: syntax newer than the grammar (variance "
                "annotations, `export type *` or a re-export's import attributes); indexed with it masked"
            )
    return record


_MASKED_LANGUAGES = frozenset({"typescript", "tsx", "javascript"})


def _conventions(
    tree: Tree, text: str, language: str, secret: bool
) -> dict[str, tuple[tuple[str, int, str], ...]]:
    """The hits of the :data:`.conventions.INDEXED_TOPICS` in the file (see :func:`.conventions.scan_topics`), from
    the tree the record was extracted from, which ``find_convention`` reads rather than parsing the file again; in a
    file that holds a credential, each hit's text redacted (index.db keeps none)."""
    found = scan_topics(tree, text, language, INDEXED_TOPICS)
    if secret:
        return {
            t: tuple((redact(p), line, redact(code)) for p, line, code in hits) for t, hits in found.items()
        }
    return {topic: tuple(hits) for topic, hits in found.items()}


def _mask_newer_syntax(root: Node, data: bytes, language: str) -> tuple[bytes, frozenset[int]] | None:
    """``data`` with the newer TypeScript or JavaScript syntax the grammar rejects blanked out (same length),
    and the start bytes of the ``export type *`` statements (type-only once masked); None when there is none.

    A keyword is masked only where the first parse went wrong around it (inside an ERROR node or a type
    parameter list with an error) and not in a comment or string, so valid code is never changed.
    """
    spans: list[tuple[int, int]] = []
    type_exports: set[int] = set()
    if language != "javascript":
        for match in _TS_VARIANCE.finditer(data):
            start, end = match.span(1)
            if start < end and _misparsed(root, start, end, "type_parameters"):
                spans.append((start, end))
        for match in _TS_EXPORT_TYPE_STAR.finditer(data):
            start, end = match.span(1)
            if _misparsed(root, start, end, "export_statement"):
                spans.append((start, end))
                type_exports.add(match.start())
    for match in _EXPORT_ATTRIBUTES.finditer(data):
        # Asked at the statement's `from`: JavaScript's grammar reads the attributes as a block of their own.
        if _misparsed(root, match.start(), match.start() + 4, "export_statement"):
            spans.append(match.span(1))
    if not spans:
        return None
    out = bytearray(data)
    for start, end in spans:
        out[start:end] = b" " * (end - start)
    return bytes(out), frozenset(type_exports)


def _misparsed(root: Node, start: int, end: int, container: str) -> bool:
    """True when the code at ``start:end`` is not in a comment or string and sits in an ERROR node or in a
    ``container`` node with an error."""
    node = root.descendant_for_byte_range(start, end)
    while node is not None:
        if node.type in _TS_NOT_CODE:
            return False
        if node.is_error or (node.type == container and node.has_error):
            return True
        node = node.parent
    return False


_NATIVE_EXTRACTORS = {"go": "lang_go", "rust": "lang_rust", "java": "lang_java"}


def _native_extractor(language: str) -> Any:
    """``extract(root, data, hashes, secret) -> (symbols, imports)`` of a language with a module of its own
    (imported on first use: those modules build on this one's helpers)."""
    import importlib

    return importlib.import_module(f"aries_kernel.codebase.{_NATIVE_EXTRACTORS[language]}").extract


def _python_captures(root: Node, data: bytes) -> dict[str, list[Node]]:
    """Definitions, imports and module-level assignments of a Python tree, as the JS query would capture them.

    Rather than a query (which visits every node), a regex finds each ``def``/``class``/``import``/``from``
    keyword in the text and the tree is asked for the node there: a keyword that sits in a string or comment
    has no statement parent and drops out. This costs a third of the query on large trees.
    """
    found: dict[str, list[Node]] = {"def": [], "import": [], "var": []}
    seen: set[int] = set()
    for match in _PY_KEYWORD.finditer(data):
        start = match.start()
        node = root.descendant_for_byte_range(start, match.end())
        if node is None or node.start_byte != start or node.type != match.group().decode():
            continue
        statement = node.parent
        if statement is None or statement.start_byte in seen:
            continue
        kind = _PY_STATEMENTS.get(statement.type)
        if kind is not None:
            seen.add(statement.start_byte)
            found[kind].append(statement)
    for child in root.named_children:
        if child.type == "expression_statement" and child.named_child_count:
            assignment = child.named_children[0]
            left = assignment.child_by_field_name("left") if assignment.type == "assignment" else None
            if left is not None and left.type == "identifier":
                found["var"].append(left)
    return found


def skipped_record(rel: str, language: str, reason: str, data: bytes | None = None) -> Record:
    return {
        "file": rel,
        "language": language,
        "status": "skipped",
        "reason": reason,
        "hash": content_hash(data) if data is not None else "",
        "size": len(data) if data is not None else 0,
        "loc": 0,
        "symbols": (),
        "imports": (),
        "uses": "",
    }


def _first_error(root: Node) -> tuple[int, int]:
    """Line and column (1-based) of the first ERROR or MISSING node, descending only along erroneous branches."""
    node = root
    while True:
        for child in node.children:
            if child.is_error or child.is_missing:
                return child.start_point[0] + 1, child.start_point[1] + 1
            if child.has_error:
                node = child
                break
        else:
            return node.start_point[0] + 1, node.start_point[1] + 1


def _symbols(
    captures: dict[str, list[Node]],
    data: bytes,
    python: bool,
    fingerprints: Fingerprints | None,
    secret: bool = False,
) -> tuple[tuple[Any, ...], ...]:
    """``(name, kind, line, end_line, signature, parent, shape_hash, exact_hash)`` for each definition; the
    hashes are "" for kinds that get none, and None while pending (no ``fingerprints``). ``secret``: the file
    holds a credential, so signatures are redacted."""

    def fingerprint(shape_node: Node, text_node: Node) -> tuple[str | None, str | None]:
        if fingerprints is None:
            return (None, None)
        return fingerprints.hashes(text_node, shape_node, data[text_node.start_byte : text_node.end_byte])

    local_scopes, class_types = (_PY_LOCAL_SCOPES, _PY_CLASS) if python else (_JS_LOCAL_SCOPES, _JS_CLASS)

    def inside(node: Node, owner: str | None) -> str | None:
        """The class a definition inside ``node`` belongs to ("" at module level), or None when it is local to
        a function, also through its classes: a class defined in a function is dropped with its methods."""
        if owner is None or node.type in local_scopes:
            return None
        if node.type in class_types:
            name = node.child_by_field_name("name")
            return _name(name) if name is not None else "<anonymous>"
        return owner

    # Python's scopes are all definitions; JavaScript's function and class expressions come as "scope".
    owners: dict[int, str | None] = enclosing(
        [*captures.get("def", ()), *captures.get("scope", ())], inside, ""
    )
    out: list[tuple[Any, ...]] = []
    for node in captures.get("def", ()):
        name_node = node.child_by_field_name("name")
        if name_node is None:
            continue
        parent = owners[node.id]
        if parent is None:
            continue  # a local definition inside a function body: not part of the file's interface
        kind = _KINDS[node.type]
        if kind == "function" and parent:
            kind = "method"
        pair = fingerprint(node, node) if kind in _HASHED_KINDS else ("", "")
        out.append((_name(name_node), kind, *_lines(node), _signature(node, data, secret), parent, *pair))
    for node in captures.get("var", ()):
        if python:
            decl = node.parent or node  # a captured assignment target always has its assignment as parent
            name, kind, value = _text(node), "variable", None
        else:
            decl = node
            name_node = node.child_by_field_name("name")
            if name_node is None or name_node.type != "identifier":
                continue
            value = node.child_by_field_name("value")
            name = _text(name_node)
            kind = "function" if value is not None and value.type in _JS_FUNCTION_VALUES else "variable"
        pair = fingerprint(value, decl) if kind == "function" and value is not None else ("", "")
        out.append((name, kind, *_lines(decl), _first_line(_declaration(decl), data, secret), "", *pair))
    out.sort(key=lambda s: (s[2], s[0]))
    return tuple(out)


def _declaration(node: Node) -> Node:
    """The whole statement a JS variable declarator sits in (``export const x = ...``), for its signature."""
    parent = node.parent
    if node.type != "variable_declarator" or parent is None:
        return node
    grand = parent.parent
    return grand if grand is not None and grand.type == "export_statement" else parent


def _lines(node: Node) -> tuple[int, int]:
    return node.start_point[0] + 1, node.end_point[0] + 1


def _text(node: Node) -> str:
    return (node.text or b"").decode()


def _name(node: Node) -> str:
    """A definition's name as code refers to it: a quoted member name without its quotes (``"~standard"`` ->
    ``~standard``, and ``["~standard"]`` alike), a computed one in brackets with its spaces collapsed
    (``[ Symbol.iterator ]`` -> ``[Symbol.iterator]``, which TypeScript's declarations print), others as
    written (``#private``, ``0``)."""
    if node.type == "string":
        return _string_value(node)
    if node.type == "computed_property_name":
        inner = node.named_children
        if len(inner) == 1 and inner[0].type == "string":
            return _string_value(inner[0])
        return "[" + " ".join(_text(node)[1:-1].split()) + "]"
    return _text(node)


def _signature(node: Node, data: bytes, secret: bool = False) -> str:
    """The header of a definition: everything before its body, whitespace collapsed (redacted if ``secret``)."""
    body = node.child_by_field_name("body")
    if body is None:
        return _first_line(node, data, secret)
    end = body.start_byte
    for child in node.children:  # Python: stop at the colon, so a comment after it stays out
        if child.type == ":":
            end = child.start_byte
    header = " ".join(data[node.start_byte : end].decode().split())
    return (redact(header) if secret else header).rstrip(":{ ")[:_SIGNATURE_MAX]


def _first_line(node: Node, data: bytes, secret: bool = False) -> str:
    text = " ".join(data[node.start_byte : node.end_byte].split(b"\n", 1)[0].decode().split())
    return (redact(text) if secret else text)[:_SIGNATURE_MAX]


def _python_imports(nodes: list[Node] | tuple[()]) -> tuple[tuple[Any, ...], ...]:
    """``(module, names, level, type_only, line)``; ``from .a import b, c`` gives ``("a", ("b", "c"), 1, ...)``."""
    out: list[tuple[Any, ...]] = []
    for node in nodes:
        line = node.start_point[0] + 1
        if node.type == "import_statement":
            for name in node.children_by_field_name("name"):
                out.append((_dotted(name), (), 0, False, line))
            continue
        if node.type == "future_import_statement":  # a real import of __future__.py, as any other
            names = tuple(_dotted(n) for n in node.children_by_field_name("name"))
            out.append(("__future__", names, 0, False, line))
            continue
        module = node.child_by_field_name("module_name")
        if module is None:
            continue
        level = 0
        if module.type == "relative_import":
            dotted = ""
            for child in module.children:
                if child.type == "import_prefix":
                    level = len(_text(child).strip())
                elif child.type == "dotted_name":
                    dotted = _text(child)
        else:
            dotted = _text(module)
        names = tuple(_dotted(n) for n in node.children_by_field_name("name"))
        if any(child.type == "wildcard_import" for child in node.children):
            names += ("*",)
        out.append((dotted, names, level, False, line))
    return tuple(out)


def _dotted(node: Node) -> str:
    if node.type == "aliased_import":
        name = node.child_by_field_name("name")
        return _text(name) if name is not None else ""
    return _text(node)


def _js_imports(
    captures: dict[str, list[Node]], type_exports: frozenset[int] = frozenset()
) -> tuple[tuple[Any, ...], ...]:
    """``(specifier, (), 0, type_only, line)`` for ESM imports/re-exports, ``require`` and dynamic ``import()``;
    ``type_exports``: start bytes of statements that are type-only though the tree no longer says so."""
    out: list[tuple[Any, ...]] = []
    for node in captures.get("import", ()):
        source = node.child_by_field_name("source")
        if source is None:
            continue  # `import x = require(...)` is captured as a require
        type_only = node.start_byte in type_exports or _type_only(node)
        out.append((_string_value(source), (), 0, type_only, node.start_point[0] + 1))
    for node in captures.get("require", ()):
        out.append((_string_value(node), (), 0, False, node.start_point[0] + 1))
    out.sort(key=lambda i: (i[4], i[0]))
    return tuple(out)


def _string_value(node: Node) -> str:
    return _text(node)[1:-1]


def _type_only(node: Node) -> bool:
    """``import type``/``export type``, or an import whose every named specifier is ``type``-qualified."""
    if any(child.type == "type" for child in node.children):
        return True
    if node.type != "import_statement":
        return False
    clause = next((c for c in node.children if c.type == "import_clause"), None)
    if clause is None:
        return False
    parts = clause.named_children
    if len(parts) != 1 or parts[0].type != "named_imports":
        return False
    specifiers = [s for s in parts[0].named_children if s.type == "import_specifier"]
    return bool(specifiers) and all(any(c.type == "type" for c in s.children) for s in specifiers)
