"""Phase-gated tool exposure: which tool schemas a request carries.

A run starts *lean*: only the schemas of the tools an agent uses most are sent (REPL mode: Repl, Edit, Write,
Bash, Notebook, VaultAdd, ProjectSave; bare mode: Read, Grep and Glob instead of Repl). The system prompt lists
the other tools by name. When the model calls one of them, the harness runs the call (no tool-not-found) and
widens to the *full* set; the phase falls back to lean once ``widen_turns`` turns in a row pass without a
gated call, so one excursion does not cost full schemas for the rest of a long run. Memory tools are never
gated: calling one runs it without widening, and its schema joins the requests that follow. Tools from MCP
servers (:attr:`PhaseState.external`, set by :mod:`aries_kernel.agent.mcp_tools`) are gated like the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from aries_kernel.agent.tools import TOOLS, Tool, tool_schema_dict
from aries_kernel.models.tokens import estimate_text_tokens
from aries_kernel.models.types import ToolSchema

__all__ = ["LEAN", "PhaseState", "schema_tokens"]

LEAN: dict[str, tuple[str, ...]] = {
    "repl": ("Repl", "Edit", "Write", "Bash", "Notebook", "VaultAdd", "ProjectSave"),
    "bare": ("Read", "Grep", "Glob", "Edit", "Write", "Bash", "Notebook", "VaultAdd", "ProjectSave"),
}


def schema_tokens(tools: Iterable[Tool]) -> int:
    """Estimated tokens the JSON schemas of ``tools`` cost in one request."""
    return sum(estimate_text_tokens(json.dumps(tool_schema_dict(tool))) for tool in tools)


@dataclass
class PhaseState:
    """The phase of one run: lean until a gated call widens it; memory tools used so far stay in the set."""

    mode: str = "repl"
    widen_turns: int = 2
    phase: str = "lean"
    extra: list[str] = field(default_factory=list)
    external: dict[str, Tool] = field(default_factory=dict)  # MCP servers' tools, by namespaced name
    _full_left: int = 0

    def registry(self) -> dict[str, Tool]:
        """Every tool a call may name: the built-in ones, then the external (MCP) ones."""
        return {**TOOLS, **self.external} if self.external else TOOLS

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, built-in or external, or None."""
        return TOOLS.get(name) or self.external.get(name)

    def lean_names(self) -> tuple[str, ...]:
        """The tool names of the lean phase in this mode."""
        return LEAN[self.mode]

    def gated_names(self) -> list[str]:
        """Tools not in the lean set: named in the system prompt, schema sent only once widened."""
        lean = set(self.lean_names())
        return [name for name in self.registry() if name not in lean]

    def tools(self) -> list[Tool]:
        """The tools whose schemas the next request carries."""
        if self.phase == "full":
            return list(self.registry().values())
        names = [*self.lean_names(), *(name for name in self.extra if name not in self.lean_names())]
        return [TOOLS[name] for name in names]

    def schemas(self) -> list[ToolSchema]:
        """The next request's tool schemas."""
        return [ToolSchema(tool.name, tool.description, tool.parameters) for tool in self.tools()]

    def admit(self, name: str) -> bool:
        """Make ``name`` callable; True if that widened the phase from lean to full."""
        if name in self.lean_names() or name in self.extra:
            return False
        tool = self.tool(name)
        if tool is not None and tool.memory:
            self.extra.append(name)
            return False
        self._full_left = self.widen_turns
        widened = self.phase == "lean"
        self.phase = "full"
        return widened

    def end_turn(self, used_gated: bool) -> None:
        """Count a finished turn; back to lean after ``widen_turns`` turns in a row without a gated call."""
        if self.phase == "full" and not used_gated:
            self._full_left -= 1
            if self._full_left <= 0:
                self.phase = "lean"

    def reset(self) -> None:
        """Back to lean, for a new run."""
        self.phase = "lean"
        self._full_left = 0
        self.extra.clear()
