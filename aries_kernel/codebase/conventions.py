"""Convention rules for `codebase.find_convention`: the node kinds each topic looks at and how it names a pattern.

Topics: error handling, logging, imports, async and API calls. A rule turns one node into a pattern name
(or None); `scan_topics` runs the rules of every topic asked for over a file through one tree-sitter query (the
index's workers scan each file for the :data:`INDEXED_TOPICS`, and `.aries/index.db` keeps what they found).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from aries_kernel.codebase.shapes import split_identifier
from aries_kernel.codebase.syntax import CLASS_TYPES, JS_FUNCTION_TYPES, native_import, node_text, nodes_of

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

__all__ = ["CONVENTION_RULES", "INDEXED_TOPICS", "canonical_topic", "scan_topics"]


# fmt: on
_TOPICS = {
    "error handling": ("error", "errors", "exception", "exceptions", "raise", "throw", "error-handling"),
    "logging": ("log", "logs", "logger", "loggers"),
    "imports": ("import", "modules", "dependencies"),
    "async": ("asynchronous", "await", "asyncio", "concurrency", "promises", "promise"),
    "api calls": ("api", "apis", "http", "https", "requests", "fetch", "network", "api call", "rest"),
}


_LOG_LEVELS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "trace", "log"}
)


_HTTP_METHODS = frozenset(
    {"get", "post", "put", "patch", "delete", "head", "options", "request", "send", "stream"}
)


_HTTP_ROOTS = frozenset(
    {"requests", "httpx", "aiohttp", "urllib", "urllib3", "axios", "http", "https", "got", "ky"}
)


_ASYNC_LIBS = ("asyncio.", "trio.", "anyio.", "Promise.")


# Callees found during one scan, by node id: several topics' rules ask for the same call's (see scan_topics).
_callees: dict[int, str] = {}


def _callee(node: Node) -> str:
    """Source text of what a call calls, whitespace removed (`logging.getLogger`, `axios.get`)."""
    found = _callees.get(node.id)
    if found is None:
        found = _callees[node.id] = _callee_text(node)
    return found


def _callee_text(node: Node) -> str:
    if node.type == "method_invocation":  # Java: object.name(...)
        obj = node_text(node.child_by_field_name("object"))
        name = node_text(node.child_by_field_name("name"))
        return re.sub(r"\s+", "", f"{obj}.{name}" if obj else name)
    return re.sub(r"\s+", "", node_text(node.child_by_field_name("function")))


def _first_arg(node: Node) -> Node | None:
    args = node.child_by_field_name("arguments")
    return args.named_children[0] if args is not None and args.named_children else None


def _error_pattern(node: Node, python: bool) -> str | None:
    kind = node.type
    if kind == "raise_statement":
        raised = node.named_children[0] if node.named_children else None
        if raised is None:
            return "raise (re-raise inside except)"
        target = _callee(raised) if raised.type == "call" else node_text(raised)
        chained = " from <err>" if node.child_by_field_name("cause") is not None else ""
        return f"raise {target}(...){chained}" if raised.type == "call" else f"raise {target}{chained}"
    if kind == "except_clause":
        caught = next((c for c in node.named_children if c.type != "block"), None)
        if caught is None:
            return "except: (bare)"
        if caught.type == "as_pattern":
            return f"except {node_text(caught.named_children[0])} as <err>:"
        return f"except {node_text(caught)}:"
    if kind == "throw_statement":
        thrown = node.named_children[0] if node.named_children else None
        if thrown is not None and thrown.type == "new_expression":
            return f"throw new {node_text(thrown.child_by_field_name('constructor'))}(...)"
        return "throw <value>"
    if kind == "catch_clause" and node.child_by_field_name("parameter") is None:
        caught = next((c for c in node.named_children if c.type == "catch_formal_parameter"), None)
        if caught is not None:  # Java
            types = next((c for c in caught.named_children if c.type == "catch_type"), None)
            return f"catch ({node_text(types)} <err>)"
    if kind == "catch_clause":
        param = node.child_by_field_name("parameter")
        return f"catch ({node_text(param)})" if param is not None else "catch without binding"
    if kind in CLASS_TYPES:
        bases = _base_names(node, python)
        for base in bases:
            if base.endswith(("Error", "Exception", "Warning")) or base in (
                "Exception",
                "Error",
                "BaseException",
            ):
                return (
                    f"class *({base}) — custom exception"
                    if python
                    else f"class * extends {base} — custom error"
                )
    if kind == "if_statement" and re.fullmatch(
        r"err\s*!=\s*nil", node_text(node.child_by_field_name("condition"))
    ):
        return "if err != nil { ... } (Go)"
    if kind == "try_expression":
        return "? operator: propagate the error (Rust)"
    if kind == "macro_invocation" and node_text(node.child_by_field_name("macro")) in (
        "panic",
        "unreachable",
    ):
        return f"{node_text(node.child_by_field_name('macro'))}!(...)"
    if kind == "call_expression":
        function = node.child_by_field_name("function")
        callee = _callee(node)
        if callee in ("errors.New", "fmt.Errorf", "errors.Is", "errors.As"):
            return f"{callee}(...)"
        if function is not None and function.type == "field_expression":  # Rust
            method = node_text(function.child_by_field_name("field"))
            if method in ("unwrap", "expect"):
                return f".{method}(...)"
        if function is not None and function.type == "member_expression":
            prop = node_text(function.child_by_field_name("property"))
            if prop == "catch":
                return ".catch(...) on a promise"
    return None


def _base_names(node: Node, python: bool) -> list[str]:
    if python:
        supers = node.child_by_field_name("superclasses")
        return [node_text(c) for c in supers.named_children] if supers is not None else []
    heritage = next((c for c in node.named_children if c.type == "class_heritage"), None)
    if heritage is None:
        return []
    extends = next((c for c in heritage.named_children if c.type == "extends_clause"), heritage)
    return [node_text(c) for c in extends.named_children if c.type in ("identifier", "member_expression")]


def _is_logger_name(text: str) -> bool:
    """`logger`, `log`, `LOGGER`, `self._log`, `auditLogger`: but not `catalog`, `dialog` or `log_return`."""
    tokens = split_identifier(text.rsplit(".", 1)[-1])
    return bool(tokens) and tokens[-1] in ("log", "logger", "logging")


def _logging_pattern(node: Node, python: bool) -> str | None:
    kind = node.type
    if kind in ("assignment", "variable_declarator"):
        value = node.child_by_field_name("right" if python else "value")
        target = node.child_by_field_name("left" if python else "name")
        if value is None or target is None or value.type not in ("call", "call_expression"):
            return None
        callee = _callee(value)
        if "getLogger" in callee:
            return " ".join(node_text(node).split())
        return f"{node_text(target)} = {callee}(...)" if _is_logger_name(node_text(target)) else None
    if kind == "macro_invocation":  # Rust: println!, log::info!, tracing::warn!
        macro = node_text(node.child_by_field_name("macro"))
        level = macro.rsplit("::", 1)[-1]
        if level in ("println", "eprintln", "print", "eprint", "dbg") or level in _LOG_LEVELS:
            return f"{macro}!(...)"
        return None
    if kind == "method_invocation":  # Java
        obj = node_text(node.child_by_field_name("object"))
        method = node_text(node.child_by_field_name("name"))
        if obj in ("System.out", "System.err") or (method in _LOG_LEVELS and _is_logger_name(obj)):
            return f"{obj}.{method}(...)"
        return None
    if kind not in ("call", "call_expression"):
        return None
    callee = _callee(node)
    if callee.startswith(("log.", "slog.")) or callee in ("fmt.Println", "fmt.Printf"):  # Go
        return f"{callee}(...)"
    if callee in ("print", "warnings.warn") or (callee.startswith("console.") and not python):
        return f"{callee}(...)"
    obj, _, method = callee.rpartition(".")
    if not (obj and method in _LOG_LEVELS and _is_logger_name(obj)):
        return None
    first = _first_arg(node)
    style = ""
    if first is not None and python and first.type == "string":
        arguments = node.child_by_field_name("arguments")
        if node_text(first)[:2].lower().startswith("f"):
            style = " with an f-string"
        elif "%" in node_text(first) and arguments is not None and len(arguments.named_children) > 1:
            style = " with %-style args"
    return f"{callee}(...){style}"


def _imports_pattern(node: Node, python: bool) -> str | None:
    kind = node.type
    if kind in _NATIVE_IMPORTS:
        form, path = native_import(node)
        return f"{form} ({path})"
    if python:
        if kind == "future_import_statement":
            return node_text(node)
        if kind == "import_statement":
            aliased = next((c for c in node.named_children if c.type == "aliased_import"), None)
            return node_text(node) if aliased is not None else "import <module>"
        if kind == "import_from_statement":
            module = node.child_by_field_name("module_name")
            if module is not None and module.type == "relative_import":
                return "from .<module> import <names> (relative)"
            if any(c.type == "wildcard_import" for c in node.named_children):
                return "from <module> import *"
            return "from <package> import <names>"
        return None
    if kind == "import_statement":
        source = node.child_by_field_name("source")
        if source is None:
            return None
        spec = node_text(source).strip("'\"`")
        where = (
            "relative"
            if spec.startswith(".")
            else ("alias" if spec.startswith(("@/", "~/", "#")) else "package")
        )
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        if clause is None:
            return f"import '<{where}>' (side effect)"
        type_only = any(c.type == "type" for c in node.children)
        forms = {c.type for c in clause.named_children}
        shape = (
            "* as ns"
            if "namespace_import" in forms
            else (
                "default, { named }"
                if {"identifier", "named_imports"} <= forms
                else ("{ named }" if "named_imports" in forms else "default")
            )
        )
        return f"import {'type ' if type_only else ''}{shape} from '<{where}>'"
    if kind == "assignment_expression" and node_text(node.child_by_field_name("left")).startswith(
        ("module.exports", "exports.")
    ):
        return "module.exports = ... (CommonJS)"
    if kind == "call_expression" and _callee(node) == "require":
        first = _first_arg(node)
        spec = node_text(first).strip("'\"`") if first is not None else ""
        return f"require('<{'relative' if spec.startswith('.') else 'package'}>') (CommonJS)"
    return None


def _async_pattern(node: Node, python: bool) -> str | None:
    kind = node.type
    if kind in ("call", "call_expression"):
        # An awaited call is reported with its await; the parent is looked up last, as it costs a descent.
        callee = _callee(node)
        if callee.startswith(_ASYNC_LIBS) or callee.endswith(".then"):
            if node.parent is not None and node.parent.type in ("await", "await_expression"):
                return None
            return f"{callee}(...)" if callee.startswith(_ASYNC_LIBS) else ".then(...) promise chain"
        return None
    if kind in ("await", "await_expression"):
        inner = node.named_children[0] if node.named_children else None
        if inner is not None and inner.type in ("call", "call_expression"):
            callee = _callee(inner)
            if callee.startswith(_ASYNC_LIBS):
                return f"await {callee}(...)"
        return "await <call>"
    is_async = any(c.type == "async" for c in node.children)
    if kind == "function_definition" and is_async:
        return "async def"
    if kind in ("with_statement", "for_statement") and is_async:
        return f"async {kind.split('_')[0]}"
    if kind in JS_FUNCTION_TYPES and is_async:
        return {"arrow_function": "async arrow function", "method_definition": "async method"}.get(
            kind, "async function"
        )
    return None


def _api_pattern(node: Node, python: bool) -> str | None:
    if node.type not in _CALLS:
        return None
    callee = _callee(node)
    if callee in ("fetch", "axios", "window.fetch"):
        return f"{callee}(...)"
    parts = callee.split(".")
    root, method = parts[0], parts[-1]
    if len(parts) >= 2 and root in _HTTP_ROOTS:
        return f"{callee}(...)"
    if len(parts) >= 2 and method in _HTTP_METHODS and re.search(r"client|session|http|api", parts[-2], re.I):
        return f"{callee}(...)"
    return None


_Rule = Callable[["Node", bool], "str | None"]


_CALLS = frozenset({"call", "call_expression", "method_invocation"})
_NATIVE_IMPORTS = frozenset({"import_spec", "use_declaration", "import_declaration"})


# Each topic's rule with the node types it recognizes: a file is scanned by one query, not a Python walk.
CONVENTION_RULES: dict[str, tuple[frozenset[str], _Rule]] = {
    "error handling": (
        CLASS_TYPES
        | {"raise_statement", "except_clause", "throw_statement", "catch_clause", "call_expression"}
        | {"if_statement", "try_expression", "macro_invocation"},
        _error_pattern,
    ),
    "logging": (
        _CALLS | {"assignment", "variable_declarator", "macro_invocation", "method_invocation"},
        _logging_pattern,
    ),
    "imports": (
        frozenset(
            {"future_import_statement", "import_statement", "import_from_statement", "assignment_expression"}
        )
        | _CALLS
        | _NATIVE_IMPORTS,
        _imports_pattern,
    ),
    "async": (
        JS_FUNCTION_TYPES
        | _CALLS
        | {"function_definition", "with_statement", "for_statement", "await", "await_expression"},
        _async_pattern,
    ),
    "api calls": (_CALLS, _api_pattern),
}


def canonical_topic(topic: str) -> str:
    key = re.sub(r"[\s_-]+", " ", topic.strip().lower())
    if key in _TOPICS:
        return key
    for name, aliases in _TOPICS.items():
        if key in aliases or key.replace(" ", "-") in aliases:
            return name
    raise ValueError(
        f"Unknown convention topic {topic!r}; use one of: {', '.join(_TOPICS)} "
        "(aliases such as 'errors', 'http')."
    )


_TOPICS_OF_TYPE: dict[str, tuple[tuple[str, _Rule], ...]] = {}
for _topic, (_types, _rule) in CONVENTION_RULES.items():
    for _type in _types:
        _TOPICS_OF_TYPE[_type] = (*_TOPICS_OF_TYPE.get(_type, ()), (_topic, _rule))


# The topic the index's workers scan every file for (the others are scanned when first asked for): in Python,
# its nodes are found from their keywords, at a fraction of a query's cost (see _keyword_nodes).
INDEXED_TOPICS = ("error handling",)
# Python statements of the error-handling rule by their keyword; an `if` counts only as Go's `if err != nil`.
_PY_KEYWORDS = re.compile(rb"\b(?:raise|except|class)\b|\bif(?=\s+err\b)")
_PY_KEYWORD_TYPES = {
    b"raise": "raise_statement",
    b"except": "except_clause",
    b"class": "class_definition",
    b"if": "if_statement",
}


def _keyword_nodes(tree: Tree, data: bytes) -> list[Node]:
    """The Python nodes the error-handling rule looks at, in document order: each statement that starts with one
    of :data:`_PY_KEYWORDS`, the smallest named node around the keyword (which is anonymous); a keyword in a
    string or comment is inside another. Not ``Node.parent``, which descends from the root again."""
    root = tree.root_node
    found: dict[int, Node] = {}
    for match in _PY_KEYWORDS.finditer(data):
        start = match.start()
        node = root.named_descendant_for_byte_range(start, match.end())
        if node is not None and node.start_byte == start and node.type == _PY_KEYWORD_TYPES[match.group()]:
            found.setdefault(node.id, node)
    return sorted(found.values(), key=lambda n: (n.start_byte, -n.end_byte))


def scan_topics(
    tree: Tree, text: str, language: str, topics: tuple[str, ...] = tuple(CONVENTION_RULES)
) -> dict[str, list[tuple[str, int, str]]]:
    """(pattern, line, source line) for every node of a file that a topic's rule recognizes, by topic."""
    lines = text.splitlines()
    python = language == "python"
    wanted = frozenset(topics)
    types = frozenset().union(*(CONVENTION_RULES[t][0] for t in topics))
    out: dict[str, list[tuple[str, int, str]]] = {topic: [] for topic in topics}
    data = text.encode("utf-8") if python and topics == INDEXED_TOPICS else None  # the bytes parsed
    try:
        for node in nodes_of(tree, language, types) if data is None else _keyword_nodes(tree, data):
            for topic, rule in _TOPICS_OF_TYPE[node.type]:
                if topic in wanted and (pattern := rule(node, python)) is not None:
                    row = node.start_point[0]
                    out[topic].append(
                        (pattern, row + 1, lines[row].strip()[:120] if row < len(lines) else "")
                    )
    finally:
        _callees.clear()
    return out
