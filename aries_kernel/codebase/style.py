"""Style profiles for `codebase.is_consistent_with`: naming, structure and import habits of a file or snippet."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from aries_kernel.codebase.shapes import naming_style
from aries_kernel.codebase.syntax import (
    CLASS_TYPES,
    JS_FUNCTION_TYPES,
    JS_FUNCTION_VALUES,
    native_import,
    node_text,
    nodes_of,
)

if TYPE_CHECKING:
    from tree_sitter import Node, Tree

__all__ = ["StyleProfile", "percentile_rank", "style_profile"]


# Go methods, Java methods and constructors, Rust functions (Go's functions share JavaScript's node type).
_NATIVE_FUNCTIONS = frozenset({"method_declaration", "constructor_declaration", "function_item"})
_FUNCTION_TYPES = JS_FUNCTION_TYPES | _NATIVE_FUNCTIONS | {"function_definition", "lambda"}
# Named types of Go, Rust and Java beyond CLASS_TYPES: their names are class names.
_NATIVE_TYPES = frozenset(
    {"type_spec", "struct_item", "enum_item", "trait_item", "interface_declaration", "enum_declaration",
     "record_declaration"}
)  # fmt: skip
# Imports of Go, Rust and Java: (form, path) of each, see _native_import.
_NATIVE_IMPORTS = frozenset({"import_spec", "use_declaration", "import_declaration"})
_TYPED = frozenset({"python", "typescript", "tsx"})  # where annotating types is a choice, not the language


_NESTING = frozenset(
    {
        "if_statement",
        "for_statement",
        "for_in_statement",
        "while_statement",
        "do_statement",
        "try_statement",
        "with_statement",
        "switch_statement",
        "match_statement",
        # Go, Rust and Java
        "expression_switch_statement",
        "type_switch_statement",
        "select_statement",
        "enhanced_for_statement",
        "switch_expression",
        "if_expression",
        "for_expression",
        "while_expression",
        "loop_expression",
        "match_expression",
    }
)


def percentile_rank(values: Sequence[float], value: float) -> float:
    """Share of `values` below `value`, counting ties as half."""
    arr = np.asarray(values, dtype=float)
    return float(((arr < value).sum() + 0.5 * (arr == value).sum()) / len(arr))


@dataclass
class StyleProfile:
    """Style facts about a body of code: identifier styles by role, function metrics, import forms."""

    names: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    lengths: list[tuple[str, int]] = field(default_factory=list)
    nesting: list[tuple[str, int]] = field(default_factory=list)
    documented: list[tuple[str, str]] = field(default_factory=list)
    typed: list[tuple[str, str]] = field(default_factory=list)
    import_form: list[tuple[str, str]] = field(default_factory=list)
    import_path: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, other: StyleProfile) -> None:
        for role, items in other.names.items():
            self.names[role].extend(items)
        for name in ("lengths", "nesting", "documented", "typed", "import_form", "import_path"):
            getattr(self, name).extend(getattr(other, name))


_PARAMETER_LISTS = frozenset({"parameters", "formal_parameters", "lambda_parameters", "parameter_list"})


_PROFILE_TYPES = (
    CLASS_TYPES
    | JS_FUNCTION_TYPES
    | _PARAMETER_LISTS
    | {
        "function_definition",
        "assignment",
        "variable_declarator",
        "import_statement",
        "import_from_statement",
    }
    | {"call_expression"}
    | _NATIVE_FUNCTIONS
    | _NATIVE_TYPES
    | _NATIVE_IMPORTS
    | {"var_spec", "const_spec", "let_declaration", "const_item", "static_item"}
)


def style_profile(tree: Tree, language: str) -> StyleProfile:
    """Collect the style facts of one parsed file or snippet."""
    python = language == "python"
    typed_language = language in _TYPED
    prof = StyleProfile()
    nesting = _nesting_depths(tree, language)
    for node in nodes_of(tree, language, _PROFILE_TYPES):
        kind = node.type
        if kind in CLASS_TYPES or kind in _NATIVE_TYPES:
            _add_name(prof, "class", node_text(node.child_by_field_name("name")))
        elif kind == "function_definition" or kind in JS_FUNCTION_TYPES or kind in _NATIVE_FUNCTIONS:
            name = _function_name(node)
            if not name:
                continue  # anonymous callbacks say nothing about naming or documentation habits
            if name != "constructor":
                _add_name(prof, "function", name)
            prof.lengths.append((name, node.end_point[0] - node.start_point[0] + 1))
            prof.nesting.append((name, nesting.get(node.id, 0)))
            if not (name.startswith("__") and name.endswith("__")):  # dunders are documented by the language
                documented = _has_doc(node, python, language)
                prof.documented.append((name, "documented" if documented else "undocumented"))
            if typed_language:
                prof.typed.append((name, "type-annotated" if _has_types(node, python) else "unannotated"))
        elif kind == "assignment":
            left = node.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                _add_variable(prof, node_text(left))
        elif kind == "variable_declarator":
            value = node.child_by_field_name("value")
            target = node.child_by_field_name("name")
            is_function = value is not None and value.type in JS_FUNCTION_VALUES
            if not is_function and target is not None and target.type == "identifier":
                _add_variable(prof, node_text(target))
        elif kind in ("var_spec", "const_spec", "let_declaration", "const_item", "static_item"):
            targets: Sequence[Node | None] = node.children_by_field_name("name") or [
                node.child_by_field_name("pattern")
            ]
            for target in targets:
                if target is not None and target.type == "identifier":
                    _add_variable(prof, node_text(target))
        elif kind in _NATIVE_IMPORTS:
            form, path = native_import(node)
            line = f"line {node.start_point[0] + 1}"
            prof.import_form.append((line, form))
            prof.import_path.append((line, path))
        elif kind in _PARAMETER_LISTS:
            for param in _parameter_names(node):
                if param not in ("self", "cls"):
                    _add_name(prof, "parameter", param)
        else:
            _collect_imports(prof, node, python)
    return prof


def _add_variable(prof: StyleProfile, name: str) -> None:
    _add_name(prof, "constant" if name.isupper() else "variable", name)


def _parameter_names(params: Node) -> Iterator[str]:
    for param in params.named_children:
        if param.type == "identifier":
            yield node_text(param)
            continue
        if param.type == "typed_parameter":
            target = param.named_children[0] if param.named_children else None
        elif param.type in ("required_parameter", "optional_parameter", "parameter"):
            target = param.child_by_field_name("pattern")
        elif param.type == "assignment_pattern":
            target = param.child_by_field_name("left")
        else:
            target = param.child_by_field_name("name")
        if target is not None and target.type == "identifier":
            yield node_text(target)


def _nesting_depths(tree: Tree, language: str) -> dict[int, int]:
    """Deepest chain of control-flow blocks per function (by node id), not counting nested functions.

    Climbing from each control-flow node to its function visits far fewer nodes than walking every body.
    """
    depths: dict[int, int] = {}
    for block in nodes_of(tree, language, _NESTING):
        depth = 0
        node: Node | None = block
        while node is not None and node.type not in _FUNCTION_TYPES:
            depth += node.type in _NESTING
            node = node.parent
        if node is not None:
            depths[node.id] = max(depths.get(node.id, 0), depth)
    return depths


def _add_name(prof: StyleProfile, role: str, name: str) -> None:
    style = naming_style(name) if name else None
    if style is not None:
        prof.names[role].append((name, style))


def _function_name(node: Node) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return node_text(name)
    parent = node.parent
    if parent is not None and parent.type in ("variable_declarator", "pair", "assignment_expression"):
        target = parent.child_by_field_name("name") or parent.child_by_field_name("key")
        target = target or parent.child_by_field_name("left")
        return node_text(target)
    return ""


def _has_doc(node: Node, python: bool, language: str = "") -> bool:
    if language in ("go", "rust", "java"):
        return _native_doc(node, language)
    if python:
        body = node.child_by_field_name("body")
        first = body.named_children[0] if body is not None and body.named_children else None
        return bool(
            first is not None
            and first.type == "expression_statement"
            and first.named_children
            and first.named_children[0].type == "string"
        )
    anchor = node.parent if node.parent is not None and node.parent.type == "export_statement" else node
    if (
        node.type in JS_FUNCTION_VALUES
        and node.parent is not None
        and node.parent.type == "variable_declarator"
    ):
        anchor = node.parent.parent or node
        if anchor.parent is not None and anchor.parent.type == "export_statement":
            anchor = anchor.parent
    previous = anchor.prev_named_sibling
    return bool(previous is not None and previous.type == "comment" and node_text(previous).startswith("/**"))


def _native_doc(node: Node, language: str) -> bool:
    """A doc comment right above a definition: ``// Name ...`` (Go), ``///`` (Rust, above any attributes),
    ``/** ... */`` (Java, whose annotations sit inside the declaration)."""
    previous = node.prev_named_sibling
    while language == "rust" and previous is not None and previous.type == "attribute_item":
        previous = previous.prev_named_sibling
    if previous is None or "comment" not in previous.type:
        return False
    text = node_text(previous)
    if language == "go":
        return previous.end_point[0] + 1 >= node.start_point[0]
    return text.startswith("///" if language == "rust" else "/**")


def _has_types(node: Node, python: bool) -> bool:
    if node.child_by_field_name("return_type") is not None:
        return True
    params = node.child_by_field_name("parameters")
    if params is None:
        return False
    if python:
        return any(p.type in ("typed_parameter", "typed_default_parameter") for p in params.named_children)
    return any(p.child_by_field_name("type") is not None for p in params.named_children)


def _collect_imports(prof: StyleProfile, node: Node, python: bool) -> None:
    line = f"line {node.start_point[0] + 1}"
    if python:
        if node.type == "import_statement":
            prof.import_form.append((line, "import module"))
            prof.import_path.append((line, "absolute"))
        elif node.type == "import_from_statement":
            module = node.child_by_field_name("module_name")
            prof.import_form.append((line, "from module import name"))
            relative = module is not None and module.type == "relative_import"
            prof.import_path.append((line, "relative" if relative else "absolute"))
        return
    specifier = None
    if node.type == "import_statement":
        source = node.child_by_field_name("source")
        if source is None:
            return
        prof.import_form.append((line, "ESM import"))
        specifier = node_text(source).strip("'\"`")
    elif node.type == "call_expression" and node_text(node.child_by_field_name("function")) == "require":
        args = node.child_by_field_name("arguments")
        if args is None or not args.named_children or args.named_children[0].type != "string":
            return
        prof.import_form.append((line, "CommonJS require"))
        specifier = node_text(args.named_children[0]).strip("'\"`")
    if specifier is not None:
        prof.import_path.append((line, "relative" if specifier.startswith(".") else "package or alias"))
