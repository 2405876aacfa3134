"""Both wire formats through the real SDKs against the loopback server: text, tool calls, usage, streaming."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import pytest

from aries_kernel.models.router import ModelRouter
from aries_kernel.models.types import (
    Completion,
    Message,
    ModelRequest,
    StreamText,
    StreamToolCall,
    StreamUsage,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
)
from tests.loopback import Reply, ScriptedModelServer
from tests.models_support import fast_config

REPL = ToolSchema(
    "Repl", "Run Python in the kernel.", {"type": "object", "properties": {"code": {"type": "string"}}}
)


def request(text: str = "hello", **kwargs: object) -> ModelRequest:
    return ModelRequest([Message("user", text)], system="Be brief.", tools=[REPL], **kwargs)  # type: ignore[arg-type]


def test_text_round_trip_without_streaming(
    router: ModelRouter, server: ScriptedModelServer, wire: str
) -> None:
    server.script(Reply(text="Paris.", input_tokens=120, output_tokens=3))
    completion = router.client("primary").complete(request("Capital of France?"))
    assert completion.message == Message("assistant", "Paris.")
    assert completion.stop_reason == "end_turn"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (120, 3)
    assert completion.slot == "primary" and completion.seconds > 0
    body = server.requests[0].body
    assert not body.get("stream")
    if wire == "anthropic":
        assert server.requests[0].path == "/v1/messages"
        assert body["system"] == "Be brief."
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}
        ]
        assert body["tools"][0]["input_schema"] == REPL.parameters
    else:
        assert server.requests[0].path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert body["tools"][0]["function"]["parameters"] == REPL.parameters


def test_cost_comes_from_the_configured_prices(
    make_router: Callable[..., ModelRouter], server: ScriptedModelServer, wire_spec: str
) -> None:
    # Prices set in the settings win over the shortname's list price (and over a local server's $0:
    # tests/test_local_models.py).
    router = make_router(prices={wire_spec: [3.0, 15.0]})
    router.set_slot("primary", wire_spec)
    server.script(Reply(text="ok", input_tokens=1_000_000, output_tokens=1_000_000))
    client = router.client("primary")
    completion = client.complete(request())
    assert completion.usage.cost_usd == pytest.approx(3.0 + 15.0)
    assert router.usage().loc["primary", "calls"] == 1
    router.set_slot("bulk", "flash")  # changing another slot keeps this one's client and totals
    assert router.client("primary") is client and router.usage().loc["primary", "calls"] == 1


def test_streamed_text_and_tool_call_in_pieces(router: ModelRouter, server: ScriptedModelServer) -> None:
    arguments = {"code": "sum(range(10))\nprint('done')"}
    server.script(Reply(text="Running it.", tool_calls=[("Repl", arguments)], chunk=4, output_tokens=21))
    events = list(router.client("primary").stream(request()))
    texts = [e.text for e in events if isinstance(e, StreamText)]
    fragments = [e.arguments_fragment for e in events if isinstance(e, ToolCallDelta)]
    started = [e for e in events if isinstance(e, StreamToolCall)]
    assert len(texts) > 1 and "".join(texts) == "Running it."
    assert len(fragments) > 3  # the arguments really arrived in pieces
    assert len(started) == 1 and started[0].name == "Repl"
    assert {e.id for e in events if isinstance(e, ToolCallDelta)} == {started[0].id}
    completion = events[-1]
    assert isinstance(completion, Completion)
    assert not any(isinstance(e, Completion) for e in events[:-1])
    assert completion.message.tool_calls == [ToolCall(started[0].id, "Repl", arguments)]
    assert completion.message.content == "Running it."
    assert completion.stop_reason == "tool_use"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 21)
    assert server.requests[0].stream


def test_tool_call_without_streaming(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(Reply(tool_calls=[("Repl", {"code": "1+1"}), ("Repl", {"code": "2+2"})]))
    completion = router.client("primary").complete(request())
    assert [c.arguments for c in completion.message.tool_calls] == [{"code": "1+1"}, {"code": "2+2"}]
    assert completion.stop_reason == "tool_use"
    assert len({c.id for c in completion.message.tool_calls}) == 2


def test_max_tokens_stop_reason(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(Reply(text="trunc", stop_reason="max_tokens"))
    events = list(router.client("primary").stream(request(max_tokens=5)))
    assert isinstance(events[-1], Completion) and events[-1].stop_reason == "max_tokens"


def test_tool_results_go_back_in_the_providers_format(
    router: ModelRouter, server: ScriptedModelServer, wire: str
) -> None:
    history = [
        Message("user", "compute"),
        Message("assistant", "Let me.", tool_calls=[ToolCall("t1", "Repl", {"code": "1/0"})]),
        Message("tool", "ZeroDivisionError", tool_call_id="t1", is_error=True),
    ]
    server.script(Reply(text="It fails."))
    router.client("primary").complete(ModelRequest(history))
    messages = server.requests[0].body["messages"]
    if wire == "anthropic":
        assert messages[1] == {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me."},
                {"type": "tool_use", "id": "t1", "name": "Repl", "input": {"code": "1/0"}},
            ],
        }
        assert messages[2] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ZeroDivisionError", "is_error": True}
            ],
        }
    else:
        assert messages[1]["tool_calls"] == [
            {"id": "t1", "type": "function", "function": {"name": "Repl", "arguments": '{"code": "1/0"}'}}
        ]
        assert messages[2] == {"role": "tool", "tool_call_id": "t1", "content": "Error: ZeroDivisionError"}


def test_closing_a_stream_early_closes_the_connection(
    router: ModelRouter, server: ScriptedModelServer
) -> None:
    # Streamed in full this reply would take 100 s; the server's handler ends only when the client hangs up.
    server.script(Reply(text="x" * 2000, chunk=1, pause=0.05), Reply(text="next"))
    stream = router.client("primary").stream(request())
    assert next(event for event in stream if not isinstance(event, StreamUsage)) == StreamText("x")
    stream.close()  # what a KeyboardInterrupt in the consumer's loop amounts to
    deadline = time.monotonic() + 20
    while server.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.in_flight == 0
    assert router.client("primary").complete(request()).message.content == "next"


def test_a_router_dropped_without_close_closes_its_connections(server: ScriptedModelServer, wire_spec: str) -> None:
    # A router a notebook user replaces, or one left in a reference cycle, is never closed. Its SDK client must
    # close its keep-alive sockets then, not leave them to their own finalizers (an "unclosed socket" warning).
    router = ModelRouter(config=fast_config())
    router.set_slot("primary", wire_spec)
    server.script(Reply(text="kept alive"))
    assert router.client("primary").complete(request()).message.content == "kept alive"
    sdk = router.client("primary")._client().client  # held here, so only the provider's release can close it
    assert not sdk.is_closed()
    cycle: list[object] = [router]
    cycle.append(cycle)
    del router, cycle
    gc.collect()
    assert sdk.is_closed()


# Where a streamed reply's bytes are read: httpcore's sync backend (the SDKs may ship it as httpcore2).
_READ_FILE = os.path.join("_backends", "sync.py")


def test_keyboard_interrupt_while_streaming_closes_the_stream(
    router: ModelRouter, server: ScriptedModelServer
) -> None:

    # Some text, then the server holds the stream: the client is then surely blocked in its socket read.
    server.script(Reply(text="x" * 2000, chunk=1, hold_after=20, hold=100), Reply(text="next"))
    received: list[object] = []
    main = threading.main_thread().ident
    assert main is not None

    def interrupt_while_reading() -> None:
        """A real Ctrl-C / kernel interrupt, sent once text has come and the main thread waits on the socket.

        A signal at a fixed delay, or while text still flows, could land anywhere (in an import, in a finalizer,
        which swallows it, or between opening a connection and keeping it, which leaks the socket); with the
        server holding the stream, it lands in the read, where a user's does.
        """
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main)
            code = frame.f_code if frame is not None else None
            if (
                received
                and code is not None
                and code.co_name == "read"
                and code.co_filename.endswith(_READ_FILE)
            ):
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.001)

    interrupter = threading.Thread(target=interrupt_while_reading)
    # Python's own Ctrl-C handler, whatever an earlier test in this process left installed (a fresh clone's
    # first full run saw the signal retried away, as PEP 475 does when a handler does not raise).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupter.start()
            received.extend(router.client("primary").stream(request()))  # keeps what came before it
    finally:
        interrupter.join()
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 20
    while server.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.in_flight == 0  # the server saw the client hang up long before its 100 s stream ended
    assert 0 < len(received) < 2000
    assert router.client("primary").complete(request()).message.content == "next"


def test_estimate_is_calibrated_by_reported_counts(router: ModelRouter, server: ScriptedModelServer) -> None:
    client = router.client("primary")
    long_request = request("word " * 400)
    before = client.estimate_tokens(long_request)
    assert 400 <= before <= 800
    server.script(Reply(text="ok", input_tokens=before * 2))
    client.complete(long_request)
    after = client.estimate_tokens(long_request)
    assert before < after < before * 2


def test_temperature_and_token_limit_parameters(
    router: ModelRouter, server: ScriptedModelServer, wire: str
) -> None:
    router.client("primary").complete(request(max_tokens=77, temperature=0.2))
    body = server.requests[0].body
    assert body["temperature"] == 0.2
    limit = {"anthropic": "max_tokens", "openai": "max_completion_tokens"}[
        wire
    ]  # what OpenAI's newer models take
    assert body[limit] == 77


def test_openai_compatible_servers_get_max_tokens(
    make_router: Callable[..., ModelRouter], server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "groq-test-key")
    client = make_router().set_slot("primary", "llama", base_url=server.openai_url)
    assert client.complete(request(max_tokens=50)).message.content == "echo: hello"
    body, headers = server.requests[0].body, server.requests[0].headers
    assert body["model"] == "llama-3.3-70b-versatile" and body["max_tokens"] == 50
    assert headers["authorization"] == "Bearer groq-test-key"  # the provider's own key variable


def test_token_count_from_the_provider_where_it_has_one(
    router: ModelRouter, server: ScriptedModelServer, wire: str
) -> None:
    server.token_counter = lambda body: 1234
    client = router.client("primary")
    question = request("count me")
    before = client.estimate_tokens(question)
    counted = client.count_tokens(question)
    if wire == "anthropic":
        assert counted == 1234
        assert server.requests[0].path == "/v1/messages/count_tokens"
        assert server.requests[0].body["messages"][0]["content"][0]["text"] == "count me"
        assert client.estimate_tokens(question) > before  # later estimates lean towards the provider's count
    else:  # Chat Completions has no count endpoint: the estimate, and nothing sent
        assert counted == before
        assert server.requests == []
