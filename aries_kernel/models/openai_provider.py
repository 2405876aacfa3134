"""OpenAI Chat Completions (openai SDK), also used for every OpenAI-compatible server: Google, DeepSeek,
Moonshot, Groq, OpenRouter, Ollama, llama.cpp and custom URLs."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from typing import Any

import httpx2  # the SDK's own httpx: it refuses another's transport
import openai

from aries_kernel.models.provider import (
    Endpoint,
    Provider,
    ProviderEvent,
    ProviderResult,
    decode_arguments,
    sdk_connection,
    sdk_timeout,
)
from aries_kernel.models.types import (
    Message,
    ModelRequest,
    StopReason,
    StreamText,
    StreamToolCall,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = ["OpenAIProvider", "to_openai_messages"]

_STOP_REASONS: dict[str | None, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider(Provider):
    """Chat Completions; tool calls are ``tool_calls`` on assistant messages and ``tool`` role messages."""

    api_error = openai.APIError
    timeout_error = openai.APITimeoutError
    connection_error = openai.APIConnectionError

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        # Local servers need no key, but the SDK insists on one; retries are the router's (max_retries=0).
        connection = sdk_connection(endpoint, openai.DefaultHttpxClient, httpx2.HTTPTransport, "bearer")
        self.client = openai.OpenAI(
            **{**connection, "api_key": connection["api_key"] or "not-needed"},
            timeout=sdk_timeout(endpoint.timeout, openai.Timeout),
            max_retries=0,
        )
        self.release_on_drop(self.client.close)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        messages = to_openai_messages(request.messages)
        if request.system:
            messages.insert(0, {"role": "system", "content": request.system})
        # OpenAI's own newer models only take max_completion_tokens; compatible servers know max_tokens.
        limit = "max_completion_tokens" if self.endpoint.provider == "openai" else "max_tokens"
        params: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            limit: request.max_tokens,
        }
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

    def execute(self, request: ModelRequest, *, stream: bool) -> Generator[ProviderEvent, None, None]:
        params = self.params(request)
        if not stream:
            yield _result(self.client.chat.completions.create(**params, stream=False))
            return
        chunks = self.client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}
        )
        with chunks:
            yield from _read_stream(chunks, self.endpoint.model)


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Chat Completions messages (without the system message)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            # Chat Completions has no error flag on tool results; say it in the content instead.
            content = f"Error: {message.content}" if message.is_error else message.content
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": content})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in message.tool_calls
                ]
            out.append(entry)
        else:
            out.append({"role": "user", "content": message.content})
    return out


def _usage(usage: Any, timings: Any = None) -> Usage:
    """Usage from the answer; prompt tokens served from the server's prompt cache are counted apart
    (``prompt_tokens_details.cached_tokens``, or llama.cpp's ``timings.cache_n`` where that is all it says)."""
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    if not cached and isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = min(timings["cache_n"], usage.prompt_tokens or 0)
    return Usage(
        input_tokens=(usage.prompt_tokens or 0) - cached,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )


def _result(response: Any) -> ProviderResult:
    choice = response.choices[0]
    calls = [
        ToolCall(c.id, c.function.name, decode_arguments(c.function.arguments or ""))
        for c in (choice.message.tool_calls or [])
    ]
    return ProviderResult(
        Message("assistant", choice.message.content or "", calls),
        _STOP_REASONS.get(choice.finish_reason, "other"),
        _usage(response.usage, (response.model_extra or {}).get("timings")),
        response.model or "",
    )


def _read_stream(chunks: Any, model: str) -> Iterator[ProviderEvent]:
    text: list[str] = []
    tools: dict[int, tuple[str, str, list[str]]] = {}  # tool-call index -> (id, name, argument fragments)
    usage = Usage()
    finish: str | None = None
    for chunk in chunks:
        model = chunk.model or model
        if chunk.usage is not None:
            usage = _usage(chunk.usage, (chunk.model_extra or {}).get("timings"))
        for choice in chunk.choices or []:
            finish = choice.finish_reason or finish
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                yield StreamText(delta.content)
            for call in delta.tool_calls or []:
                if call.index not in tools:
                    call_id = call.id or f"call_{call.index}"
                    name = call.function.name if call.function and call.function.name else ""
                    tools[call.index] = (call_id, name, [])
                    yield StreamToolCall(call_id, name)
                fragment = call.function.arguments if call.function else None
                if fragment:
                    call_id, _, fragments = tools[call.index]
                    fragments.append(fragment)
                    yield ToolCallDelta(call_id, fragment)
    calls = [ToolCall(i, name, decode_arguments("".join(parts))) for i, name, parts in tools.values()]
    yield ProviderResult(
        Message("assistant", "".join(text), calls), _STOP_REASONS.get(finish, "other"), usage, model
    )
