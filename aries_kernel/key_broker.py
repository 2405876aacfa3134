"""The key broker: provider keys live in a small process of their own, never in the kernel's.

The kernelspec's launcher (``python -m aries_kernel -f ...``, :func:`launch`) takes the provider key variables
out of its environment, starts the broker with them, and ``execve``\\ s the kernel in the same pid without them,
so the kernel's ``os.environ`` and ``/proc/self/environ`` hold none. The broker listens on a Unix socket in a
folder only the user can open, answers only requests carrying this kernel's secret (handed to the kernel on an
inherited pipe, never in an environment), and adds a key only to requests bound for a base URL that key was
registered with: the provider's public URL, its ``*_BASE_URL`` at launch, ``c.AriesModels.base_urls`` as the
kernel read them at start (sent once, before any code runs: the first request seals them) or as they stand when
a key set in a cell is handed over. No request returns a key and no error names one. The official SDKs stay the
clients: the providers point them at the socket (:func:`aries_kernel.models.provider.sdk_connection`).

The broker's process is :mod:`aries_kernel.key_broker_server`: it relays HTTP/1.1 byte for byte after the
request head (streams pass through as they arrive), ignores SIGINT and runs in a session of its own (an
interrupt of the kernel's process group does not reach it), sets itself non-dumpable (``/proc/<pid>/environ``
and ``mem`` closed to the user's other processes), and exits when the kernel does: it watches a pipe whose other
end only the kernel holds. This module is the kernel's end and the launcher's, which imports it before the
kernel starts: its imports stay few.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "PROVIDER_KEYS",
    "BrokerLink",
    "BrokerRoute",
    "adopt",
    "launch",
    "link",
    "start_broker",
    "watch_cells",
    "where_keys_live",
]

# Provider key variable -> (provider, public base URL, the SDK's base-URL variable): models/shortnames.PROVIDERS
# says the same (a test checks); importing it here would import the models package (pandas) in the launcher.
PROVIDER_KEYS: dict[str, tuple[str, str | None, str | None]] = {
    "ANTHROPIC_API_KEY": ("anthropic", "https://api.anthropic.com", "ANTHROPIC_BASE_URL"),
    "OPENAI_API_KEY": ("openai", "https://api.openai.com/v1", "OPENAI_BASE_URL"),
    "GOOGLE_API_KEY": ("google", "https://generativelanguage.googleapis.com/v1beta/openai/", None),
    "DEEPSEEK_API_KEY": ("deepseek", "https://api.deepseek.com/v1", None),
    "MOONSHOT_API_KEY": ("moonshot", "https://api.moonshot.ai/v1", None),
    "GROQ_API_KEY": ("groq", "https://api.groq.com/openai/v1", None),
    "OPENROUTER_API_KEY": ("openrouter", "https://openrouter.ai/api/v1", None),
    "ARIES_CUSTOM_API_KEY": ("custom", None, None),
}
LINK_ENV = (
    "ARIES_KEY_BROKER_FD"  # set in the kernel's environment by the launcher: the pipe to read the link from
)
CONTROL = "/.aries-key-broker/"  # path prefix of the broker's own requests (bind, handover, status)
SDK_HOST = "http://aries-key-broker"  # the host name the SDKs are given; the socket is what they reach


def normal_url(url: str) -> str:
    """``url`` without its trailing slash: how the broker compares base URLs."""
    return url.rstrip("/")


def _http_url(url: str | None) -> str | None:
    """``url`` without its trailing slash, or None when it is not an http(s) URL with a host (a key never goes
    there). String operations, not urllib: the launcher imports this module and keeps its imports few."""
    scheme, _, rest = (url or "").partition("://")
    host = rest.split("/", 1)[0].rpartition("@")[2]
    return normal_url(url or "") if scheme in ("http", "https") and host.strip(":") else None


# --------------------------------------------------------------------------------------------- kernel side


class BrokerRoute:
    """How one SDK client reaches one key through the broker: the socket, the secret, the key and its URL.
    Compared by value (an endpoint whose route changes gets a new client); its repr leaves the secret out."""

    __slots__ = ("base_url", "secret", "socket_path", "variable")

    def __init__(self, socket_path: str, secret: str, variable: str, base_url: str) -> None:
        self.socket_path = socket_path
        self.secret = secret
        self.variable = variable
        self.base_url = base_url

    def _fields(self) -> tuple[str, str, str, str]:
        return (self.socket_path, self.secret, self.variable, self.base_url)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BrokerRoute) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"<BrokerRoute {self.variable} to {self.base_url}>"

    @property
    def sdk_base_url(self) -> str:
        """The base URL an SDK is given: the broker's host, with the upstream base URL's path."""
        path = self.base_url.partition("://")[2].partition("/")[2]
        return SDK_HOST + ("/" + path if path else "")

    def headers(self, auth: str, connect_timeout: float) -> dict[str, str]:
        """The headers that tell the broker whose key to add (``auth``: x-api-key or bearer) and where to."""
        return {
            "x-aries-broker": self.secret,
            "x-aries-key": self.variable,
            "x-aries-upstream": self.base_url,
            "x-aries-auth": auth,
            "x-aries-connect-timeout": f"{connect_timeout:g}",
        }


class BrokerLink:
    """The kernel's end: where the broker listens, the secret, and which key it holds for which URLs."""

    def __init__(self, socket_path: str, secret: str, pid: int, routes: dict[str, list[str]]) -> None:
        self.socket_path = socket_path
        self._secret = secret
        self.pid = pid
        self.routes = routes  # a copy of the broker's view; the broker itself decides every request

    def __repr__(self) -> str:
        return f"<BrokerLink pid {self.pid} at {self.socket_path}>"

    def route(self, variable: str, base_url: str) -> BrokerRoute | None:
        """The route of ``variable`` to ``base_url``, if the broker holds that key for that URL."""
        if normal_url(base_url) not in self.routes.get(variable, ()):
            return None
        return BrokerRoute(self.socket_path, self._secret, variable, normal_url(base_url))

    def bind(self, urls: dict[str, list[str]]) -> None:
        """Add URLs to the launch keys (the kernel's configured base URLs); the broker takes this once, first."""
        self.routes = self._ask("bind", {"urls": urls})["routes"]

    def hand_over(self, variable: str, value: str, urls: list[str]) -> None:
        """Give the broker a key set in the kernel, for its public and launch URLs and ``urls``."""
        self.routes = self._ask("handover", {"variable": variable, "value": value, "urls": urls})["routes"]

    def status(self) -> dict[str, Any]:
        """The broker's pid and, per key it holds, the URLs it sends it to (never the key)."""
        answer = self._ask("status", {})
        self.routes = answer["routes"]
        return answer

    def _ask(self, what: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(payload).encode()
        head = (
            f"POST {CONTROL}{what} HTTP/1.1\r\nhost: aries-key-broker\r\nx-aries-broker: {self._secret}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(self.socket_path)
            conn.sendall(head + body)
            answer = bytearray()
            while chunk := conn.recv(65536):
                answer += chunk
        status_line, _, rest = bytes(answer).partition(b"\r\n")
        reply = json.loads(rest.partition(b"\r\n\r\n")[2] or b"{}")
        if b" 200 " not in status_line + b" ":
            raise OSError(
                f"the key broker refused {what}: {reply.get('error', {}).get('message', status_line)}"
            )
        return dict(reply)


_LINK: BrokerLink | None = None
_PROBLEM = ""  # why no broker runs, when the launcher could not start one


def link() -> BrokerLink | None:
    """This kernel's broker, or None (not launched by the aries kernelspec, or the broker could not start)."""
    return _LINK


def adopt() -> None:
    """In the kernel just exec'd by :func:`launch`: read the link from the inherited pipe, and keep the
    broker's watch pipe open but out of the processes the kernel starts."""
    global _LINK
    fd = int(os.environ.pop(LINK_ENV))
    with os.fdopen(fd, "rb") as pipe:
        info = json.loads(pipe.read())
    os.set_inheritable(info["watch_fd"], False)
    _LINK = BrokerLink(info["socket"], info["secret"], info["pid"], info["routes"])


def start_broker(environ: Mapping[str, str]) -> tuple[BrokerLink, int]:
    """Start a broker holding the provider keys of ``environ`` (each bound to its public URL and its
    ``*_BASE_URL`` there); returns the link and the write end of its watch pipe: the broker exits when every
    copy of that descriptor is closed. Raises OSError when it cannot start."""
    keys = {name: environ[name] for name in PROVIDER_KEYS if environ.get(name)}
    launch_urls = {
        name: environ[variable]
        for name, (_, _, variable) in PROVIDER_KEYS.items()
        if variable and environ.get(variable)
    }
    base = environ.get("XDG_RUNTIME_DIR") or environ.get("TMPDIR") or "/tmp"
    folder = os.path.join(base, f"aries-key-broker-{os.urandom(8).hex()}")
    os.mkdir(folder, 0o700)  # only the user can reach the socket in it
    path = os.path.join(folder, "socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(64)
        watch_read, watch_write = os.pipe()
        broker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aries_kernel.key_broker_server",
                str(listener.fileno()),
                str(watch_read),
                folder,
            ],
            stdin=subprocess.PIPE,
            pass_fds=(listener.fileno(), watch_read),
            start_new_session=True,  # the kernel's process group gets the interrupts; the broker is not in it
            env={name: value for name, value in environ.items() if name not in PROVIDER_KEYS},
        )
    os.close(watch_read)
    secret = os.urandom(32).hex()
    assert broker.stdin is not None
    broker.stdin.write(json.dumps({"secret": secret, "keys": keys, "launch_urls": launch_urls}).encode())
    broker.stdin.close()  # the keys now live in the broker's memory only
    routes = {name: sorted(bound_urls(name, [], launch_urls)) for name in keys}
    return BrokerLink(path, secret, broker.pid, routes), watch_write


def launch(argv: list[str]) -> None:
    """Start the broker with the provider keys of this environment, then exec the kernel without them.

    Returns only when the broker cannot be started (the kernel then runs here, keys in its process, and
    ``%aries status`` says why)."""
    global _PROBLEM
    try:
        broker, watch_write = start_broker(os.environ)
    except OSError as exc:
        _PROBLEM = f"the key broker could not start ({exc})"
        print(f"aries-kernel: {_PROBLEM}; provider keys stay in the kernel process.", file=sys.stderr)
        return
    info = {
        "socket": broker.socket_path,
        "secret": broker._secret,
        "pid": broker.pid,
        "watch_fd": watch_write,
        "routes": broker.routes,
    }
    info_read, info_write = os.pipe()
    os.write(
        info_write, json.dumps(info).encode()
    )  # far below a pipe's buffer: read by the kernel after the exec
    os.close(info_write)
    os.set_inheritable(info_read, True)
    os.set_inheritable(watch_write, True)
    env = {name: value for name, value in os.environ.items() if name not in PROVIDER_KEYS}
    env[LINK_ENV] = str(info_read)
    os.execve(sys.executable, [sys.executable, "-m", "aries_kernel", *argv], env)


def bound_urls(variable: str, given: list[str], launch_urls: dict[str, str]) -> set[str]:
    """Where a key may go: its provider's public URL, its base-URL variable at launch, and ``given``."""
    candidates = [*given, PROVIDER_KEYS[variable][1], launch_urls.get(variable)]
    return {url for url in map(_http_url, candidates) if url is not None}


def _trusted_base_urls(context: Any) -> dict[str, str]:
    """``c.AriesModels.base_urls`` as the user set them: the router's (owned) settings once it is built, else
    the config the kernel read at start."""
    models = context.built("models")
    if models is not None:
        return dict(models.settings.base_urls)
    config = context.config
    section = config.get("AriesModels") if config is not None and "AriesModels" in config else None
    urls = section.get("base_urls") if section is not None else None
    return dict(urls) if isinstance(urls, dict) else {}


def watch_cells(shell: Any, context: Any) -> None:
    """With a broker: bind the configured base URLs now (before any code runs), and after each execution hand
    the provider keys a cell put in ``os.environ`` to the broker and remove them (except those named in
    ``c.AriesAgent.pass_env_keys``, which Bash and the Repl are to see: they stay in the kernel process)."""
    if _LINK is None:
        return
    global _PROBLEM
    broker = _LINK
    configured = _trusted_base_urls(context)
    try:
        broker.bind(
            {
                name: [configured[provider]]
                for name, (provider, _, _) in PROVIDER_KEYS.items()
                if name in broker.routes and configured.get(provider)
            }
        )
    except OSError as exc:  # it died or never started: %aries status says so; calls through it fail
        _PROBLEM = f"the key broker (pid {broker.pid}) did not answer at start ({exc})"

    def hand_over_keys(*_: Any) -> None:
        found = [name for name in PROVIDER_KEYS if os.environ.get(name)]
        if not found:
            return
        passed = {name.upper() for name in context.agent_settings.pass_env_keys}
        base_urls = _trusted_base_urls(context)
        for name in found:
            if name in passed:
                continue
            provider = PROVIDER_KEYS[name][0]
            try:
                broker.hand_over(
                    name, os.environ[name], [base_urls[provider]] if provider in base_urls else []
                )
            except (OSError, ValueError) as exc:
                print(
                    f"[aries] {name} could not be handed to the key broker ({exc}); it stays in os.environ."
                )
                continue
            del os.environ[name]
            print(f"[aries] {name} was handed to the key broker and removed from os.environ.")

    shell.events.register("post_run_cell", hand_over_keys)
    context.hooks.append(("post_run_cell", hand_over_keys))


def where_keys_live() -> str:
    """One line for ``%aries status``: where the provider keys are (the broker, or this process)."""
    here = sorted(name for name in PROVIDER_KEYS if os.environ.get(name))
    in_kernel = f"in the kernel process: {', '.join(here)}" if here else ""
    if _LINK is None:
        why = _PROBLEM or "no key broker runs (the kernel was not started by the aries kernelspec)"
        return f"Provider keys: {in_kernel or 'in the kernel process (none set)'}; {why}."
    try:
        routes = _LINK.status()["routes"]
    except OSError as exc:
        return f"Provider keys: the key broker (pid {_LINK.pid}) does not answer ({exc}). {in_kernel}".strip()
    held = "; ".join(f"{name} for {', '.join(urls)}" for name, urls in sorted(routes.items()))
    if held:
        text = f"Provider keys: held by the key broker (pid {_LINK.pid}), not in the kernel process: {held}"
    else:
        text = f"Provider keys: none set; one set in a cell goes to the key broker (pid {_LINK.pid})"
    if here:
        text += f"; {in_kernel} (set in a cell while c.AriesAgent.pass_env_keys names it)"
    return text + "."
