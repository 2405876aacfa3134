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

The broker relays HTTP/1.1 byte for byte after the request head (streams pass through as they arrive), ignores
SIGINT and runs in a session of its own (an interrupt of the kernel's process group does not reach it), sets
itself non-dumpable (``/proc/<pid>/environ`` and ``mem`` closed to the user's other processes), and exits when
the kernel does: it watches a pipe whose other end only the kernel holds.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
_AUTH = {"x-api-key": "x-api-key: {}", "bearer": "authorization: Bearer {}"}  # how a wire format sends a key
_DROPPED = {b"host", b"x-api-key", b"authorization", b"proxy-authorization"}
_HEAD_LIMIT = 1 << 20


def _normal(url: str) -> str:
    return url.rstrip("/")


def _http_url(url: str | None) -> str | None:
    """``url`` without its trailing slash, or None when it is not an http(s) URL (a key never goes there)."""
    if not url:
        return None
    parts = urlsplit(url)
    return _normal(url) if parts.scheme in ("http", "https") and parts.hostname else None


# --------------------------------------------------------------------------------------------- kernel side


@dataclass(frozen=True)
class BrokerRoute:
    """How one SDK client reaches one key through the broker: the socket, the secret, the key and its URL."""

    socket_path: str
    secret: str = field(repr=False)
    variable: str
    base_url: str

    @property
    def sdk_base_url(self) -> str:
        """The base URL an SDK is given: the broker's host, with the upstream base URL's path."""
        return SDK_HOST + urlsplit(self.base_url).path.rstrip("/")

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
        if _normal(base_url) not in self.routes.get(variable, ()):
            return None
        return BrokerRoute(self.socket_path, self._secret, variable, _normal(base_url))

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
    folder = tempfile.mkdtemp(prefix="aries-key-broker-", dir=environ.get("XDG_RUNTIME_DIR") or None)  # 0700
    path = os.path.join(folder, "socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(64)
        watch_read, watch_write = os.pipe()
        broker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aries_kernel.key_broker",
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
    secret = secrets.token_urlsafe(32)
    assert broker.stdin is not None
    broker.stdin.write(json.dumps({"secret": secret, "keys": keys, "launch_urls": launch_urls}).encode())
    broker.stdin.close()  # the keys now live in the broker's memory only
    routes = {name: sorted(_urls(name, [], launch_urls)) for name in keys}
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


def _urls(variable: str, given: list[str], launch_urls: dict[str, str]) -> set[str]:
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
    text = f"Provider keys: held by the key broker (pid {_LINK.pid}), not in the kernel process: {held or 'none'}"
    return (
        text
        + (f"; {in_kernel} (set in a cell while c.AriesAgent.pass_env_keys names it)" if here else "")
        + "."
    )


# --------------------------------------------------------------------------------------------- broker side


class _Refused(Exception):
    """A request the broker answers itself: its status, and a message that names no key."""

    def __init__(self, status: int, message: str, failure: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.failure = failure  # for 502: refused, timeout or failed (read back by the provider layer)


class _Hangup(Exception):
    """One side closed the connection mid-message (the kernel's interrupt or timeout, an upstream crash): the
    other side's connection is closed too, so it sees the message cut."""


class _Reader:
    """Buffered reads from a socket; ``before_wait`` runs before each blocking read."""

    def __init__(self, sock: socket.socket, wait: Any = None) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.wait = wait

    def fill(self) -> bool:
        if self.wait is not None:
            self.wait()
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def until(self, marker: bytes, start: int = 0) -> int | None:
        """The end of the first ``marker`` at or after ``start`` (reading as needed); None at EOF."""
        while (at := self.buf.find(marker, start)) < 0:
            if len(self.buf) > _HEAD_LIMIT:
                raise _Refused(431, "the head of the message is too large")
            if not self.fill():
                return None
        return at + len(marker)

    def take(self, end: int) -> bytes:
        out = bytes(self.buf[:end])
        del self.buf[:end]
        return out


def _headers(head: bytes) -> tuple[list[bytes], dict[bytes, bytes], list[tuple[bytes, bytes]]]:
    lines = head[:-4].split(b"\r\n")
    fields = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields.append((name.strip().lower(), line))
    values = {name: line.partition(b":")[2].strip() for name, line in fields}
    return lines[0].split(b" ", 2), values, fields


class _Key:
    def __init__(self, value: str, urls: set[str]) -> None:
        self.value = value
        self.urls = urls


class _Broker:
    """The broker process's state: the secret, the keys and the URLs each may go to."""

    def __init__(self, secret: str, keys: dict[str, str], launch_urls: dict[str, str]) -> None:
        self.secret = secret.encode()
        self.launch_urls = launch_urls
        self.keys = {name: _Key(value, _urls(name, [], launch_urls)) for name, value in keys.items()}
        self.sealed = False  # the first request seals the launch keys' URLs
        self.lock = threading.Lock()
        self.tls: ssl.SSLContext | None = None

    def routes(self) -> dict[str, list[str]]:
        return {name: sorted(key.urls) for name, key in self.keys.items()}

    def serve(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, client: socket.socket) -> None:
        reader = _Reader(client)
        upstream: list[Any] = [None, None]  # (origin, socket) of the connection this client's requests use
        try:
            while self.request(reader, client, upstream):
                pass
        except (OSError, _Hangup):
            pass
        finally:
            if upstream[1] is not None:
                upstream[1].close()
            client.close()

    def request(self, reader: _Reader, client: socket.socket, upstream: list[Any]) -> bool:
        """Answer or relay one request; whether the connection stays open for another."""
        end = reader.until(b"\r\n\r\n")
        if end is None:
            return False
        try:
            line, values, fields = _headers(reader.take(end))
            if len(line) != 3:
                raise _Refused(400, "not an HTTP request")
            method, target, _ = line
            if not hmac.compare_digest(values.get(b"x-aries-broker", b""), self.secret):
                raise _Refused(401, "this socket answers only its kernel (the secret is missing or wrong)")
            with self.lock:
                self.sealed, was_sealed = True, self.sealed
            if b"transfer-encoding" in values:
                raise _Refused(400, "requests must carry a content-length")
            length = int(values.get(b"content-length", b"0"))
            if target.startswith(CONTROL.encode()):
                body = self.body(reader, length)
                self.answer(client, 200, self.control(target.decode()[len(CONTROL) :], body, was_sealed))
                return b"close" not in values.get(b"connection", b"").lower()
            return self.relay(reader, client, upstream, method, target, values, fields, length)
        except _Refused as refusal:
            self.answer(client, refusal.status, {"error": {"message": str(refusal)}}, refusal.failure)
            return False
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.answer(client, 400, {"error": {"message": f"a malformed request ({type(exc).__name__})"}})
            return False

    def body(self, reader: _Reader, length: int) -> bytes:
        while len(reader.buf) < length:
            if not reader.fill():
                raise _Hangup
        return reader.take(length)

    def control(self, what: str, body: bytes, sealed: bool) -> dict[str, Any]:
        payload = json.loads(body or b"{}")
        with self.lock:
            if what == "bind":
                if sealed:
                    raise _Refused(
                        403, "the launch keys' base URLs are fixed: they were set when the kernel started"
                    )
                for name, urls in payload["urls"].items():
                    if name in self.keys:
                        self.keys[name].urls |= _urls(name, list(urls), self.launch_urls)
            elif what == "handover":
                name = payload["variable"]
                if name not in PROVIDER_KEYS:
                    raise _Refused(400, f"{name} is not a provider key variable")
                urls = _urls(name, list(payload["urls"]), self.launch_urls)
                self.keys[name] = _Key(str(payload["value"]), urls)
            elif what != "status":
                raise _Refused(404, f"the key broker has no request {what!r}")
            return {"pid": os.getpid(), "routes": self.routes()}

    def relay(
        self,
        reader: _Reader,
        client: socket.socket,
        upstream: list[Any],
        method: bytes,
        target: bytes,
        values: dict[bytes, bytes],
        fields: list[tuple[bytes, bytes]],
        length: int,
    ) -> bool:
        name = values.get(b"x-aries-key", b"").decode()
        base = _normal(values.get(b"x-aries-upstream", b"").decode())
        auth = _AUTH.get(values.get(b"x-aries-auth", b"").decode())
        with self.lock:
            key = self.keys.get(name)
            value = key.value if key is not None and base in key.urls else None
        if value is None or auth is None:
            raise _Refused(
                403,
                f"the key broker holds no key {name or '(none named)'} for {base or '(no URL)'}: it adds a "
                "key only to requests for the base URL the key was given with",
            )
        parts = urlsplit(base)
        prefix = parts.path.rstrip("/").encode()
        if not target.startswith(prefix + b"/") and target != prefix:
            raise _Refused(403, f"{target.decode(errors='replace')} is not under {base}")
        head = [b"%s %s HTTP/1.1" % (method, target), b"host: " + parts.netloc.encode()]
        head += [
            line
            for field_name, line in fields
            if field_name not in _DROPPED and not field_name.startswith(b"x-aries-")
        ]
        head.append(auth.format(value).encode())
        origin = (parts.scheme, parts.hostname, parts.port)
        up = self.upstream(upstream, origin, float(values.get(b"x-aries-connect-timeout", b"15")))
        first = reader.take(min(length, len(reader.buf)))
        up.sendall(b"\r\n".join(head) + b"\r\n\r\n" + first)
        remaining = length - len(first)
        while remaining > 0:  # a body larger than what came with the head: pass it on as it comes
            if not reader.fill():
                raise _Hangup
            piece = reader.take(min(remaining, len(reader.buf)))
            up.sendall(piece)
            remaining -= len(piece)
        keep = self.response(up, client, method)
        if not keep:
            up.close()
            upstream[:] = [None, None]
        return keep

    def upstream(
        self, upstream: list[Any], origin: tuple[str, str | None, int | None], wait: float
    ) -> socket.socket:
        """The connection to ``origin``: this client's open one, unless the upstream closed it since."""
        if upstream[0] == origin and not select.select([upstream[1]], [], [], 0)[0]:
            return upstream[1]  # type: ignore[no-any-return]
        if upstream[1] is not None:
            upstream[1].close()
        scheme, host, port = origin
        assert host is not None
        try:
            sock = socket.create_connection((host, port or (443 if scheme == "https" else 80)), timeout=wait)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock = self.tls_context().wrap_socket(sock, server_hostname=host)
            sock.settimeout(None)
        except TimeoutError as exc:
            raise _Refused(502, f"no connection to {host} within {wait:g}s", "timeout") from exc
        except ConnectionRefusedError as exc:
            raise _Refused(502, f"{host} refused the connection ({exc.strerror})", "refused") from exc
        except OSError as exc:
            raise _Refused(502, f"the connection to {host} failed ({exc})", "failed") from exc
        upstream[:] = [origin, sock]
        return sock

    def tls_context(self) -> ssl.SSLContext:
        """The SDKs' own TLS settings (their httpx's: certifi, or SSL_CERT_FILE / SSL_CERT_DIR)."""
        if self.tls is None:
            import httpx2

            self.tls = httpx2.create_ssl_context()
        return self.tls

    def response(self, up: socket.socket, client: socket.socket, method: bytes) -> bool:
        """Relay one response as it arrives; whether both connections can carry another request."""
        pending = bytearray()

        def flush_and_wait() -> None:
            if pending:
                client.sendall(pending)
                pending.clear()
            if isinstance(up, ssl.SSLSocket) and up.pending():
                return
            readable = select.select([up, client], [], [])[0]
            if up not in readable and client.recv(1, socket.MSG_PEEK) == b"":
                raise _Hangup

        reader = _Reader(up, flush_and_wait)
        while True:
            end = reader.until(b"\r\n\r\n")
            if end is None:
                raise _Refused(502, "the upstream closed the connection without an answer", "failed")
            head = reader.take(end)
            line, values, _ = _headers(head)
            pending += head
            status = int(line[1])
            if status >= 200 or status == 101:
                break
        keep = b"close" not in values.get(b"connection", b"").lower()
        if method == b"HEAD" or status in (204, 304):
            pass
        elif b"chunked" in values.get(b"transfer-encoding", b"").lower():
            self.chunks(reader, pending)
        elif b"content-length" in values:
            self.copy(reader, pending, int(values[b"content-length"]))
        else:  # the body ends when the upstream closes
            while reader.buf or reader.fill():
                pending += reader.take(len(reader.buf))
            keep = False
        client.sendall(pending)
        return keep

    def copy(self, reader: _Reader, pending: bytearray, length: int) -> None:
        while length > 0:
            if not reader.buf and not reader.fill():
                raise _Hangup
            piece = reader.take(min(length, len(reader.buf)))
            pending += piece
            length -= len(piece)

    def chunks(self, reader: _Reader, pending: bytearray) -> None:
        while True:
            end = reader.until(b"\r\n")
            if end is None:
                raise _Hangup
            size = int(bytes(reader.buf[: end - 2]).split(b";", 1)[0].strip(), 16)
            if size == 0:
                last = reader.until(b"\r\n\r\n", end - 2)
                if last is None:
                    raise _Hangup
                pending += reader.take(last)
                return
            pending += reader.take(end)
            self.copy(reader, pending, size + 2)

    def answer(self, client: socket.socket, status: int, payload: dict[str, Any], failure: str = "") -> None:
        body = json.dumps(payload).encode()
        extra = f"x-aries-upstream-failure: {failure}\r\n" if failure else ""
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Refused'}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n"
        )
        client.sendall(head.encode() + body)


def _not_dumpable() -> None:
    """Close /proc/<pid>/environ and mem, and ptrace, to the user's other processes (Linux's prctl)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def _watch(fd: int, folder: str) -> None:
    """Exit when the kernel does: its end of the watch pipe closes (EOF here)."""
    while os.read(fd, 1):
        pass
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def _main(listen_fd: int, watch_fd: int, folder: str) -> None:
    _not_dumpable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    setup = json.loads(sys.stdin.buffer.read())
    broker = _Broker(setup["secret"], setup["keys"], setup["launch_urls"])
    del setup
    threading.Thread(target=_watch, args=(watch_fd, folder), daemon=True).start()
    broker.serve(socket.socket(fileno=listen_fd))


if __name__ == "__main__":
    _main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
