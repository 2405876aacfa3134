"""A scripted model server on 127.0.0.1 that speaks the Anthropic Messages API and OpenAI Chat Completions.

The real SDKs talk to it through their base-URL settings, so tests exercise the whole wire path (HTTP, SSE
streaming, error statuses) without the internet. Replies are format-neutral :class:`Reply` objects, rendered
in whichever format the request came in::

    with ScriptedModelServer() as server:
        server.script(Reply(text="hi"), Reply(tool_calls=[("Repl", {"code": "1+1"})]))
        ...  # point a client at server.anthropic_url or server.openai_url
        server.requests[0].body, server.max_in_flight

With the queue empty, the server answers through ``server.responder(body)``; the default echoes the last user
message (``"echo: <text>"``), which keeps answers tied to questions in concurrency tests.

It can also play a local server's metadata: ``server.props`` (llama.cpp's ``GET /props``),
``server.models`` (``GET /v1/models`` entries, e.g. with llama.cpp's ``meta.n_ctx`` or vLLM's ``max_model_len``),
``server.ollama_show`` (Ollama's ``POST /api/show``) and ``server.ollama_version`` (Ollama's ``GET
/api/version``); each answers 404 while None. By default it says nothing about what it is, like a cloud API;
``server.present("llama.cpp")`` (or ``"vLLM"``, ``"Ollama"``) makes it answer as that local model server does,
``server.present("LiteLLM")`` as a proxy does (its models listed as ``owned_by: "openai"``, no local marker). With
``server.context_size`` set, a chat request whose ``server.token_counter`` size is over it is refused as
llama.cpp refuses it (HTTP 400, ``request (N tokens) exceeds the available context size (M tokens)``).

Pointing a kernel at it: start the kernel with ``ANTHROPIC_BASE_URL=server.anthropic_url`` and
``ANTHROPIC_API_KEY=test-key`` in its environment; the default slots (sonnet, opus, haiku) then reach this
server. For the OpenAI format, set ``OPENAI_BASE_URL=server.openai_url`` and ``OPENAI_API_KEY=test-key`` and
use the slot spec ``gpt4o`` or ``openai:<any model>`` (``%aries model bulk gpt4o``).
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

from aries_kernel.models import server as server_facts

__all__ = ["RecordedRequest", "Reply", "ScriptedModelServer", "model_server"]

_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Reply:
    """One scripted answer. ``status`` >= 400 sends an error in the provider's format instead."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stop_reason: str | None = None  # neutral names: end_turn, tool_use, max_tokens; default from tool_calls
    input_tokens: int = 11
    output_tokens: int = 7
    status: int = 200
    error: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the answer starts
    chunk: int = 3  # characters per text / argument delta when streaming
    pause: float = 0.0  # seconds between streamed events
    hold_after: int | None = None  # after this many streamed events, wait ``hold`` seconds before the rest
    hold: float = 0.0
    stream_error: int | None = None  # status of an error event sent inside a stream, after error_after events
    error_after: int = 1
    model: str | None = None  # default: the model the request named
    cut_after: int | None = None  # after this many streamed events, close the connection mid-stream (a crash)
    cached_tokens: int = 0  # prompt tokens read from the prompt cache (OpenAI details, Anthropic)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]
    received: float  # time.monotonic() on arrival

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


def echo_responder(body: dict[str, Any]) -> Reply:
    """Answer with the text of the last user message."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message["content"]
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            return Reply(text=f"echo: {content}")
    return Reply(text="echo: ")


class ScriptedModelServer:
    """The server; a context manager (``with ScriptedModelServer() as s``) or the ``model_server`` fixture."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.responder: Callable[[dict[str, Any]], Reply] = echo_responder
        # Anthropic's /v1/messages/count_tokens answers with this; the default is a rough size of the body.
        self.token_counter: Callable[[dict[str, Any]], int] = lambda body: len(json.dumps(body)) // 4
        self.requests: list[RecordedRequest] = []
        self.props: dict[str, Any] | None = None
        self.models: list[dict[str, Any]] | None = None
        self.ollama_show: dict[str, Any] | None = None
        self.ollama_version: dict[str, Any] | None = None
        self.context_size: int | None = None
        self.metadata_requests: list[str] = []  # paths of the metadata GETs and /api/show POSTs
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def anthropic_url(self) -> str:
        """Base URL for the anthropic SDK / ANTHROPIC_BASE_URL (the SDK adds /v1/messages)."""
        return self.url

    @property
    def openai_url(self) -> str:
        """Base URL for the openai SDK / OPENAI_BASE_URL (the SDK adds /chat/completions)."""
        return self.url + "/v1"

    def kernel_env(self, **more: str) -> dict[str, str]:
        """Environment for a kernel whose anthropic slots call this server with a test key, plus ``more``."""
        return {"ANTHROPIC_BASE_URL": self.anthropic_url, "ANTHROPIC_API_KEY": "test-key", **more}

    def present(self, kind: str, model: str = "SmolLM2-135M-Instruct-Q8_0.gguf") -> Self:
        """Answer the metadata questions as ``kind`` does, serving ``model``: "llama.cpp" (``/props`` and
        ``/v1/models`` with ``owned_by: "llamacpp"``), "vLLM" (``owned_by: "vllm"``, ``max_model_len``),
        "Ollama" (``/api/version``, ``owned_by: "library"``) or "LiteLLM" (a proxy: ``owned_by: "openai"``)."""
        entry: dict[str, Any] = {"id": model, "object": "model", "created": 0}
        if kind == "llama.cpp":
            self.props = {
                "default_generation_settings": {"n_ctx": 8192},
                "total_slots": 1,
                "model_path": f"/models/{model}",
                "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
            }
            self.models = [{**entry, "owned_by": "llamacpp", "meta": {"n_ctx_train": 8192}}]
        elif kind == "vLLM":
            self.models = [{**entry, "owned_by": "vllm", "max_model_len": 8192}]
        elif kind == "Ollama":
            self.ollama_version = {"version": "0.6.2"}
            self.models = [{**entry, "owned_by": "library"}]
        elif kind == "LiteLLM":
            self.models = [{**entry, "owned_by": "openai"}]
        else:
            raise ValueError(f"unknown server kind {kind!r}: llama.cpp, vLLM, Ollama or LiteLLM")
        return self

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one."""
        with self._lock:
            self.replies.extend(replies)

    def reset_counts(self) -> None:
        """Forget recorded requests and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def start(self) -> Self:
        # The kernel caches what a server at an address is, process-wide; the OS may hand this server the port
        # of one an earlier test closed, which was another kind of server (a LiteLLM proxy cached as
        # "not local" made a llama.cpp test see list prices).
        for base_url in (self.anthropic_url, self.openai_url):
            server_facts.forget(base_url)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="model-loopback", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return self.responder(body)

    def _enter(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (an aborted stream, a closed keep-alive connection) are normal here, not
    errors.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as separate writes; don't wait for ACKs

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            server.metadata_requests.append(path)
            if path == "/props" and server.props is not None:
                self._send_json(200, server.props)
            elif path == "/v1/models" and server.models is not None:
                self._send_json(200, {"object": "list", "data": server.models})
            elif path == "/api/version" and server.ollama_version is not None:
                self._send_json(200, server.ollama_version)
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.rstrip("/")
            if path == "/api/show":
                server.metadata_requests.append(path)
                if server.ollama_show is None:
                    self._send_json(404, {"error": f"model '{body.get('model')}' not found"})
                else:
                    self._send_json(200, server.ollama_show)
                return
            wire = "anthropic" if path.endswith("/v1/messages") else "openai"
            recorded = RecordedRequest(
                self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()
            )
            if path.endswith("/v1/messages/count_tokens"):
                server.requests.append(recorded)
                self._send_json(200, {"input_tokens": server.token_counter(body)})
                return
            if not path.endswith(("/v1/messages", "/chat/completions")):
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            server._enter(recorded)
            try:
                size = server.token_counter(body)
                if server.context_size is not None and size > server.context_size:
                    message = (
                        f"request ({size} tokens) exceeds the available context size "
                        f"({server.context_size} tokens), try increasing it"
                    )
                    self._send_error(wire, Reply(status=400, error=message))
                    return
                reply = server._next_reply(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status >= 400:
                    self._send_error(wire, reply)
                elif body.get("stream"):
                    events = _events(wire, reply, body)
                    if reply.stream_error:
                        events = _failing(events, wire, reply)
                    self._send_stream(events, reply)
                else:
                    self._send_json(200, _complete(wire, reply, body), reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer
            finally:
                server._leave()

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_error(self, wire: str, reply: Reply) -> None:
            if wire == "anthropic":
                kind = _ANTHROPIC_ERRORS.get(reply.status, "api_error")
                payload: Any = {"type": "error", "error": {"type": kind, "message": reply.error}}
            else:
                payload = {"error": {"message": reply.error, "type": "scripted", "code": reply.status}}
            self._send_json(reply.status, payload, reply.headers)

        def _send_stream(self, events: Iterator[tuple[str | None, Any]], reply: Reply) -> None:
            # Chunked transfer encoding, as real providers send SSE, so the connection can be kept alive.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for sent, (name, data) in enumerate(events, 1):
                head = f"event: {name}\n" if name else ""
                payload = data if isinstance(data, str) else json.dumps(data)
                event = f"{head}data: {payload}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                if reply.pause:
                    time.sleep(reply.pause)
                if sent == reply.cut_after:  # the server dies mid-answer: no closing chunk
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if sent == reply.hold_after and _hangs_up_within(self.connection, reply.hold):
                    return  # the client closed the stream while it was held
            self.wfile.write(b"0\r\n\r\n")

    return Handler


def _hangs_up_within(connection: socket.socket, seconds: float) -> bool:
    """Wait up to ``seconds`` for the client to close ``connection``; whether it did."""
    readable, _, _ = select.select([connection], [], [], seconds)
    return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""


def _failing(
    events: Iterator[tuple[str | None, Any]], wire: str, reply: Reply
) -> Iterator[tuple[str | None, Any]]:
    """The first ``reply.error_after`` events, then an error event in the wire's format."""
    for _, event in zip(range(reply.error_after), events, strict=False):
        yield event
    assert reply.stream_error is not None
    if wire == "anthropic":
        kind = _ANTHROPIC_ERRORS.get(reply.stream_error, "api_error")
        yield "error", {"type": "error", "error": {"type": kind, "message": reply.error}}
    else:
        yield None, {"error": {"message": reply.error, "type": "server_error", "code": reply.stream_error}}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def _stop(reply: Reply, wire: str) -> str:
    neutral = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    if wire == "anthropic":
        return neutral
    return {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}.get(neutral, neutral)


def _complete(wire: str, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    model = reply.model or body.get("model", "scripted")
    if wire == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        return {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": _stop(reply, wire),
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "cache_read_input_tokens": reply.cached_tokens,
            },
        }
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _stop(reply, wire)}],
        "usage": {
            "prompt_tokens": reply.input_tokens + reply.cached_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.cached_tokens + reply.output_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
        },
    }


def _events(wire: str, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str | None, Any]]:
    model = reply.model or body.get("model", "scripted")
    if wire == "anthropic":
        yield (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_scripted",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": reply.input_tokens,
                        "output_tokens": 1,
                        "cache_read_input_tokens": reply.cached_tokens,
                    },
                },
            },
        )
        index = 0
        if reply.text:
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
            for piece in _pieces(reply.text, reply.chunk):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": 0}
            index = 1
        for i, (name, args) in enumerate(reply.tool_calls, start=index):
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_{i - index}",
                        "name": name,
                        "input": {},
                    },
                },
            )
            for piece in _pieces(json.dumps(args), reply.chunk):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop(reply, wire), "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            },
        )
        yield "message_stop", {"type": "message_stop"}
        return

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield None, chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text, reply.chunk):
        yield None, chunk({"content": piece})
    for i, (name, args) in enumerate(reply.tool_calls):
        yield (
            None,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            ),
        )
        for piece in _pieces(json.dumps(args), reply.chunk):
            yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield None, chunk({}, _stop(reply, wire))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield (
            None,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": reply.input_tokens + reply.cached_tokens,
                    "completion_tokens": reply.output_tokens,
                    "total_tokens": reply.input_tokens + reply.cached_tokens + reply.output_tokens,
                    "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
                },
            },
        )
    yield None, "[DONE]"


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A running :class:`ScriptedModelServer`, stopped after the test."""
    with ScriptedModelServer() as server:
        yield server
