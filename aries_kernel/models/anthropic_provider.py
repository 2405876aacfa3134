"""The Anthropic Messages API (anthropic SDK): our messages to content blocks and back, streamed or not."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterator
from typing import Any

import anthropic
import httpx2  # the SDK's own httpx: it refuses another's transport

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
    StreamUsage,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = ["AnthropicProvider", "to_anthropic_messages"]

_STOP_REASONS: dict[str | None, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}


class AnthropicProvider(Provider):
    """Claude through ``client.messages.create``; tool calls are ``tool_use`` / ``tool_result`` blocks."""

    api_error = anthropic.APIError
    timeout_error = anthropic.APITimeoutError
    connection_error = anthropic.APIConnectionError

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        # Retries are the router's (max_retries=0), so their behaviour is ours and testable.
        self.client = anthropic.Anthropic(
            **sdk_connection(endpoint, anthropic.DefaultHttpxClient, httpx2.HTTPTransport, "x-api-key"),
            timeout=sdk_timeout(endpoint.timeout, anthropic.Timeout),
            max_retries=0,
        )
        self.release_on_drop(self.client.close)

    counts_tokens = True

    def count_tokens(self, request: ModelRequest) -> int:
        params = self.params(request)
        params.pop("max_tokens")
        params.pop("extra_body", None)
        return int(self.client.messages.count_tokens(**params).input_tokens)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": self.endpoint.model,
            "max_tokens": request.max_tokens,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.temperature is not None:
            params["extra_body"] = {"temperature": request.temperature}
        return params

    def execute(self, request: ModelRequest, *, stream: bool) -> Generator[ProviderEvent, None, None]:
        params = self.params(request)
        if not stream:
            yield _result(self.client.messages.create(**params))
            return
        with self.client.messages.create(**params, stream=True) as events:
            yield from _read_stream(events, self.endpoint.model)


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Anthropic turns: tool results become ``tool_result`` blocks in a user turn, and
    consecutive turns of one role are merged, since the API wants user and assistant to alternate."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                    "is_error": message.is_error,
                }
            )
        elif message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )


def _result(response: Any) -> ProviderResult:
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, dict(block.input or {})))
    return ProviderResult(
        Message("assistant", "".join(text), calls),
        _STOP_REASONS.get(response.stop_reason, "other"),
        _usage(response.usage),
        response.model,
    )


def _read_stream(events: Any, model: str) -> Iterator[ProviderEvent]:
    text: list[str] = []
    tools: dict[int, tuple[str, str, list[str]]] = {}  # block index -> (id, name, argument fragments)
    usage = Usage()
    stop: str | None = None
    for event in events:
        kind = event.type
        if kind == "message_start":
            usage = _usage(event.message.usage)
            model = event.message.model or model
            yield StreamUsage(dataclasses.replace(usage))  # the input is billed even if the answer is stopped
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                tools[event.index] = (block.id, block.name, [])
                yield StreamToolCall(block.id, block.name)
            elif block.type == "text" and block.text:
                text.append(block.text)
                yield StreamText(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                text.append(delta.text)
                yield StreamText(delta.text)
            elif delta.type == "input_json_delta" and event.index in tools:
                call_id, _, fragments = tools[event.index]
                fragments.append(delta.partial_json)
                yield ToolCallDelta(call_id, delta.partial_json)
        elif kind == "message_delta":
            stop = event.delta.stop_reason or stop
            usage.output_tokens = event.usage.output_tokens or usage.output_tokens
            if event.usage.input_tokens:
                usage.input_tokens = event.usage.input_tokens
    calls = [ToolCall(i, name, decode_arguments("".join(parts))) for i, name, parts in tools.values()]
    yield ProviderResult(
        Message("assistant", "".join(text), calls), _STOP_REASONS.get(stop, "other"), usage, model
    )
