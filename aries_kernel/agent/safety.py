"""Where the agent may write, and which tool calls need a human's approval.

Every path a tool touches is resolved against the project root; a path that leaves the root, through ``..``,
an absolute path or a symlink anywhere along the way, is refused with a message the model can act on. Reads
are confined the same way, so the agent's view of the disk is the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutsideRootError", "confine", "EFFECTS", "TOOL_EFFECTS", "describe_call"]

# What a tool can do to the world, which the permission mode weighs: "read" never changes anything,
# "edit" changes files under the root, "command" runs programs or reaches the network, "repl" runs the
# agent's Python in the kernel (its effects are gated one by one as they happen).
EFFECTS = ("read", "edit", "command", "repl")
TOOL_EFFECTS = {
    "Edit": "edit",
    "Write": "edit",
    "NotebookEdit": "edit",
    "ProjectSave": "edit",
    "Bash": "command",
    "WebFetch": "command",
    "Repl": "repl",
}


class OutsideRootError(ValueError):
    """A tool was asked to touch a path outside the project root."""


def confine(root: Path, path: str | os.PathLike[str]) -> Path:
    """The absolute path of ``path`` (relative to ``root`` unless absolute), refused if it leaves ``root``.

    Symlinks are followed (``resolve``), so a link inside the root that points outside it is refused too; a
    path that does not exist yet is checked through its nearest existing parent.
    """
    if str(path).strip() == "":
        raise OutsideRootError("The path is empty; give a file path relative to the project root.")
    root = root.resolve()
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = (
        candidate.resolve()
    )  # strict=False: follows every symlink that exists, keeps the rest lexically
    if resolved != root and root not in resolved.parents:
        via = " (through a symlink)" if _has_symlink(root, candidate) else ""
        raise OutsideRootError(
            f"Refused: {path} resolves to {resolved}{via}, outside the project root {root}. "
            "Only files inside the project root can be read or changed."
        )
    return resolved


def _has_symlink(root: Path, candidate: Path) -> bool:
    current = candidate
    while current != current.parent:
        if current.is_symlink():
            return True
        if current == root:
            return False
        current = current.parent
    return False


def describe_call(name: str, arguments: dict[str, object]) -> str:
    """A one-line summary of a tool call, for approval prompts and transcripts."""
    if name == "Bash":
        return f"Bash: {arguments.get('command', '')}"
    if name == "Edit":
        count = "all occurrences" if arguments.get("replace_all") else "one occurrence"
        return f"Edit {arguments.get('file_path', '')} ({count})"
    if name == "Write":
        content = str(arguments.get("content", ""))
        return f"Write {arguments.get('file_path', '')} ({len(content.splitlines())} lines)"
    if name == "NotebookEdit":
        mode = arguments.get("edit_mode", "replace")
        where = f"{arguments.get('notebook_path', '')} cell {arguments.get('cell_index', '')}"
        return f"NotebookEdit {where} ({mode})"
    return name
