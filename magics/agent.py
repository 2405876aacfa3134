"""``%aries <prompt>`` and ``%%aries``: run the agent in this kernel; and its subcommands.

Subcommands: ``fix``, ``tools``, ``compact``, ``reset``, ``resume``, ``history``, ``cost``, ``config``, plus the
"Agent" and "Notebook" sections of ``%aries status``. The ``model`` subcommand lives in :mod:`.model`.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.agent import Agent, agent_for, outside
from aries_kernel.agent.events import ApprovalRequested, RunFinished, Waiting
from aries_kernel.agent.permissions import MODES, decide
from aries_kernel.agent.phases import LEAN, schema_tokens
from aries_kernel.agent.render import Renderer, TextRenderer
from aries_kernel.agent.repl import format_value, truncate
from aries_kernel.agent.session import list_sessions
from aries_kernel.agent.tools import TOOLS

from .aries import HelpText, prompt_handler, split_args, status_section, subcommand

if TYPE_CHECKING:  # pandas is imported by the subcommands that return tables, not by a prompt's first request
    import pandas as pd

__all__ = ["run_prompt", "interpolate"]

_VARIABLE = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}(?!\})")
_FLAGS_WITH_VALUE = ("--model", "--max-turns", "--mode")
_FLAGS = ("--yes", "--bare", "--code")


@magic_arguments()
@argument(
    "--model", default=None, help="Model of the primary slot from now on (a shortname or provider:model)."
)
@argument("--bare", action="store_true", help="Bare tools for this run: Read, Grep and Glob instead of Repl.")
@argument("--max-turns", type=int, default=None, help="Most model turns for this run.")
@argument(
    "--code",
    action="store_true",
    help="Code-action mode for this run: the model writes Python blocks that run in this kernel, no tool calls.",
)
@argument(
    "--mode",
    choices=MODES,
    default=None,
    help="Permission mode for this run: default (ask before edits and commands), acceptEdits (edits run, "
    "commands asked), plan (read-only), bypassPermissions (everything runs).",
)
@argument(
    "--yes",
    action="store_true",
    help="Allow edits and commands without asking, this run (the same as --mode bypassPermissions).",
)
def _prompt_options(line: str) -> None:
    """%aries [--model M] [--bare] [--code] [--max-turns N] [--mode MODE | --yes] <prompt>"""


def _check_run(agent: Agent, args: Any) -> None:
    """Refuse a run while one is in progress (the agent's own code asking), and --yes with another mode."""
    if agent.running:
        raise UsageError(
            "An agent run is in progress: only the user starts runs and chooses their permission mode."
        )
    if args.yes and args.mode not in (None, "bypassPermissions"):
        raise UsageError("--yes means --mode bypassPermissions; give one of them.")


def _split_options(text: str) -> tuple[str, str]:
    """Leading option tokens, and the prompt after them kept verbatim (quotes and apostrophes untouched)."""
    options: list[str] = []
    rest = text.lstrip()
    while rest.startswith("--"):
        token, _, after = rest.partition(" ")
        name = token.split("=", 1)[0]
        if name == "--":
            return " ".join(options), after.lstrip()
        if name in _FLAGS:
            options.append(token)
        elif name in _FLAGS_WITH_VALUE:
            if "=" in token:
                options.append(token)
            else:
                value, _, after = after.lstrip().partition(" ")
                if not value:
                    raise UsageError(f"{name} needs a value.")
                options.extend([token, value])
        else:
            raise UsageError(f"Unknown option {name}; options are {', '.join(_FLAGS + _FLAGS_WITH_VALUE)}.")
        rest = after.lstrip()
    return " ".join(options), rest


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """Replace ``{name}`` (or ``{name.attr}``) by the variable's value; unknown names and ``{{x}}`` stay as
    written."""

    def value_of(match: re.Match[str]) -> str:
        head, *attributes = match.group(1).split(".")
        if head not in namespace:
            return match.group(0)
        value = namespace[head]
        try:
            for attribute in attributes:
                value = getattr(value, attribute)
        except AttributeError:
            return match.group(0)
        return format_value(value)

    return _VARIABLE.sub(value_of, text)


def _agent(magics: Any) -> Agent:
    return agent_for(magics.context)


def _renderer(magics: Any, agent: Agent) -> Renderer:
    """The widget panel where the frontend can show it (see ``AriesAgent.display``), else the text renderer."""
    choice = agent.settings.display
    kernel = getattr(magics.shell, "kernel", None)
    if choice == "widgets" or (choice == "auto" and getattr(kernel, "frontend_has_widgets", False)):
        from aries_kernel.widgets import AgentPanel
        from aries_kernel.widgets.ui_events import click_route

        from .rewind import panel_rewinder

        route = click_route(magics.shell)
        if not route.clickable:  # buttons nobody could click while the run goes on: the text view, and why
            print(route.describe(), file=sys.stderr)
            return TextRenderer()
        panel = AgentPanel(
            window=agent.router.client("primary").context_window,
            rewind=panel_rewinder(magics.context),
            route=route,
        )
        panel.show()
        return panel
    return TextRenderer()


@prompt_handler(options=_prompt_options)
def run_prompt(magics: Any, text: str, cell: str | None) -> None:
    """Run the agent on the prompt: the line after options, then the cell body ({var} interpolated)."""
    options, prompt = _split_options(text)
    args = parse_argstring(_prompt_options, options)
    if cell is not None:
        body = interpolate(cell, magics.shell.user_ns)
        prompt = f"{prompt}\n{body}".strip() if prompt else body.strip()
    if not prompt:
        raise UsageError("Give the agent a prompt: %aries <prompt>, or a %%aries cell.")
    if args.max_turns is not None and args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1.")
    agent = _agent(magics)
    _check_run(agent, args)
    if args.model:
        agent.router.set_slot("primary", args.model)
    renderer = _renderer(magics, agent)
    session = agent.session
    first = (len(session.tool_calls), len(session.messages)) if session is not None else (0, 0)
    run = agent.run(
        prompt,
        max_turns=args.max_turns,
        auto_approve=True if args.yes else None,
        mode="bare" if args.bare else None,
        permission_mode=args.mode,
        actions="code" if args.code else None,
        approver=renderer.answer,  # the Repl guard's questions, asked in the middle of a step
    )
    ended, stopping, finished = "error", False, False
    try:
        for event in run:
            renderer(event)
            finished = finished or isinstance(event, RunFinished)
            if isinstance(event, ApprovalRequested):
                renderer.answer(event)  # the one door for approvals: buttons in the panel, stdin in text
            if renderer.stop_requested and not stopping:
                if not isinstance(event, Waiting):
                    raise KeyboardInterrupt  # Stop outside a model wait ends the run as an interrupt does
                event.stop()  # the loop raises the interrupt inside the run and says how it ended
                stopping = True
        ended = "done"
    except KeyboardInterrupt:
        run.close()  # the loop settles the transcript (partial text kept, pending calls answered)
        if agent.ending is not None and not finished:
            renderer(agent.ending)  # its turns, tokens and cost, which it could no longer yield
        ended = "interrupted"
    finally:
        renderer.finish(ended)  # the panel leaves a static record of the run in the notebook
        from aries_kernel.notebook.steps import after_run

        if agent.session is not session:
            session, first = agent.session, (0, 0)  # the run opened the session
        after_run(magics.shell, magics.context, session, first, agent.settings.steps_as_cells)


@subcommand("fix", "fix the last error (its cell, traceback, variables); the fix offered as a new cell")
def fix_command(magics: Any, args: str, cell: str | None) -> None:
    """Run the agent on the last error (see :func:`aries_kernel.notebook.context.fix_prompt`); options and words
    after ``fix`` are as for a prompt (``%aries fix --mode acceptEdits keep the column names``)."""
    from aries_kernel.notebook.context import fix_prompt

    options, words = _split_options(args)
    try:
        prompt = fix_prompt(magics.shell, magics.context, _agent(magics).settings.notebook_context, words)
    except (LookupError, PermissionError) as exc:
        raise UsageError(str(exc)) from None
    run_prompt(magics, f"{options} -- {prompt}" if options else f"-- {prompt}", cell)


@status_section("Notebook")
def notebook_status(context: Any) -> str:
    """Which notebook the kernel serves, the running cell's id, the cells recorded and the last error."""
    from aries_kernel.notebook.context import status

    return status(context.shell, context)


@subcommand("tools", "the agent's tools: phase, approval, schema tokens")
def tools_command(magics: Any, args: str, cell: str | None) -> pd.DataFrame:
    """One row per tool; ``lean`` says whether its schema is sent before any widening in the current mode, and
    ``permission`` what the permission mode does with it (allow, ask, refuse; Repl's effects are weighed one by
    one as its code runs)."""
    import pandas as pd

    agent = _agent(magics)
    lean = set(LEAN[agent.settings.mode])
    mode = agent.permission_mode
    rows = [
        {
            "tool": tool.name,
            "lean": tool.name in lean,
            "memory": tool.memory,
            "effect": tool.effect,
            "permission": "per effect" if tool.effect == "repl" else decide(mode, tool.effect),
            "schema_tokens": schema_tokens([tool]),
            "arguments": ", ".join(tool.parameters["properties"]),
        }
        for tool in TOOLS.values()
    ]
    return pd.DataFrame(rows)


@subcommand("compact", "compact the agent's history now (prune, then summarize)")
def compact_command(magics: Any, args: str, cell: str | None) -> HelpText:
    agent = _agent(magics)
    if agent.session is None or not agent.session.messages:
        return HelpText("Nothing to compact: the session has no history yet.")
    renderer = TextRenderer()
    for event in agent.compact():
        renderer(event)
    return HelpText(f"{len(agent.session.messages)} messages after compaction.")


@subcommand("reset", "start a new agent session (the old one stays on disk)")
def reset_command(magics: Any, args: str, cell: str | None) -> HelpText:
    agent = _agent(magics)
    renderer = TextRenderer()
    for event in agent.reset():
        renderer(event)
    return HelpText("Started a new session; the next prompt opens it.")


@subcommand("resume", "continue a saved session: resume [session id prefix], or resume --list")
def resume_command(magics: Any, args: str, cell: str | None) -> Any:
    agent = _agent(magics)
    words = split_args(args)
    if words == ["--list"]:
        import pandas as pd

        return pd.DataFrame(
            [
                {"session": path.stem, "bytes": path.stat().st_size}
                for path in reversed(list_sessions(agent.root))
            ]
        )
    if len(words) > 1:
        raise UsageError("Usage: %aries resume [session id prefix] | --list")
    try:
        session = agent.resume(words[0] if words else None)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    last = next((m.content for m in reversed(session.messages) if m.role == "assistant" and m.content), "")
    return HelpText(
        f"Resumed session {session.id}: {len(session.messages)} messages, {session.turns} turns, "
        f"${session.cost_usd:.4f}.\nLast reply: {truncate(last, 500) or '(none)'}"
    )


@magic_arguments()
@argument(
    "--cells", action="store_true", help="Put the agent's Repl steps into the next cell to re-run them."
)
@argument("--print", action="store_true", dest="print_steps", help="Print the Repl steps as code.")
@argument("--limit", type=int, default=40, help="Most messages to show.")
def _history_options(line: str) -> None:
    """%aries history [--cells | --print] [--limit N]"""


@subcommand("history", "the session transcript; --cells turns the agent's Repl steps into a cell")
def history_command(magics: Any, args: str, cell: str | None) -> Any:
    options = parse_argstring(_history_options, args)
    session = _agent(magics).session
    if session is None:
        return HelpText("No session yet.")
    if options.cells or options.print_steps:
        steps = session.repl_steps()
        if not steps:
            return HelpText("The agent has not run any Repl code in this session.")
        code = "\n\n".join(f"# aries step {number}\n{step.rstrip()}" for number, step in enumerate(steps, 1))
        if options.cells:
            magics.shell.set_next_input(code, replace=False)
            return HelpText(f"{len(steps)} Repl step(s) put into the next cell.")
        return HelpText(code)
    lines = []
    first = max(0, len(session.messages) - options.limit)
    notes: dict[int, list[str]] = {}
    for after, why in session.stops:
        notes.setdefault(min(after, len(session.messages)), []).append(f"[{why}]")
    for index, message in enumerate(session.messages[first:], first):
        lines.extend(notes.pop(index, []))
        if message.role == "tool":
            lines.append(
                f"  result{' (error)' if message.is_error else ''}: {truncate(message.content, 300)}"
            )
            continue
        if message.content:
            lines.append(f"{message.role}: {truncate(message.content, 1000)}")
        for call in message.tool_calls:
            lines.append(f"  call {call.name}: {truncate(str(call.arguments), 300)}")
    lines.extend(note for index in sorted(notes) if index >= first for note in notes[index])
    return HelpText("\n".join(lines) or "The session is empty.")


@subcommand("cost", "tokens and cost of this agent session, per model slot, and spend against the limits")
def cost_command(magics: Any, args: str, cell: str | None) -> Any:
    agent = _agent(magics)
    session = agent.session
    limits = agent.router.limits
    spend = limits.spend()
    lines = ["Spend (every slot, rlm included):", *(f"  {line}" for line in spend.lines())]
    if limits.problem:
        lines.append(f"  {limits.problem}")
    if session is None or not session.usage:
        return HelpText("No model calls in this session yet.\n" + "\n".join(lines))
    rows = [
        {
            "slot": slot,
            "calls": usage.calls,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "cost_usd": round(usage.cost_usd, 6),
        }
        for slot, usage in session.usage.items()
    ]
    import pandas as pd

    frame = pd.DataFrame(rows)
    total = {"slot": "total", **{column: frame[column].sum() for column in frame.columns if column != "slot"}}
    table = pd.concat([frame, pd.DataFrame([total])], ignore_index=True)
    return HelpText(table.to_string(index=False) + "\n\n" + "\n".join(lines))


@subcommand("config", "show the agent settings, or set them: config name=value ...")
def config_command(magics: Any, args: str, cell: str | None) -> Any:
    agent = _agent(magics)
    settings = agent.settings
    traits = settings.traits(config=True)
    assignments = split_args(args)
    if assignments and agent.running:
        raise UsageError(
            "Settings cannot be changed while an agent run is in progress: only the user changes them "
            "(the permission mode and approval settings above all), between runs."
        )
    if assignments and (reason := agent.owner.refusal_reason()) is not None:
        agent.owner.report(f"Refused: %aries config {args.strip()} {reason}.")
        raise UsageError(
            f"Settings cannot be changed {reason}: only the user changes them, in a cell of theirs."
        )
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or name not in traits:
            raise UsageError(f"Use name=value with a name among: {', '.join(sorted(traits))}.")
        try:
            setattr(settings, name, traits[name].from_string(value))
        except Exception as exc:  # traitlets raises TraitError or ValueError; both mean a bad value
            raise UsageError(f"Bad value for {name}: {exc}") from exc
    agent.phase.mode = settings.mode
    import pandas as pd

    return pd.DataFrame(
        [
            {"setting": name, "value": getattr(settings, name), "help": trait.help}
            for name, trait in sorted(traits.items())
        ]
    )


@status_section("Agent")
def agent_status(context: Any) -> str:
    """Session, turns, context use, phase, permission mode and cost, then what the hooks (memory) report."""
    agent = agent_for(context)
    session = agent.session
    permissions = _permissions_line(agent)
    if session is None:
        lines = [f"No session yet ({agent.settings.mode} mode).", permissions]
    else:
        lines = [
            f"Session {session.id}: {session.prompts} prompt(s), {session.turns} turn(s), "
            f"{len(session.messages)} messages",
            f"Context: ~{agent.last_request_tokens:,} tokens in the last request; phase {agent.phase.phase}, "
            f"{agent.phase.mode} mode",
            permissions,
            f"Cost: ${session.cost_usd:.4f}",
            f"File: {session.path}",
        ]
    lines.extend(text for hook in agent.hooks if (text := hook.status(agent)))
    return "\n".join(lines)


_MODE_MEANS = {
    "default": "edits and commands asked",
    "acceptEdits": "edits inside the root allowed, commands asked",
    "plan": "read-only: edits and commands refused",
    "bypassPermissions": "edits and commands allowed",
}


def _permissions_line(agent: Agent) -> str:
    mode = agent.permission_mode
    alias = " (auto_approve)" if agent.settings.auto_approve and not agent.running else ""
    run = " for the run in progress" if agent.running else ""
    return f"Permission mode: {mode}{alias}{run}; {_MODE_MEANS[mode]}"


@status_section("Panel")
def panel_status(context: Any) -> str | None:
    """Which path a click on the agent panel takes while a cell runs, and what the panel can do there."""
    kernel = getattr(context.shell, "kernel", None)
    if kernel is None:
        return None
    from aries_kernel.widgets.ui_events import click_route

    return click_route(context.shell).describe()


@status_section("Protected settings")
def protected_settings_status(context: Any) -> str | None:
    """How many changes to the settings only the user changes were refused or set back, and the last."""
    reports = context.settings_owner.reports
    if not reports:
        return None
    return f"{len(reports)} change(s) refused or set back; the last: {reports[-1]}"


@status_section("Outside agents")
def outside_status(context: Any) -> str | None:
    """What MCP clients ran in this kernel: how many steps, the last one, what the guard refused."""
    if not outside.RUNS:
        return None
    last = outside.RUNS[-1]
    first_line = last["code"].strip().splitlines()[0] if last["code"].strip() else ""
    refused = sum(len(run["refused"]) for run in outside.RUNS)
    return (
        f"{len(outside.RUNS)} step(s) from MCP clients (aries-kernel mcp --kernel), {refused} effect(s) refused by the "
        f"Repl guard; the last, {time.time() - last['at']:.0f} s ago in mode {last['mode']}: {first_line[:80]}\n"
        "aries_kernel.agent.outside.RUNS holds every step's code."
    )
