"""Provider keys never enter the kernel process: the key broker holds them, in real kernels.

A kernel started with a key has none in ``os.environ`` or ``/proc/self/environ``, and its calls still reach the
loopback server with that key, streamed or not, in both wire formats; a key set in a cell is handed over and
removed; the broker answers only its kernel's secret, adds a key only for the URL it was given with, outlives an
interrupt and ends with the kernel.
"""

from __future__ import annotations

import json
import os
import queue
import select
import time
from pathlib import Path
from typing import Any

from aries_kernel.models.shortnames import PROVIDERS
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

ANTHROPIC_KEY = "sk-ant-api03-" + "L" * 40
OPENAI_KEY = "sk-proj-" + "P" * 40
CELL_KEY = "sk-ant-api03-" + "C" * 40

# Ask the broker directly, as any code in the kernel can: (status, body) of one raw HTTP request on its socket.
RAW = """
import json, socket
from aries_kernel import key_broker
def raw(path, headers, body=b""):
    link = key_broker.link()
    head = f"POST {path} HTTP/1.1\\r\\nhost: x\\r\\ncontent-length: {len(body)}\\r\\nconnection: close\\r\\n"
    head += "".join(f"{k}: {v}\\r\\n" for k, v in headers.items()) + "\\r\\n"
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(link.socket_path)
        s.sendall(head.encode() + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return int(answer.split(b" ")[1]), answer.decode()
secret = key_broker.link()._secret
"""


def broker_pid(kc: Any) -> int:
    out = run_cell(kc, "from aries_kernel import key_broker\nprint(key_broker.link().pid)")
    assert out.error is None, out.error
    return int(out.stdout)


def test_the_table_of_key_variables_is_the_providers() -> None:
    from aries_kernel.key_broker import (
        PROVIDER_KEYS,
    )  # here, so that each test fails alone without the broker

    expected = {p.key_env: (p.name, p.base_url, p.base_url_env) for p in PROVIDERS.values() if p.key_env}
    assert PROVIDER_KEYS == expected


def test_a_launch_key_is_not_in_the_kernel_yet_every_call_carries_it(small_repo: Path) -> None:
    with ScriptedModelServer() as server:
        env = server.kernel_env(
            ANTHROPIC_API_KEY=ANTHROPIC_KEY, OPENAI_API_KEY=OPENAI_KEY, OPENAI_BASE_URL=server.openai_url
        )
        km, kc = start_kernel(small_repo, env=env)
        try:
            code = (
                "import os, subprocess\n"
                "raw = open('/proc/self/environ', 'rb').read()\n"
                f"print([k in raw for k in (b{ANTHROPIC_KEY!r}, b{OPENAI_KEY!r})])\n"
                "print(sorted(n for n in os.environ if n.endswith('_API_KEY')))\n"
                "print(subprocess.run(['env'], capture_output=True, text=True).stdout.count('sk-'))"
            )
            out = run_cell(kc, code)
            assert out.error is None, out.error
            assert out.stdout.split("\n")[:3] == ["[False, False]", "[]", "0"]
            assert run_cell(kc, "print(rlm_call('complete me'))").stdout.strip() == "echo: complete me"
            assert run_cell(kc, "%aries model bulk gpt4o").error is None
            assert run_cell(kc, "print(rlm_call('and me'))").stdout.strip() == "echo: and me"
            server.script(Reply(text="Streamed through the broker.", chunk=2))
            assert "Streamed through the broker." in run_cell(kc, "%aries say something").stdout
            anthropic_call, openai_call, agent_call = server.requests[-3:]
            assert anthropic_call.headers["x-api-key"] == ANTHROPIC_KEY
            assert openai_call.headers["authorization"] == f"Bearer {OPENAI_KEY}"
            assert agent_call.stream and agent_call.headers["x-api-key"] == ANTHROPIC_KEY
            assert not any(name.startswith("x-aries") for name in agent_call.headers)  # the broker's own
            status = run_cell(kc, "%aries status").result or ""
            assert "held by the key broker" in status and "not in the kernel process" in status
            assert ANTHROPIC_KEY not in status
        finally:
            stop_kernel(km, kc)


def test_a_key_set_in_a_cell_is_handed_to_the_broker_and_removed(small_repo: Path) -> None:
    with ScriptedModelServer() as server:
        km, kc = start_kernel(small_repo, env={"ANTHROPIC_BASE_URL": server.anthropic_url})
        try:
            out = run_cell(kc, f"import os\nos.environ['ANTHROPIC_API_KEY'] = {CELL_KEY!r}")
            assert "ANTHROPIC_API_KEY was handed to the key broker" in out.stdout
            assert run_cell(kc, "print('ANTHROPIC_API_KEY' in os.environ)").stdout.strip() == "False"
            assert run_cell(kc, "print(rlm_call('still used'))").stdout.strip() == "echo: still used"
            assert server.requests[-1].headers["x-api-key"] == CELL_KEY
        finally:
            stop_kernel(km, kc)


def test_the_broker_answers_only_its_kernel_and_only_for_the_keys_own_url(small_repo: Path) -> None:
    with ScriptedModelServer() as server, ScriptedModelServer() as elsewhere:
        km, kc = start_kernel(small_repo, env=server.kernel_env(ANTHROPIC_API_KEY=ANTHROPIC_KEY))
        try:
            assert run_cell(kc, RAW).error is None
            body = json.dumps({"model": "m", "max_tokens": 5, "messages": []}).encode()
            route = {"x-aries-key": "ANTHROPIC_API_KEY", "x-aries-auth": "x-api-key"}
            attempts = {  # what: (headers, path, the broker's answer)
                "no secret": ({**route, "x-aries-upstream": server.anthropic_url}, "/v1/messages", 401),
                "a wrong secret": (
                    {**route, "x-aries-upstream": server.anthropic_url, "x-aries-broker": "guess"},
                    "/v1/messages",
                    401,
                ),
                "another upstream": (
                    {**route, "x-aries-upstream": elsewhere.anthropic_url, "x-aries-broker": "SECRET"},
                    "/v1/messages",
                    403,
                ),
                "a late bind": ({"x-aries-broker": "SECRET"}, "/.aries-key-broker/bind", 403),
            }
            for what, (headers, path, expected) in attempts.items():
                sent = body
                if path.endswith("bind"):
                    sent = json.dumps({"urls": {"ANTHROPIC_API_KEY": [elsewhere.anthropic_url]}}).encode()
                cell = f"print(raw({path!r}, {headers!r}, {sent!r}))".replace("'SECRET'", "secret")
                out = run_cell(kc, cell)
                assert out.error is None, (what, out.error)
                status = int(out.stdout.strip("()\n").split(",")[0])
                assert status == expected, (what, out.stdout)
                assert ANTHROPIC_KEY not in out.stdout
            # A base URL changed in a cell is not trusted with the key: the call is refused before it leaves.
            code = f"os.environ['ANTHROPIC_BASE_URL'] = {elsewhere.anthropic_url!r}\nrlm_call('where to?')"
            out = run_cell(kc, "import os\n" + code)
            assert out.error is not None and out.error[0] == "MissingKeyError"
            assert "sends a key only to the base URL it was given with" in out.error[1]
            assert ANTHROPIC_KEY not in json.dumps(out.error)
            assert elsewhere.requests == [] and server.requests == []
        finally:
            stop_kernel(km, kc)


def test_the_broker_outlives_an_interrupt_and_ends_with_the_kernel(small_repo: Path) -> None:
    with ScriptedModelServer() as server:
        km, kc = start_kernel(small_repo, env=server.kernel_env(ANTHROPIC_API_KEY=ANTHROPIC_KEY))
        stopped = False
        try:
            pid = broker_pid(kc)
            watch = os.pidfd_open(pid)
            # stop_on_error=False: after a cell's error ipykernel aborts what reaches it until its own "stop
            # aborting" message comes round, so the next cell, sent the moment the error reply arrives, could be
            # aborted by that race (seen once in a full run) rather than tell anything about the broker.
            msg_id = kc.execute(
                "import time\nprint('sleeping', flush=True)\ntime.sleep(120)", stop_on_error=False
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the cell is running
                try:
                    message = kc.get_iopub_msg(timeout=0.5)
                except queue.Empty:
                    continue
                if message["parent_header"].get("msg_id") == msg_id and message["msg_type"] == "stream":
                    break
            km.interrupt_kernel()
            reply = kc.get_shell_msg(timeout=60)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = kc.get_shell_msg(timeout=60)
            assert reply["content"]["ename"] == "KeyboardInterrupt"
            assert select.select([watch], [], [], 0)[0] == []  # the broker is still running
            after = run_cell(kc, "print(rlm_call('after the interrupt'))")
            # The whole stderr when it fails: one CI run saw the warm-up thread's traceback there, cut short.
            assert after.stdout.strip().startswith("echo:"), after.stderr
            assert server.requests[-1].headers["x-api-key"] == ANTHROPIC_KEY
            stop_kernel(km, kc)
            stopped = True
            assert select.select([watch], [], [], 60)[0] == [watch], "the broker outlived its kernel"
            os.close(watch)
        finally:
            if not stopped:
                stop_kernel(km, kc)


def test_a_key_named_in_pass_env_keys_stays_for_bash(small_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "jupyter_config.py").write_text("c.AriesAgent.pass_env_keys = ['OPENAI_API_KEY']\n")
    km, kc = start_kernel(small_repo, env={"JUPYTER_CONFIG_DIR": str(tmp_path)})
    try:
        code = f"import os\nos.environ['OPENAI_API_KEY'] = {OPENAI_KEY!r}\nos.environ['ANTHROPIC_API_KEY'] = {CELL_KEY!r}"
        out = run_cell(kc, code)
        assert out.error is None, out.error
        kept = run_cell(kc, "print(sorted(n for n in os.environ if n.endswith('_API_KEY')))")
        assert kept.stdout.strip() == "['OPENAI_API_KEY']"
        status = run_cell(kc, "%aries status").result or ""
        assert "ANTHROPIC_API_KEY for https://api.anthropic.com" in status
        assert "in the kernel process: OPENAI_API_KEY" in status
    finally:
        stop_kernel(km, kc)


def test_without_the_launcher_the_status_says_the_keys_are_in_the_kernel(small_repo: Path) -> None:
    km, kc = start_kernel(small_repo, env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY}, kernel_name="python3")
    try:
        assert run_cell(kc, "%load_ext aries_kernel").error is None
        status = run_cell(kc, "%aries status").result or ""
        assert "Provider keys: in the kernel process: ANTHROPIC_API_KEY; no key broker runs" in status
        assert ANTHROPIC_KEY not in status
    finally:
        stop_kernel(km, kc)
