"""The agent's tools: each a dataclass holding a name, a description, a JSON schema, the function it runs and
its effect.

A tool's JSON schema comes from its function's signature (types and defaults) plus one line per argument, so
the schema and the code cannot drift apart. A tool declares its effect where it is defined (what the permission
mode weighs before it runs); one without is refused when it is registered. Argument names follow the
conventions current models already know (``file_path``, ``old_string``, ``new_string``, ``replace_all``, ...).
A tool returns text for the model; an exception inside a tool becomes an error result the model can read,
never a crash of the loop.
"""

from __future__ import annotations

import difflib
import inspect
import ipaddress
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from aries_kernel import rootfs
from aries_kernel.agent.patterns import (
    MAX_PATTERN_CHARS,
    Budget,
    PatternError,
    PatternTimeout,
    compile_file_filter,
    compile_glob,
    compile_regex,
)
from aries_kernel.agent.repl import StepInterrupted, format_value, run_code, truncate
from aries_kernel.agent.safety import EFFECTS, confine
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.agent.step_window import STEP, interrupts_held
from aries_kernel.codebase.files import FileWalk
from aries_kernel.redact import scrubbed_env
from aries_kernel.rootfs import RootPathError

__all__ = ["Tool", "ToolEnv", "ToolError", "TOOLS", "run_tool", "tool_schema_dict"]

_MAX_FILE_BYTES = 1 << 20  # Grep skips larger files
_MAX_TEXT_BYTES = 8 << 20  # Read, Edit and NotebookEdit refuse larger files
_READ_LINES = 2000
_GREP_MATCHES = 200  # shown
_GREP_COUNTED = 10_000  # counted before Grep stops
_GREP_SCAN_BYTES = 64 << 20
_GLOB_RESULTS = 500
_WALK_ENTRIES = 200_000  # directory entries one Grep or Glob call looks at
_WEB_REDIRECTS = 5


class ToolError(Exception):
    """A tool could not do what was asked; the message goes to the model as an error result."""


@dataclass
class ToolEnv:
    """What a tool can reach: the root, the kernel shell, the Aries context (codebase, vault) and the
    settings."""

    root: Path
    settings: AriesAgent
    shell: Any = None
    context: Any = None
    todos: list[dict[str, str]] = field(default_factory=list)
    changed: set[Path] = field(default_factory=set)
    repl_runs: int = 0
    # The agent session and turn of the call running (set by the loop): the provenance of the notes it writes.
    session_id: str = ""
    turn: int | None = None

    def provenance(self) -> Any:
        """The :class:`~aries_kernel.vault.provenance.Provenance` of a note this call writes (the agent's)."""
        from aries_kernel.vault.provenance import Provenance

        return Provenance("agent_tool", self.session_id, self.turn)

    def vault(self) -> Any:
        """The vault of the context, opened on first use."""
        if self.context is None:
            raise ToolError("No vault is attached to this agent.")
        from aries_kernel.pillars import shared_vault

        return shared_vault(self.context)

    def codebase(self) -> Any:
        """The code graph of the context."""
        if self.context is None:
            raise ToolError("No code graph is attached to this agent.")
        return self.context.codebase

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, as the code graph and the model name files."""
        try:
            return path.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)


@dataclass(frozen=True)
class Tool:
    """One tool: what the model sees (name, description, parameters), what runs (``func``) and what it can do
    to the world (``effect``, one of :data:`~aries_kernel.agent.safety.EFFECTS`, weighed by the permission
    mode before it runs). A tool without a known effect cannot be made: nothing is a read by default."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., str]
    effect: str
    memory: bool = False

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            given = (
                f"the effect {self.effect!r}, which is not one of"
                if self.effect
                else "no effect; give one of"
            )
            raise ValueError(
                f"Tool {self.name!r} declares {given} {', '.join(map(repr, EFFECTS))} (effect=... where the "
                "tool is defined): the permission mode weighs it before the tool runs"
            )

    @property
    def needs_approval(self) -> bool:
        """Whether the default mode asks before this tool runs (it edits files or runs a command)."""
        return self.effect in ("edit", "command")


TOOLS: dict[str, Tool] = {}

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return _json_type(options[0])
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": _json_type(item)}
    return {"type": _JSON_TYPES.get(origin or annotation, "string")}


def tool(
    name: str,
    description: str,
    /,
    *,
    effect: str = "",
    memory: bool = False,
    **arg_docs: str | dict[str, Any],
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register ``func(env, **arguments) -> str`` as a tool of ``effect`` (required: a :class:`ValueError`
    names the tool without one); its schema comes from the signature and ``arg_docs``.

    An ``arg_docs`` value is the argument's description, or a dict merged into its schema (for nested items).
    """

    def register(func: Callable[..., str]) -> Callable[..., str]:
        hints = typing.get_type_hints(func)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for parameter in list(inspect.signature(func).parameters.values())[1:]:
            schema = _json_type(hints[parameter.name])
            doc = arg_docs[parameter.name]
            schema.update({"description": doc} if isinstance(doc, str) else doc)
            properties[parameter.name] = schema
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
        parameters = {"type": "object", "properties": properties, "required": required}
        TOOLS[name] = Tool(name, description, parameters, func, effect, memory)
        return func

    return register


def tool_schema_dict(item: Tool) -> dict[str, Any]:
    """The tool as the JSON a provider receives (used to count schema tokens)."""
    return {"name": item.name, "description": item.description, "input_schema": item.parameters}


def run_tool(item: Tool, env: ToolEnv, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Run ``item`` and return ``(output, is_error)``; a failure is reported, a KeyboardInterrupt is not
    caught (a :class:`~aries_kernel.agent.repl.StepInterrupted` keeps what the step printed)."""
    properties = item.parameters["properties"]
    if not isinstance(arguments, dict):
        return f"{item.name}: arguments must be an object, not {type(arguments).__name__}.", True
    unknown = sorted(str(name) for name in set(arguments) - set(properties))
    missing = [name for name in item.parameters["required"] if arguments.get(name) is None]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"missing {', '.join(missing)}")
        if unknown:
            problems.append(f"unknown {', '.join(unknown)}")
        return f"{item.name}: {'; '.join(problems)}. Arguments are: {', '.join(properties)}.", True
    checked: dict[str, Any] = {}
    wrong: list[str] = []
    for name, value in arguments.items():
        if value is None:  # null for an optional argument: its default
            continue
        kind = properties[name].get("type")  # none (an MCP tool's anyOf, say): passed on as given
        conformed = _conform(kind, value)
        if conformed is _WRONG:
            wrong.append(
                f"{name} must be {_KINDS.get(kind, kind)}, not {type(value).__name__} ({_short(value)})"
            )
        else:
            checked[name] = conformed
    if wrong:
        return f"{item.name}: {'; '.join(wrong)}.", True
    try:
        output = item.func(env, **checked)
    except (ToolError, RootPathError) as exc:
        return f"{item.name}: {exc}", True
    except StepInterrupted as exc:  # what it printed is cut to length as a finished step's output is
        exc.output = truncate(exc.output, env.settings.tool_output_chars)
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a tool's bug or a bad argument is the model's to see and work around
        return f"{item.name} failed: {type(exc).__name__}: {exc}", True
    return truncate(output, env.settings.tool_output_chars), False


_WRONG = object()
_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
}
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def _conform(kind: str, value: Any) -> Any:
    """``value`` as the schema type ``kind`` (numbers and booleans written as strings are accepted, as models
    send them), or ``_WRONG``."""
    if kind == "string":
        return value if isinstance(value, str) else _WRONG
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        return {"true": True, "false": False}.get(value.lower(), _WRONG) if isinstance(value, str) else _WRONG
    if kind == "integer":
        if isinstance(value, bool):
            return _WRONG
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value.strip()) else _WRONG
    if kind == "number":
        if isinstance(value, bool):
            return _WRONG
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return _WRONG
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else _WRONG
    if kind == "array":
        return value if isinstance(value, list) else _WRONG
    if kind == "object":
        return value if isinstance(value, dict) else _WRONG
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------------------------------------- the REPL


@tool(
    "Repl",
    "Run Python in the live kernel shared with the user; variables persist and the REPL body (see the system "
    "prompt) is preloaded. Shows output and the last expression's value.",
    effect="repl",
    code="Python code (IPython magics work).",
)
def repl(env: ToolEnv, code: str) -> str:
    if env.shell is None:
        raise ToolError("There is no kernel shell to run code in.")
    env.repl_runs += 1
    from aries_kernel.vault.provenance import acting

    with acting(env.provenance()):  # a vault.add in the agent's code is the agent's, not the user's
        return run_code(env.shell, code, env.repl_runs).as_text()


# ---------------------------------------------------------------------------------------------------- files


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{what} has a character that is not valid Unicode at position {exc.start} "
            f"({text[exc.start]!r}, a lone surrogate); it cannot be written as UTF-8."
        ) from None


def _read_text(env: ToolEnv, file_path: str) -> tuple[str, str]:
    """The UTF-8 text of ``file_path`` and its real path relative to the root, read beneath the root."""
    data, rel = rootfs.read_regular(env.root, file_path, _MAX_TEXT_BYTES)
    if len(data) > _MAX_TEXT_BYTES:
        raise ToolError(f"{file_path} is over the {_MAX_TEXT_BYTES:,}-byte limit for this tool.")
    if b"\0" in data[:8192]:
        raise ToolError(f"{file_path} is a binary file.")
    try:
        return data.decode("utf-8"), rel
    except UnicodeDecodeError as exc:
        raise ToolError(f"{file_path} is not UTF-8 text (byte {exc.start}).") from exc


def _changed(env: ToolEnv, rel: str) -> Path:
    path = env.root.resolve() / rel
    env.changed.add(path)
    return path


def _diff(path: str, before: str, after: str, limit: int = 3000) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=2
    )
    return truncate("".join(lines), limit)


@tool(
    "Read",
    "Read a UTF-8 text file under the project root (at most 8 MB), with line numbers.",
    effect="read",
    file_path="Path of the file, relative to the project root or absolute.",
    offset="First line to show, 1-based.",
    limit=f"Number of lines to show (default {_READ_LINES}).",
)
def read(env: ToolEnv, file_path: str, offset: int = 1, limit: int = _READ_LINES) -> str:
    text, _ = _read_text(env, file_path)
    lines = text.splitlines()
    start = max(offset, 1) - 1
    shown = lines[start : start + max(limit, 1)]
    if not shown:
        return f"{file_path} has {len(lines)} lines; nothing at line {start + 1}."
    body = "\n".join(f"{number:>6}\t{line}" for number, line in enumerate(shown, start + 1))
    rest = len(lines) - start - len(shown)
    return body + (
        f"\n[... {rest} more lines; read on with offset={start + len(shown) + 1}]" if rest > 0 else ""
    )


@tool(
    "Edit",
    "Replace an exact string in a file; it must match once unless replace_all.",
    effect="edit",
    file_path="File path.",
    old_string="Exact text to replace.",
    new_string="Replacement text.",
    replace_all="Replace every match.",
)
def edit(env: ToolEnv, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    before, rel = _read_text(env, file_path)
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; nothing to change.")
    if old_string == "":
        raise ToolError("old_string is empty; use Write to create or overwrite a whole file.")
    count = before.count(old_string)
    if count == 0:
        raise ToolError(f"old_string was not found in {file_path}; read the file and copy the text exactly.")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string matches {count} times in {file_path}; add surrounding lines to make it unique, "
            "or set replace_all."
        )
    after = (
        before.replace(old_string, new_string) if replace_all else before.replace(old_string, new_string, 1)
    )
    # The real path found by the read, written beneath the root again: a swap since cannot redirect it.
    _, rel = rootfs.write_bytes(env.root, rel, _utf8(after, "new_string"))
    _changed(env, rel)
    replaced = count if replace_all else 1
    return f"Edited {rel}: {replaced} replacement(s).\n{_diff(rel, before, after)}"


@tool(
    "Write",
    "Create or overwrite a file.",
    effect="edit",
    file_path="File path.",
    content="The whole new content.",
)
def write(env: ToolEnv, file_path: str, content: str) -> str:
    existed, rel = rootfs.write_bytes(env.root, file_path, _utf8(content, "content"))
    _changed(env, rel)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {rel} ({len(content.splitlines())} lines)."


def iter_files(root: Path, start: str | os.PathLike[str] = ".") -> Iterator[Path]:
    """Regular files under ``start`` (inside ``root``), through the project's one walk and skip policy
    (:class:`aries_kernel.codebase.files.FileWalk`: what the index skips, and what .gitignore ignores, is not
    listed); symlinks are never followed."""
    base = root.resolve()
    for found in FileWalk(root, os.fspath(start), max_entries=_WALK_ENTRIES):
        yield base / found.rel


def _cut(notes: list[str]) -> str:
    return "".join(f"\n[{note}]" for note in notes)


@tool(
    "Grep",
    "Search file contents with a regular expression (Python syntax); prints path:line: text. Limits: a pattern "
    f"of at most {MAX_PATTERN_CHARS} characters, search_timeout seconds of matching (default 10), files up to "
    "1 MB, 64 MB scanned, 10,000 matches counted; symlinks are not followed.",
    effect="read",
    pattern="Regular expression to search for.",
    path="File or folder to search, relative to the project root (default: the whole project).",
    glob="Only files whose name matches this glob, e.g. *.py.",
    case_insensitive="Ignore case.",
)
def grep(env: ToolEnv, pattern: str, path: str = ".", glob: str = "", case_insensitive: bool = False) -> str:
    try:
        regex = compile_regex(pattern, case_insensitive)
        whole = compile_file_filter(pattern, case_insensitive)
        wanted = compile_glob(glob) if glob else None
    except PatternError as exc:
        raise ToolError(str(exc)) from None
    budget = Budget(env.settings.search_timeout)
    walk = FileWalk(env.root, path, max_entries=_WALK_ENTRIES)
    matches: list[str] = []
    total = scanned = 0
    skipped: dict[str, int] = {}
    try:
        for found in walk:
            if wanted is not None and not (
                budget.fullmatch(wanted, found.name) or budget.fullmatch(wanted, found.rel)
            ):
                continue
            if found.size > _MAX_FILE_BYTES:
                skipped["over 1 MB"] = skipped.get("over 1 MB", 0) + 1
                continue
            if scanned + found.size > _GREP_SCAN_BYTES:
                walk.notes.append(f"stopped after scanning {scanned:,} bytes; narrow path or glob")
                break
            try:
                data = rootfs.read_at(found.dir_fd, found.name, _MAX_FILE_BYTES, found.rel)
            except RootPathError:  # changed since it was listed: not read
                continue
            if len(data) > _MAX_FILE_BYTES:  # grew since it was listed
                continue
            scanned += len(data)
            if b"\0" in data[:8192]:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:  # Read refuses it too
                skipped["not UTF-8"] = skipped.get("not UTF-8", 0) + 1
                continue
            lines = text.splitlines()  # as Read numbers them
            if whole is not None and not budget.search(whole, "\n".join(lines)):
                continue
            for number, line in enumerate(lines, 1):
                if budget.search(regex, line):
                    total += 1
                    if len(matches) < _GREP_MATCHES:
                        matches.append(f"{found.rel}:{number}: {line.strip()[:300]}")
                    if total >= _GREP_COUNTED:
                        break
            if total >= _GREP_COUNTED:
                walk.notes.append(f"stopped counting at {_GREP_COUNTED:,} matches")
                break
    except PatternTimeout:
        if not matches:
            raise ToolError(
                f"the search ran past its {budget.seconds:g}-second limit with no match yet; the pattern may "
                "backtrack badly (nested repeats such as (a+)+): simplify it, or narrow path or glob."
            ) from None
        walk.notes.append(f"stopped at the {budget.seconds:g}-second limit; results are partial")
    notes = walk.notes + [f"{count} file(s) {why} not searched" for why, count in skipped.items()]
    if not matches:
        return f"No match for {_short(pattern)}.{_cut(notes)}"
    more = f"\n[... {total - len(matches)} more matches]" if total > len(matches) else ""
    return "\n".join(matches) + more + _cut(notes)


def _glob_parts(root: Path, pattern: str) -> tuple[str, list[str]]:
    """A Glob pattern checked like a path: its base folder override (for absolute patterns) and its parts."""
    if "\\" in pattern:
        raise ToolError(f"the pattern {pattern!r} contains a backslash; separate folders with /.")
    base = ""
    if pattern.startswith("/"):
        base = "."  # the pattern names its folders from the root; the path argument does not apply
        pattern = rootfs.within_root(root, pattern)
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ToolError(
            f"the pattern {pattern!r} has a '..' part; Glob lists only inside the project root. To search "
            "another folder of the project, set path to it."
        )
    if not parts:
        raise ToolError("the pattern is empty; try **/* for every file.")
    return base, parts


@tool(
    "Glob",
    "List files matching a glob pattern such as **/*.py, most recently modified first. Limits: a pattern of at "
    f"most {MAX_PATTERN_CHARS} characters, no '..', search_timeout seconds of matching; symlinks are not "
    "followed.",
    effect="read",
    pattern="Glob pattern, relative to path.",
    path="Folder to search from, relative to the project root (default: the root).",
)
def glob_files(env: ToolEnv, pattern: str, path: str = ".") -> str:
    base, parts = _glob_parts(env.root, pattern)
    try:
        compiled = compile_glob("/".join(parts))
    except PatternError as exc:
        raise ToolError(str(exc)) from None
    # Without a ** part the pattern says how deep its matches are: no need to walk further.
    depth = None if "**" in parts else len(parts) - 1
    start = rootfs.resolve(env.root, base or path)
    prefix = len(start) + 1 if start else 0

    def too_deep(rel: str) -> bool:
        return depth is not None and rel[prefix:].count("/") >= depth

    walk = FileWalk(env.root, start or ".", skip_folder=too_deep, max_entries=_WALK_ENTRIES)
    budget = Budget(env.settings.search_timeout)
    found: list[tuple[float, str]] = []
    try:
        for item in walk:
            if budget.fullmatch(compiled, item.rel[prefix:]):
                found.append((item.mtime, item.rel))
    except PatternTimeout:
        raise ToolError(
            f"matching {pattern!r} ran past its {budget.seconds:g}-second limit; use fewer '*' in one part."
        ) from None
    found.sort(key=lambda pair: pair[0], reverse=True)
    if not found:
        return f"No file matches {_short(pattern)} under {start or '.'}.{_cut(walk.notes)}"
    shown = [rel for _, rel in found[:_GLOB_RESULTS]]
    more = f"\n[... {len(found) - len(shown)} more]" if len(found) > len(shown) else ""
    return "\n".join(shown) + more + _cut(walk.notes)


@tool(
    "NotebookEdit",
    "Replace, insert or delete one cell of a Jupyter notebook (.ipynb).",
    effect="edit",
    notebook_path="Path of the notebook, relative to the project root or absolute.",
    cell_index="0-based index of the cell (for insert: the new cell's index).",
    new_source="The cell's new source (ignored for delete).",
    edit_mode={
        "description": "replace (default), insert or delete.",
        "enum": ["replace", "insert", "delete"],
    },
    cell_type={
        "description": "code or markdown, for inserted or replaced cells.",
        "enum": ["code", "markdown"],
    },
)
def notebook_edit(
    env: ToolEnv,
    notebook_path: str,
    cell_index: int,
    new_source: str = "",
    edit_mode: str = "replace",
    cell_type: str = "",
) -> str:
    import nbformat

    if edit_mode not in ("replace", "insert", "delete"):
        raise ToolError(f"edit_mode must be replace, insert or delete, not {edit_mode!r}.")
    if cell_type not in ("", "code", "markdown"):
        raise ToolError(f"cell_type must be code or markdown, not {cell_type!r}.")
    if not notebook_path.endswith(".ipynb"):
        raise ToolError(f"notebook_path must name a .ipynb notebook; {notebook_path!r} does not.")
    try:
        text, rel = _read_text(env, notebook_path)
    except rootfs.MissingPathError:
        notebook, rel = nbformat.v4.new_notebook(), notebook_path
    else:
        try:
            notebook = nbformat.reads(text, as_version=4)
        except Exception as exc:  # nbformat raises JSON, validation and version errors of many kinds
            raise ToolError(
                f"{notebook_path} is not a readable notebook: {type(exc).__name__}: {exc}"
            ) from None
    cells = notebook.cells
    limit = len(cells) if edit_mode == "insert" else len(cells) - 1
    if not 0 <= cell_index <= limit:
        raise ToolError(f"cell_index {cell_index} is out of range; the notebook has {len(cells)} cells.")
    if edit_mode == "delete":
        del cells[cell_index]
    else:
        kind = cell_type or (cells[cell_index].cell_type if edit_mode == "replace" else "code")
        new_cell = (
            nbformat.v4.new_markdown_cell(new_source)
            if kind == "markdown"
            else nbformat.v4.new_code_cell(new_source)
        )
        if edit_mode == "insert":
            cells.insert(cell_index, new_cell)
        else:
            cells[cell_index] = new_cell
    data = _utf8(nbformat.writes(notebook).rstrip("\n") + "\n", "new_source")
    _, rel = rootfs.write_bytes(env.root, rel, data)
    _changed(env, rel)
    done = {"replace": "Replaced", "insert": "Inserted", "delete": "Deleted"}[edit_mode]
    return f"{done} cell {cell_index} of {rel}; it now has {len(cells)} cells."


@tool(
    "Notebook",
    "The user's notebook and kernel beyond the request's notebook section: one cell run in this kernel with its "
    "output, one variable described in full, or the last error's whole traceback; with no argument, every "
    "variable's name and type and every cell run.",
    effect="read",
    cell="A cell: In[n] (or n) for one run here, or a cell id.",
    variable="A variable's name.",
    traceback="true: the last error's whole traceback and its cell.",
)
def notebook(env: ToolEnv, cell: str = "", variable: str = "", traceback: bool = False) -> str:
    from aries_kernel.notebook.context import notebook_answer

    if env.shell is None:
        raise ToolError("No kernel is attached to this agent: there is no notebook to look at.")
    return notebook_answer(env.shell, env.context, env.settings.notebook_context, cell, variable, traceback)


@tool(
    "CellEdit",
    "Offer new code for a cell of the user's notebook (the fix of a failing cell): once the user approves, it "
    "goes into a new cell below the running one for them to run; the notebook file is not written.",
    effect="edit",
    new_source="The cell's complete new code.",
    cell="The cell it replaces: In[n] or a cell id (default: the cell of the last error).",
)
def cell_edit(env: ToolEnv, new_source: str, cell: str = "") -> str:
    from aries_kernel.notebook.context import offer_cell

    try:
        return offer_cell(env.shell, env.context, new_source, cell)
    except RuntimeError as exc:
        raise ToolError(str(exc)) from None


# ------------------------------------------------------------------------------------------------ processes


@tool(
    "Bash",
    "Run a bash command in the project root; output is truncated.",
    effect="command",
    command="The command line.",
    timeout="Seconds before it is killed.",
)
def bash(env: ToolEnv, command: str, timeout: float = 0) -> str:
    limit = min(float(timeout) or env.settings.bash_timeout, env.settings.max_bash_timeout)
    started = time.monotonic()
    output: _Output | None = None
    try:
        # An interrupt landing while the command starts (a command that signals the kernel at once, a loaded
        # machine) would leave it running with its output unread: it is held until both have started.
        with interrupts_held():
            # A session of its own, so a timeout or an interrupt can kill the command and everything it started.
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=env.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=scrubbed_env(
                    env.settings.pass_env_keys
                ),  # provider keys stay out of `env` output and child tools
            )
            output = _Output(process)
        with STEP.running():  # a Stop interrupts the wait for the command, never the code around it
            process.wait(timeout=limit)
            output.join(limit - (time.monotonic() - started))  # a child holding the pipe counts as running
    except subprocess.TimeoutExpired:
        assert output is not None  # only the waits time out
        text = output.stop()
        raise ToolError(
            f"timed out after {limit:g} s; the command and its children were killed. Output so far:\n{text}"
        ) from None
    except KeyboardInterrupt:
        # The command is killed and what it wrote is kept, never left running; no output: it never started.
        raise StepInterrupted(output.stop().rstrip("\n") if output else "") from None
    seconds = time.monotonic() - started
    return f"exit code {process.returncode} ({seconds:.1f} s)\n{output.text()}".rstrip("\n")


class _Output:
    """What a command writes to its stdout pipe, read to the end on a daemon thread.

    On a thread of its own, so that an interrupt of the main thread can land anywhere without losing a chunk
    already read (``communicate()`` drops one when it lands between a read and its append)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, name="aries-bash-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None  # Popen(stdout=PIPE)
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):  # what has arrived, as it arrives
            self._chunks.append(chunk)
        stream.close()

    def join(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the end of the output; TimeoutExpired if it has not come."""
        self._reader.join(max(seconds, 0.0))
        if self._reader.is_alive():
            raise subprocess.TimeoutExpired(self.process.args, seconds)

    def text(self) -> str:
        return b"".join(list(self._chunks)).decode("utf-8", errors="replace")

    def stop(self) -> str:
        """Kill the command and everything it started; what it wrote until then."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reader.join(5)  # a grandchild that left the group may hold the pipe: stop waiting for it then
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return self.text()


# ----------------------------------------------------------------------------------------------- code graph


@tool(
    "FindSymbol",
    "Find where a function, class or variable is defined in the code graph.",
    effect="read",
    name="The symbol's name.",
)
def find_symbol(env: ToolEnv, name: str) -> str:
    return _shown(env.codebase().find_symbol(name), f"No definition of {name!r} in the code graph.")


@tool(
    "ShowDependents",
    "List the files that import or reference a file (reverse dependencies).",
    effect="read",
    file_path="Path of the file, relative to the project root.",
)
def show_dependents(env: ToolEnv, file_path: str) -> str:
    relative = env.relative(confine(env.root, file_path))
    return _shown(env.codebase().show_dependents(relative), f"Nothing depends on {relative}.")


@tool(
    "ShowDependencies",
    "List the files a file imports or references (forward dependencies).",
    effect="read",
    file_path="Path of the file, relative to the project root.",
)
def show_dependencies(env: ToolEnv, file_path: str) -> str:
    relative = env.relative(confine(env.root, file_path))
    found = env.codebase().show_dependencies(relative)
    return _shown(found, f"{relative} depends on no other indexed file.")


@tool(
    "CodeSearch",
    "Ranked search over the code graph's symbols and content (better than Grep for concepts).",
    effect="read",
    query="Words or a symbol name to look for.",
    limit="Most matches to return.",
    roles='Which files: "source" (the default), "all", or roles among test, example, fixture, generated, '
    "comma-separated.",
)
def code_search(env: ToolEnv, query: str, limit: int = 20, roles: str = "source") -> str:
    found = env.codebase().search(query, limit=limit, roles=roles)
    return _shown(found, f"No match for {query!r} in the code graph's {roles} files.")


# -------------------------------------------------------------------------------------------- planning, web


@tool(
    "TodoWrite",
    "Replace the task list for this session; use it to plan multi-step work and mark progress.",
    effect="read",
    todos={
        "description": "The whole list, in order.",
        "items": {
            "type": "object",
            "properties": {
                "content": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
            },
            "required": ["content", "status"],
        },
    },
)
def todo_write(env: ToolEnv, todos: list[dict[str, Any]]) -> str:
    cleaned = []
    for position, item in enumerate(todos, 1):
        if not isinstance(item, dict) or "content" not in item:
            raise ToolError(f"todo {position} needs a content and a status.")
        status = str(item.get("status", "pending"))
        if status not in ("pending", "in_progress", "completed"):
            raise ToolError(f"todo {position} has status {status!r}; use pending, in_progress or completed.")
        cleaned.append({"content": str(item["content"]), "status": status})
    env.todos[:] = cleaned
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    return "\n".join(f"{marks[item['status']]} {item['content']}" for item in cleaned) or "(empty list)"


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip += 1
        elif tag in ("p", "br", "div", "li", "tr", "h1", "h2", "h3", "h4", "pre"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The readable text of an HTML page, scripts and styles left out, blank runs squeezed."""
    extractor = _TextExtractor()
    extractor.feed(html)
    text = "".join(extractor.parts)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()


@tool(
    "WebFetch",
    "Fetch a web page (http or https) and return its text. Limits: web_timeout seconds and web_max_bytes bytes "
    f"(settings), {_WEB_REDIRECTS} redirects; loopback, private and link-local addresses are refused unless "
    "web_allow_private is set.",
    effect="command",
    url="The URL to fetch.",
)
def web_fetch(env: ToolEnv, url: str) -> str:
    import httpx

    deadline = time.monotonic() + env.settings.web_timeout
    current = url
    for _ in range(_WEB_REDIRECTS + 1):
        target, host = _web_target(current, env.settings.web_allow_private)
        try:
            with (
                httpx.Client(timeout=_left(deadline, url)) as client,
                # The checked address is the one connected to (no second DNS answer can differ); the name
                # still goes in Host and in TLS's SNI, so virtual hosts and certificates work as usual.
                client.stream(
                    "GET", target, headers={"Host": host}, extensions={"sni_hostname": host.split(":")[0]}
                ) as response,
            ):
                if response.is_redirect and "location" in response.headers:
                    current = str(httpx.URL(current).join(response.headers["location"]))
                    continue
                if response.status_code >= 400:
                    raise ToolError(
                        f"{current} answered HTTP {response.status_code} {response.reason_phrase}."
                    )
                body, cut = _capped_body(response, env.settings.web_max_bytes, deadline)
                kind = response.headers.get("content-type", "")
                encoding = response.charset_encoding or "utf-8"
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch {current}: {type(exc).__name__}: {exc}") from exc
        try:
            raw = body.decode(encoding, errors="replace")
        except LookupError:  # a charset Python does not know
            raw = body.decode("utf-8", errors="replace")
        text = html_to_text(raw) if "html" in kind else raw
        note = f"\n[cut: {cut}]" if cut else ""
        return f"{current} ({response.status_code}, {kind or 'unknown type'})\n{text}{note}"
    raise ToolError(f"{url} redirected more than {_WEB_REDIRECTS} times.")


def _left(deadline: float, url: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ToolError(f"fetching {url} ran past the web_timeout limit.")
    return left


def _web_target(url: str, allow_private: bool) -> tuple[str, str]:
    """``url`` with its host replaced by a checked IP address, and the Host header to send; refused for other
    schemes, and for non-public addresses unless ``allow_private``."""
    import httpx

    if not url.startswith(("http://", "https://")):
        raise ToolError(f"{url!r} is not an http(s) URL.")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolError(f"{url!r} is not a valid URL: {exc}") from None
    if not parsed.host:
        raise ToolError(f"{url!r} has no host.")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        answers = socket.getaddrinfo(parsed.host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ToolError(f"could not resolve {parsed.host}: {exc}") from None
    addresses = [ipaddress.ip_address(str(answer[4][0]).split("%")[0]) for answer in answers]
    if not allow_private:
        for address in addresses:
            if not _public_address(address):
                raise ToolError(
                    f"Refused: {parsed.host} resolves to {address}, a loopback, private, link-local or otherwise "
                    "non-public address. WebFetch reaches only the public internet unless the user sets "
                    "c.AriesAgent.web_allow_private = True."
                )
    return str(parsed.copy_with(host=str(addresses[0]))), parsed.netloc.decode("ascii")


def _public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``address`` is on the public internet: not loopback, private, link-local, unspecified, shared,
    reserved or multicast (an IPv4 address mapped into IPv6 is judged as itself)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _capped_body(response: Any, limit: int, deadline: float) -> tuple[bytes, str]:
    """At most ``limit`` bytes of the (decompressed) body, read until ``deadline``; and what was cut, if any."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], f"the page is longer than web_max_bytes ({limit:,} bytes)"
        if time.monotonic() > deadline:
            return b"".join(chunks), f"stopped at the web_timeout limit after {size:,} bytes"
    return b"".join(chunks), ""


# --------------------------------------------------------------------------------------------------- memory


@tool(
    "VaultSearch",
    "Ranked search of persistent memory (notes).",
    effect="read",
    memory=True,
    query="What to look for.",
    limit="Most notes to return.",
)
def vault_search(env: ToolEnv, query: str, limit: int = 10) -> str:
    return _shown(env.vault().query_ranked(query, limit=limit), f"No note matches {query!r}.")


@tool(
    "VaultRead", "Read one memory note by its title.", effect="read", memory=True, title="The note's title."
)
def vault_read(env: ToolEnv, title: str) -> str:
    return _shown(env.vault().read(title), f"No note titled {title!r}.")


@tool(
    "VaultExplore",
    "Explore memory around a question, following links between notes.",
    effect="read",
    memory=True,
    query="The question to explore.",
    limit="Most notes to return.",
)
def vault_explore(env: ToolEnv, query: str, limit: int = 15) -> str:
    return _shown(env.vault().explore(query, limit=limit), f"Nothing found around {query!r}.")


@tool(
    "VaultWarmth",
    "The warmest notes: recently active and reinforced memory.",
    effect="read",
    memory=True,
    query="Optional focus.",
    limit="Most notes to return.",
)
def vault_warmth(env: ToolEnv, query: str = "", limit: int = 10) -> str:
    return _shown(env.vault().query_warmth(query or None, limit=limit), "The warmth field is empty.")


@tool(
    "VaultAdd",
    "Save an insight to memory.",
    effect="read",
    memory=True,
    title="The insight as a prose claim.",
    content="Details.",
    type="insight, decision, pattern, ...",
)
def vault_add(env: ToolEnv, title: str, content: str, type: str = "insight") -> str:
    return _shown(
        env.vault().add(title, content, type=type, provenance=env.provenance()), f"Saved {title!r}."
    )


@tool(
    "ProjectSave",
    "Save a fact about this repository to its project brain.",
    effect="edit",
    memory=True,
    title="The fact as a prose claim.",
    content="Details.",
    type="decision, pattern, convention, ...",
)
def project_save(env: ToolEnv, title: str, content: str, type: str = "decision") -> str:
    rootfs.require_real_folders(env.root, ".aries/memory")  # a committed symlink would lead the write out
    return _shown(
        env.vault().add(title, content, type=type, project=True, provenance=env.provenance()),
        f"Saved {title!r} to the project brain.",
    )


def _shown(value: Any, empty: str) -> str:
    """A result (often a DataFrame) as the model sees it, or ``empty`` when there is nothing to show."""
    if value is None or (hasattr(value, "__len__") and not isinstance(value, str) and len(value) == 0):
        return empty
    return format_value(value)
