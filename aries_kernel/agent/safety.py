"""Where the agent may write, and which tool calls need a human's approval.

Every path a tool touches is resolved beneath the project root by :mod:`aries_kernel.rootfs`, one
component at a time with no-follow semantics; a path that leaves the root, through ``..``, an absolute path or
a symlink anywhere along the way, is refused with a message the model can act on. Reads are confined the same
way, so the agent's view of the disk is the repository.
"""

from __future__ import annotations

from pathlib import Path

from aries_kernel.rootfs import MissingPathError, normalize, resolve

__all__ = ["confine", "EFFECTS", "describe_call"]

# What a tool can do to the world, which the permission mode weighs: "read" never changes anything,
# "edit" changes files under the root, "command" runs programs or reaches the network, "repl" runs the
# agent's Python in the kernel (its effects are gated one by one as they happen). Each tool declares its own
# (aries_kernel.agent.tools.Tool.effect).
EFFECTS = ("read", "edit", "command", "repl")


def confine(root: Path, path: str) -> Path:
    """The absolute path of ``path`` (relative to ``root`` unless absolute), refused if it leaves ``root``.

    Symlinks inside the root are followed, beneath the root's handle, so a link that points outside it is
    refused too; a path that does not exist yet is accepted as long as its existing part stays inside. For
    opening files, use :mod:`aries_kernel.rootfs` directly: a path returned here can change before use.
    """
    try:
        rel = resolve(root, path)
    except MissingPathError:
        rel = "/".join(normalize(root, path))  # a folder on the way is missing: nothing there to follow
    return root.resolve() / rel if rel else root.resolve()


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
    if name == "CellEdit":
        lines = str(arguments.get("new_source", "")).splitlines()
        shown = "\n".join(f"    {line}" for line in lines[:20]) + ("\n    ..." if len(lines) > 20 else "")
        cell = arguments.get("cell") or "the failing cell"
        return f"CellEdit {cell}: this code in a new cell below\n{shown}"
    return name
