"""The Aries kernel behind a real Jupyter Kernel Gateway on loopback, driven over its REST and websocket API.

The gateway starts kernels in its own working directory with only the environment it is told to pass: the
variables named in ``KG_ENV_PROCESS_WHITELIST`` from its own environment, and those in the POST body that
``KG_ENV_WHITELIST`` allows. So the root (``ARIES_ROOT``), the vault (``ARIES_VAULT``) and the model key and
URL (``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``, pointing at the loopback model server) all come from the
kernel's environment, as on a hub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket  # websocket-client (the test extra)

from aries_kernel.kernelspec import KERNEL_NAME
from tests.kernel_harness import JUPYTER_DATA
from tests.kernel_websocket import Channels
from tests.loopback import ScriptedModelServer
from tests.net_support import free_port

# From the client, per kernel: what a hub's spawner would set.
CLIENT_ENV = (
    "ARIES_ROOT",
    "ARIES_VAULT",
    "ARIES_LOG_DIR",
    "ARIES_INDEX_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


class Gateway:
    """A running ``jupyter kernelgateway`` and the HTTP calls the test makes to it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.base = f"127.0.0.1:{port}"

    def http(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://{self.base}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text else None

    def wait_ready(self) -> None:
        """Poll until the API answers; bounded by attempts, and failing at once if the gateway exits."""
        for _ in range(600):
            if self.process.poll() is not None:
                raise RuntimeError(f"the kernel gateway exited with {self.process.returncode}")
            try:
                self.http("GET", "/api")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        raise RuntimeError("the kernel gateway did not answer /api")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    port = free_port()
    workdir = tmp_path / "gateway-cwd"  # not the repository: the root must come from ARIES_ROOT
    workdir.mkdir()
    env = {
        **os.environ,
        "JUPYTER_PATH": str(JUPYTER_DATA),  # the test kernelspec only
        "KG_ENV_PROCESS_WHITELIST": "JUPYTER_PATH,HOME",
        "KG_ENV_WHITELIST": ",".join(CLIENT_ENV),
    }
    for name in CLIENT_ENV:  # the kernel must get these from the request, not from the gateway's environment
        env.pop(name, None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            f"--KernelGatewayApp.default_kernel_name={KERNEL_NAME}",
            "--KernelGatewayApp.port_retries=0",
            "--JupyterWebsocketPersonality.list_kernels=True",  # so the test can see the kernel is gone
        ],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    running = Gateway(process, port)
    try:
        running.wait_ready()
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def test_the_aries_kernel_answers_through_a_kernel_gateway(
    gateway: Gateway, small_repo: Path, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    env = {
        "ARIES_ROOT": str(small_repo),
        "ARIES_VAULT": str(tmp_path / "team-vault"),
        "ARIES_LOG_DIR": str(tmp_path / "logs"),
        "ARIES_INDEX_KEY": str(tmp_path / "keys" / "index.key"),
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": model_server.anthropic_url,
    }
    kernel = gateway.http("POST", "/api/kernels", {"name": KERNEL_NAME, "env": env})
    assert kernel["name"] == KERNEL_NAME
    connection = websocket.create_connection(
        f"ws://{gateway.base}/api/kernels/{kernel['id']}/channels", timeout=120
    )
    try:
        channels = Channels(connection)
        where = channels.execute("import os; print(os.getcwd()); codebase.root")
        assert where["error"] is None, where["error"]
        assert str(small_repo) in (where["result"] or "")  # from ARIES_ROOT, not the gateway's working folder
        assert "gateway-cwd" in where["stdout"]

        top = channels.execute("codebase.top_files(3)['file'].tolist()")
        assert top["error"] is None, top["error"]
        assert top["status"] == "ok" and ".py" in (top["result"] or "")

        added = channels.execute(
            "vault.add('Gateway note', 'kernels behind a gateway read the vault from ARIES_VAULT')\n"
            "vault.query_ranked('gateway vault')['title'].tolist()"
        )
        assert added["error"] is None, added["error"]
        assert "Gateway note" in (added["result"] or "")
        assert list((tmp_path / "team-vault").rglob("*.md"))  # the note is in the folder the env named

        answer = channels.execute("rlm_call('ping from the gateway')")
        assert answer["error"] is None, answer["error"]
        assert "echo: ping from the gateway" in (answer["result"] or "")  # key and URL from the kernel env
        assert any("test-key" in value for value in model_server.requests[-1].headers.values())
    finally:
        connection.close()
        gateway.http("DELETE", f"/api/kernels/{kernel['id']}")
    assert gateway.http("GET", "/api/kernels") == []
