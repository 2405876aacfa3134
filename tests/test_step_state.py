"""A step changes nothing process-wide that it does not put back, and a kernel's state is its context's.

The Repl guard's replaced functions are back after the step, ``sys.dont_write_bytecode`` never moves (the
step's imports write no cache, another thread's do), the keys leave ``os.environ`` only in the step's context
(and the C environment its processes inherit), and two contexts in one process keep their own agent hooks and
panel messages.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent.guard import Verdict, guarded
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.context import AriesContext, set_context
from aries_kernel.redact import environ_value, withheld_keys
from tests.loopback import Reply
from tests.test_agent_loop import make_agent, run_all

TOKEN = "ghp_" + "S" * 36


class Recorder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, effect: str, summary: str) -> Verdict:
        self.asked.append(summary)
        return Verdict(True)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    monkeypatch.chdir(path)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # PYTHONDONTWRITEBYTECODE may be set around us
    monkeypatch.syspath_prepend(str(path))
    return path.resolve()


def _replaced() -> tuple[Any, ...]:
    import _sqlite3
    import posix

    return (os.mkfifo, os.mknod, posix.mkfifo, sqlite3.connect, sqlite3.dbapi2.connect, _sqlite3.connect)


def test_the_guard_puts_back_what_it_replaced_once_the_last_step_ends(root: Path) -> None:
    before = _replaced()
    first_inside, second_done = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def other_step() -> None:  # a second step in another thread (an MCP client's, another kernel's)
        with guarded(root, Recorder()):
            first_inside.wait()
        second_done.set()

    thread = threading.Thread(target=other_step)
    thread.start()
    with guarded(root, Recorder()):
        seen["during"] = _replaced()
        first_inside.set()
        second_done.wait()
        seen["after the other"] = _replaced()  # this step still runs: still replaced
    thread.join()
    assert all(a is not b for a, b in zip(seen["during"], before, strict=True))
    assert seen["after the other"] == seen["during"]
    assert _replaced() == before


def test_a_steps_imports_write_no_cache_and_leave_dont_write_bytecode_alone(root: Path) -> None:
    (root / "in_step.py").write_text("X = 1\n")
    (root / "in_thread.py").write_text("X = 2\n")
    ask = Recorder()
    seen: dict[str, Any] = {}

    def other_thread() -> None:
        seen["flag"] = sys.dont_write_bytecode
        __import__("in_thread")

    with guarded(root, ask) as report:
        seen["flag in step"] = sys.dont_write_bytecode
        __import__("in_step")
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen == {"flag in step": False, "flag": False}
    assert sys.dont_write_bytecode is False
    assert ask.asked == [] and report.refused == [] and report.allowed == []
    assert [path.name.split(".")[0] for path in (root / "__pycache__").iterdir()] == ["in_thread"]


def test_withheld_keys_leave_only_the_blocks_context_and_its_processes(root: Path) -> None:
    data = os.environ._data  # type: ignore[attr-defined]
    before = dict(os.environ)
    inside, looked = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def other_thread() -> None:  # started before the block, as the indexer, warm-up, MCP and rlm threads are
        inside.wait()
        seen["thread"] = os.environ.get("GITHUB_TOKEN")
        looked.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with withheld_keys() as names:
        assert "GITHUB_TOKEN" in names
        assert "GITHUB_TOKEN" not in os.environ and os.getenv("GITHUB_TOKEN") is None
        assert b"GITHUB_TOKEN" not in os.environb and "GITHUB_TOKEN" not in dict(os.environ)
        assert environ_value("GITHUB_TOKEN") == TOKEN
        shown = subprocess.run(["sh", "-c", "echo ${GITHUB_TOKEN:-none}"], capture_output=True, text=True)
        assert shown.stdout.strip() == "none"
        inside.set()
        looked.wait()
    thread.join()
    assert seen["thread"] == TOKEN
    assert dict(os.environ) == before and os.environ._data is data  # type: ignore[attr-defined]
    shown = subprocess.run(["sh", "-c", "echo $GITHUB_TOKEN"], capture_output=True, text=True)
    assert shown.stdout.strip() == TOKEN


def test_an_agent_repl_step_puts_the_process_back_as_it_was(root: Path) -> None:
    (root / "fresh_module.py").write_text("VALUE = 7\n")
    code = (
        "import os, sys\n"
        "import fresh_module\n"
        "print('token:', os.environ.get('GITHUB_TOKEN'), 'flag:', sys.dont_write_bytecode, fresh_module.VALUE)"
    )
    before = (dict(os.environ), _replaced())
    agent, primary, _ = make_agent(
        root,
        Reply(tool_calls=[("Repl", {"code": code})]),
        Reply(text="done"),
        settings=AriesAgent(permission_mode="bypassPermissions"),
    )
    run_all(agent, "import it")
    (repl,) = [m.content for m in primary.requests[-1].messages if m.role == "tool"]
    assert repl == "token: None flag: False 7"
    assert (dict(os.environ), _replaced()) == before and sys.dont_write_bytecode is False
    assert not (root / "__pycache__").exists()


def _context(root: Path) -> AriesContext:
    return AriesContext(types.SimpleNamespace(config=None), root=root)


def test_two_contexts_keep_their_own_agent_hooks(root: Path) -> None:
    from aries_kernel.agent import _registered, register_hook

    first, second = _context(root), _context(root)
    factory = register_hook(first, lambda agent: None)
    assert _registered(first) == [factory] and _registered(second) == []


def test_two_kernels_keep_their_own_deferred_panel_messages(root: Path) -> None:
    from aries_kernel.widgets import ui_events

    kernels = []
    for _ in range(2):
        shell = types.SimpleNamespace(config=None)
        set_context(shell, _context(root))
        kernels.append(types.SimpleNamespace(shell=shell))
    first = ui_events._deferred(kernels[0])
    first.add("a message")  # type: ignore[arg-type]
    assert ui_events._deferred(kernels[0]) is first and ui_events._deferred(kernels[1]) == set()


def test_the_index_key_is_the_users_not_a_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aries_kernel.codebase.index_key import index_key

    monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / "a.key"))
    first = index_key()
    assert index_key() is first  # a second kernel of the process, same user: the same key, read once
    monkeypatch.setenv("ARIES_INDEX_KEY", str(tmp_path / "b.key"))
    assert index_key().secret != first.secret and (tmp_path / "b.key").read_bytes() == index_key().secret
