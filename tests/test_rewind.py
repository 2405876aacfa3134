"""Rewind (issue 14): checkpoints of files, kernel names and the conversation, and going back to them.

In-process tests drive the real loop with a scripted model and a real IPython shell; the kernel tests run
scripted ``%aries`` sessions in a real Aries kernel against the loopback model server.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent import Agent
from aries_kernel.agent.checkpoints import Checkpoints
from aries_kernel.agent.events import Checkpointed, Event
from aries_kernel.agent.settings import AriesAgent
from tests.agent_scripted import ScriptedClient, ScriptedRouter
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer
from tests.test_agent_loop import recording_context
from tests.test_panel_kernel import buttons, final_output, lab_kernel, run_interacting, states

__all__ = ["lab_kernel"]  # a fixture, used by name

FILES = {
    "pkg/core.py": "def run():\n    return 42\n",
    "pkg/util.py": "NAME = 'old'\n",
    "pkg/gone.py": "GONE = True\n",
    "data/notes.txt": "line one\n",
    "data/blob.bin": bytes(range(256)) * 4,
}


def make_repo(root: Path) -> dict[str, bytes]:
    for rel, content in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return snapshot(root)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but .aries/, by path."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".aries" not in path.relative_to(root).parts
    }


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    saved = dict(shell.user_ns)
    try:
        yield shell
    finally:
        shell.user_ns.clear()
        shell.user_ns.update(saved)


def make_agent(root: Path, shell: InteractiveShell, *replies: Any) -> tuple[Agent, ScriptedClient]:
    primary = ScriptedClient(*replies)
    settings = AriesAgent(permission_mode="bypassPermissions")
    agent = Agent(recording_context(root, shell), router=ScriptedRouter(primary), settings=settings)
    return agent, primary


def run_all(agent: Agent, prompt: str) -> list[Event]:
    return list(agent.run(prompt))


# The scenario of the issue, as three model turns of one run: Edit + Write, Bash (sed -i, rm), then Repl.
REPL_CODE = (
    "open('data/notes.txt', 'w').write('rewritten by the repl\\n')\n"
    "df = df.drop(columns=['b'])\n"
    "del x\n"
    "items.append(4)\n"
)
# In-process, an unclosed file's ResourceWarning would fail the test (filterwarnings = error): close it.
CLOSED_REPL_CODE = REPL_CODE.replace("open(", "with open(").replace(".write(", " as _f: _f.write(", 1)


def scenario_replies(code: str = REPL_CODE) -> list[Reply]:
    return [
        Reply(
            tool_calls=[
                ("Edit", {"file_path": "pkg/core.py", "old_string": "42", "new_string": "43"}),
                ("Write", {"file_path": "pkg/new_module.py", "content": "CREATED = 1\n"}),
            ]
        ),
        Reply(tool_calls=[("Bash", {"command": "sed -i 's/old/new/' pkg/util.py && rm pkg/gone.py"})]),
        Reply(tool_calls=[("Repl", {"code": code})]),
        Reply(text="All done."),
    ]


def seed_namespace(shell: InteractiveShell) -> dict[str, Any]:
    import pandas as pd

    shell.user_ns.update(df=pd.DataFrame({"a": [1, 2], "b": [3, 4]}), x=10, items=[1, 2, 3])
    return {name: shell.user_ns[name] for name in ("df", "x", "items")}


def test_rewinding_the_first_turn_restores_files_names_and_the_conversation(
    tmp_path: Path, shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    before = make_repo(root)
    monkeypatch.chdir(root)  # as the kernel runs: the Repl's relative paths are the root's
    objects = seed_namespace(shell)
    agent, _ = make_agent(root, shell, *scenario_replies(CLOSED_REPL_CODE))
    events = run_all(agent, "change things every way")
    marks = [event for event in events if isinstance(event, Checkpointed)]
    assert [event.turn for event in marks] == [1, 2, 3]
    assert sorted(marks[0].files) == ["pkg/core.py", "pkg/new_module.py"]
    assert sorted(marks[1].files) == ["pkg/gone.py", "pkg/util.py"]
    assert marks[2].files == ["data/notes.txt"] and sorted(marks[2].names) == ["df", "items", "x"]
    after = snapshot(root)
    assert after != before and "x" not in shell.user_ns and shell.user_ns["items"] == [1, 2, 3, 4]

    report = agent.rewind(1)
    assert report.done, report.text()
    assert snapshot(root) == before  # byte for byte: the created file gone, the deleted one back
    assert shell.user_ns["df"] is objects["df"] and shell.user_ns["x"] is objects["x"]
    assert shell.user_ns["items"] is objects["items"] and shell.user_ns["items"] == [1, 2, 3]
    assert "items" in report.restored_inplace and "Restored in place: items" in report.text()
    assert agent.session is not None and agent.session.messages == []  # ends before turn 1 (its prompt too)

    frame = agent.checkpoints.frame()
    assert list(frame["state"]) == ["undone by 4"] * 3 + ["active"]
    assert list(frame["kind"]) == ["turn", "turn", "turn", "rewind"]
    assert list(frame.columns[:7]) == [
        "checkpoint",
        "turn",
        "time",
        "prompt",
        "files changed",
        "names changed",
        "size",
    ]

    undo = agent.rewind()  # the rewind itself is undone: the state after the session
    assert undo.done, undo.text()
    assert snapshot(root) == after
    assert "x" not in shell.user_ns and shell.user_ns["items"] == [1, 2, 3, 4]
    assert list(shell.user_ns["df"].columns) == ["a"]
    assert [m.role for m in agent.session.messages][-1] == "assistant"
    assert agent.session.messages[-1].content == "All done."
    assert list(agent.checkpoints.frame()["state"]) == ["active"] * 3 + ["undone by 5", "active"]


def test_a_file_changed_after_the_turn_is_a_conflict_kept_unless_forced(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    root = tmp_path / "repo"
    before = make_repo(root)
    agent, _ = make_agent(
        root,
        shell,
        Reply(tool_calls=[("Write", {"file_path": "pkg/util.py", "content": "NAME = 'agent'\n"})]),
        Reply(tool_calls=[("Write", {"file_path": "pkg/core.py", "content": "AGENT = 1\n"})]),
        Reply(text="ok"),
    )
    run_all(agent, "write two files")
    (root / "pkg" / "util.py").write_text("NAME = 'mine'\n")  # the user's edit after the agent's turn

    refused = agent.rewind(1)
    assert not refused.done and refused.conflicts == ["pkg/util.py: changed since the agent's turn"]
    assert "--force" in refused.text() and "--keep" in refused.text()
    assert (root / "pkg" / "util.py").read_text() == "NAME = 'mine'\n"
    assert (root / "pkg" / "core.py").read_text() == "AGENT = 1\n"  # nothing was changed

    kept = agent.rewind(1, keep=True)
    assert kept.done and kept.kept == ["pkg/util.py"]
    assert (root / "pkg" / "util.py").read_text() == "NAME = 'mine'\n"
    assert (root / "pkg" / "core.py").read_bytes() == before["pkg/core.py"]

    agent.rewind()  # undo the keeping rewind, then force
    assert (root / "pkg" / "core.py").read_text() == "AGENT = 1\n"
    forced = agent.rewind(1, force=True)
    assert forced.done
    assert snapshot(root) == before


def test_a_name_rebound_by_the_user_after_the_turn_is_a_conflict(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    shell.user_ns["x"] = 1
    agent, _ = make_agent(root, shell, Reply(tool_calls=[("Repl", {"code": "x = 2"})]), Reply(text="ok"))
    run_all(agent, "rebind x")
    shell.user_ns["x"] = 3
    report = agent.rewind(1)
    assert not report.done and report.conflicts == ["name x: rebound or changed since the agent's turn"]
    assert shell.user_ns["x"] == 3
    assert agent.rewind(1, force=True).done and shell.user_ns["x"] == 1


def test_an_inplace_dataframe_change_is_reported_not_restored(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    import pandas as pd

    root = tmp_path / "repo"
    make_repo(root)
    frame = shell.user_ns["frame"] = pd.DataFrame({"a": [1, 2]})
    code = (
        "frame.loc[0, 'a'] = 99"  # pandas 3.1 deprecates inplace=True; an assignment changes it in place too
    )
    agent, _ = make_agent(root, shell, Reply(tool_calls=[("Repl", {"code": code})]), Reply(text="ok"))
    events = run_all(agent, "drop a row in place")
    (mark,) = [event for event in events if isinstance(event, Checkpointed)]
    assert mark.names == ["frame"] and mark.files == []
    report = agent.rewind(1)
    assert report.done
    assert any(item.startswith("frame: the DataFrame was changed in place") for item in report.not_restored)
    assert shell.user_ns["frame"] is frame and frame["a"].tolist() == [99, 2]


def test_file_checkpoints_survive_a_new_agent_and_names_say_they_do_not(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    root = tmp_path / "repo"
    before = make_repo(root)
    shell.user_ns["x"] = 1
    agent, _ = make_agent(
        root,
        shell,
        Reply(tool_calls=[("Bash", {"command": "echo more >> data/notes.txt"}), ("Repl", {"code": "x = 5"})]),
        Reply(text="ok"),
    )
    run_all(agent, "append")
    session_id = agent.session.id if agent.session else ""
    agent.changes.close()
    fresh, _ = make_agent(root, shell)  # as after a kernel restart: records from disk only
    fresh.resume(session_id)
    report = fresh.rewind(1)
    assert report.done, report.text()
    assert snapshot(root) == before
    assert any("the kernel was restarted since" in item for item in report.not_restored)
    assert shell.user_ns["x"] == 5
    assert fresh.session is not None and fresh.session.messages == []
    fresh.changes.close()


def test_pruning_holds_the_age_count_and_size_bounds_over_a_long_session(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    changed: list[str] = []
    from aries_kernel.codebase.changes import ChangeWatch

    with ChangeWatch(root) as watch:

        def look() -> list[str]:
            found = sorted(set(watch.changed()) | set(changed))
            changed.clear()
            return found

        checkpoints = Checkpoints(root, look, watch.files)
        checkpoints.settings.max_bytes = 200_000
        checkpoints.settings.max_checkpoints = 30

        class Session:
            id = "long"
            messages: list[Any] = []

        for turn in range(1, 121):
            checkpoints.start_run(f"turn {turn}", Session())
            checkpoints.start_turn(turn)
            with checkpoints.around("Bash", "command", {}):
                # Incompressible content, so every turn stores about 8 KB of new blobs.
                (root / "data" / f"out{turn % 7}.bin").write_bytes(os.urandom(8_000))
            checkpoints.end_run()
            kept = checkpoints.records()
            assert len(kept) <= 30
            blobs = (root / ".aries" / "checkpoints" / "blobs").rglob("*")
            on_disk = sum(path.stat().st_size for path in blobs if path.is_file())
            assert on_disk == checkpoints.store_bytes() <= 200_000  # the tree itself is under 70 KB
        assert len(checkpoints.records()) < 30  # the size bound, not the count, decided
        assert checkpoints.records()[-1].turn == 120

        checkpoints.settings.max_age_days = 0.0
        checkpoints.prune()
        assert checkpoints.records() == []
        records = list((root / ".aries" / "checkpoints" / "records").glob("*.json"))
        assert records == []


# ------------------------------------------------------------------------------------------- a real kernel


@pytest.mark.kernel
def test_the_scenario_in_a_real_kernel_rewinds_with_the_magic(
    tmp_path: Path, server: ScriptedModelServer
) -> None:
    root = tmp_path / "repo"
    before = make_repo(root)
    km, kc = start_kernel(root, env=server.kernel_env())
    try:
        setup = run_cell(
            kc,
            "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\nx = 10\nitems = [1, 2, 3]\n"
            "ids = (id(df), id(x), id(items))",
        )
        assert setup.error is None, setup.error
        server.script(*scenario_replies())
        cell = run_cell(kc, "%aries --yes change things every way", timeout=180)
        assert cell.error is None, cell.error
        assert "All done." in cell.stdout
        after = snapshot(root)
        assert after != before

        listed = run_cell(
            kc, "cps = %aries checkpoints\nprint(cps[['turn', 'files changed', 'names changed']])"
        )
        assert listed.error is None, listed.error
        assert listed.stdout.split() == "turn files changed names changed 0 1 2 0 1 2 2 0 2 3 1 3".split()

        rewound = run_cell(kc, "%aries rewind 1")
        assert rewound.error is None, rewound.error
        assert "Rewound to before turn 1" in (rewound.result or "")
        assert "Restored in place: items" in (rewound.result or "")
        assert snapshot(root) == before
        same = run_cell(kc, "print((id(df), id(x), id(items)) == ids, list(df.columns), items)")
        assert same.stdout.strip() == "True ['a', 'b'] [1, 2, 3]"
        history = run_cell(kc, "%aries history")
        assert (history.result or "") == "The session is empty."

        # A cell changes a file the rewind would put back: a conflict, kept unless forced.
        redo = run_cell(kc, "%aries rewind")
        assert redo.error is None and snapshot(root) == after
        run_cell(kc, "open('pkg/util.py', 'w').write('NAME = \"mine\"\\n')")
        refused = run_cell(kc, "%aries rewind 1")
        assert "pkg/util.py: changed since the agent's turn" in (refused.result or "")
        assert (root / "pkg" / "util.py").read_text() == 'NAME = "mine"\n'
        forced = run_cell(kc, "%aries rewind 1 --force")
        assert forced.error is None and snapshot(root) == before
        help_text = run_cell(kc, "%aries help")
        assert "%aries rewind" in (help_text.result or "") and "%aries checkpoints" in (
            help_text.result or ""
        )
    finally:
        stop_kernel(km, kc)


@pytest.mark.kernel
def test_the_panels_rewind_button_rewinds_and_offers_keep_or_overwrite_on_a_conflict(
    lab_kernel: tuple[Any, Any], small_repo: Path, server: ScriptedModelServer
) -> None:
    _, kc = lab_kernel
    before = snapshot(small_repo)
    server.script(
        Reply(tool_calls=[("Write", {"file_path": "made_by_agent.py", "content": "MADE = 1\n"})]),
        Reply(tool_calls=[("Write", {"file_path": "a.py", "content": "x = 2\n"})]),
        Reply(text="Wrote them."),
    )
    messages = run_interacting(kc, "%aries --yes write two files")
    assert buttons(messages, "Rewind turn 1") and buttons(messages, "Rewind turn 2")
    (small_repo / "a.py").write_text("x = 'mine'\n")  # changed after the agent's turn 2

    shown, _ = final_output(messages)
    record_id = shown["transient"]["display_id"]

    def record_after(clicked: list[dict[str, Any]]) -> dict[str, str]:
        """What a click made of the run's record: the rewind's result is static output the notebook keeps."""
        (update,) = [
            m["content"]
            for m in clicked
            if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == record_id
        ]
        assert set(update["data"]) == {"text/html", "text/plain"}, "no widget in the saved output"
        return dict(update["data"])

    clicked = press(kc, buttons(messages, "Rewind turn 1")[0])
    assert (small_repo / "a.py").read_text() == "x = 'mine'\n"
    assert (small_repo / "made_by_agent.py").exists()  # the conflict stopped the whole rewind
    conflict = record_after(clicked)
    assert "a.py: changed since the agent&#x27;s turn" in conflict["text/html"], conflict
    assert "Wrote them." in conflict["text/html"], "the transcript is still there"
    assert "Nothing was rewound to before turn 1" in conflict["text/plain"]
    assert not [s for s in states(clicked) if "changed since" in str(s.get("value", ""))], "said once"
    assert buttons(clicked, "Overwrite mine")
    kept = record_after(press(kc, buttons(clicked, "Keep mine, rewind the rest")[0]))
    assert not (small_repo / "made_by_agent.py").exists()
    assert snapshot(small_repo) == before | {"a.py": b"x = 'mine'\n"}
    assert "Nothing was rewound" in kept["text/plain"] and "Rewound to before turn 1" in kept["text/plain"]
    assert (
        "Files removed: made_by_agent.py" in kept["text/html"] and "Kept (yours): a.py" in kept["text/html"]
    )

    # The next cell retires the bar: its output becomes empty (a saved notebook holds no widget view that
    # would reopen as "model not found") and its widgets are closed in the kernel.
    bar_output = [
        m
        for m in messages
        if m["msg_type"] == "display_data"
        and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
    ][-1]
    display_id = bar_output["content"]["transient"]["display_id"]
    later = run_interacting(kc, "1 + 1")
    updates = [m["content"] for m in later if m["msg_type"] == "update_display_data"]
    assert {"display_id": display_id} == {"display_id": updates[0]["transient"]["display_id"]}, updates
    assert updates[0]["data"] == {"text/plain": ""}
    assert [u["transient"]["display_id"] for u in updates] == [display_id], "the record keeps the rewind"
    closed = {m["content"]["comm_id"] for m in later if m["msg_type"] == "comm_close"}
    assert set(buttons(messages, "Rewind turn 1") + buttons(messages, "Rewind turn 2")) <= closed
    assert not [m for m in run_interacting(kc, "2 + 2") if m["msg_type"] == "update_display_data"]


def press(kc: Any, comm_id: str) -> list[dict[str, Any]]:
    """Click a button as the browser does and return the iopub messages its handling sent."""
    message = kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
    )
    kc.shell_channel.send(message)
    seen: list[dict[str, Any]] = []
    while True:
        reply = kc.get_iopub_msg(timeout=60)  # a hang fails here
        if reply["parent_header"].get("msg_id") != message["header"]["msg_id"]:
            continue
        seen.append(reply)
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            return seen


@pytest.mark.kernel
def test_the_checkpoints_table_has_integer_turns_no_stray_index_and_a_row_for_an_interrupted_run(
    tmp_path: Path, server: ScriptedModelServer
) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    km, kc = start_kernel(root, env=server.kernel_env())
    try:
        server.script(
            Reply(
                tool_calls=[("Edit", {"file_path": "pkg/core.py", "old_string": "42", "new_string": "43"})]
            ),
            Reply(text="Edited."),
        )
        assert run_cell(kc, "%aries --yes edit core", timeout=180).error is None
        assert "Rewound to before turn 1" in (run_cell(kc, "%aries rewind 1").result or "")
        # A Bash run that changes a file, interrupted while it waits: its change is a checkpoint all the same.
        command = "echo changed > data/notes.txt && touch data/marker && sleep 600"
        server.script(Reply(tool_calls=[("Bash", {"command": command})]))
        msg_id = kc.execute("%aries --yes change the notes")
        deadline = time.monotonic() + 120  # a command that never runs fails here
        while not (root / "data" / "marker").exists():
            assert time.monotonic() < deadline, "the Bash command did not run"
            time.sleep(0.05)
        km.interrupt_kernel()
        said = ""
        while True:
            message = kc.get_iopub_msg(timeout=60)  # a hang fails here
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            said += message["content"].get("text", "") if message["msg_type"] == "stream" else ""
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        assert "[interrupted · 1 turn(s)" in said, said
        announced = re.search(
            r"\[checkpoint 3: turn (\d+) changed 2 file\(s\); %aries rewind \1 goes back", said
        )
        assert announced, said
        turn = announced.group(1)

        listed = run_cell(kc, "%aries checkpoints")
        (result,) = [m["content"]["data"] for m in listed.messages if m["msg_type"] == "execute_result"]
        text, page = result["text/plain"], result["text/html"]
        header, *rows = text.splitlines()
        assert header.split()[:2] == ["checkpoint", "turn"], text  # no index column before the number
        assert [row.split()[0] for row in rows] == ["1", "2", "3"], text
        assert "NaN" not in text + page and "1.0" not in text + page and "<NA>" not in text + page
        assert "<th" not in page.split("<tbody>", 1)[1], "no index cells in the HTML table"
        cps = run_cell(kc, "cps = %aries checkpoints\nprint(cps['turn'].tolist(), cps['kind'].tolist())")
        assert cps.stdout.split("\n")[-2] == f"[1, <NA>, {turn}] ['turn', 'rewind', 'turn']", cps.stdout
    finally:
        stop_kernel(km, kc)
