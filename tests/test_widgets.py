"""The widgets for real: built in a running Aries kernel, checked through the comm messages a frontend receives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.codebase.progress import Progress
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

FEED_EVENTS = """
from IPython.display import display
from aries_kernel.agent import events as ev
from aries_kernel.widgets import AgentPanel
panel = AgentPanel(window=1000)
display(panel)
for e in [
    ev.MemoryRetrieved(titles=["caching makes the index fast", "unrelated note"]),
    ev.TextDelta(text="Looking at "), ev.TextDelta(text="the cache."),
    ev.ToolCallStarted(id="t1", name="Edit", arguments={"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}),
    ev.ToolCallFinished(id="t1", name="Edit", output="Edited a.py", is_error=False, seconds=0.2),
    ev.MemoryEchoed(titles=["caching makes the index fast"]),
    ev.MemoryFizzled(titles=["unrelated note"]),
    ev.TurnFinished(stop_reason="end_turn", input_tokens=700, output_tokens=20, cost_usd=0.01, model="m",
                    tools_used=1, context_tokens=720, phase="lean"),
    ev.RunFinished(reason="done", turns=1, input_tokens=700, output_tokens=20, cost_usd=0.01),
]:
    panel(e)
panel.text()
"""


def widget_states(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every widget state the kernel sent: comm_open data and comm_msg updates."""
    states = []
    for msg in messages:
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            data = msg["content"].get("data", {})
            states.append(data.get("state", {}))
    return states


def test_agent_panel_renders_the_event_stream_as_widget_state(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, FEED_EVENTS)
    assert out.error is None, out.error
    assert out.result == "'Looking at the cache.'"
    assert any("application/vnd.jupyter.widget-view+json" in d for d in out.displays)
    states = widget_states(out.messages)
    values = [str(s.get("value", "")) for s in states]
    assert any("Looking at the cache." in v for v in values), "streamed text reached the frontend"
    assert any("x = 2" in v and "#1a7f37" in v for v in values), "the edit shows as a coloured diff"
    assert any("Edited a.py" in v for v in values), "the tool result reached its card"
    assert any("echoed" in v and "caching makes the index fast" in v and "fizzled" in v for v in values)
    assert any("720 tokens of 1,000 (72%)" in v and "lean tools" in v for v in values)
    assert any(s.get("value") == 0.72 for s in states), "the context meter moved"
    assert any("Edit ✓ 0.2s" in str(s.get("titles", "")) for s in states)


SHOW_GRAPH = """
from IPython.display import display
from aries_kernel.widgets import CommunityGraph
graph = CommunityGraph(codebase, expand_below=0)
display(graph)
[g.key for g in graph.graph_layout.groups]
"""


def test_community_graph_syncs_its_layout_and_expands_on_a_frontend_request(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, SHOW_GRAPH)
    assert out.error is None, out.error
    keys = eval(out.result or "[]")  # the group keys, printed by the kernel as a list of strings
    assert keys
    bundle = next(d for d in out.displays if "application/vnd.jupyter.widget-view+json" in d)
    assert bundle["text/html"].startswith("<svg") and bundle["text/html"].count("<circle") == len(keys)
    assert bundle["text/plain"].startswith("Community graph:"), "a terminal gets a summary, not a repr"
    comm_id = bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    synced = {}
    for msg in out.messages:
        if msg["msg_type"] in ("comm_open", "comm_msg") and msg["content"]["comm_id"] == comm_id:
            synced.update(msg["content"]["data"].get("state", {}))
    assert "export default" in synced["_esm"], "the bundled script travels with the widget"
    assert [g["key"] for g in synced["groups"]] == keys
    assert synced["nodes"] == [] and synced["expanded"] == []

    # What the script does on a click: an update of the synced `expanded` trait, sent as a comm message.
    request = kc.session.msg(
        "comm_msg",
        {
            "comm_id": comm_id,
            "data": {"method": "update", "state": {"expanded": [keys[0]]}, "buffer_paths": []},
        },
    )
    kc.shell_channel.send(request)
    answer: dict[str, Any] = {}
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != request["header"]["msg_id"]:
            continue
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            answer.update(msg["content"]["data"].get("state", {}))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert answer["nodes"], "the kernel answered with the community's files"
    assert {n["group"] for n in answer["nodes"]} == {keys[0]}
    assert next(g for g in answer["groups"] if g["key"] == keys[0])["expanded"] is True
    check = run_cell(
        kc, f"graph.expanded, len(graph.nodes) == len(graph.graph_layout.group({keys[0]!r}).files)"
    )
    assert check.result == f"([{keys[0]!r}], True)"


def test_kernel_notes_a_frontend_with_widget_support(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    check = "get_ipython().kernel.frontend_has_widgets"
    assert run_cell(kc, check).result == "False"  # what jupyter console and this test client look like
    kc.comm_info(target_name="jupyter.widget")  # what JupyterLab's widget manager asks as it connects
    kc.get_shell_msg(timeout=30)
    assert run_cell(kc, check).result == "True"


def test_aries_shows_the_panel_in_a_widget_frontend_and_text_elsewhere(small_repo: Path) -> None:
    with ScriptedModelServer() as server:
        km, kc = start_kernel(
            small_repo, env={"ANTHROPIC_BASE_URL": server.anthropic_url, "ANTHROPIC_API_KEY": "k"}
        )
        try:
            server.script(Reply(text="Plain text for the console."))
            console_like = run_cell(kc, "%aries say something")
            assert "Plain text for the console." in console_like.stdout
            assert not any("application/vnd.jupyter.widget-view+json" in d for d in console_like.displays)

            kc.comm_info(target_name="jupyter.widget")  # now the client looks like JupyterLab
            kc.get_shell_msg(timeout=30)
            server.script(
                Reply(tool_calls=[("Repl", {"code": "21 * 2"})]),
                Reply(text="The answer is 42."),
            )
            lab_like = run_cell(kc, "%aries compute it")
            assert any("application/vnd.jupyter.widget-view+json" in d for d in lab_like.displays)
            values = [str(s.get("value", "")) for s in widget_states(lab_like.messages)]
            assert any("The answer is 42." in v for v in values)
            assert any("21 * 2" in v for v in values), "the Repl card shows the code"
            assert "The answer is 42." not in lab_like.stdout
        finally:
            stop_kernel(km, kc)


STANDALONE_APPROVAL = """
from aries_kernel.agent import events as ev
from aries_kernel.widgets import AgentPanel
panel = AgentPanel()
panel.show()
question = ev.ApprovalRequested(tool_call_id="", name="Repl", summary="write /tmp/x.txt", arguments={"effect": "edit"})
panel(question)  # no ToolCallStarted came first: a card of its own
row = panel.transcript.children[-1].children[0].children[-1]
labels = [b.description for b in row.children]
row.children[2].click()  # what the frontend's click runs in the kernel
record = panel.finish("done")
print(labels, question.decision, question.for_run, panel.transcript.children[-1].selected_index)
print("allowed for this run" in record.html, "? approval needed: write /tmp/x.txt" in record.text)
"""


def test_an_approval_with_no_card_gets_a_card_of_its_own_with_the_three_buttons(aries_kernel: tuple) -> None:
    _, kc = aries_kernel
    out = run_cell(kc, STANDALONE_APPROVAL)
    assert out.error is None, out.error
    assert out.stdout.splitlines() == ["['Approve', 'Deny', 'Allow for this run'] True True 0", "True True"]


def test_a_progress_bar_ends_full_and_still(monkeypatch: pytest.MonkeyPatch) -> None:
    shell = InteractiveShell.instance()
    monkeypatch.setattr(shell.display_formatter, "active_types", ["text/plain", "text/html"])
    shown: list[dict[str, str]] = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, **kw: shown.append(data))
    with pytest.raises(RuntimeError), Progress("scanning", rich=True) as progress:
        progress.update(0, 0, "walking", force=True)  # unknown total: the browser's moving bar
        raise RuntimeError("the work failed")
    assert re.search(r"<progress\s+style", shown[0]["text/html"]), "no value: indeterminate while it runs"
    assert (
        '<progress value="1" max="1"' in shown[-1]["text/html"]
        and "scanning: stopped" in shown[-1]["text/plain"]
    )
    progress.update(5, 10, force=True)
    assert len(shown) == 2, "a closed bar stays closed"


def test_an_edit_card_shows_its_diff_once() -> None:
    """The Edit tool's result repeats the diff for the model; the card, which shows it above, keeps the summary."""
    from aries_kernel.agent import events as ev
    from widgets.panel import AgentPanel

    panel = AgentPanel()
    arguments = {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}
    result = "Edited a.py: 1 replacement(s).\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    panel(ev.ToolCallStarted(id="t1", name="Edit", arguments=arguments))
    panel(ev.ToolCallFinished(id="t1", name="Edit", output=result, is_error=False, seconds=0.2))
    record = panel.finish("done").html
    assert "Edited a.py: 1 replacement(s)." in record
    assert record.count("x = 2") == 1, record


def test_the_shell_stream_fallback_refuses_an_ipykernel_it_does_not_know() -> None:
    from aries_kernel.widgets.ui_events import ClickRoute, ShellStreamFallback

    unknown = ShellStreamFallback(kernel=None, ipykernel_version="8.0.0")
    assert not unknown.available and unknown.problem is not None
    assert "ipykernel 8.0.0 is not a version the shell-stream fallback knows (7.4.x)" in unknown.problem
    assert unknown.process() == 0 and not unknown.on_arrival(object(), lambda: None)
    route = ClickRoute(kernel=None)  # no ipykernel shell stream and no subshells
    assert route.path == "none" and not route.clickable
    assert "Panel clicks: none:" in route.describe() and "approvals asked as text" in route.describe()
