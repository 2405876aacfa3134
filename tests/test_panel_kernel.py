"""The agent panel in a real kernel, driven as JupyterLab drives it: widget comms, button clicks sent as the
comm messages a browser sends, and the static record left in the notebook when the run ends."""

from __future__ import annotations

import json
import queue
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter

from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

pytestmark = pytest.mark.kernel

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
Message = dict[str, Any]


@pytest.fixture
def lab_kernel(small_repo: Path, server: ScriptedModelServer) -> Iterator[tuple[Any, Any]]:
    """A kernel whose client looks like JupyterLab (it asked about widget comms): (manager, client)."""
    (small_repo / "a.py").write_text("x = 1\n")
    (small_repo / "b.py").write_text("y = 1\n")
    env = server.kernel_env(
        ARIES_ROOT=str(small_repo)  # the copy, not a project marker some other run left above it in /tmp
    )
    km, kc = start_kernel(small_repo, env=env)
    try:
        kc.comm_info(target_name="jupyter.widget")
        kc.get_shell_msg(timeout=30)
        yield km, kc
    finally:
        stop_kernel(km, kc)


@pytest.fixture
def lab(lab_kernel: tuple[Any, Any]) -> Any:
    """The client of :func:`lab_kernel`."""
    return lab_kernel[1]


def run_interacting(
    kc: Any, code: str, react: Callable[[Message, list[Message]], None] = lambda m, ms: None
) -> list[Message]:
    """Execute ``code``, calling ``react(msg, so_far)`` on each of its iopub messages while it runs."""
    msg_id = kc.execute(code)
    messages: list[Message] = []
    deadline = time.monotonic() + 180  # a hang fails here, not in CI's global timeout
    while True:
        assert time.monotonic() < deadline, f"cell did not finish: {code!r}"
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        react(msg, messages)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    return messages


def click(kc: Any, comm_id: str, subshell_id: str | None = None) -> str:
    """What the browser sends when a button is clicked (on a subshell, as JupyterLab 4.4+ does, if given); the
    message's id."""
    message = kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
    )
    if subshell_id is not None:
        message["header"]["subshell_id"] = subshell_id
    kc.shell_channel.send(message)
    return str(message["header"]["msg_id"])


def subshell(kc: Any) -> str:
    """A new kernel subshell (JEP 91), made the way JupyterLab makes the one it sends widget messages on."""
    request = kc.session.msg("create_subshell_request", {})
    kc.control_channel.send(request)
    while True:
        reply = kc.control_channel.get_msg(timeout=60)  # a hang fails here
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return str(reply["content"]["subshell_id"])


def buttons(messages: list[Message], label: str) -> list[str]:
    """Comm ids of the buttons labelled ``label``, in the order they were made."""
    return [
        m["content"]["comm_id"]
        for m in messages
        if m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("description") == label
    ]


def states(messages: list[Message]) -> list[dict[str, Any]]:
    return [
        m["content"]["data"].get("state", {}) for m in messages if m["msg_type"] in ("comm_open", "comm_msg")
    ]


def final_output(messages: list[Message]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The live display (with its display id) and the update that replaced it."""
    shown_with_id = [
        m["content"]
        for m in messages
        if m["msg_type"] == "display_data" and m["content"].get("transient", {}).get("display_id")
    ]
    shown = shown_with_id[0]  # the panel; a rewind bar may follow it under its own display id
    panel_id = shown["transient"]["display_id"]
    (update,) = [
        m["content"]
        for m in messages
        if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == panel_id
    ]
    return shown, update


def test_a_finished_run_is_left_as_html_and_text_that_nbconvert_shows(
    lab: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    server.script(
        Reply(
            text="Changing x.",
            tool_calls=[("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})],
        ),
        Reply(text="Done: x is 2 now."),
    )
    messages = run_interacting(lab, "%aries --yes set x to 2")
    shown, update = final_output(messages)
    display_id = shown["transient"]["display_id"]
    assert WIDGET_MIME in shown["data"], "the live panel is a widget"
    assert update["transient"]["display_id"] == display_id, "the record replaces the panel in place"
    data = update["data"]
    assert set(data) == {"text/html", "text/plain"}, "no widget is left in the saved output"
    page = data["text/html"]
    assert '<span style="color:#1a7f37">+x = 2</span>' in page and "color:#cf222e" in page, "the diff"
    assert "Changing x." in page and "Done: x is 2 now." in page
    assert "Edited a.py: 1 replacement(s)" in page, "the tool's result"
    assert "done · 2 turn(s)" in page and "$" in page, "the usage and cost footer"
    # Code and diffs name a monospace font themselves: nbconvert's lab template sets pre in a proportional one.
    blocks = re.findall(r"<(pre|code) style=['\"]([^'\"]*)", page)
    assert len(blocks) >= 3 and all("monospace" in style for _, style in blocks), blocks
    text = data["text/plain"]
    assert "> Edit(file_path=a.py, old_string=x = 1, new_string=x = 2)" in text
    assert "Done: x is 2 now." in text and "[done · 2 turn(s)" in text
    assert (small_repo / "a.py").read_text() == "x = 2\n"

    # What JupyterLab saves: the display output with the update's data; nbconvert renders it.
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%aries --yes set x to 2")
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    notebook.cells.append(cell)
    html_page, _ = HTMLExporter().from_notebook_node(nbformat.reads(nbformat.writes(notebook), 4))
    assert "+x = 2" in html_page and "Done: x is 2 now." in html_page
    assert "model not found" not in html_page and WIDGET_MIME not in html_page


def test_approve_deny_and_allow_for_this_run_are_buttons_on_the_asking_card(
    lab: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    server.script(
        Reply(tool_calls=[("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})]),
        Reply(tool_calls=[("Edit", {"file_path": "b.py", "old_string": "y = 1", "new_string": "y = 2"})]),
        Reply(text="One edit made, one refused."),
    )
    answers = iter(["Approve", "Deny"])

    def answer_each_question(msg: Message, so_far: list[Message]) -> None:
        if msg["msg_type"] == "comm_open" and msg["content"]["data"]["state"].get("description") == (
            "Allow for this run"
        ):  # the last button of a question's row: the whole row exists now
            label = next(answers)
            click(lab, buttons(so_far, label)[-1])

    messages = run_interacting(lab, "%aries change both files", answer_each_question)
    assert (small_repo / "a.py").read_text() == "x = 2\n", "Approve let the edit run"
    assert (small_repo / "b.py").read_text() == "y = 1\n", "Deny kept the file"
    assert len(buttons(messages, "Approve")) == 2 and len(buttons(messages, "Deny")) == 2
    seen = states(messages)
    cards = {
        m["content"]["comm_id"]
        for m in messages
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_model_name") == "AccordionModel"
    }
    expanded = [
        m["content"]["comm_id"]
        for m in messages
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("state", {}).get("selected_index") == 0
    ]
    assert len(set(expanded) & cards) == 2, "each asking card is expanded"
    assert any(
        str(s.get("titles", "")).find("Edit ✓") >= 0 and "approved" in str(s.get("titles")) for s in seen
    )
    assert any("denied" in str(s.get("titles", "")) for s in seen)
    _, update = final_output(messages)
    assert "approval: Edit a.py (one occurrence) → approved" in update["data"]["text/html"]
    assert "approval: Edit b.py (one occurrence) → denied" in update["data"]["text/html"]
    assert "? approval needed: Edit b.py (one occurrence)\n  -> denied" in update["data"]["text/plain"]
    second = server.requests[2].body["messages"]
    refused = [b for m in second if isinstance(m["content"], list) for b in m["content"] if b.get("is_error")]
    assert refused and "did not allow" in json.dumps(refused)

    # Allow for this run: the second edit of the run runs without a question.
    (small_repo / "a.py").write_text("x = 1\n")
    server.script(
        Reply(
            tool_calls=[
                ("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 3"}),
                ("Edit", {"file_path": "b.py", "old_string": "y = 1", "new_string": "y = 3"}),
            ]
        ),
        Reply(text="Both edited."),
    )
    answers = iter(["Allow for this run"])
    messages = run_interacting(lab, "%aries change both again", answer_each_question)
    assert len(buttons(messages, "Approve")) == 1, "one question for the run"
    assert (small_repo / "a.py").read_text() == "x = 3\n" and (small_repo / "b.py").read_text() == "y = 3\n"


def test_stop_during_a_slow_reply_ends_the_run_as_an_interrupt_and_the_kernel_lives(
    lab: Any, server: ScriptedModelServer
) -> None:
    server.script(Reply(text="Too late.", delay=4.0))
    stopped = []

    def stop_while_waiting(msg: Message, so_far: list[Message]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
        if not stopped and str(state.get("value", "")).startswith("waiting for the model… "):
            stopped.append(True)
            click(lab, buttons(so_far, "Stop")[0])

    messages = run_interacting(lab, "%aries answer slowly", stop_while_waiting)
    assert stopped, "the panel said it was waiting for the model"
    _, update = final_output(messages)
    page = update["data"]["text/html"]
    # The loop's own ending (its notice and RunFinished), as after a kernel interrupt in the model wait.
    assert "Interrupted; the transcript so far is kept." in page and "interrupted · 1 turn(s) · 0 in" in page
    assert "Too late." not in update["data"]["text/plain"]
    assert run_cell(lab, "6 * 7").result == "42", "the kernel is alive"
    history = run_cell(lab, "%aries history")
    assert "user: answer slowly" in (history.result or "") and "interrupted" in (history.result or "")


def card_titles(messages: list[Message]) -> list[str]:
    return [str(s.get("titles", "")) for s in states(messages) if s.get("titles")]


def test_a_question_of_the_repl_guard_mid_step_is_asked_on_the_repl_card(
    lab: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    code = "open('made_by_repl.txt', 'w').write('hi')"
    server.script(Reply(tool_calls=[("Repl", {"code": code})]), Reply(text="Wrote it."))

    def approve(msg: Message, so_far: list[Message]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
        if state.get("description") == "Allow for this run":
            click(lab, buttons(so_far, "Approve")[-1])

    messages = run_interacting(lab, "%aries write a file from the repl", approve)
    assert (small_repo / "made_by_repl.txt").read_text() == "hi", "approved in the panel, the write ran"
    assert len(buttons(messages, "Approve")) == 1
    assert any("Repl" in title and "approved" in title for title in card_titles(messages)), (
        "the question sat on the Repl card"
    )
    _, update = final_output(messages)
    assert "approval: " in update["data"]["text/html"] and "→ approved" in update["data"]["text/html"]


# Prints five ticks, says so with a file (the test interrupts only then), and sleeps for a minute.
TICKING = (
    "import time\nfor i in range(5): print(f'tick {i}')\nopen('ticked', 'w').close()\n"
    "for _ in range(600): time.sleep(0.1)"
)
TICKS = "\n".join(f"tick {i}" for i in range(5))


def when_ticked(
    root: Path, act: Callable[[Message, list[Message]], None]
) -> Callable[[Message, list[Message]], None]:
    """A reaction that calls ``act`` once, when the Repl card is up and the step has printed its ticks."""
    done: list[bool] = []

    def react(msg: Message, so_far: list[Message]) -> None:
        if not done and any("Repl …" in title for title in card_titles([msg])):
            deadline = time.monotonic() + 60  # a step that never ticks fails here
            while not (root / "ticked").exists():
                assert time.monotonic() < deadline, "the Repl step did not print its ticks"
                time.sleep(0.05)
            done.append(True)
            act(msg, so_far)

    return react


def assert_ticks_kept(messages: list[Message]) -> None:
    """The stopped card showed the ticks live, and the record keeps them (HTML and text)."""
    assert any(TICKS in str(s.get("value", "")) for s in states(messages)), "the live card shows the ticks"
    _, update = final_output(messages)
    page, text = update["data"]["text/html"], update["data"]["text/plain"]
    assert "Repl interrupted" in page and "interrupted · 1 turn(s)" in page, page
    assert TICKS in page and "the code ran partly" in page, page
    assert "| tick 4" in text, text
    # What the step changed (the file it wrote) is a checkpoint the run's record offers to rewind.
    assert "checkpoint 1: turn 1 changed 1 file(s)" in page and buttons(messages, "Rewind turn 1"), page
    assert "Interrupted; the transcript so far is kept." in page, "the loop's own ending, whole"


def test_an_interrupt_mid_tool_leaves_the_card_saying_interrupted_with_what_it_printed(
    lab_kernel: tuple[Any, Any], small_repo: Path, server: ScriptedModelServer
) -> None:
    km, kc = lab_kernel
    server.script(Reply(tool_calls=[("Repl", {"code": TICKING})]))
    react = when_ticked(small_repo, lambda msg, so_far: km.interrupt_kernel())
    messages = run_interacting(kc, "%aries --yes tick, then sleep a minute", react)
    assert any("Repl interrupted" in title for title in card_titles(messages)), "the live card said so"
    assert_ticks_kept(messages)
    assert run_cell(kc, "6 * 7").result == "42", "the kernel is alive"


def test_stop_clicked_mid_tool_interrupts_the_tool_and_keeps_what_it_printed(
    lab_kernel: tuple[Any, Any], small_repo: Path, server: ScriptedModelServer
) -> None:
    """JupyterLab sends widget messages on a subshell, handled while the cell runs; a Stop there must not wait
    for the running tool (a minute of sleep here) but end it as a kernel interrupt would."""
    _, kc = lab_kernel
    side = subshell(kc)
    server.script(Reply(tool_calls=[("Repl", {"code": TICKING})]))
    react = when_ticked(small_repo, lambda msg, so_far: click(kc, buttons(so_far, "Stop")[0], side))
    messages = run_interacting(kc, "%aries --yes tick, then sleep a minute", react)
    assert_ticks_kept(messages)
    assert run_cell(kc, "6 * 7").result == "42", "the kernel is alive"
    # The next run's request gives the model the stopped step's result with its ticks.
    server.script(Reply(text="I saw five ticks."))
    run_interacting(kc, "%aries what did it print?")
    results = [
        block
        for message in server.requests[-1].body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and TICKS in json.dumps(results[-1]).replace("\\n", "\n"), results


def test_memory_off_in_a_fresh_vault_is_said_once_per_kernel_in_one_line(
    lab: Any, server: ScriptedModelServer
) -> None:
    pages = []
    for prompt in ("first question", "second question"):
        server.script(Reply(text="Answered."))
        _, update = final_output(run_interacting(lab, f"%aries {prompt}"))
        pages.append(update["data"])
    first, second = (re.findall(r"Memory is off[^<]*", page["text/html"]) for page in pages)
    assert len(first) == 1 and not second, (first, second)
    (notice,) = first
    assert len(notice) <= 90 and "\n" not in notice, notice  # one line of the panel at JupyterLab's width
    assert "Memory is off" not in pages[1]["text/plain"]
    status = run_cell(lab, "%aries status")
    assert "Memory: off, the vault has no notes yet (" in status.stdout + (status.result or ""), "where it is"


def run_on(kc: Any, code: str, subshell_id: str, silent: bool = False) -> str:
    """Send ``code`` to run on a subshell (as JupyterLab's subshell console does) and return its msg_id;
    ``silent`` as JupyterLab's own silent requests: IPython runs no ``pre_run_cell`` callback for it."""
    request = kc.session.msg("execute_request", {"code": code, "silent": silent, "store_history": False})
    request["header"]["subshell_id"] = subshell_id
    kc.shell_channel.send(request)
    return str(request["header"]["msg_id"])


def route_to(kc: Any, comm_ids: list[str], subshell_id: str) -> None:
    """Have the next clicks on these comms handled on the subshell: each publishes from it (an empty update),
    and ipykernel routes a comm's messages to the thread that last published on it. Silent, so no
    ``pre_run_cell`` callback (a Rewind bar's retirement) runs."""
    sends = "".join(
        f"get_ipython().kernel.comm_manager.get_comm({comm_id!r}).send("
        "{'method': 'update', 'state': {}, 'buffer_paths': []})\n"
        for comm_id in comm_ids
    )
    ran_on(kc, sends, subshell_id, silent=True)


def ran_on(kc: Any, code: str, subshell_id: str, silent: bool = False) -> None:
    """:func:`run_on` and wait for the subshell's reply: what was sent to that subshell before has been handled
    (a subshell handles its messages in order)."""
    sent = run_on(kc, code, subshell_id, silent)
    while True:
        reply = kc.get_shell_msg(timeout=60)  # a hang fails here
        if reply["parent_header"].get("msg_id") == sent:
            assert reply["content"]["status"] == "ok", reply["content"]
            return


def test_a_click_handled_on_a_subshell_changes_the_widgets_on_the_main_thread(
    lab: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    """The Approve button's comm published last from a subshell, so its click runs there (ipykernel routes a
    comm's messages to the thread that last published on it, and upstream routes by the message's subshell):
    the handler only records the click; the buttons are disabled, and the question answered, by the cell's
    main thread, so those updates carry the cell's parent header, not the click's."""
    side = subshell(lab)
    server.script(
        Reply(tool_calls=[("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})]),
        Reply(text="Edited."),
    )
    clicked: list[str] = []

    def approve_on_the_subshell(msg: Message, so_far: list[Message]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
        if state.get("description") != "Allow for this run":
            return
        approve = buttons(so_far, "Approve")[-1]
        route_to(lab, [approve], side)
        clicked.append(approve)
        click(lab, approve, side)

    messages = run_interacting(lab, "%aries change a.py", approve_on_the_subshell)
    assert clicked and (small_repo / "a.py").read_text() == "x = 2\n", "the click approved the edit"
    row = set(
        buttons(messages, "Approve") + buttons(messages, "Deny") + buttons(messages, "Allow for this run")
    )
    disabled = {
        m["content"]["comm_id"]
        for m in messages  # only the cell's own messages: published by the main thread
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("state", {}).get("disabled") is True
    }
    assert row <= disabled, "the main thread disabled the question's buttons"
    status = run_cell(lab, "%aries status")
    text = status.stdout + (status.result or "")
    assert "Panel clicks: subshell routing" in text and f"thread subshell-{side}" in text, text


def test_a_stop_while_aries_own_code_runs_is_no_interrupt_of_it(lab: Any, small_repo: Path) -> None:
    """A Stop arriving while a tool's card is open but Aries's own code runs (a SQLite write here, outside the
    step's window) interrupts nothing: the writes go on whole and the run is asked to stop at its next event.
    Inside the step's window the same Stop interrupts the step."""
    side = subshell(lab)
    cell = """
import sqlite3, threading, time
from aries_kernel.agent.events import ToolCallStarted
from aries_kernel.agent.step_window import STEP
from aries_kernel.widgets import AgentPanel
panel = AgentPanel()
panel.show()
panel(ToolCallStarted("call-1", "Repl", {"code": "x"}))
db = sqlite3.connect("writes.db")
db.execute("create table t (n integer)")
writes = 0
open("ready", "w").close()
deadline = time.monotonic() + 60
while not panel.stop_seen.is_set() and time.monotonic() < deadline:
    with db:
        db.execute("insert into t values (?)", (writes,))
    writes += 1
while not panel.stop_requested and time.monotonic() < deadline:
    panel.poll()
    time.sleep(0.02)
rows = db.execute("select count(*) from t").fetchone()[0]
print("seen", panel.stop_seen.is_set(), "requested", panel.stop_requested, "whole", rows == writes)
try:
    with STEP.running():
        threading.Thread(target=STEP.interrupt).start()
        time.sleep(60)
    print("step not interrupted")
except KeyboardInterrupt:
    print("step interrupted", STEP.landed)
try:
    with STEP.running():
        raise ValueError("the step's own error")
except ValueError:
    print("closed after an error", not STEP.open and not STEP.interrupt())
"""

    def stop_when_ready(msg: Message, so_far: list[Message]) -> None:
        if not getattr(stop_when_ready, "sent", False) and buttons(so_far, "Stop"):
            deadline = time.monotonic() + 60
            while not (small_repo / "ready").exists():
                assert time.monotonic() < deadline, "the cell did not start writing"
                time.sleep(0.02)
            stop_when_ready.sent = True  # type: ignore[attr-defined]
            click(lab, buttons(so_far, "Stop")[0], side)

    messages = run_interacting(lab, cell, stop_when_ready)
    printed = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    errors = [m["content"]["ename"] for m in messages if m["msg_type"] == "error"]
    assert not errors, errors
    assert "seen True requested True whole True" in printed, printed
    assert "step interrupted True" in printed and "closed after an error True" in printed, printed


def test_status_says_the_panel_uses_the_shell_stream_fallback_on_ipykernel_7_4(lab: Any) -> None:
    status = run_cell(lab, "%aries status")
    text = status.stdout + (status.result or "")
    assert "Panel clicks: shell-stream fallback for ipykernel 7.4.x" in text, text
    assert "approvals, Stop, and Stop mid-step (only the step is interrupted)" in text, text
