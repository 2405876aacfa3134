"""The agent's tools: each a dataclass holding a name, a description, a JSON schema and the function it runs.

A tool's JSON schema comes from its function's signature (types and defaults) plus one line per argument, so
the schema and the code cannot drift apart. Argument names follow the conventions current models already know
(``file_path``, ``old_string``, ``new_string``, ``replace_all``, ...). A tool returns text for the model; an
exception inside a tool becomes an error result the model can read, never a crash of the loop.
"""

from __future__ import annotations

import difflib
import fnmatch
import inspect
import os
import re
import signal
import subprocess
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from aries_kernel.agent.repl import format_value, run_code, truncate
from aries_kernel.agent.safety import TOOL_EFFECTS, confine
from aries_kernel.agent.settings import AriesAgent

__all__ = ["Tool", "ToolEnv", "ToolError", "TOOLS", "run_tool", "tool_schema_dict"]

# Folders never searched or listed: VCS data, environments, caches, and Aries' own state.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".aries",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "dist",
        "build",
        ".ipynb_checkpoints",
    }
)
_MAX_FILE_BYTES = 1 << 20
_READ_LINES = 2000
_GREP_MATCHES = 200
_GLOB_RESULTS = 500


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

    def vault(self) -> Any:
        """The vault of the context, opened on first use."""
        if self.context is None:
            raise ToolError("No vault is attached to this agent.")
        from aries_kernel.vault import open_vault

        return self.context.lazy("vault", lambda ctx: open_vault(ctx.root, config=ctx.config))

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
    """One tool: what the model sees (name, description, parameters) and what runs (``func``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., str]
    effect: str = "read"  # one of safety.EFFECTS: what the permission mode weighs before it runs
    memory: bool = False

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
    name: str, description: str, /, *, memory: bool = False, **arg_docs: str | dict[str, Any]
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register ``func(env, **arguments) -> str`` as a tool; its schema comes from the signature and
    ``arg_docs``.

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
        TOOLS[name] = Tool(
            name, description, parameters, func, effect=TOOL_EFFECTS.get(name, "read"), memory=memory
        )
        return func

    return register


def tool_schema_dict(item: Tool) -> dict[str, Any]:
    """The tool as the JSON a provider receives (used to count schema tokens)."""
    return {"name": item.name, "description": item.description, "input_schema": item.parameters}


def run_tool(item: Tool, env: ToolEnv, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Run ``item`` and return ``(output, is_error)``; a failure is reported, a KeyboardInterrupt is not
    caught."""
    properties = item.parameters["properties"]
    unknown = sorted(set(arguments) - set(properties))
    missing = [name for name in item.parameters["required"] if name not in arguments]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"missing {', '.join(missing)}")
        if unknown:
            problems.append(f"unknown {', '.join(unknown)}")
        return f"{item.name}: {'; '.join(problems)}. Arguments are: {', '.join(properties)}.", True
    try:
        output = item.func(env, **arguments)
    except ToolError as exc:
        return f"{item.name}: {exc}", True
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a tool's bug or a bad argument is the model's to see and work around
        return f"{item.name} failed: {type(exc).__name__}: {exc}", True
    return truncate(output, env.settings.tool_output_chars), False


# ------------------------------------------------------------------------------------------------- the REPL


@tool(
    "Repl",
    "Run Python in the live kernel shared with the user; variables persist and the REPL body (see the system "
    "prompt) is preloaded. Shows output and the last expression's value.",
    code="Python code (IPython magics work).",
)
def repl(env: ToolEnv, code: str) -> str:
    if env.shell is None:
        raise ToolError("There is no kernel shell to run code in.")
    env.repl_runs += 1
    return run_code(env.shell, code, env.repl_runs).as_text()


# ---------------------------------------------------------------------------------------------------- files


def _read_text(path: Path) -> str:
    if not path.exists():
        raise ToolError(f"{path} does not exist.")
    if path.is_dir():
        raise ToolError(f"{path} is a directory; use Glob to list it.")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} is a binary file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text (byte {exc.start}).") from exc


def _diff(path: str, before: str, after: str, limit: int = 3000) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=2
    )
    return truncate("".join(lines), limit)


@tool(
    "Read",
    "Read a text file under the project root, with line numbers.",
    file_path="Path of the file, relative to the project root or absolute.",
    offset="First line to show, 1-based.",
    limit=f"Number of lines to show (default {_READ_LINES}).",
)
def read(env: ToolEnv, file_path: str, offset: int = 1, limit: int = _READ_LINES) -> str:
    path = confine(env.root, file_path)
    lines = _read_text(path).splitlines()
    start = max(int(offset), 1) - 1
    shown = lines[start : start + max(int(limit), 1)]
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
    file_path="File path.",
    old_string="Exact text to replace.",
    new_string="Replacement text.",
    replace_all="Replace every match.",
)
def edit(env: ToolEnv, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    path = confine(env.root, file_path)
    before = _read_text(path)
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
    path.write_text(after, encoding="utf-8")
    env.changed.add(path)
    replaced = count if replace_all else 1
    return (
        f"Edited {env.relative(path)}: {replaced} replacement(s).\n{_diff(env.relative(path), before, after)}"
    )


@tool("Write", "Create or overwrite a file.", file_path="File path.", content="The whole new content.")
def write(env: ToolEnv, file_path: str, content: str) -> str:
    path = confine(env.root, file_path)
    existed = path.exists()
    if path.is_dir():
        raise ToolError(f"{file_path} is a directory.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    env.changed.add(path)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {env.relative(path)} ({len(content.splitlines())} lines)."


def _ignore_spec(root: Path) -> Any:
    from aries_kernel.codebase.files import read_gitignore

    return read_gitignore(root, ".gitignore")[0]  # invalid lines are left out, as git does


def iter_files(root: Path, start: Path) -> Iterator[Path]:
    """Files under ``start`` (inside ``root``), skipping VCS, environments, caches and what .gitignore
    ignores."""
    spec = _ignore_spec(root)
    if start.is_file():
        yield start
        return
    for directory, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(name for name in dirnames if name not in SKIP_DIRS)
        base = Path(directory)
        for name in sorted(filenames):
            path = base / name
            if spec is not None and spec.match_file(path.relative_to(root).as_posix()):
                continue
            yield path


@tool(
    "Grep",
    "Search file contents with a regular expression (Python syntax); prints path:line: text.",
    pattern="Regular expression to search for.",
    path="File or folder to search, relative to the project root (default: the whole project).",
    glob="Only files whose name matches this glob, e.g. *.py.",
    case_insensitive="Ignore case.",
)
def grep(env: ToolEnv, pattern: str, path: str = ".", glob: str = "", case_insensitive: bool = False) -> str:
    try:
        regex = re.compile(pattern, re.IGNORECASE if case_insensitive else 0)
    except re.error as exc:
        raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
    root = env.root.resolve()
    matches: list[str] = []
    total = 0
    for file in iter_files(root, confine(root, path)):
        if glob and not (fnmatch.fnmatch(file.name, glob) or fnmatch.fnmatch(env.relative(file), glob)):
            continue
        try:
            if file.stat().st_size > _MAX_FILE_BYTES:
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < _GREP_MATCHES:
                    matches.append(f"{env.relative(file)}:{number}: {line.strip()[:300]}")
    if not matches:
        return f"No match for {pattern!r}."
    more = f"\n[... {total - len(matches)} more matches]" if total > len(matches) else ""
    return "\n".join(matches) + more


@tool(
    "Glob",
    "List files matching a glob pattern such as **/*.py, most recently modified first.",
    pattern="Glob pattern, relative to path.",
    path="Folder to search from, relative to the project root (default: the root).",
)
def glob_files(env: ToolEnv, pattern: str, path: str = ".") -> str:
    root = env.root.resolve()
    base = confine(root, path)
    found = [
        file
        for file in base.glob(pattern)
        if file.is_file() and not SKIP_DIRS.intersection(file.relative_to(root).parts)
    ]
    found.sort(key=lambda file: file.stat().st_mtime, reverse=True)
    if not found:
        return f"No file matches {pattern!r} under {env.relative(base) or '.'}."
    shown = [env.relative(file) for file in found[:_GLOB_RESULTS]]
    more = f"\n[... {len(found) - len(shown)} more]" if len(found) > len(shown) else ""
    return "\n".join(shown) + more


@tool(
    "NotebookEdit",
    "Replace, insert or delete one cell of a Jupyter notebook (.ipynb).",
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

    path = confine(env.root, notebook_path)
    if edit_mode not in ("replace", "insert", "delete"):
        raise ToolError(f"edit_mode must be replace, insert or delete, not {edit_mode!r}.")
    notebook = nbformat.read(path, as_version=4) if path.exists() else nbformat.v4.new_notebook()
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
    nbformat.write(notebook, path)
    env.changed.add(path)
    return (
        f"{edit_mode.capitalize()}d cell {cell_index} of {env.relative(path)}; it now has {len(cells)} cells."
    )


# ------------------------------------------------------------------------------------------------ processes


@tool(
    "Bash",
    "Run a bash command in the project root; output is truncated.",
    command="The command line.",
    timeout="Seconds before it is killed.",
)
def bash(env: ToolEnv, command: str, timeout: float = 0) -> str:
    limit = min(float(timeout) or env.settings.bash_timeout, env.settings.max_bash_timeout)
    started = time.monotonic()
    # A session of its own, so a timeout or an interrupt can kill the command and everything it started.
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=env.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        output = _kill_group(process)
        text = output.decode("utf-8", errors="replace")
        raise ToolError(
            f"timed out after {limit:g} s; the command and its children were killed. Output so far:\n{text}"
        ) from None
    except KeyboardInterrupt:
        _kill_group(process)
        raise
    text = output.decode("utf-8", errors="replace")
    seconds = time.monotonic() - started
    return f"exit code {process.returncode} ({seconds:.1f} s)\n{text}".rstrip("\n")


def _kill_group(process: subprocess.Popen[bytes]) -> bytes:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        output, _ = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipe; stop waiting for it
        process.kill()
        output = b""
    return output or b""


# ----------------------------------------------------------------------------------------------- code graph


@tool(
    "FindSymbol",
    "Find where a function, class or variable is defined in the code graph.",
    name="The symbol's name.",
)
def find_symbol(env: ToolEnv, name: str) -> str:
    return _shown(env.codebase().find_symbol(name), f"No definition of {name!r} in the code graph.")


@tool(
    "ShowDependents",
    "List the files that import or reference a file (reverse dependencies).",
    file_path="Path of the file, relative to the project root.",
)
def show_dependents(env: ToolEnv, file_path: str) -> str:
    relative = env.relative(confine(env.root, file_path))
    return _shown(env.codebase().show_dependents(relative), f"Nothing depends on {relative}.")


@tool(
    "ShowDependencies",
    "List the files a file imports or references (forward dependencies).",
    file_path="Path of the file, relative to the project root.",
)
def show_dependencies(env: ToolEnv, file_path: str) -> str:
    relative = env.relative(confine(env.root, file_path))
    found = env.codebase().show_dependencies(relative)
    return _shown(found, f"{relative} depends on no other indexed file.")


@tool(
    "CodeSearch",
    "Ranked search over the code graph's symbols and content (better than Grep for concepts).",
    query="Words or a symbol name to look for.",
    limit="Most matches to return.",
    roles='Which files: "source" (the default), "all", or roles among test, example, fixture, generated, '
    'comma-separated.',
)
def code_search(env: ToolEnv, query: str, limit: int = 20, roles: str = "source") -> str:
    found = env.codebase().search(query, limit=limit, roles=roles)
    return _shown(found, f"No match for {query!r} in the code graph's {roles} files.")


# -------------------------------------------------------------------------------------------- planning, web


@tool(
    "TodoWrite",
    "Replace the task list for this session; use it to plan multi-step work and mark progress.",
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


@tool("WebFetch", "Fetch a web page (http or https) and return its text.", url="The URL to fetch.")
def web_fetch(env: ToolEnv, url: str) -> str:
    import httpx

    if not url.startswith(("http://", "https://")):
        raise ToolError(f"{url!r} is not an http(s) URL.")
    try:
        response = httpx.get(url, timeout=env.settings.web_timeout, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise ToolError(f"could not fetch {url}: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        raise ToolError(f"{url} answered HTTP {response.status_code} {response.reason_phrase}.")
    kind = response.headers.get("content-type", "")
    text = html_to_text(response.text) if "html" in kind else response.text
    return f"{response.url} ({response.status_code}, {kind or 'unknown type'})\n{text}"


# --------------------------------------------------------------------------------------------------- memory


@tool(
    "VaultSearch",
    "Ranked search of persistent memory (notes).",
    memory=True,
    query="What to look for.",
    limit="Most notes to return.",
)
def vault_search(env: ToolEnv, query: str, limit: int = 10) -> str:
    return _shown(env.vault().query_ranked(query, limit=limit), f"No note matches {query!r}.")


@tool("VaultRead", "Read one memory note by its title.", memory=True, title="The note's title.")
def vault_read(env: ToolEnv, title: str) -> str:
    return _shown(env.vault().read(title), f"No note titled {title!r}.")


@tool(
    "VaultExplore",
    "Explore memory around a question, following links between notes.",
    memory=True,
    query="The question to explore.",
    limit="Most notes to return.",
)
def vault_explore(env: ToolEnv, query: str, limit: int = 15) -> str:
    return _shown(env.vault().explore(query, limit=limit), f"Nothing found around {query!r}.")


@tool(
    "VaultWarmth",
    "The warmest notes: recently active and reinforced memory.",
    memory=True,
    query="Optional focus.",
    limit="Most notes to return.",
)
def vault_warmth(env: ToolEnv, query: str = "", limit: int = 10) -> str:
    return _shown(env.vault().query_warmth(query or None, limit=limit), "The warmth field is empty.")


@tool(
    "VaultAdd",
    "Save an insight to memory.",
    memory=True,
    title="The insight as a prose claim.",
    content="Details.",
    type="insight, decision, pattern, ...",
)
def vault_add(env: ToolEnv, title: str, content: str, type: str = "insight") -> str:
    return _shown(env.vault().add(title, content, type=type), f"Saved {title!r}.")


@tool(
    "ProjectSave",
    "Save a fact about this repository to its project brain.",
    memory=True,
    title="The fact as a prose claim.",
    content="Details.",
    type="decision, pattern, convention, ...",
)
def project_save(env: ToolEnv, title: str, content: str, type: str = "decision") -> str:
    return _shown(
        env.vault().add(title, content, type=type, project=True), f"Saved {title!r} to the project brain."
    )


def _shown(value: Any, empty: str) -> str:
    """A result (often a DataFrame) as the model sees it, or ``empty`` when there is nothing to show."""
    if value is None or (hasattr(value, "__len__") and not isinstance(value, str) and len(value) == 0):
        return empty
    return format_value(value)
