"""The ``%aries`` magic: subcommand dispatch, ``help`` and ``status``.

A subcommand is a function ``(magics, args, cell) -> object`` registered with :func:`subcommand`; its return
value becomes the cell's ``Out[]``. Text that is not a subcommand (or follows ``--``) is a prompt for the agent,
handled by the function registered with :func:`prompt_handler`, whose ``@magic_arguments`` options ``%aries help``
lists from the parser itself.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, output_can_be_silenced

from aries_kernel.context import AriesContext, get_context

SubcommandFunc = Callable[["AriesMagics", str, "str | None"], Any]
StatusFunc = Callable[[AriesContext], "str | None"]

# Which module registers each subcommand word (and "" for the prompt handler). They are imported on first use,
# not at kernel start: they pull in pandas, SQLAlchemy and the model SDKs.
_MODULE_OF = {
    "index": "index",
    "vault": "vault",
    "model": "model",
    "rewind": "rewind",
    "checkpoints": "rewind",
    "replay": "replay",
    "hidden": "replay",
    "cells": "cells",
    **dict.fromkeys(["", "fix", "tools", "compact", "reset", "resume", "history", "cost", "config"], "agent"),
}


@dataclass(frozen=True)
class Subcommand:
    name: str
    summary: str
    func: SubcommandFunc


SUBCOMMANDS: dict[str, Subcommand] = {}
STATUS_SECTIONS: dict[str, StatusFunc] = {}
_prompt_handler: list[SubcommandFunc] = []
_prompt_options: list[argparse.ArgumentParser] = []


def subcommand(name: str, summary: str) -> Callable[[SubcommandFunc], SubcommandFunc]:
    """Register ``func`` as ``%aries <name> ...``; ``summary`` is its line in ``%aries help``."""

    def register(func: SubcommandFunc) -> SubcommandFunc:
        SUBCOMMANDS[name] = Subcommand(name, summary, func)
        return func

    return register


def status_section(title: str) -> Callable[[StatusFunc], StatusFunc]:
    """Register a section of ``%aries status``: ``func(context)`` returns text, or None to leave it out."""

    def register(func: StatusFunc) -> StatusFunc:
        STATUS_SECTIONS[title] = func
        return func

    return register


def prompt_handler(options: Any) -> Callable[[SubcommandFunc], SubcommandFunc]:
    """Register the function that runs the agent on a free-text prompt; ``options`` is the
    ``@magic_arguments`` function that parses its options (listed by ``%aries help``)."""

    def register(func: SubcommandFunc) -> SubcommandFunc:
        _prompt_handler[:] = [func]
        _prompt_options[:] = [options.parser]
        return func

    return register


def _load_subcommand_modules(word: str | None = None) -> None:
    """Import the module that registers ``word`` (all of them when ``word`` is None)."""
    modules = (
        set(_MODULE_OF.values()) if word is None else {_MODULE_OF[word]} if word in _MODULE_OF else set()
    )
    for module in sorted(modules):
        importlib.import_module(f"aries_kernel.magics.{module}")


_QUESTION_LINE = re.compile(r"^(\s*)%aries\s+(\S.*\?)\s*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """Input transformer: ``%aries why is it slow?`` is a prompt, not IPython's ``?`` help on ``slow``.

    Such a line is rewritten into ``get_ipython().run_line_magic('aries', '<text>?')`` before IPython's help
    transformer sees it; ``run_line_magic`` still expands ``{var}``. ``%aries?`` (help on the magic) has no text
    after the name and is left alone.
    """
    rewritten = []
    for line in lines:
        match = _QUESTION_LINE.match(line)
        if match:
            indent, text = match.groups()
            line = f"{indent}get_ipython().run_line_magic('aries', {text!r})\n"
        rewritten.append(line)
    return rewritten


@magics_class
class AriesMagics(Magics):
    """``%aries``: the agent, and the commands that drive the codebase, the vault and the models."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        if shell is not None and keep_question_marks not in shell.input_transformers_cleanup:
            shell.input_transformers_cleanup.append(keep_question_marks)

    @property
    def context(self) -> AriesContext:
        """The :class:`AriesContext` of this shell (codebase, vault, models, agent)."""
        return get_context(self.shell)

    @output_can_be_silenced
    @line_cell_magic
    def aries(self, line: str, cell: str | None = None) -> Any:
        """Run the Aries agent, or one of its subcommands.

        Usage::

            %aries <prompt>            run the agent on a prompt ({var} interpolates kernel variables)
            %%aries [options]          the cell body is the prompt
            %aries -- <text>           force a prompt even if it starts with a subcommand word
            %aries help                list the subcommands
            %aries <subcommand> ...    see %aries help
        """
        stripped = line.strip()
        first, _, rest = stripped.partition(" ")
        if first == "--":
            return self._run_prompt(rest, cell)
        if first in ("help", "-h", "--help") and cell is None:
            return self._help()
        if first == "status" and cell is None:
            return self._status()
        _load_subcommand_modules(first)
        if first in SUBCOMMANDS:
            return SUBCOMMANDS[first].func(self, rest.strip(), cell)
        return self._run_prompt(stripped, cell)

    def _run_prompt(self, text: str, cell: str | None) -> Any:
        _load_subcommand_modules("")
        return _prompt_handler[0](self, text, cell)

    def _help(self) -> HelpText:
        _load_subcommand_modules()
        lines = [
            "%aries <prompt>             run the agent on a prompt ({var} interpolates variables)",
            "%%aries [options]           the cell body is the prompt",
            "%aries -- <text>            force a prompt that starts with a subcommand word",
            "%aries help                 this list",
            "%aries status               the state of the codebase, vault, models and agent",
        ]
        for name in sorted(SUBCOMMANDS):
            lines.append(f"%aries {name:<20} {SUBCOMMANDS[name].summary}")
        if _prompt_options:
            lines += ["", "Options of %aries <prompt> and %%aries, before the prompt:"]
            lines += [f"  {flags:<26} {text}" for flags, text in option_lines(_prompt_options[0])]
        return HelpText("\n".join(lines))

    def _status(self) -> HelpText:
        _load_subcommand_modules()
        parts = []
        for title, func in STATUS_SECTIONS.items():
            try:
                text = func(self.context)
            except Exception as exc:  # one broken pillar (a vault that cannot open) must not hide the others
                text = f"unavailable: {type(exc).__name__}: {exc}"
            if text:
                parts.append(f"{title}\n{'-' * len(title)}\n{text}")
        return HelpText("\n\n".join(parts) or "Nothing to report yet.")


class HelpText(str):
    """A string shown as plain text (not as a quoted repr) when it is a cell's result."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def option_lines(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(flags, help) for each option of ``parser``, e.g. ``("--max-turns MAX_TURNS", "Most model turns ...")``."""
    lines = []
    for action in parser._actions:  # argparse keeps no public list of its actions
        if not action.option_strings:
            continue
        flags = ", ".join(action.option_strings)
        if action.nargs != 0:
            choices = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else None
            flags += f" {choices or action.metavar or action.dest.upper()}"
        lines.append((flags, action.help or ""))
    return lines


def split_args(args: str) -> list[str]:
    """Split a subcommand's argument string the way a shell would, with a clear error on bad quoting."""
    try:
        return shlex.split(args)
    except ValueError as exc:
        raise UsageError(f"Could not parse the arguments {args!r}: {exc}") from exc


@status_section("User")
def user_status(context: Any) -> str:
    """Who the user is and where the name came from (aries_kernel.user), and where the day's spend is counted."""
    from aries_kernel.user import user_and_source

    name, source = user_and_source()
    lines = [
        f"{name} (from {source}): the author of your notes; your learned state and spend are kept as theirs"
    ]
    models = context.built("models")
    team = models.limits.team if models is not None else None
    if team is not None:
        lines.append(f"Daily spend: the team ledger in {team.where} (%aries cost shows it)")
    return "\n".join(lines)


@status_section("Start-up")
def startup_status(context: Any) -> str | None:
    """What could not be set up (an unwritable folder), each with the setting that moves it; None when all is."""
    from aries_kernel.codebase.index_key import index_key, key_path

    problems = list(context.problems.values())
    if not index_key().persistent:
        try:
            where = str(key_path())
        except RuntimeError:  # no home folder at all
            where = "~/.aries/index.key"
        problems.append(
            f"The index key {where} cannot be read or created: a key for this kernel only is used, so "
            ".aries/index.db is not reused after a restart. Set ARIES_INDEX_KEY to a writable file path."
        )
    models = context.built("models")
    if models is not None and models.limits.problem:
        problems.append(models.limits.problem)
    return "\n".join(problems) or None
