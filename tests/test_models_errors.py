"""Retries and errors: 429 with retry-after, 5xx, timeouts, refused connections, 401, 404, missing keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aries_kernel.models.errors import (
    AuthenticationError,
    ConfigurationError,
    MissingKeyError,
    ModelNotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from aries_kernel.models.router import ModelRouter
from aries_kernel.models.types import Completion, Message, ModelRequest, StreamText
from tests.loopback import Reply, ScriptedModelServer
from tests.net_support import free_port

KEY_VARIABLE = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
HELLO = ModelRequest([Message("user", "hello")])


def test_429_waits_for_retry_after_then_succeeds(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(Reply(status=429, error="slow down", headers={"retry-after": "1"}), Reply(text="ok"))
    assert router.client("primary").complete(HELLO).message.content == "ok"
    first, second = server.requests
    assert second.received - first.received >= 0.9  # the server's retry-after, not the 10 ms test backoff


def test_retry_after_longer_than_allowed_is_reported(
    router: ModelRouter, server: ScriptedModelServer
) -> None:
    server.script(Reply(status=429, error="quota", headers={"retry-after": "3600"}))
    with pytest.raises(RateLimitError, match="HTTP 429.*3600s") as caught:
        router.client("primary").complete(HELLO)
    assert caught.value.status == 429 and len(server.requests) == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_503_twice_then_success(router: ModelRouter, server: ScriptedModelServer, streaming: bool) -> None:
    server.script(Reply(status=503, error="busy"), Reply(status=503, error="busy"), Reply(text="finally"))
    client = router.client("primary")
    if streaming:
        completion = list(client.stream(HELLO))[-1]
        assert isinstance(completion, Completion)
    else:
        completion = client.complete(HELLO)
    assert completion.message.content == "finally"
    assert len(server.requests) == 3


def test_persistent_5xx_is_reported_with_status(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(*[Reply(status=500, error="kaput")] * 4)
    with pytest.raises(ProviderError, match="HTTP 500 after 4 attempts: kaput") as caught:
        router.client("primary").complete(HELLO)
    assert caught.value.status == 500 and len(server.requests) == 4


def test_400_is_not_retried(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(Reply(status=400, error="messages: bad"))
    with pytest.raises(ProviderError, match="HTTP 400: messages: bad"):
        router.client("primary").complete(HELLO)
    assert len(server.requests) == 1


def test_timeout_is_retried(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], wire_spec: str
) -> None:
    models = make_router(timeout=0.5)
    models.set_slot("primary", wire_spec)
    server.script(Reply(text="late", delay=3), Reply(text="in time"))
    assert models.client("primary").complete(HELLO).message.content == "in time"
    assert len(server.requests) == 2


def test_timeouts_are_reported_after_the_retries(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], wire_spec: str
) -> None:
    models = make_router(timeout=0.3, max_retries=1)
    models.set_slot("primary", wire_spec)
    server.script(Reply(text="late", delay=2), Reply(text="late", delay=2))
    with pytest.raises(ProviderTimeoutError, match=r"within 0.3s after 2 attempts.*c.AriesModels.timeout"):
        models.client("primary").complete(HELLO)


def test_refused_connection_is_retried_then_reported(
    monkeypatch: pytest.MonkeyPatch, make_router: Callable[..., ModelRouter]
) -> None:
    port = free_port()  # nothing listens on it
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    models = make_router(max_retries=2)
    models.set_slot("primary", "gpt4o", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderConnectionError, match=f"127.0.0.1:{port}.*after 3 attempts"):
        models.client("primary").complete(HELLO)


def test_401_names_the_key_variable(router: ModelRouter, server: ScriptedModelServer, wire: str) -> None:
    server.script(Reply(status=401, error="invalid x-api-key"))
    with pytest.raises(AuthenticationError, match=f"rejected the API key.*{KEY_VARIABLE[wire]}") as caught:
        router.client("primary").complete(HELLO)
    assert caught.value.status == 401
    assert len(server.requests) == 1  # a bad key is not retried


def test_unknown_model_at_the_provider_lists_shortnames(
    router: ModelRouter, server: ScriptedModelServer
) -> None:
    server.script(Reply(status=404, error="model: claude-nope"))
    with pytest.raises(ModelNotFoundError, match="HTTP 404.*shortnames: opus, sonnet, haiku"):
        router.client("primary").complete(HELLO)
    assert len(server.requests) == 1


@pytest.mark.parametrize("spec", ["sonet", "acme:model-x", "anthropic:"])
def test_unknown_shortname_or_provider_lists_the_choices(spec: str) -> None:
    models = ModelRouter()
    with pytest.raises(ModelNotFoundError, match="sonnet, haiku, gemini") as caught:
        models.set_slot("primary", spec)
    assert "ollama" in str(caught.value)
    assert models.client("primary").shortname == "sonnet"  # the slot kept its model


def test_missing_key_is_reported_at_call_time(
    server: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
    make_router: Callable[..., ModelRouter],
    wire: str,
    wire_spec: str,
) -> None:
    monkeypatch.delenv(KEY_VARIABLE[wire])
    models = make_router()  # building the router and the client needs no key
    client = models.set_slot("primary", wire_spec)
    with pytest.raises(MissingKeyError) as caught:
        client.complete(HELLO)
    message = str(caught.value)
    assert KEY_VARIABLE[wire] in message and "Ollama" in message and "llama.cpp" in message
    assert "never writes keys to disk" in message
    assert server.requests == []
    monkeypatch.setenv(KEY_VARIABLE[wire], "test-key")  # set in a cell after the error: the next call works
    assert client.complete(HELLO).message.content == "echo: hello"


def test_local_servers_need_no_key(
    server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, make_router: Callable[..., ModelRouter]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    server.present("Ollama", "qwen3")
    models = make_router()
    client = models.set_slot("bulk", "ollama:qwen3", base_url=server.openai_url)
    assert client.key_status() == "not needed"
    completion = client.complete(HELLO)
    assert completion.message.content == "echo: hello"
    assert completion.usage.cost_usd == 0.0 and client.priced
    assert server.requests[0].body["model"] == "qwen3"


def test_unpriced_model_costs_zero_and_says_so(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], monkeypatch: pytest.MonkeyPatch
) -> None:
    models = make_router()
    client = models.set_slot("primary", "openai:gpt-9-imaginary")
    assert client.complete(HELLO).usage.cost_usd == 0.0  # no USD limit: an unknown price counts as 0
    assert not client.priced
    monkeypatch.delenv("OPENAI_BASE_URL")  # the public API: no price known for this model either
    assert not client.priced and client.info.cost(1000, 1000) == 0.0
    assert models.slots().loc["primary", "price"] == "unknown: counted as 0, refused under a USD limit"


def test_custom_endpoint_without_base_url_says_how_to_set_one() -> None:
    client = ModelRouter().set_slot("cheap", "custom:my-model")
    with pytest.raises(ConfigurationError, match=r"c.AriesModels.base_urls.*--base-url"):
        client.complete(HELLO)


def test_error_event_before_any_content_is_retried(router: ModelRouter, server: ScriptedModelServer) -> None:
    server.script(
        Reply(text="lost", stream_error=529, error="Overloaded", error_after=1), Reply(text="second")
    )
    completion = list(router.client("primary").stream(HELLO))[-1]
    assert isinstance(completion, Completion) and completion.message.content == "second"
    assert len(server.requests) == 2


def test_error_event_after_content_is_reported_not_retried(
    router: ModelRouter, server: ScriptedModelServer
) -> None:
    server.script(
        Reply(text="partial answer", chunk=2, stream_error=500, error="backend died", error_after=4)
    )
    seen: list[object] = []
    with pytest.raises(ProviderError, match="HTTP 500: backend died") as caught:
        seen.extend(router.client("primary").stream(HELLO))
    assert caught.value.status == 500
    assert any(isinstance(event, StreamText) for event in seen)  # text already shown cannot be taken back
    assert len(server.requests) == 1
