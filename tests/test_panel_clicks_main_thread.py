"""A click no agent run waits for (the Rewind bar's) does its work on the kernel's main thread, in a real kernel:
sent on a subshell while the main thread runs a cell, the rewind waits for that cell; sent while the kernel is
idle, it runs at once. Traitlets are not thread-safe, and a rewind restores files and kernel names, so beside a
running cell it would race with it."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kernel_harness import run_cell
from tests.loopback import Reply, ScriptedModelServer
from tests.test_panel_kernel import (
    WIDGET_MIME,
    Message,
    buttons,
    click,
    lab_kernel,
    ran_on,
    route_to,
    run_interacting,
    subshell,
)

__all__ = ["lab_kernel"]  # the fixture, shared with tests/test_panel_kernel.py

pytestmark = pytest.mark.kernel

# Every rewind the agent does records whether it ran on the main thread (the Agent class is the kernel's).
RECORD_REWIND_THREADS = """
import threading
from aries_kernel.agent.loop import Agent
rewind_on_main = []
_rewind = Agent.rewind
def _recorded(self, *args, **kwargs):
    rewind_on_main.append(threading.current_thread() is threading.main_thread())
    return _rewind(self, *args, **kwargs)
Agent.rewind = _recorded
"""

# After the run, the same cell keeps the main thread busy until the test lets it go (a hang fails at 120 s).
BUSY = """
import os, time
open({busy!r}, "w").close()
deadline = time.monotonic() + 120
while not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
print("released", os.path.exists({release!r}))
"""


def record_says(kc: Any, seen: list[Message], record_id: str, text: str) -> Message:
    """Wait until the run's record (display ``record_id``) is updated with ``text``; that update."""
    deadline = time.monotonic() + 120  # a rewind that never runs fails here
    checked = 0
    while True:
        for msg in seen[checked:]:
            content = msg["content"]
            if (
                msg["msg_type"] == "update_display_data"
                and content["transient"]["display_id"] == record_id
                and text in content["data"]["text/plain"]
            ):
                return msg
        checked = len(seen)
        assert time.monotonic() < deadline, f"the record never said {text!r}"
        try:
            seen.append(kc.get_iopub_msg(timeout=0.5))
        except queue.Empty:
            continue


def test_a_rewind_clicked_on_a_subshell_waits_for_the_running_cell_then_runs_on_the_main_thread(
    lab_kernel: tuple[Any, Any], small_repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    _, kc = lab_kernel
    side = subshell(kc)
    assert run_cell(kc, RECORD_REWIND_THREADS).error is None
    server.script(
        Reply(tool_calls=[("Write", {"file_path": "first.py", "content": "A = 1\n"})]),
        Reply(tool_calls=[("Write", {"file_path": "second.py", "content": "B = 1\n"})]),
        Reply(text="Wrote them."),
    )
    busy, release = tmp_path / "busy", tmp_path / "release"
    handled: list[dict[str, Any]] = []

    def click_while_busy(msg: Message, so_far: list[Message]) -> None:
        if handled or not buttons([msg], "Rewind turn 2"):
            return  # the bar's buttons exist once its last one does
        deadline = time.monotonic() + 60
        while not busy.exists():
            assert time.monotonic() < deadline, "the cell did not get busy after the run"
            time.sleep(0.02)
        bar = buttons(so_far, "Rewind turn 1") + buttons(so_far, "Rewind turn 2")
        route_to(kc, bar, side)  # as JupyterLab >= 4.4 sends them: handled on the subshell, now
        clicked = click(kc, bar[1], side)
        ran_on(kc, "pass", side, silent=True)  # the subshell has handled the click
        handled.append({"second": (small_repo / "second.py").exists(), "bar": bar, "click": clicked})
        release.touch()

    cell = f"%aries --yes write two files\n{BUSY.format(busy=str(busy), release=str(release))}"
    messages = run_interacting(kc, cell, click_while_busy)
    assert handled, "the run left a Rewind bar"
    assert handled[0]["second"], "the click handled on the subshell did not rewind beside the running cell"
    assert "released True" in "".join(
        m["content"].get("text", "") for m in messages if m["msg_type"] == "stream"
    )
    record_id = next(
        m["content"]["transient"]["display_id"]
        for m in messages
        if m["msg_type"] == "display_data" and m["content"].get("transient", {}).get("display_id")
    )
    rewound = record_says(kc, messages, record_id, "Rewound to before turn 2")  # once the cell ended
    assert not (small_repo / "second.py").exists() and (small_repo / "first.py").exists()
    # The main thread's loop runs the work in the handler's context: what it sends answers the click.
    assert rewound["parent_header"]["msg_id"] == handled[0]["click"], rewound["parent_header"]

    # The kernel is idle: a click on the subshell is done at once, with no cell to wait for.
    clicked = click(kc, handled[0]["bar"][0], side)
    rewound = record_says(kc, messages, record_id, "Rewound to before turn 1")
    assert not (small_repo / "first.py").exists()
    assert rewound["parent_header"]["msg_id"] == clicked, rewound["parent_header"]

    threads = run_cell(kc, "print(rewind_on_main)")
    assert threads.stdout.strip() == "[True, True]", threads.stdout
    status = run_cell(kc, "%aries status")
    text = status.stdout + (status.result or "")
    assert "Panel clicks: subshell routing" in text and f"thread subshell-{side}" in text, text
    assert "a Rewind clicked while a cell runs is done on the main thread when that cell ends" in text, text


# The graph records each redraw (whether on the main thread) and leaves a file the test sees at once.
SHOW_GRAPH_RECORDING = """
import threading
from pathlib import Path
from IPython.display import display
from aries_kernel.widgets import CommunityGraph
graph = CommunityGraph(codebase, expand_below=0)
display(graph)
drawn_on_main = []
_draw = CommunityGraph._draw
def _recorded(self):
    drawn_on_main.append(threading.current_thread() is threading.main_thread())
    Path({drawn!r}).touch()
    _draw(self)
CommunityGraph._draw = _recorded
graph.graph_layout.groups[0].key
"""


def test_a_graph_click_on_a_subshell_is_drawn_on_the_main_thread_after_the_running_cell(
    aries_kernel: tuple[Any, Any], tmp_path: Path
) -> None:
    _, kc = aries_kernel
    side = subshell(kc)
    drawn, busy, release = tmp_path / "drawn", tmp_path / "busy", tmp_path / "release"
    shown = run_cell(kc, SHOW_GRAPH_RECORDING.format(drawn=str(drawn)))
    assert shown.error is None, shown.error
    key = eval(shown.result or "''")
    (comm_id,) = [d[WIDGET_MIME]["model_id"] for d in shown.displays if WIDGET_MIME in d]
    route_to(kc, [comm_id], side)
    during: list[bool] = []

    def click_while_busy(msg: Message, so_far: list[Message]) -> None:
        if during:
            return
        deadline = time.monotonic() + 60
        while not busy.exists():
            assert time.monotonic() < deadline, "the cell did not get busy"
            time.sleep(0.02)
        # What the script sends on a click on a disc: the synced `expanded` trait, here on the subshell.
        request = kc.session.msg(
            "comm_msg",
            {
                "comm_id": comm_id,
                "data": {"method": "update", "state": {"expanded": [key]}, "buffer_paths": []},
            },
        )
        request["header"]["subshell_id"] = side
        kc.shell_channel.send(request)
        ran_on(kc, "pass", side, silent=True)  # the subshell has handled the click
        during.append(drawn.exists())
        release.touch()

    run_interacting(kc, BUSY.format(busy=str(busy), release=str(release)), click_while_busy)
    assert during == [False], "the click handled on the subshell did not redraw beside the running cell"
    check = run_cell(kc, f"drawn_on_main, len(graph.nodes) == len(graph.graph_layout.group({key!r}).files)")
    assert check.result == "([True], True)", check.result
