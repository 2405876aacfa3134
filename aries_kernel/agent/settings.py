"""The agent's settings: ``c.AriesAgent.<name> = ...`` in a Jupyter config file, or ``%aries config
name=value``."""

from __future__ import annotations

from traitlets import Bool, Enum, Float, Int
from traitlets.config import Configurable

__all__ = ["AriesAgent"]


class AriesAgent(Configurable):
    """Settings of the ``%aries`` agent loop."""

    max_turns = Int(25, help="Model turns per prompt before the loop stops and says so.").tag(config=True)
    auto_approve = Bool(
        False,
        help="Run Edit, Write, Bash and NotebookEdit without asking (as `%aries --yes` does for one run).",
    ).tag(config=True)
    mode = Enum(
        ["repl", "bare"], "repl", help="repl: the lean tool set has Repl; bare: Read, Grep and Glob instead."
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
    max_tokens = Int(8192, help="Output tokens allowed per model call.").tag(config=True)
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
