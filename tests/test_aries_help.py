"""``%aries help`` lists every subcommand and every option of ``%aries <prompt>``, from the parsers themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from aries_kernel.magics import agent
from aries_kernel.magics.aries import SUBCOMMANDS
from IPython.core.interactiveshell import InteractiveShell


def test_help_lists_every_subcommand_and_prompt_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # loading the extension starts indexing its root: not this repository
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "aries_kernel")
    text = ip.run_line_magic("aries", "help")
    lines = text.splitlines()
    assert {"index", "vault", "model", "history", "cost", "resume"} <= set(SUBCOMMANDS)
    for name in SUBCOMMANDS:
        assert any(line.startswith(f"%aries {name} ") for line in lines), name
    options = lines[lines.index("Options of %aries <prompt> and %%aries, before the prompt:") + 1 :]
    listed = {line.split()[0] for line in options}
    parser_options = {o for a in agent._prompt_options.parser._actions for o in a.option_strings}
    assert {"--yes", "--bare", "--max-turns", "--model"} <= parser_options == listed
    max_turns = next(line for line in options if line.split()[0] == "--max-turns")
    assert "MAX_TURNS" in max_turns and "Most model turns" in max_turns
