"""Aries on a real JupyterHub: two members share one team vault on PostgreSQL.

The hub runs on loopback with configurable-http-proxy (from npm: ``$ARIES_TEST_CHP``, which ``.ci/run`` sets,
else one on ``PATH`` or in ``<venv>/node_modules/.bin``), the dummy authenticator's users ``alice`` and ``bob``,
and ``SimpleLocalProcessSpawner`` single-user servers running JupyterLab with the Aries kernel. Its
``jupyterhub_config.py`` is the test's own lines (ports, users, homes, the loopback model server) followed by
the README's hub recipe, read from README.md, so the recipe is what runs. Each member starts their server and a
kernel through the hub's REST API with a token of their own, talks to the kernel over its websocket, and writes
and reads the team vault. Every process the test starts carries a marker in its environment, so whatever is
left at the end (the hub, the proxy, servers, kernels) is found and stopped even when the test fails.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
import websocket  # websocket-client (the test extra)

from aries_kernel.kernelspec import KERNEL_NAME
from tests.kernel_harness import JUPYTER_DATA
from tests.kernel_websocket import Channels
from tests.loopback import ScriptedModelServer
from tests.net_support import free_port
from tests.pg_support import PgServer

README = Path(__file__).resolve().parents[1] / "README.md"
USERS = ("alice", "bob")
SHARED_LOGIN = "hubuser"  # the one system login every member's server runs as, as on many hubs
CHP_VARIABLE = "ARIES_TEST_CHP"
WAIT_SECONDS = 180.0  # for the hub, a server or a kernel to come up or go away

T = TypeVar("T")


def configurable_http_proxy() -> str:
    """The proxy's executable; a missing proxy fails the test with how to install it."""
    named = os.environ.get(CHP_VARIABLE)
    candidates = (
        [named]
        if named
        else [
            shutil.which("configurable-http-proxy"),
            str(Path(sys.prefix) / "node_modules" / ".bin" / "configurable-http-proxy"),
        ]
    )
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "configurable-http-proxy not found ("
        + (f"{CHP_VARIABLE}={named!r} is no executable" if named else f"not on PATH, not in {candidates[1]}")
        + "): the JupyterHub test runs a real proxy. Install it with npm: "
        f"npm install --prefix {sys.prefix} configurable-http-proxy (.ci/run does).",
        pytrace=False,
    )


def readme_hub_lines() -> str:
    """The README's ``jupyterhub_config.py`` block."""
    found = re.search(r"```python\n(# jupyterhub_config\.py.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert found, "README.md has no ```python block starting with '# jupyterhub_config.py' (the hub recipe)"
    return found.group(1)


def marked_processes(marker: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment holds ``marker`` (``NAME=value``)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker.encode() in environ:
            found[int(entry.name)] = command.replace(b"\0", b" ").decode(errors="replace")
    return found


@dataclass
class Hub:
    """A running ``jupyterhub`` and the calls the test makes through its proxy."""

    process: subprocess.Popen[bytes]
    port: int
    admin_token: str
    log: Path
    marker: str
    schema: str
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def api(self, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
        """``method path`` with ``token``; the JSON answer (None for an empty one)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"token {token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return (
            json.loads(text) if text and response.headers.get_content_type() == "application/json" else text
        )

    def wait(self, what: str, probe: Callable[[], T | None], seconds: float = WAIT_SECONDS) -> T:
        """Poll ``probe`` until it returns a value; fails after ``seconds`` or as soon as the hub exits."""
        deadline = time.monotonic() + seconds
        failure = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the hub exited ({self.process.returncode}) waiting for {what}:\n{self.log_tail()}"
                )
            try:
                value = probe()
            except (urllib.error.URLError, ConnectionError) as exc:
                value, failure = None, repr(exc)
            if value is not None:
                return value
            time.sleep(0.2)
        raise AssertionError(f"no {what} in {seconds:.0f} s ({failure or 'not yet'}):\n{self.log_tail()}")

    def token_for(self, user: str) -> str:
        """A token of ``user``'s own (the user's scopes: their server, its API), made by the admin service."""
        if user not in self.tokens:
            made = self.api("POST", f"/hub/api/users/{user}/tokens", self.admin_token, {"note": "aries test"})
            self.tokens[user] = made["token"]
        return self.tokens[user]

    def start_server(self, user: str) -> None:
        """Start ``user``'s single-user server through the hub's API and wait until it is ready."""
        token = self.token_for(user)
        self.api("POST", f"/hub/api/users/{user}/server", token)

        def ready() -> bool | None:
            server = self.api("GET", f"/hub/api/users/{user}", token)["servers"].get("")
            return True if server and server["ready"] else None

        self.wait(f"single-user server of {user}", ready)

    def stop_server(self, user: str) -> None:
        token = self.token_for(user)
        self.api("DELETE", f"/hub/api/users/{user}/server", token)
        self.wait(
            f"stop of {user}'s server",
            lambda: True if not self.api("GET", f"/hub/api/users/{user}", token)["servers"] else None,
        )

    def stop(self) -> dict[int, str]:
        """Stop the hub (it stops the proxy and the servers it started); what of the test's was still running
        after, which is then killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        left = marked_processes(self.marker)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left


class Member:
    """One user's kernel on their own single-user server, reached through the hub's proxy."""

    def __init__(self, hub: Hub, user: str) -> None:
        self.hub, self.user = hub, user
        token = hub.token_for(user)
        self.kernel = hub.api(
            "POST", f"/user/{user}/api/kernels", token, {"name": KERNEL_NAME, "path": "repo"}
        )
        self.connection = websocket.create_connection(
            f"ws://127.0.0.1:{hub.port}/user/{user}/api/kernels/{self.kernel['id']}/channels",
            header=[f"Authorization: token {token}"],
            timeout=120,
        )
        self.channels = Channels(self.connection)

    def run(self, code: str) -> dict[str, Any]:
        """Run ``code``; its output, failing the test on an error."""
        out = self.channels.execute(code)
        assert out["error"] is None, f"{self.user}: {out['error']}\n{out['stderr']}"
        return out

    def value(self, code: str) -> Any:
        """The Python value of the expression ``code`` in the kernel (its repr read back)."""
        result = self.run(code)["result"]
        assert result is not None, f"{self.user}: {code!r} showed nothing"
        return ast.literal_eval(result)

    def close(self) -> None:
        self.connection.close()
        self.hub.api(
            "DELETE", f"/user/{self.user}/api/kernels/{self.kernel['id']}", self.hub.token_for(self.user)
        )


def _test_lines(tmp_path: Path, ports: dict[str, int], admin_token: str, model_url: str, marker: str) -> str:
    """The hub's configuration that only a test needs; the README's lines follow it."""
    homes = tmp_path / "homes"
    singleuser = Path(sys.executable).parent / "jupyterhub-singleuser"
    name, value = marker.split("=", 1)
    args = (
        ["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []
    )  # jupyter-server refuses root otherwise
    return f"""\
# The test's lines: loopback ports, the dummy authenticator's two users, local servers in private homes.
c.JupyterHub.bind_url = "http://127.0.0.1:{ports["hub"]}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {ports["internal"]}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports["proxy_api"]}"
c.ConfigurableHTTPProxy.command = [{configurable_http_proxy()!r}]
c.JupyterHub.db_url = {f"sqlite:///{tmp_path / 'hub.sqlite'}"!r}
c.JupyterHub.cookie_secret_file = {str(tmp_path / "cookie_secret")!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {uuid.uuid4().hex!r}
c.Authenticator.allowed_users = {set(USERS)!r}
c.JupyterHub.services = [{{"name": "aries-test", "api_token": {admin_token!r}}}]
c.JupyterHub.load_roles = [
    {{"name": "aries-test", "scopes": ["admin:users", "admin:servers", "tokens"], "services": ["aries-test"]}}
]
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(homes / "{username}")!r}
c.Spawner.cmd = [{str(singleuser)!r}]
c.Spawner.args = {args!r}
c.Spawner.default_url = "/lab"
c.Spawner.environment.update(
    {{
        "JUPYTER_PATH": {str(JUPYTER_DATA)!r},  # the test's Aries kernelspec
        "ANTHROPIC_BASE_URL": {model_url!r},  # the loopback model server
        "LOGNAME": {SHARED_LOGIN!r},
        {name!r}: {value!r},
    }}
)

"""


@pytest.fixture
def hub(tmp_path: Path, small_repo: Path, pg_server: PgServer, server: ScriptedModelServer) -> Iterator[Hub]:
    schema = f"hub_{uuid.uuid4().hex[:12]}"
    keys = tmp_path / "keys"
    team_key = tmp_path / "team.key"
    team_key.write_bytes(os.urandom(32))
    team_key.chmod(0o600)
    (tmp_path / "team-index").mkdir()
    for user in USERS:
        (keys / user).mkdir(parents=True)
        (keys / user / "ANTHROPIC_API_KEY").write_text(f"sk-ant-{user}-{uuid.uuid4().hex}\n")
        shutil.copytree(small_repo, tmp_path / "homes" / user / "repo")
    ports = {name: free_port() for name in ("hub", "internal", "proxy_api")}
    admin_token = uuid.uuid4().hex
    marker = f"ARIES_HUB_TEST={uuid.uuid4().hex}"
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(
        _test_lines(tmp_path, ports, admin_token, server.anthropic_url, marker) + readme_hub_lines()
    )
    env = {
        **os.environ,
        "ARIES_VAULT_URL": pg_server.url,
        "ARIES_VAULT_SCHEMA": schema,
        "ARIES_HUB_KEYS": str(keys),
        "ARIES_TEAM_INDEX_DIR": str(tmp_path / "team-index"),
        "ARIES_TEAM_KEY_FILE": str(team_key),
        marker.split("=")[0]: marker.split("=")[1],
    }
    log = tmp_path / "hub.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(config)],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    running = Hub(process, ports["hub"], admin_token, log, marker, schema)
    try:
        running.wait("answer from the hub's API", lambda: running.api("GET", "/hub/api/", admin_token))
        yield running
    finally:
        running.stop()
        try:
            pg_server.execute("SELECT 1")
        except psycopg.OperationalError:  # stopped by the test, which failed before starting it again
            pg_server.start()
        pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_two_members_share_the_team_vault_through_a_real_hub(
    hub: Hub, pg_server: PgServer, server: ScriptedModelServer, tmp_path: Path
) -> None:
    for user in USERS:
        hub.start_server(user)
    lab = hub.api("GET", "/user/alice/lab", hub.token_for("alice"))
    assert b"JupyterLab" in lab  # the single-user server is JupyterLab's
    members = {}
    try:
        for user in USERS:
            members[user] = Member(hub, user)
        alice, bob = members["alice"], members["bob"]

        for member in members.values():
            seen = member.value(
                "import os; (os.environ.get('JUPYTERHUB_USER'), os.environ.get('LOGNAME'), "
                "os.environ.get('ARIES_VAULT_SCHEMA'), os.environ.get('ARIES_TEAM_KEY_FILE'), "
                "'ANTHROPIC_API_KEY' in os.environ)"
            )
            # The hub names the member; the login is the shared one; the recipe's vault and team key arrived;
            # the provider key is the broker's, not the kernel's.
            assert seen == (member.user, SHARED_LOGIN, hub.schema, str(tmp_path / "team.key"), False)
            status = member.run("%aries status")["result"] or ""
            assert f"{member.user} (from $JUPYTERHUB_USER)" in status, status

        alice.run("vault.add('Alice on the hub', 'alice wrote this note from her single-user server')")
        bob.run("vault.add('Bob on the hub', 'bob wrote this note from his single-user server')")
        expected = {"Alice on the hub": "alice", "Bob on the hub": "bob"}
        for member in members.values():
            authors = member.value("dict(vault.authors())")
            assert {title: authors.get(title) for title in expected} == expected, member.user
            found = member.value("vault.query_ranked('note from a single-user server')['title'].tolist()")
            assert set(expected) <= set(found), (member.user, found)

        # Each member's model calls carry their own key, which no process's command line shows.
        for member in members.values():
            answer = member.value(f"rlm_call('ping from {member.user}')")
            assert f"echo: ping from {member.user}" in answer
            key = (tmp_path / "keys" / member.user / "ANTHROPIC_API_KEY").read_text().strip()
            assert server.requests[-1].headers.get("x-api-key") == key
        for command in marked_processes(hub.marker).values():
            assert "sk-ant-" not in command, command

        # The database goes away in the middle of alice's add: the kernel says so once, waits, and the note is
        # there for bob when the server is back.
        pg_server.stop()
        request = alice.channels.send(
            "vault.add('Written while the database was away', 'the vault waited for the server to come back')"
        )
        waited = alice.channels.collect(request, until=lambda out: "is not reachable" in out["stderr"])
        assert "retrying for up to 60 s" in waited["stderr"], waited
        pg_server.start()
        done = alice.channels.collect(request)
        assert done["error"] is None and done["status"] == "ok", done
        assert "answers again" in waited["stderr"] + done["stderr"], (waited, done)
        authors = bob.value("dict(vault.authors())")
        assert authors.get("Written while the database was away") == "alice", authors
        assert {title: authors.get(title) for title in expected} == expected
    finally:
        for member in members.values():
            member.close()
    for user in USERS:
        hub.stop_server(user)
    servers_left = {
        pid: command
        for pid, command in marked_processes(hub.marker).items()
        if pid != hub.process.pid and "configurable-http-proxy" not in command
    }
    assert servers_left == {}, servers_left  # the servers and kernels stopped with their servers
    assert hub.stop() == {}  # the hub took its proxy with it
