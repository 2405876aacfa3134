"""The key broker's process (``python -m aries_kernel.key_broker_server``): it holds the provider keys and adds
them to the kernel's requests.

Started by :func:`aries_kernel.key_broker.start_broker`, which says what it guarantees. It reads the secret and
the keys from its stdin, after making itself non-dumpable; answers only requests with the secret; adds a key only
for a base URL the key is bound to; relays HTTP/1.1 after the request head byte for byte, so streams pass as
they arrive; closes the upstream connection when the kernel hangs up (an interrupt, a timeout) and the kernel's
when the upstream does; ignores SIGINT; exits when its watch pipe reaches EOF (the kernel has exited).
"""

from __future__ import annotations

import hmac
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aries_kernel.key_broker import CONTROL, PROVIDER_KEYS, bound_urls, normal_url

if TYPE_CHECKING:
    import ssl  # imported by httpx2 at the first https upstream: not at start, beside the kernel's own start

__all__: list[str] = []

_AUTH = {"x-api-key": "x-api-key: {}", "bearer": "authorization: Bearer {}"}  # how a wire format sends a key
_DROPPED = {b"host", b"x-api-key", b"authorization", b"proxy-authorization"}
_HEAD_LIMIT = 1 << 20


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
    """Buffered reads from a socket; ``wait`` (if any) runs before each read that may block."""

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
    """A message head's first line split in three, its header values by lower-case name, and its header
    lines (name, line) in order."""
    lines = head[:-4].split(b"\r\n")
    fields = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields.append((name.strip().lower(), line))
    values = {name: line.partition(b":")[2].strip() for name, line in fields}
    return lines[0].split(b" ", 2), values, fields


class _Key:
    """One key and the base URLs it may go to."""

    def __init__(self, value: str, urls: set[str]) -> None:
        self.value = value
        self.urls = urls


class _Broker:
    """The broker process's state: the secret, the keys and the URLs each may go to."""

    def __init__(self, secret: str, keys: dict[str, str], launch_urls: dict[str, str]) -> None:
        self.secret = secret.encode()
        self.launch_urls = launch_urls
        self.keys = {name: _Key(value, bound_urls(name, [], launch_urls)) for name, value in keys.items()}
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
                        self.keys[name].urls |= bound_urls(name, list(urls), self.launch_urls)
            elif what == "handover":
                name = payload["variable"]
                if name not in PROVIDER_KEYS:
                    raise _Refused(400, f"{name} is not a provider key variable")
                urls = bound_urls(name, list(payload["urls"]), self.launch_urls)
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
        base = normal_url(values.get(b"x-aries-upstream", b"").decode())
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
            if getattr(up, "pending", lambda: 0)():  # TLS: bytes already decrypted, which select cannot see
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
