"""The one settings rule (aries_kernel.paths): ``$ARIES_X``, else the setting, else the default under ``~/.aries``;
and no module of the package spells it out for itself any more."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from aries_kernel.codebase.index_key import key_path
from aries_kernel.diagnostics import stack_dump_path
from aries_kernel.models.budget import spend_file_path
from aries_kernel.paths import aries_home, aries_path, aries_setting
from tests.package_sources import package_trees


def test_the_variable_wins_over_the_setting_which_wins_over_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ARIES_TEST_THING", raising=False)
    assert aries_home() == tmp_path / "home" / ".aries"
    assert aries_path("ARIES_TEST_THING", "", "thing.json") == tmp_path / "home" / ".aries" / "thing.json"
    assert (
        aries_path("ARIES_TEST_THING", "~/set/thing.json", "thing.json")
        == tmp_path / "home" / "set" / "thing.json"
    )
    monkeypatch.setenv("ARIES_TEST_THING", "~/env/thing.json")
    assert (
        aries_path("ARIES_TEST_THING", "~/set/thing.json", "thing.json")
        == tmp_path / "home" / "env" / "thing.json"
    )
    monkeypatch.setenv("ARIES_TEST_THING", "")  # an empty variable is unset, as an empty setting is
    assert aries_path("ARIES_TEST_THING", "", "thing.json") == tmp_path / "home" / ".aries" / "thing.json"
    assert aries_setting("ARIES_TEST_THING", "", "fallback") == "fallback"
    monkeypatch.setenv("ARIES_TEST_THING", "from-env")
    assert aries_setting("ARIES_TEST_THING", "from-setting", "fallback") == "from-env"


def test_a_variable_or_a_setting_needs_no_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    monkeypatch.delenv("ARIES_TEST_THING", raising=False)
    assert aries_path("ARIES_TEST_THING", str(tmp_path / "set"), "x") == tmp_path / "set"
    with pytest.raises(RuntimeError):
        aries_path("ARIES_TEST_THING", "", "x")
    monkeypatch.setenv("ARIES_SPEND_FILE", str(tmp_path / "spend.json"))
    assert spend_file_path() == tmp_path / "spend.json"


def test_the_files_of_aries_follow_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("ARIES_SPEND_FILE", "ARIES_INDEX_KEY", "ARIES_LOG_DIR"):
        monkeypatch.delenv(variable, raising=False)
    aries = tmp_path / "home" / ".aries"
    assert spend_file_path() == aries / "spend.json"
    assert spend_file_path("~/mine.json") == tmp_path / "home" / "mine.json"
    assert key_path() == aries / "index.key"
    assert stack_dump_path().parent == aries / "logs"
    monkeypatch.setenv("ARIES_SPEND_FILE", "~/env.json")  # the variable wins over c.AriesModels.spend_file
    assert spend_file_path("~/mine.json") == tmp_path / "home" / "env.json"
    monkeypatch.setenv("ARIES_INDEX_KEY", "~/key")
    monkeypatch.setenv("ARIES_LOG_DIR", "~/logs")
    assert key_path() == tmp_path / "home" / "key"
    assert stack_dump_path().parent == tmp_path / "home" / "logs"


def _rule_spelled_out(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module reads an ``ARIES_*`` variable itself or builds a path on the home folder."""
    found = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            called = (ast.unparse(node.func.value), node.func.attr)
            if called in {("os.environ", "get"), ("os", "getenv"), ("os.environ", "pop")} and node.args:
                key = node.args[0]
            elif called == ("Path", "home"):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) == "os.environ":
                key = node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
            if any(ast.unparse(c) == "os.environ" for c in node.comparators):
                key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("ARIES_"):
            found.append((node.lineno, ast.unparse(node)))
    return found


# Not the settings rule: the root search stops at the home folder (context.py).
_NOT_THE_RULE = {("aries_kernel/context.py", "Path.home()")}


def test_no_module_spells_the_settings_rule_itself() -> None:
    offenders = [
        f"{rel}:{line}: {code}"
        for rel, tree in package_trees(skip=("aries_kernel/paths.py",))
        for line, code in _rule_spelled_out(tree)
        if (rel, code) not in _NOT_THE_RULE
    ]
    assert not offenders, "use aries_kernel.paths (aries_path, aries_setting, aries_home):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_the_rule_spelled_out() -> None:
    spelled = """
import os
from pathlib import Path
a = Path(os.environ.get("ARIES_SPEND_FILE") or Path.home() / ".aries" / "spend.json")
b = os.getenv("ARIES_USER", "")
c = os.environ["ARIES_ROOT"] if "ARIES_ROOT" in os.environ else None
d = os.environ.get("HOME")
"""
    lines = sorted(line for line, _ in _rule_spelled_out(ast.parse(spelled)))
    assert lines == [4, 4, 5, 6, 6]
