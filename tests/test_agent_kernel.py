"""The agent end to end: a real Aries kernel, the real model router and SDKs, and the loopback server."""

from __future__ import annotations

import json
import queue
import re
import time
from pathlib import Path
from typing import Any

import pytest

from aries_kernel.agent.compaction import SUMMARY_HEADER
from aries_kernel.agent.phases import LEAN
from aries_kernel.agent.tools import TOOLS
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

pytestmark = pytest.mark.kernel


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def session_records(root: Path) -> list[dict[str, Any]]:
    (path,) = sorted((root / ".aries" / "sessions").glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def last_unique_line(path: Path) -> str:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return next(line for line in reversed(lines) if path.read_text().count(line) == 1)


def test_a_scripted_session_queries_the_graph_edits_a_file_and_reindexes(
    kernel: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    _, kc = kernel
    target = sorted(small_repo.rglob("*.py"))[0]
    relative = target.relative_to(small_repo).as_posix()
    anchor = last_unique_line(target)
    server.script(
        Reply(tool_calls=[("Repl", {"code": "codebase.top_files(3)"})]),
        Reply(
            tool_calls=[
                (
                    "Edit",
                    {
                        "file_path": relative,
                        "old_string": anchor,
                        "new_string": anchor + "\n\n\ndef aries_added_symbol():\n    return 1\n",
                    },
                )
            ]
        ),
        Reply(text="Added aries_added_symbol."),
    )
    cell = run_cell(kc, "%aries --yes add a helper to the most central file", timeout=180)
    assert cell.error is None, cell.error
    assert "Added aries_added_symbol." in cell.stdout and "re-indexed 1 changed file(s)" in cell.stdout

    first, second, third = (request.body for request in server.requests[:3])
    assert tool_names(first) == list(LEAN["repl"])
    frame_text = result_text(tool_results(second)[0])
    assert "pagerank" in frame_text and "[3 rows x" in frame_text
    assert "1 replacement" in result_text(tool_results(third)[-1])
    assert "def aries_added_symbol" in target.read_text()

    found = run_cell(kc, "codebase.find_symbol('aries_added_symbol')['file'].tolist()")
    assert found.error is None and relative in (found.result or "")

    records = session_records(small_repo)
    tools = [(r["name"], r["is_error"]) for r in records if r["kind"] == "tool"]
    assert tools == [("Repl", False), ("Edit", False)]
    assert [r["approved"] for r in records if r["kind"] == "approval"] == [True]
    assert len([r for r in records if r["kind"] == "usage"]) == 3
    roles = [r["message"]["role"] for r in records if r["kind"] == "message"]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]

    cost = run_cell(kc, "%aries cost")
    assert cost.error is None and "primary" in (cost.result or "")
    status = run_cell(kc, "%aries status")
    assert "Agent" in (status.result or "") and "3 turn(s)" in (status.result or "")
    steps = run_cell(kc, "%aries history --print")
    assert "# aries step 1\ncodebase.top_files(3)" in (steps.result or "")


def test_lean_schemas_first_a_gated_call_widens_and_errors_go_back_to_the_model(
    kernel: Any, server: ScriptedModelServer
) -> None:
    _, kc = kernel
    server.script(
        Reply(tool_calls=[("Glob", {"pattern": "**/*.py"}), ("Read", {"file_path": "no/such/file.py"})]),
        Reply(text="Seen."),
    )
    cell = run_cell(kc, "%aries list the python files", timeout=180)
    assert cell.error is None, cell.error
    first, second = (request.body for request in server.requests[:2])
    assert tool_names(first) == list(LEAN["repl"])
    assert "Glob(pattern, path?)" in json.dumps(first["system"])
    assert tool_names(second) == list(TOOLS)
    glob_result, read_result = tool_results(second)
    assert not glob_result.get("is_error") and ".py" in result_text(glob_result)
    assert read_result.get("is_error") is True and "does not exist" in result_text(read_result)
    assert "tools widened to the full set for Glob" in cell.stdout and "Seen." in cell.stdout


def test_edits_outside_the_root_are_refused_and_bash_is_stopped_at_its_timeout(
    kernel: Any, small_repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    _, kc = kernel
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    (small_repo / "escape").symlink_to(tmp_path)
    server.script(
        Reply(
            tool_calls=[
                ("Edit", {"file_path": "../outside.txt", "old_string": "keep", "new_string": "lost"}),
                ("Edit", {"file_path": "escape/outside.txt", "old_string": "keep", "new_string": "lost"}),
                ("Bash", {"command": "sleep 60", "timeout": 1}),
            ]
        ),
        Reply(text="Blocked."),
    )
    started = time.monotonic()
    cell = run_cell(kc, "%aries --yes try to escape", timeout=180)
    assert cell.error is None, cell.error
    assert time.monotonic() - started < 60  # the sleep was killed, not waited out
    dotdot, symlink, bash = tool_results(server.requests[1].body)
    assert dotdot["is_error"] and "outside the project root" in result_text(dotdot)
    assert symlink["is_error"] and "through a symlink" in result_text(symlink)
    assert bash["is_error"] and "timed out after 1 s" in result_text(bash)
    assert outside.read_text() == "keep me\n"


def test_approval_is_asked_on_stdin(kernel: Any, small_repo: Path, server: ScriptedModelServer) -> None:
    _, kc = kernel
    write = ("Write", {"file_path": "notes/approved.txt", "content": "yes\n"})
    server.script(
        Reply(tool_calls=[write]), Reply(text="Written."), Reply(tool_calls=[write]), Reply(text="No.")
    )
    cell = run_cell(kc, "%aries write a note", timeout=180, stdin_reply="y")
    assert cell.prompts == ["Allow Write notes/approved.txt (1 lines)? [y/N/a(ll this run)] "]
    assert (small_repo / "notes" / "approved.txt").read_text() == "yes\n"
    (small_repo / "notes" / "approved.txt").unlink()
    cell = run_cell(kc, "%aries write it again", timeout=180, stdin_reply="no, not now")
    assert not (small_repo / "notes" / "approved.txt").exists()
    refused = tool_results(server.requests[3].body)[-1]
    assert refused["is_error"] and "The user said: no, not now" in result_text(refused)


def test_a_small_context_window_prunes_then_summarizes(small_repo: Path, server: ScriptedModelServer) -> None:
    window = 9000
    primary_calls = []

    def respond(body: dict[str, Any]) -> Reply:
        if "compress the history" in json.dumps(body.get("system", "")):
            return Reply(text="## Goal\n- print a lot\n## Work done\n- SUMMARY-MARKER printed x")
        primary_calls.append(body)
        size = (
            len(json.dumps(body)) // 4
        )  # realistic usage, so the router's calibrated estimate stays near 1:1
        if len(primary_calls) >= 7:
            return Reply(text="All printed.", input_tokens=size)
        return Reply(
            text="thinking " * 500, tool_calls=[("Repl", {"code": "print('x' * 6000)"})], input_tokens=size
        )

    server.responder = respond
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    try:
        setup = run_cell(
            kc,
            "cfg = get_ipython().config\n"
            f"cfg.AriesModels.context_windows = {{'sonnet': {window}}}\n"
            "cfg.AriesAgent.protected_tool_tokens = 300\n"
            "cfg.AriesAgent.tool_output_chars = 6000",
        )
        assert setup.error is None, setup.error
        cell = run_cell(kc, "%aries print a lot", timeout=240)
        assert cell.error is None, cell.error
    finally:
        stop_kernel(km, kc)
    stages = re.findall(r"\[compacted \((\w+)\): \d+ messages, ~([\d,]+) -> ~([\d,]+) tokens\]", cell.stdout)
    kinds = [stage for stage, _, _ in stages]
    assert "summarize" in kinds and kinds.index("prune") < kinds.index("summarize")
    summarize = stages[kinds.index("summarize")]
    assert int(summarize[2].replace(",", "")) <= 0.7 * window < int(summarize[1].replace(",", ""))
    after = next(body for body in primary_calls if "SUMMARY-MARKER" in json.dumps(body["messages"]))
    assert json.dumps(after["system"]).startswith('"You are Aries') or "You are Aries" in json.dumps(
        after["system"]
    )
    first_message = after["messages"][0]["content"]
    first_text = first_message if isinstance(first_message, str) else first_message[0]["text"]
    assert first_text.startswith(SUMMARY_HEADER)
    assert "All printed." in cell.stdout


def test_resume_continues_a_saved_session(small_repo: Path, server: ScriptedModelServer) -> None:
    server.script(Reply(text="The answer is 42."))
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    try:
        assert "The answer is 42." in run_cell(kc, "%aries what is the answer", timeout=180).stdout
    finally:
        stop_kernel(km, kc)
    server.script(Reply(text="Still 42."))
    km, kc = start_kernel(small_repo, env=server.kernel_env())
    try:
        resumed = run_cell(kc, "%aries resume")
        assert resumed.error is None and "Resumed session" in (resumed.result or "")
        assert "The answer is 42." in (resumed.result or "")
        cell = run_cell(kc, "%aries and now?", timeout=180)
        assert "Still 42." in cell.stdout
    finally:
        stop_kernel(km, kc)
    messages = server.requests[-1].body["messages"]
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0].get("text") for m in messages]
    assert texts == ["what is the answer", "The answer is 42.", "and now?"]


def test_an_interrupt_mid_stream_stops_the_loop_and_keeps_what_was_said(
    kernel: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    km, kc = kernel
    server.script(Reply(text="I have started explaining the cache, " * 20, chunk=4, pause=0.2))
    msg_id = kc.execute("%aries why is the cache slow")
    streamed = ""
    deadline = time.monotonic() + 60
    while "the cache," not in streamed and time.monotonic() < deadline:  # some text has been shown
        try:
            message = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if message["parent_header"].get("msg_id") == msg_id and message["msg_type"] == "stream":
            streamed += message["content"]["text"]
    assert "the cache," in streamed, "the model's text never reached the notebook"
    interrupted_at = time.monotonic()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:  # skip the kernel_info reply of the start-up
        reply = kc.get_shell_msg(timeout=60)
    stopped_after = time.monotonic() - interrupted_at
    print(f"loop stopped {stopped_after:.2f} s after the interrupt")
    shown = streamed[streamed.index("I have started") :].strip()  # the model's text, after any notices
    history = run_cell(kc, "%aries history")
    assert shown in (history.result or "")  # everything shown is kept
    assert "[interrupted by the user]" in (history.result or "")
    records = session_records(small_repo)
    said = [
        r["message"]["content"]
        for r in records
        if r["kind"] == "message" and r["message"]["role"] == "assistant"
    ]
    assert said and said[-1].startswith(shown)
    assert len(said[-1]) < len("I have started explaining the cache, " * 20)  # cut mid-stream
    # the kernel is usable and the next prompt works
    server.script(Reply(text="Back."))
    assert "Back." in run_cell(kc, "%aries continue", timeout=120).stdout


def shell_payload(kc: Any, code: str) -> list[dict[str, Any]]:
    """Run ``code`` and return the payloads of its execute_reply (where set_next_input lands)."""
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=120)
        if reply["parent_header"].get("msg_id") == msg_id:
            return list(reply["content"].get("payload", []))


def test_cell_form_options_and_subcommands(
    kernel: Any, small_repo: Path, server: ScriptedModelServer
) -> None:
    _, kc = kernel
    server.script(
        Reply(tool_calls=[("Repl", {"code": "total = sum(numbers)\ntotal"})]),
        Reply(text="It is 6."),
        Reply(text="Bare."),
        Reply(text="Haiku here."),
    )
    cell = run_cell(kc, "numbers = [1, 2, 3]\nlabel = 'sum'")
    cell = run_cell(kc, "%%aries --max-turns 3\nCompute the {label} of {numbers}; keep {unknown} as is.")
    assert cell.error is None, cell.error
    # The prompt, after the notebook section (the variables the cell before made: aries_kernel.notebook.context)
    assert server.requests[0].body["messages"][0]["content"][0]["text"].endswith(
        "</notebook_context>\n\nCompute the sum of [1, 2, 3]; keep {unknown} as is."
    )
    assert run_cell(kc, "total").result == "6"  # the agent's variable is the user's

    payload = shell_payload(kc, "%aries history --cells")
    assert payload and payload[0]["source"] == "set_next_input"
    assert payload[0]["text"] == "# aries step 1\ntotal = sum(numbers)\ntotal"

    run_cell(kc, "%aries --bare what's here")  # an apostrophe in a prompt is just text
    bare = server.requests[2].body
    assert (
        tool_names(bare) == list(LEAN["bare"])
        and bare["messages"][-1]["content"][0]["text"].endswith("</notebook_context>\n\nwhat's here")
    )
    run_cell(kc, "%aries --model haiku hello")
    assert server.requests[3].body["model"] == "claude-haiku-4-5"

    tools = run_cell(kc, "frame = %aries tools\n(len(frame), int(frame['lean'].sum()), frame['tool'][0])")
    assert tools.result == "(22, 7, 'Repl')"
    permission = (
        "p = %aries tools\n(p.set_index('tool').loc[['Edit', 'Bash', 'Read', 'Repl'], 'permission'].tolist())"
    )
    assert run_cell(kc, permission).result == "['ask', 'ask', 'allow', 'per effect']"
    config = run_cell(kc, "%aries config max_turns=7 auto_approve=true")
    assert config.error is None
    assert run_cell(kc, permission).result == "['allow', 'allow', 'allow', 'per effect']"  # bypassPermissions
    assert (
        run_cell(
            kc,
            "from aries_kernel.agent import agent_for\n"
            "from aries_kernel.context import get_context\n"
            "s = agent_for(get_context(get_ipython())).settings\n"
            "(s.max_turns, s.auto_approve)",
        ).result
        == "(7, True)"
    )
    bad = run_cell(kc, "%aries config nonsense=1")
    assert bad.status == "error" and "UsageError: Use name=value" in bad.stderr
    bad = run_cell(kc, "%aries --max-turns")
    assert bad.status == "error" and "--max-turns needs a value" in bad.stderr

    compacted = run_cell(kc, "%aries compact")
    assert compacted.error is None and "compacted (summarize)" in compacted.stdout
    listed = run_cell(kc, "%aries resume --list")
    assert listed.error is None and "session" in (listed.result or "")
    reset = run_cell(kc, "%aries reset")
    assert "new session" in (reset.result or "")
    assert "No session yet" in (run_cell(kc, "%aries status").result or "")


def test_a_prompt_ending_in_a_question_mark_is_a_prompt_not_help(
    kernel: Any, server: ScriptedModelServer
) -> None:
    _, kc = kernel
    server.script(Reply(text="Because of rehashing."))
    cell = run_cell(kc, "topic = 'cache'\n%aries why is the {topic} slow?", timeout=120)
    assert "Because of rehashing." in cell.stdout and "not found" not in cell.stdout
    prompt = server.requests[0].body["messages"][0]["content"][0]["text"]
    assert prompt.endswith("</notebook_context>\n\nwhy is the cache slow?")  # after the notebook section
    assert "Object `aries` not found" not in run_cell(kc, "%aries?").stdout  # help on the magic still works
