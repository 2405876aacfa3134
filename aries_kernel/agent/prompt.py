"""The system prompt: who the agent is, how it works (output discipline), where it is (a code-graph
orientation), which tools it can ask for beyond the lean set, and any sections hooks add (warm context, in
issue 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aries_kernel.agent.tools import TOOLS, Tool

__all__ = ["build_system_prompt", "orientation"]

_BASE = """\
You are Aries, a coding agent working inside a live Jupyter kernel on the repository at {root}.
The human shares this kernel with you: variables you create with the Repl are theirs to inspect, and \
theirs are yours.

How to work:
- Do not narrate. Do not announce tool calls, do not restate results, do not summarize what you are about \
to do.
- Reason in the REPL with code that yields concrete results: query the graph and memory and compute answers \
instead of reading files one by one.
- Before writing new code, check the graph for existing patterns (codebase.find_similar_patterns, \
codebase.detect_duplication, codebase.find_convention).
- Edit with exact strings copied from the file; keep changes small and consistent with the code around them.
- When you are done, answer in a few plain sentences: what you found or changed, and anything left open.

The REPL body (preloaded in the Repl namespace; tabular results are pandas DataFrames):
- codebase: search(query, limit, roles), top_files(limit, roles), hits(limit, roles), communities(roles), \
find_symbol(name), show_dependents(file, depth), show_dependencies(file, depth), edges(kind), \
get_context(file, lines, window), cluster_by_file(matches), list_files(roles), stats(), reindex(paths); \
the rankings list source files unless roles="all" (or test, example, fixture, generated)
- judgment: codebase.find_similar_patterns(pattern, limit, mode="name"|"signature"|"shape"), \
detect_duplication(snippet, threshold), is_consistent_with(snippet, reference, criteria), \
suggest_location(description, limit), find_convention(topic, limit)
- vault: query_ranked(query, limit), query_important(limit), query_warmth(query, limit), \
explore(query, limit), add(title, content, type), read(title)
- rlm_call(question, context) -> str: one focused sub-model call on a slice you pass; rlm_batch([(question, \
context), ...]) runs many at once. Use them to analyse text too big to read yourself."""

_GATED = """\
More tools are available on request; call any of them by name with these arguments and it will run:
{lines}"""


def _arguments(tool: Tool) -> str:
    properties = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    return ", ".join(arg if arg in required else f"{arg}?" for arg in properties)


def orientation(codebase: Any, top: int = 8, communities: int = 6) -> str:
    """A short map of the repository: its most central files and its communities, from the code graph."""
    lines = []
    ranked = codebase.top_files(top)
    if len(ranked):
        lines.append("Most central files (PageRank): " + ", ".join(str(name) for name in ranked["file"]))
    groups = codebase.communities()
    if len(groups):
        label = "label" if "label" in groups.columns else groups.columns[-1]
        by_label = groups.groupby(label, sort=False)["file"].apply(list)
        by_label = by_label.loc[by_label.map(len).sort_values(ascending=False).index][:communities]
        lines.append("Communities (module boundaries from the dependency structure):")
        for name, files in by_label.items():
            shown = ", ".join(str(file) for file in files[:4])
            more = f" and {len(files) - 4} more" if len(files) > 4 else ""
            lines.append(f"- {name}: {shown}{more}")
    return "\n".join(lines)


def build_system_prompt(
    root: str,
    gated: Iterable[str],
    orientation_text: str = "",
    leading: Iterable[str] = (),
    trailing: Iterable[str] = (),
    registry: Mapping[str, Tool] = TOOLS,
) -> str:
    """Assemble the system prompt.

    ``leading`` sections (warm context) come first and stay stable across turns; ``trailing`` ones (notes
    offered for this turn only) come last, so a change in them leaves the cacheable prefix alone. ``registry``
    holds the gated tools named (the built-in ones, and any from MCP servers).
    """
    parts = [section for section in leading if section]
    parts.append(_BASE.format(root=root))
    if orientation_text:
        parts.append("Repository map:\n" + orientation_text)
    gated = list(gated)
    if gated:
        lines = "\n".join(f"- {name}({_arguments(registry[name])})" for name in gated)
        parts.append(_GATED.format(lines=lines))
    parts.extend(section for section in trailing if section)
    return "\n\n".join(parts)
