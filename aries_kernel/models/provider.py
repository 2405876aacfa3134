"""The provider contract: what a wire format must do, and how providers are found (entry points).

A provider turns one :class:`ModelRequest` into one SDK call and the SDK's answer into our stream events. It
does not retry, time, price or count calls: the router's :class:`~aries_kernel.models.router.SlotClient` owns
that, so every provider behaves the same. Providers register in the ``aries_kernel.providers`` entry-point
group, the same door a third-party package would use; the built-in two are ``anthropic`` and ``openai``.
"""

from __future__ import annotations

import email.utils
import json
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any, ClassVar

from aries_kernel.key_broker import BrokerRoute
from aries_kernel.models.errors import ConfigurationError
from aries_kernel.models.types import (
    Message,
    ModelRequest,
    StopReason,
    StreamText,
    StreamToolCall,
    StreamUsage,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "Endpoint",
    "Failure",
    "Provider",
    "ProviderEvent",
    "ProviderResult",
    "Timeouts",
    "decode_arguments",
    "load_provider",
    "sdk_connection",
]

ENTRY_POINT_GROUP = "aries_kernel.providers"


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, for the first byte of an answer, and between two bytes of a stream.

    The SDKs' HTTP client has one read timeout for both of the last two: it gets the first-token wait (every
    read, the whole answer of a call that is not streamed, must end within it), and the agent loop holds a
    stream that has begun to the idle wait, which it sees as silence. An error says which wait ran out.
    """

    connect: float
    first_token: float
    idle: float

    def for_sdk(self, timeout_class: Any) -> Any:
        """The SDK's own ``Timeout`` (``timeout_class``: the SDK's httpx flavour) for these waits."""
        return timeout_class(self.first_token, connect=self.connect, pool=self.connect)


def sdk_timeout(value: float | Timeouts, timeout_class: Any) -> Any:
    """What an SDK client takes as ``timeout``: a number of seconds, or its ``Timeout`` class's object."""
    return value.for_sdk(timeout_class) if isinstance(value, Timeouts) else value


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom one slot's requests go."""

    provider: str  # the ProviderInfo name ("openai", "groq", "ollama", ...)
    model: str
    base_url: str
    api_key: str = field(repr=False)  # a repr (a log line, a traceback) must never show the key
    timeout: float | Timeouts
    broker: BrokerRoute | None = field(default=None, repr=False)  # set: the key broker adds the key


def sdk_connection(
    endpoint: Endpoint, http_client_class: Any, transport_class: Any, auth: str
) -> dict[str, Any]:
    """An SDK client's ``base_url`` and ``api_key``; through the key broker (``endpoint.broker``) a placeholder
    key, an ``http_client`` (``http_client_class``: the SDK's httpx client) whose transport (the SDK's
    ``HTTPTransport``) reaches the broker's socket, and the headers that say which key to add (``auth``: how
    the wire sends it, ``x-api-key`` or ``bearer``)."""
    route = endpoint.broker
    if route is None:
        return {"base_url": endpoint.base_url, "api_key": endpoint.api_key}
    connect = endpoint.timeout.connect if isinstance(endpoint.timeout, Timeouts) else endpoint.timeout
    return {
        "base_url": route.sdk_base_url,
        "api_key": "held-by-the-key-broker",
        "http_client": http_client_class(transport=transport_class(uds=route.socket_path)),
        "default_headers": route.headers(auth, connect),
    }


@dataclass
class ProviderResult:
    """The provider's last word on a call; the router adds cost, slot and timing to make a Completion."""

    message: Message
    stop_reason: StopReason
    usage: Usage
    model: str


ProviderEvent = StreamText | StreamToolCall | ToolCallDelta | StreamUsage | ProviderResult


@dataclass(frozen=True)
class Failure:
    """An SDK exception, read: its HTTP status (None when there was no answer) and whether to try again."""

    status: int | None
    message: str
    retry_after: float | None = None
    timed_out: bool = False
    refused: bool = False  # the connection was never made (nothing listens there), as against cut

    @property
    def retryable(self) -> bool:
        """429, 408, 409, 5xx (529 is Anthropic's "overloaded"), and no answer at all."""
        return self.status is None or self.status in (408, 409, 429) or self.status >= 500


class Provider(ABC):
    """One wire format. Subclasses set the SDK's error classes and implement :meth:`execute`."""

    api_error: ClassVar[type[BaseException]]  # the SDK's base of answered errors, incl. ones inside a stream
    timeout_error: ClassVar[type[BaseException]]
    connection_error: ClassVar[type[BaseException]]
    counts_tokens: ClassVar[bool] = False  # whether the API counts a request's tokens without running it

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._release: weakref.finalize[Any, Any] | None = None

    def release_on_drop(self, close: Callable[[], None]) -> None:
        """Have :meth:`close` call ``close`` (the SDK client's), as dropping the provider without a close does.

        A provider left in a reference cycle is collected in no set order: without this, its sockets' own
        finalizers could run before the SDK client's and warn of unclosed sockets (``close`` must not refer
        to the provider, or it would keep it alive).
        """
        self._release = weakref.finalize(self, close)

    @abstractmethod
    def execute(self, request: ModelRequest, *, stream: bool) -> Generator[ProviderEvent, None, None]:
        """Send one request (no retries); yield text and tool-call events, then a ProviderResult."""

    def count_tokens(self, request: ModelRequest) -> int:
        """The provider's own count of the input tokens of ``request`` (only when ``counts_tokens``)."""
        raise NotImplementedError(f"{type(self).__name__} has no token count endpoint")

    def close(self) -> None:
        """Release the SDK client's connections (once; see :meth:`release_on_drop`)."""
        if self._release is not None:
            self._release()

    def read_failure(self, exc: BaseException) -> Failure | None:
        """Read an SDK exception as a :class:`Failure`; None when it is not a transport or status error."""
        cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else ""
        if isinstance(exc, self.timeout_error):
            return Failure(None, "timed out", timed_out=True, refused=cause == "ConnectTimeout")
        if isinstance(exc, self.connection_error):
            return Failure(None, str(exc.__cause__ or exc), refused=cause == "ConnectError")
        if isinstance(exc, self.api_error):
            response: Any = getattr(exc, "response", None)
            headers = response.headers if response is not None else {}
            if "x-aries-upstream-failure" in headers:  # the key broker could not reach the server: no answer
                how = headers["x-aries-upstream-failure"]
                return Failure(None, _error_text(exc), timed_out=how == "timeout", refused=how != "failed")
            status = getattr(exc, "status_code", None)
            if not isinstance(status, int) or status < 400:
                # An error event inside a stream that began with 200: its body says what went wrong.
                status = _status_from_body(getattr(exc, "body", None))
            return Failure(status, _error_text(exc), _retry_after(headers))
        return None


def _error_text(exc: BaseException) -> str:
    """The provider's own error message from the body when there is one, else the SDK's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))


_ERROR_TYPES = {  # Anthropic's error "type" names, for errors sent inside a stream
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _status_from_body(body: Any) -> int:
    """The HTTP status an in-stream error stands for; 500 (a server-side failure) when it does not say."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and 400 <= code < 600:
            return code
        if error.get("type") in _ERROR_TYPES:
            return _ERROR_TYPES[error["type"]]
    return 500


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@cache
def _entry_points_by_wire() -> dict[str, Any]:
    """The entry points of the ``aries_kernel.providers`` group, by wire name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def provider_module(wire: str) -> str | None:
    """The module that defines the provider registered as ``wire`` (imported by nothing here), or None."""
    found = _entry_points_by_wire().get(wire)
    return found.module if found is not None else None


@cache
def load_provider(wire: str) -> type[Provider]:
    """The provider class registered as ``wire`` in the ``aries_kernel.providers`` entry-point group."""
    found = _entry_points_by_wire()
    if wire not in found:
        raise ConfigurationError(
            f"No provider named {wire!r} is installed (entry-point group {ENTRY_POINT_GROUP!r} has: "
            f"{', '.join(sorted(found)) or 'nothing'}). Reinstall aries-kernel, or install the package that "
            "provides it."
        )
    cls = found[wire].load()
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ConfigurationError(
            f"The entry point {found[wire].value} is not an aries_kernel Provider subclass."
        )
    return cls


def decode_arguments(raw: str) -> dict[str, Any]:
    """Tool arguments from their JSON text; text that is not a JSON object is kept under ``_unparsed``."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_unparsed": raw}
