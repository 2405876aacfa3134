"""The agent's settings: ``c.AriesAgent.<name> = ...`` in a Jupyter config file, or ``%aries config
name=value``."""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, Union, validate
from traitlets.config import Configurable

from aries_kernel.agent.permissions import MODES
from aries_kernel.settings_owner import PROTECTED, check_change

__all__ = ["AriesAgent", "PERMISSION_SETTINGS"]

# Settings that decide what the agent may do unasked: only the user changes them, in a cell of their own (never
# from the agent's Repl, an MCP client's step or what either leaves running); see aries_kernel.settings_owner.
PERMISSION_SETTINGS = PROTECTED["AriesAgent"]


class AriesAgent(Configurable):
    """Settings of the ``%aries`` agent loop."""

    max_turns = Int(25, help="Model turns per prompt before the loop stops and says so.").tag(config=True)
    permission_mode = Enum(
        list(MODES),
        "default",
        help="What runs without asking: default (asks before edits and commands), acceptEdits (edits inside "
        "the root run, commands are asked), plan (read-only: edits and commands refused), bypassPermissions "
        "(everything runs). `%aries --mode <mode>` sets it for one run.",
    ).tag(config=True)
    auto_approve = Bool(
        False,
        help="An alias of permission_mode = bypassPermissions: edits and commands run without asking (as "
        "`%aries --yes` does for one run).",
    ).tag(config=True)
    pass_env_keys = List(
        Unicode(),
        [],
        help="Credential variables (ANTHROPIC_API_KEY, GITHUB_TOKEN, ...) that Bash and the Repl may see; every "
        "other one is withheld from them.",
    ).tag(config=True)
    mode = Enum(
        ["repl", "bare"], "repl", help="repl: the lean tool set has Repl; bare: Read, Grep and Glob instead."
    ).tag(config=True)
    actions = Enum(
        ["auto", "tools", "code"],
        "auto",
        help="How the model acts: tools (tool calls), code (fenced Python blocks, each run as a Repl step in "
        "the kernel; for any model), or auto: code when the primary model's server says its chat template takes "
        "no tools, else tools.",
    ).tag(config=True)
    widen_turns = Int(
        2,
        help="After a call to a gated tool, requests carry the full tool set until this many turns in a row "
        "pass without one; then back to lean.",
    ).tag(config=True)
    compact_threshold = Float(
        0.7, help="Fraction of the primary slot's context window past which history is compacted."
    ).tag(config=True)
    protected_tool_tokens = Int(
        40_000, help="The most recent tool results, up to this many tokens, are never pruned."
    ).tag(config=True)
    bash_timeout = Float(
        120.0, help="Seconds a Bash command may run before its process group is killed."
    ).tag(config=True)
    max_bash_timeout = Float(600.0, help="The longest timeout the model may ask for in a Bash call.").tag(
        config=True
    )
    tool_output_chars = Int(
        12_000, help="Tool output longer than this is cut in the middle, with a marker saying how much."
    ).tag(config=True)
    max_tokens = Int(
        0,
        help="Output tokens allowed per model call; 0 means a quarter of the primary model's context window, at "
        "most 8,192 (a local 8k window keeps room for the prompt).",
    ).tag(config=True)
    web_timeout = Float(30.0, help="Seconds a WebFetch may take.").tag(config=True)
    web_max_bytes = Int(
        2_000_000, help="Bytes of a page WebFetch reads; the rest is not downloaded and the text says so."
    ).tag(config=True)
    web_allow_private = Bool(
        False,
        help="Let WebFetch reach loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local and other "
        "non-public addresses (checked after DNS resolution and on every redirect).",
    ).tag(config=True)
    search_timeout = Float(
        10.0, help="Seconds of pattern matching one Grep or Glob call may spend before it stops and says so."
    ).tag(config=True)
    display = Enum(
        ["auto", "text", "widgets"],
        "auto",
        help="How %aries shows a run: text, the widget panel, or auto (the panel where the frontend renders "
        "widgets, as JupyterLab and Notebook 7 do; text in jupyter console).",
    ).tag(config=True)
    notebook_context = Enum(
        ["full", "names", "off"],
        "full",
        help="What each run's request says of the notebook and the kernel: full (variables described with a few "
        "values, the cells run with their text output, the last error and its traceback, the notebook file's "
        "other cells), names (variable names and types, cell labels, the error's type: no values, code or "
        "output; %aries fix still sends the failing cell and its traceback, which it is asked for), off (nothing; the "
        "Notebook tool and %aries fix refuse).",
    ).tag(config=True)
    steps_as_cells = Enum(
        ["ask", "always", "never"],
        "ask",
        help="What becomes of a run's Repl steps that succeeded: always (code cells below the %aries cell, tagged "
        "in their metadata, through aries-kernel's JupyterLab extension; else one new cell), ask (an \"Insert steps "
        "as cells\" button on the run's record; %aries cells where the extension is not there), never.",
    ).tag(config=True)
    mcp_servers = Dict(
        value_trait=Union([Unicode(), Dict()]),
        help="MCP servers whose tools join the agent's (named mcp__<server>__<tool>, asked for like Bash unless the "
        "permission mode allows commands), started on first use: name -> a command line or an http(s) URL, or "
        '{"command": ..., "args": [...], "env": {...}, "cwd": ...} / {"url": ..., "headers": {...}}.',
    ).tag(config=True)
    mcp_timeout = Float(
        60.0, help="Seconds an MCP server may take to start, and one MCP tool call to answer."
    ).tag(config=True)

    @validate(*PERMISSION_SETTINGS)
    def _only_by_the_user(self, proposal: Any) -> Any:
        return check_change(self, proposal.trait.name, proposal.value)
