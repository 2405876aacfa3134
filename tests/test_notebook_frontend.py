"""The agent writes the notebook (issue 24), kernel side: a real Aries kernel, the loopback model server, and a
scripted frontend that speaks the extension's comm protocol (labextension/src/protocol.ts) over jupyter_client.

Without a frontend comm, a run's steps reach the notebook through one ``set_next_input`` payload; with one, they
are an ``insert`` message on IOPub, tagged per step; bad shapes get an error message back and the kernel stays
well.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient

from aries_kernel.notebook.frontend import STEPS_MIME, TARGET
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

pytestmark = pytest.mark.kernel

PROMPT_CELL = "prompt-cell-id"


@pytest.fixture
def kernel(small_repo: Path, server: ScriptedModelServer) -> Iterator[BlockingKernelClient]:
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    try:
        yield kc
    finally:
        stop_kernel(km, kc)


def snapshot(path: str = "work.ipynb", ids: tuple[str, ...] = (PROMPT_CELL,)) -> dict[str, Any]:
    return {
        "path": path,
        "dirty": True,
        "read_only": False,
        "cells": [
            {"id": ident, "cell_type": "code", "source": f"# {ident}", "execution_count": None, "outputs": []}
            for ident in ids
        ],
    }


class ScriptedFrontend:
    """One notebook's comm, as the extension opens it, with the IOPub messages the kernel sent on it."""

    def __init__(self, kc: BlockingKernelClient) -> None:
        self.kc = kc
        self.comm_id = uuid.uuid4().hex
        self.received: list[dict[str, Any]] = []  # comm_msg data sent to this comm
        self.closed = False
        self.stdout = ""  # what the cells run by execute printed

    def _send(self, kind: str, content: dict[str, Any]) -> None:
        """Send a shell message and read IOPub until the kernel is idle after it (it is handled in order)."""
        message = self.kc.session.msg(kind, content)
        self.kc.shell_channel.send(message)
        self.drain(message["header"]["msg_id"])

    def drain(self, parent: str) -> None:
        """Keep what the kernel sends this comm until it is idle after the request ``parent``."""
        while True:
            msg = self.kc.get_iopub_msg(timeout=120)
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and msg["parent_header"].get("msg_id") == parent:
                self.stdout += content["text"]
            elif kind == "comm_msg" and content["comm_id"] == self.comm_id:
                self.received.append(content["data"])
            elif kind == "comm_close" and content["comm_id"] == self.comm_id:
                self.closed = True
            elif (
                kind == "status"
                and content["execution_state"] == "idle"
                and msg["parent_header"].get("msg_id") == parent
            ):
                return

    def open(self, data: Any) -> None:
        self._send("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": data})

    def hello(self, notebook: dict[str, Any]) -> None:
        self.open({"protocol": 1, "type": "hello", "frontend": "scripted", "notebook": notebook})

    def send(self, data: Any) -> None:
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def execute(self, code: str, cell_id: str) -> dict[str, Any]:
        """Run a cell as JupyterLab does (its id in the request), keeping this comm's messages meanwhile."""
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
        }
        request = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
        self.kc.shell_channel.send(request)
        self.drain(request["header"]["msg_id"])
        reply = self.kc.get_shell_msg(timeout=120)
        while reply["parent_header"].get("msg_id") != request["header"]["msg_id"]:
            reply = self.kc.get_shell_msg(timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        return dict(reply["content"])

    def close_comm(self) -> None:
        """Close the comm, as the extension does when its notebook is closed."""
        self._send("comm_close", {"comm_id": self.comm_id, "data": {}})

    def errors(self) -> list[str]:
        return [data["error"] for data in self.received if data.get("type") == "error"]


def three_steps(server: ScriptedModelServer) -> None:
    server.script(
        Reply(tool_calls=[("Repl", {"code": "a = 1"})]),
        Reply(tool_calls=[("Repl", {"code": "b = a + 1"}), ("Repl", {"code": "raise ValueError('no')"})]),
        Reply(tool_calls=[("Repl", {"code": "c = a + b"})]),
        Reply(text="a, b and c are set."),
    )


def test_without_the_extension_always_gives_one_set_next_input_payload(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    assert run_cell(kernel, "%aries config steps_as_cells=always").error is None
    three_steps(server)
    cell = run_cell(kernel, "%aries set a, b and c", timeout=180)
    assert cell.error is None, cell.error
    (payload,) = [item for item in cell.payload if item["source"] == "set_next_input"]
    text = payload["text"]
    assert text.index("a = 1") < text.index("b = a + 1") < text.index("c = a + b")
    assert "ValueError" not in text  # the step that failed is left out
    assert "3 step(s) put into the next cell" in cell.stdout
    status = run_cell(kernel, "%aries status").result or ""
    assert "Cell writing" in status and "Fallback" in status


def test_ask_leaves_the_steps_in_the_record_and_aries_cells_writes_them(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    three_steps(server)
    cell = run_cell(kernel, "%aries set a, b and c", timeout=180)
    assert cell.error is None and cell.payload == []
    (record,) = [data for data in cell.displays if STEPS_MIME in data]
    steps = record[STEPS_MIME]["steps"]
    assert [step["code"] for step in steps] == ["a = 1", "b = a + 1", "c = a + b"]
    assert [step["step"] for step in steps] == [1, 2, 4] and [step["turn"] for step in steps] == [1, 2, 3]
    assert record[STEPS_MIME]["answer"] == "a, b and c are set."
    assert "%aries cells" in record["text/plain"]
    assert "# aries step 4 (turn 3)\nc = a + b" in record["text/plain"], "no notebook (a console): printed"
    written = run_cell(kernel, "%aries cells")
    (payload,) = written.payload
    assert payload["source"] == "set_next_input" and "c = a + b" in payload["text"]
    none = run_cell(kernel, "%aries config steps_as_cells=never")
    assert none.error is None
    server.script(Reply(tool_calls=[("Repl", {"code": "d = 4"})]), Reply(text="d."))
    quiet = run_cell(kernel, "%aries set d", timeout=180)
    assert quiet.payload == [] and not [data for data in quiet.displays if STEPS_MIME in data]


def test_with_the_extension_the_steps_are_one_insert_below_the_prompt_cell(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    frontend = ScriptedFrontend(kernel)
    frontend.hello(snapshot())
    assert frontend.errors() == [] and not frontend.closed
    frontend.execute("%aries config steps_as_cells=always", "config-cell")
    three_steps(server)
    frontend.send({"protocol": 1, "type": "snapshot", "notebook": snapshot(), "cell_id": PROMPT_CELL})
    frontend.execute("%aries set a, b and c", PROMPT_CELL)
    (insert,) = [data for data in frontend.received if data.get("type") == "insert"]
    assert insert["protocol"] == 1 and insert["after"] == PROMPT_CELL
    assert [cell["source"] for cell in insert["cells"]] == ["a = 1", "b = a + 1", "c = a + b"]
    tags = [cell["metadata"]["aries"] for cell in insert["cells"]]
    assert [(tag["turn"], tag["step"]) for tag in tags] == [(1, 1), (2, 2), (3, 4)]
    assert len({tag["session"] for tag in tags}) == 1
    frontend.send(
        {"protocol": 1, "type": "reply", "request": insert["request"], "ok": True, "ids": ["x", "y", "z"]}
    )
    status = run_cell(kernel, "%aries status").result or ""
    assert "Through aries-kernel's JupyterLab extension (protocol 1): work.ipynb (1 cells)" in status


def test_bad_shapes_get_an_error_back_and_the_kernel_stays_well(kernel: BlockingKernelClient) -> None:
    refused = ScriptedFrontend(kernel)
    refused.open({"protocol": 2, "type": "hello", "notebook": snapshot()})
    assert "protocol 2 is not supported" in refused.errors()[0] and refused.closed
    frontend = ScriptedFrontend(kernel)
    frontend.hello(snapshot())
    for bad, expected in [
        ("not an object", "not a JSON object"),
        ({"protocol": 1, "type": "bogus"}, "unknown message type 'bogus'"),
        (
            {"protocol": 1, "type": "snapshot", "notebook": {"path": 3, "cells": []}},
            "notebook.path must be a string",
        ),
        ({"protocol": 1, "type": "snapshot", "notebook": {"path": "x", "cells": [{"id": 1}]}}, "cells[0].id"),
        ({"protocol": 1, "type": "reply", "request": "k1"}, "a reply needs request"),
        ({"protocol": 1, "type": "reply", "request": "k1", "ok": False}, "a failed reply needs error"),
    ]:
        frontend.send(bad)
        assert expected in frontend.errors()[-1], (bad, frontend.errors())
    assert not frontend.closed
    assert run_cell(kernel, "1 + 1").result == "2"
    status = run_cell(kernel, "%aries status").result or ""
    assert "problem(s); the last: a message from work.ipynb was refused: a failed reply needs error" in status
    assert "work.ipynb (1 cells)" in status  # the good snapshot stands: a bad one did not replace it


def test_a_failed_insert_and_two_notebooks_on_one_kernel(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    first, second = ScriptedFrontend(kernel), ScriptedFrontend(kernel)
    first.hello(snapshot("one.ipynb", ("a1", "a2")))
    second.hello(snapshot("two.ipynb", ("b1", PROMPT_CELL)))
    second.execute("%aries config steps_as_cells=always", PROMPT_CELL)
    three_steps(server)
    second.execute("%aries set a, b and c", PROMPT_CELL)
    assert not [data for data in first.received if data.get("type") == "insert"]
    (insert,) = [data for data in second.received if data.get("type") == "insert"]
    assert insert["after"] == PROMPT_CELL
    error = f"cell {PROMPT_CELL} is not in two.ipynb (deleted, or the notebook was reloaded): no cell was inserted"
    second.send({"protocol": 1, "type": "reply", "request": insert["request"], "ok": False, "error": error})
    status = run_cell(kernel, "%aries status").result or ""
    assert f"two.ipynb: inserting 3 cell(s) failed: {error}" in status
    # A cell neither notebook holds, two notebooks open: nothing is sent, the steps go to the next cell.
    server.script(Reply(tool_calls=[("Repl", {"code": "d = 4"})]), Reply(text="d."))
    cell = run_cell(kernel, "%aries set d", timeout=180, cell_id="elsewhere")
    (payload,) = cell.payload
    assert payload["text"].endswith("d = 4") and "2 notebooks are open on this kernel" in cell.stdout


def test_two_hundred_steps_are_one_insert_in_order(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    frontend = ScriptedFrontend(kernel)
    frontend.hello(snapshot())
    frontend.execute("%aries config steps_as_cells=always", PROMPT_CELL)
    server.script(
        Reply(tool_calls=[("Repl", {"code": f"x{number} = {number}"}) for number in range(200)]),
        Reply(text="200 names."),
    )
    frontend.execute("%aries --yes set 200 names", PROMPT_CELL)
    (insert,) = [data for data in frontend.received if data.get("type") == "insert"]
    assert [cell["source"] for cell in insert["cells"]] == [f"x{number} = {number}" for number in range(200)]
    assert [cell["metadata"]["aries"]["step"] for cell in insert["cells"]] == list(range(1, 201))


def test_the_notebook_context_reads_the_live_notebook_unsaved_edits_included(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    frontend = ScriptedFrontend(kernel)
    live = snapshot(ids=(PROMPT_CELL, "unsaved-cell"))
    live["cells"][1]["source"] = "UNSAVED_ONLY_IN_THE_BROWSER = 1"
    frontend.hello(live)
    server.script(Reply(text="Seen."))
    frontend.execute("%aries what is in the notebook", PROMPT_CELL)
    (request,) = [request for request in server.requests if request.body.get("tools")]
    assert "UNSAVED_ONLY_IN_THE_BROWSER" in json.dumps(request.body)


def test_run_cell_is_a_request_to_the_notebook_holding_the_cell(kernel: BlockingKernelClient) -> None:
    frontend = ScriptedFrontend(kernel)
    frontend.hello(snapshot(ids=(PROMPT_CELL, "agent-cell")))
    code = (
        "from aries_kernel.context import get_context\n"
        "from aries_kernel.notebook.frontend import bridge_of\n"
        "bridge = bridge_of(get_context(get_ipython()))\n"
        "request = bridge.run_cell('agent-cell')"
    )
    frontend.execute(code, PROMPT_CELL)
    (run,) = [data for data in frontend.received if data.get("type") == "run"]
    assert run["cell_id"] == "agent-cell" and run["protocol"] == 1
    error = "cell agent-cell is not a code cell the agent wrote: only those are run on its behalf"
    frontend.send({"protocol": 1, "type": "reply", "request": run["request"], "ok": False, "error": error})
    assert run_cell(kernel, "bridge.reply(request)['error']").result == repr(error)
    refused = run_cell(kernel, "bridge.run_cell('no-such-cell')")
    assert refused.error is None  # one notebook linked: the frontend is asked, and says the cell is not there
    frontend.close_comm()
    gone = run_cell(kernel, "bridge.run_cell('agent-cell')")
    assert (
        gone.error is not None and gone.error[0] == "BridgeError" and "No notebook is linked" in gone.error[1]
    )


def test_a_rewind_offers_to_remove_the_cells_its_turns_inserted_unless_edited(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    frontend = ScriptedFrontend(kernel)
    frontend.hello(snapshot())
    frontend.execute("%aries config steps_as_cells=always", PROMPT_CELL)
    three_steps(server)
    frontend.execute("%aries set a, b and c", PROMPT_CELL)
    (insert,) = [data for data in frontend.received if data.get("type") == "insert"]
    live = snapshot(ids=(PROMPT_CELL, "cell-a", "cell-b", "cell-c", "rewind-cell", "remove-cell"))
    for cell, new in zip(live["cells"][1:4], insert["cells"], strict=True):
        cell["source"], cell["aries"] = new["source"], new["metadata"]["aries"]
    live["cells"][3]["source"] = "c = a + b  # edited by the user"
    frontend.send({"protocol": 1, "type": "snapshot", "notebook": live, "cell_id": "rewind-cell"})
    rewound = run_cell(kernel, "%aries rewind 2", cell_id="rewind-cell").result or ""
    assert rewound.startswith("Rewound to"), rewound
    assert "The notebook holds 1 cell(s) the rewound turns inserted: %aries cells --remove 2" in rewound
    frontend.send({"protocol": 1, "type": "snapshot", "notebook": live, "cell_id": "remove-cell"})
    frontend.execute("%aries cells --remove 2", "remove-cell")
    (remove,) = [data for data in frontend.received if data.get("type") == "remove"]
    assert remove["cells"] == [{"id": "cell-b", "source": "b = a + 1"}]  # c was edited: it stays


def test_a_notebook_open_read_only_gets_no_insert_and_the_steps_go_to_the_next_cell(
    kernel: BlockingKernelClient, server: ScriptedModelServer
) -> None:
    frontend = ScriptedFrontend(kernel)
    frontend.hello({**snapshot(), "read_only": True})
    frontend.execute("%aries config steps_as_cells=always", PROMPT_CELL)
    server.script(Reply(tool_calls=[("Repl", {"code": "d = 4"})]), Reply(text="d."))
    (payload,) = frontend.execute("%aries set d", PROMPT_CELL)["payload"]
    assert payload["source"] == "set_next_input" and payload["text"].endswith("d = 4")
    assert "work.ipynb is open read-only: no cell was inserted" in frontend.stdout
    assert not [data for data in frontend.received if data.get("type") == "insert"]
