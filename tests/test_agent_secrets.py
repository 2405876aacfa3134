"""Secrets never reach disk: planted keys in a file, in Bash output and in Repl output are not in the session
file, nor in what the model is sent; Bash and the Repl do not see the provider keys; reprs hide them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aries_kernel.agent import compaction
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import types as mt
from aries_kernel.redact import environ_value, withheld_keys
from tests.loopback import Reply
from tests.test_agent_loop import make_agent, run_all

ANTHROPIC = "sk-ant-api03-" + "K" * 40  # the kernel's own key, in its environment
OPENAI = "sk-proj-" + "O" * 40
PLANTED_IN_FILE = "ghp_" + "F" * 36  # a GitHub token committed in a source file
PLANTED_IN_REPL = "sk-ant-api03-" + "R" * 40  # printed by the agent's own code
PLANTED_IN_BASH = "AKIA" + "B" * 16  # an AWS access key echoed by a command
GITHUB_TOKEN = "gho_" + "G" * 36  # a key the user chose to pass to Bash
PLANTED_IN_PROMPT = "xoxb-" + "P" * 24  # pasted by the user into a prompt: sent, but not stored
SECRETS = (ANTHROPIC, OPENAI, PLANTED_IN_FILE, PLANTED_IN_REPL, PLANTED_IN_BASH, GITHUB_TOKEN)

REPL_CODE = f"""\
import os
print("anthropic:", os.environ.get("ANTHROPIC_API_KEY"))
print("openai:", os.environ.get("OPENAI_API_KEY"))
print("planted:", "{PLANTED_IN_REPL}")
from aries_kernel.models import ModelRouter
print("router key:", ModelRouter().client("primary").key_status())
import subprocess
seen = subprocess.run("printenv ANTHROPIC_API_KEY; echo rc=$?", shell=True, capture_output=True, text=True)
print("subprocess sees:", seen.stdout.strip())
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    root = tmp_path / "repo"
    root.mkdir()
    (root / "settings.py").write_text(f'TOKEN = "{PLANTED_IN_FILE}"\n')
    monkeypatch.chdir(root)
    return root.resolve()


def test_planted_keys_do_not_reach_the_session_file_or_the_model(repo: Path) -> None:
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Read", {"file_path": "settings.py"})]),
        Reply(tool_calls=[("Bash", {"command": f"env; echo planted: {PLANTED_IN_BASH}"})]),
        Reply(tool_calls=[("Repl", {"code": REPL_CODE})]),
        Reply(text="done"),
        settings=AriesAgent(permission_mode="bypassPermissions"),
    )
    run_all(agent, f"look around; the Slack token is {PLANTED_IN_PROMPT}")
    session = agent.session
    assert session is not None
    on_disk = session.path.read_bytes()
    for secret in (*SECRETS, PLANTED_IN_PROMPT):
        assert secret.encode() not in on_disk
    assert b"the Slack token is [REDACTED:slack]" in on_disk
    sent = json.dumps([[m.content for m in request.messages] for request in primary.requests])
    for secret in SECRETS:
        assert secret not in sent
    read, bash, repl = [m.content for m in primary.requests[-1].messages if m.role == "tool"]
    assert 'TOKEN = "[REDACTED:github]"' in read
    assert "planted: [REDACTED:aws-access-key]" in bash
    assert "ANTHROPIC_API_KEY" not in bash and "OPENAI_API_KEY" not in bash  # not even the names: withheld
    assert "anthropic: None" in repl and "openai: None" in repl  # withheld from the Repl's os.environ
    assert "planted: [REDACTED:anthropic]" in repl
    assert "router key: set" in repl  # the model router still has its key during the step
    assert "subprocess sees: rc=1" in repl
    assert os.environ["ANTHROPIC_API_KEY"] == ANTHROPIC  # put back after the step
    records = [json.loads(line) for line in session.path.read_text().splitlines()]
    assert any("[REDACTED:" in json.dumps(record) for record in records if record["kind"] == "tool")


def test_pass_env_keys_lets_a_named_key_through(repo: Path) -> None:
    command = "printenv GITHUB_TOKEN | wc -c; printenv ANTHROPIC_API_KEY || echo no anthropic"
    code = "import os\nprint(len(os.environ.get('GITHUB_TOKEN', '')), 'ANTHROPIC_API_KEY' in os.environ)"
    agent, primary, _ = make_agent(
        repo,
        Reply(tool_calls=[("Bash", {"command": command}), ("Repl", {"code": code})]),
        Reply(text="done"),
        settings=AriesAgent(permission_mode="bypassPermissions", pass_env_keys=["GITHUB_TOKEN"]),
    )
    run_all(agent, "check")
    bash, repl = [m.content for m in primary.requests[-1].messages if m.role == "tool"]
    assert f"{len(GITHUB_TOKEN) + 1}\nno anthropic" in bash
    assert repl == f"{len(GITHUB_TOKEN)} False"


def test_withheld_keys_are_restored_and_still_known_to_the_router_and_redaction(repo: Path) -> None:
    with withheld_keys(["OPENAI_API_KEY"]) as names:
        assert "ANTHROPIC_API_KEY" in names and "OPENAI_API_KEY" not in names
        assert "ANTHROPIC_API_KEY" not in os.environ and environ_value("ANTHROPIC_API_KEY") == ANTHROPIC
        os.environ["ANTHROPIC_API_KEY"] = "set by the agent's code"
        from aries_kernel.redact import redact

        assert redact(f"key={ANTHROPIC}") == "key=[REDACTED:env]"
    assert os.environ["ANTHROPIC_API_KEY"] == ANTHROPIC and os.environ["OPENAI_API_KEY"] == OPENAI


def test_compaction_summaries_and_the_transcript_sent_are_redacted() -> None:
    older = [
        mt.Message("user", f"use the key {PLANTED_IN_REPL}"),
        mt.Message("assistant", "ok", [mt.ToolCall("c1", "Bash", {"command": f"echo {PLANTED_IN_BASH}"})]),
        mt.Message("tool", f"{PLANTED_IN_BASH}\n", tool_call_id="c1"),
    ]
    sent: list[str] = []

    def summarizer(request: mt.ModelRequest) -> str:
        sent.append(request.messages[0].content)
        return f"## Goal\n- call the API with {PLANTED_IN_REPL}"

    text, how = compaction.summarize(older, summarizer, limit_chars=10_000)
    assert how == "model" and PLANTED_IN_REPL not in text and "[REDACTED:anthropic]" in text
    assert sent and PLANTED_IN_REPL not in sent[0] and PLANTED_IN_BASH not in sent[0]
    mechanical, how = compaction.summarize(older, None, limit_chars=10_000)
    assert how == "no summary model" and PLANTED_IN_REPL not in mechanical


def test_an_endpoint_repr_does_not_show_its_key() -> None:
    from aries_kernel.models.provider import Endpoint

    endpoint = Endpoint("anthropic", "claude", "https://api.anthropic.com", ANTHROPIC, 30.0)
    assert ANTHROPIC not in repr(endpoint) and ANTHROPIC not in str(endpoint)
    assert endpoint.api_key == ANTHROPIC
