"""``%aries index`` and the Codebase section of ``%aries status`` in a real IPython shell."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.codebase import Codebase
from aries_kernel.context import get_context


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "aries_kernel")
    saved = ip.user_ns.get("codebase"), get_context(ip).built("codebase")
    yield ip
    ip.user_ns["codebase"] = saved[0]
    if saved[1] is not None:
        get_context(ip).set_codebase(saved[1])


def test_index_another_folder_replaces_codebase(shell, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other"
    other.mkdir()
    (other / "mod.py").write_text("def answer():\n    return 42\n")
    result = shell.run_line_magic("aries", f"index {other}")
    assert isinstance(result, Codebase) and result.root == other.resolve()
    assert shell.user_ns["codebase"] is result is get_context(shell).codebase
    assert result.find_symbol("answer")["file"].tolist() == ["mod.py"]
    status = shell.run_line_magic("aries", "status")
    assert f"{other.resolve()}: ready: 1 files" in status
    # Without a path: re-index what changed, returning the changes.
    (other / "new.py").write_text("from mod import answer\n")
    changes = shell.run_line_magic("aries", "index")
    assert isinstance(changes, pd.DataFrame)
    assert dict(zip(changes["file"], changes["change"], strict=False)) == {"new.py": "added"}
    assert ("new.py", "mod.py") in set(
        zip(result.edges("import")["source"], result.edges("import")["target"], strict=False)
    )


def test_index_bad_input_is_a_usage_error(shell, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="is not a folder"):
        shell.run_line_magic("aries", f"index {tmp_path / 'missing'}")
    with pytest.raises(UsageError):
        shell.run_line_magic("aries", "index --no-such-flag")
