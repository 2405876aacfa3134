"""The four model slots (primary, reasoning, cheap, bulk), their settings, and the client of one slot.

:class:`ModelRouter` maps slots to models (``c.AriesModels.primary = "sonnet"`` in a Jupyter config file, or
``router.set_slot("bulk", "ollama:llama3")`` at run time). :class:`SlotClient` owns what every provider
shares: the API key lookup (at call time, never stored), retries with backoff and jitter, timing, cost and
per-slot usage. Building a router is cheap and needs no key; the SDK is imported and the key checked on the
first call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

from traitlets import Dict, Float, Int, List, Unicode, validate
from traitlets.config import Configurable

from aries_kernel import key_broker
from aries_kernel.key_broker import BrokerRoute
from aries_kernel.models.budget import SpendLimits
from aries_kernel.models.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    MissingKeyError,
    ModelError,
    ModelNotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from aries_kernel.models.pricing import Price, price_of
from aries_kernel.models.provider import Endpoint, Failure, Provider, ProviderResult, Timeouts, load_provider
from aries_kernel.models.server import ServerFacts, is_local_url, learn_window, server_facts
from aries_kernel.models.shortnames import (
    PROVIDERS,
    SHORTNAMES,
    ModelInfo,
    ProviderInfo,
    resolve,
    with_overrides,
)
from aries_kernel.models.tokens import TokenEstimator, estimate_text_tokens, estimator_for
from aries_kernel.models.types import (
    Completion,
    ModelRequest,
    SlotUsage,
    StreamEvent,
    StreamUsage,
    Usage,
)
from aries_kernel.redact import environ_value
from aries_kernel.retry import Backoff
from aries_kernel.settings_owner import PROTECTED, check_change

if TYPE_CHECKING:  # imported by the tables, not by a model call
    import pandas as pd

__all__ = ["SLOTS", "AriesModels", "ModelRouter", "SlotClient", "UsageObserver"]

log = logging.getLogger(__name__)

SLOTS = ("primary", "reasoning", "cheap", "bulk")
# An empty slot borrows the model of the first non-empty slot in its chain.
_FALLBACK = {"primary": (), "reasoning": ("primary",), "cheap": ("primary",), "bulk": ("cheap", "primary")}
# Told of every finished call of every slot (the agent counts the sub-calls a Repl step makes).
UsageObserver = Callable[[Completion], None]


class AriesModels(Configurable):
    """Model slots and transport settings (``c.AriesModels.<name>`` in a Jupyter config file)."""

    primary = Unicode("sonnet", help="Model of agent turns: a shortname or provider:model.").tag(config=True)
    reasoning = Unicode("opus", help="Model for deep thinking; empty means the primary model.").tag(
        config=True
    )
    cheap = Unicode(
        "haiku", help="Model for summaries, reflection, classification; empty means primary."
    ).tag(config=True)
    bulk = Unicode("", help="Model of rlm_call / rlm_batch sub-calls; empty means cheap, then primary.").tag(
        config=True
    )
    base_urls = Dict(
        value_trait=Unicode(),
        help="Base URL per provider, e.g. {'ollama': 'http://gpu-box:11434/v1', 'custom': 'http://host/v1'}. "
        "Without one, ANTHROPIC_BASE_URL / OPENAI_BASE_URL, then the provider's public URL, are used.",
    ).tag(config=True)
    context_windows = Dict(
        value_trait=Int(), help="Context window per shortname or model id, overriding the table."
    ).tag(config=True)
    prices = Dict(
        value_trait=List(Float()),
        help="USD per million tokens per shortname or model id: [input, output, cache_read?, cache_write?].",
    ).tag(config=True)
    timeout = Float(
        0.0,
        help="Seconds to wait for an answer to start (its first token) before retrying; 0 means by the kind of "
        "server: 600 for a cloud API, 120 for a local server.",
    ).tag(config=True)
    connect_timeout = Float(
        0.0, help="Seconds to wait for a connection; 0 means 15 for a cloud API, 2 for a local server."
    ).tag(config=True)
    idle_timeout = Float(
        0.0,
        help="Seconds a stream may stay silent once it has begun; 0 means 120 for a cloud API, 30 for a local "
        "server.",
    ).tag(config=True)
    max_retries = Int(
        -1,
        help="Retries after a 429, a 5xx, a timeout or a refused connection; -1 means 4 for a cloud API and 1 "
        "for a local server, which is then not retried after a timeout (a local server that hangs is not busy).",
    ).tag(config=True)
    backoff_base = Float(1.0, help="Seconds before the first retry; doubled each retry, with jitter.").tag(
        config=True
    )
    backoff_max = Float(30.0, help="Longest wait between two retries (without a retry-after).").tag(
        config=True
    )
    retry_after_max = Float(
        120.0, help="Longest retry-after honoured; a longer one is reported instead of waited for."
    ).tag(config=True)
    session_budget_usd = Float(
        0.0, help="USD this kernel may spend on model calls over all slots, rlm included; 0 means no limit."
    ).tag(config=True)
    session_budget_tokens = Int(
        0, help="Tokens (input and output) this kernel may spend over all slots, rlm included; 0: no limit."
    ).tag(config=True)
    daily_budget_usd = Float(
        0.0, help="USD per local day over every kernel of this user (kept in spend_file); 0 means no limit."
    ).tag(config=True)
    daily_budget_tokens = Int(
        0, help="Tokens per local day over every kernel of this user (kept in spend_file); 0 means no limit."
    ).tag(config=True)
    team_daily_budget_usd = Float(
        0.0,
        help="USD each member of a team vault (c.AriesVault.url) may spend per UTC day over all their servers "
        "and machines, counted in the team database; without a team vault, this machine's day (spend_file). "
        "0 means no limit.",
    ).tag(config=True)
    free_endpoints = List(
        Unicode(),
        help="Base URLs (or hosts, host:port) whose calls cost nothing, e.g. ['http://gpu-box:8000']; without "
        "it only a server that identifies as llama.cpp, vLLM or Ollama is free, and a proxy is priced by model.",
    ).tag(config=True)
    spend_file = Unicode(
        "",
        help="Where the day's spend is kept ($ARIES_SPEND_FILE overrides it); empty means ~/.aries/spend.json.",
    ).tag(config=True)

    @validate(*PROTECTED["AriesModels"])
    def _only_by_the_user(self, proposal: Any) -> Any:
        # Endpoints, prices and limits: only the user changes them (aries_kernel.settings_owner).
        return check_change(self, proposal.trait.name, proposal.value)


class SlotClient:
    """Calls to the model of one slot: ``stream``, ``complete``, ``acomplete``, ``estimate_tokens``."""

    def __init__(
        self,
        slot: str,
        info: ModelInfo,
        settings: AriesModels,
        sleep: Callable[[float], None] = time.sleep,
        *,
        spec: str = "",
        limits: SpendLimits | None = None,
        observers: list[UsageObserver] | None = None,
    ) -> None:
        self.slot = slot
        self.info = info
        self.spec = spec or info.shortname  # what the slot was set to, to tell when it changes
        self.provider_info: ProviderInfo = PROVIDERS[info.provider]
        self.settings = settings
        self.usage = SlotUsage()
        self._sleep = sleep
        self._lock = threading.Lock()
        self._provider: Provider | None = None
        self.limits = limits if limits is not None else SpendLimits(settings)
        self._observers = observers if observers is not None else []

    def __repr__(self) -> str:
        return f"<SlotClient {self.slot}: {self.shortname} ({self.provider}:{self.model})>"

    @property
    def shortname(self) -> str:
        return self.info.shortname

    @property
    def provider(self) -> str:
        return self.info.provider

    @property
    def model(self) -> str:
        return self.info.model

    @property
    def context_window(self) -> int:
        return self.window()[0]

    @property
    def local(self) -> bool:
        """Whether the model runs on this machine or a private network (a local provider, or a loopback or
        private base URL, whatever wire format it speaks): it is asked for its window and what it is (its price
        follows what it is, :meth:`price`), and gets short waits."""
        return self.provider_info.local or is_local_url(self.base_url)

    def facts(self) -> ServerFacts:
        """What the slot's server published about itself (asked once per server; a cloud API is not asked)."""
        url = self.base_url
        if not (self.local and url):
            return ServerFacts()
        return server_facts(url, self.model, provider=self.provider)

    def wire_model(self) -> str:
        """The model name sent: the slot's, except that the ``local`` shortname (a placeholder: llama.cpp
        serves one model whatever it is called) sends the id the server publishes when it serves exactly one,
        as Ollama needs a real name."""
        if self.shortname == "local":
            return self.facts().served_model or self.model
        return self.model

    def window(self) -> tuple[int, str]:
        """(context window, where it comes from): the settings, else what the server published, else the
        shortname table (or the provider's default for a model outside it)."""
        windows = self.settings.context_windows
        for key in (self.shortname, self.model):
            if key in windows:
                return int(windows[key]), f"c.AriesModels.context_windows[{key!r}]"
        facts = self.facts()
        if facts.context_window:
            return facts.context_window, facts.window_source
        if self.shortname in SHORTNAMES:
            return self.info.context_window, "shortname table"
        if self.local and not self.provider_info.local:  # a cloud route (custom, openai:) to a local server
            return _LOCAL_WINDOW, "default for a local server"
        return self.info.context_window, f"default for {self.provider_info.label}"

    def default_max_tokens(self, cap: int) -> int:
        """An answer-length limit for this model: a quarter of its window, at most ``cap`` (an 8k local
        window must keep room for the prompt; a runaway answer stops long before it fills the context)."""
        return max(256, min(cap, self.context_window // 4))

    @property
    def priced(self) -> bool:
        """False when the price of this slot's calls is unknown: counted as 0, refused under a USD limit."""
        return self.price().known

    def price(self) -> Price:
        """What this slot's calls cost, by what its server is (``pricing.py``): the settings' price, $0 at a
        free endpoint or a local model server, else the model's list price, else unknown."""
        return price_of(
            self.info,
            self.wire_model(),
            self.base_url,
            self.settings.prices,
            self.settings.free_endpoints,
            self.facts if self.local else None,
        )

    @property
    def estimator(self) -> TokenEstimator:
        """The token estimator of this model at this server, calibrated by its reported counts (shared by
        every slot and router that uses the same model at the same URL)."""
        return estimator_for(f"{self.provider}|{self.base_url}|{self.model}")

    def timeouts(self) -> Timeouts:
        """Connect, first-token and idle-stream waits: the settings, else sized to the kind of server."""
        settings, local = self.settings, self.local
        return Timeouts(
            settings.connect_timeout or (2.0 if local else 15.0),
            settings.timeout or (120.0 if local else 600.0),
            settings.idle_timeout or (30.0 if local else 120.0),
        )

    @property
    def base_url(self) -> str | None:
        """Configured URL, else the SDK's base-URL variable, else the provider's public URL."""
        return _base_url(self.provider_info, self.settings)

    def key_status(self) -> str:
        """'set' (in the kernel, or in the key broker for this base URL), 'held by the key broker for ... only'
        (other URLs), 'missing (VAR)' or 'not needed', for the slot table."""
        p = self.provider_info
        key, route = _key(p, self.base_url)
        if key or route is not None:
            return "set"
        broker = key_broker.link()
        bound = broker.routes.get(p.key_env, []) if broker is not None and p.key_env else []
        if bound:
            return f"held by the key broker for {', '.join(bound)} only"
        return f"missing ({p.key_env})" if p.key_required else "not needed"

    def has_credentials(self) -> bool:
        """Whether a call can be sent without a MissingKeyError."""
        return self.key_status() != f"missing ({self.provider_info.key_env})"

    def estimate_tokens(self, request: ModelRequest) -> int:
        """Input tokens ``request`` will likely cost, calibrated by this slot's reported counts."""
        return self.estimator.estimate(request)

    def count_tokens(self, request: ModelRequest) -> int:
        """Input tokens of ``request`` as the provider counts them, where its API can without running the
        request (Anthropic: one small request); elsewhere the calibrated estimate, with no request at all."""
        if not load_provider(self.provider_info.wire).counts_tokens:
            return self.estimate_tokens(request)
        provider = self._client()
        try:
            counted = provider.count_tokens(request)
        except Exception as exc:
            failure = provider.read_failure(exc)
            if failure is None:
                raise
            raise self._error(failure, 1) from exc
        self.estimator.observe(request, counted)
        return counted

    def stream(self, request: ModelRequest) -> Generator[StreamEvent, None, None]:
        """Yield text and tool-call events as they arrive, then the Completion. Closing the generator (or a
        KeyboardInterrupt inside it) closes the HTTP stream."""
        price = self.price()  # what the call is sent under, and counted at
        self.limits.check(self.slot, price.problem)
        start = time.perf_counter()
        for event in self._attempts(request, stream=True):
            if isinstance(event, ProviderResult):
                yield self._finish(request, event, start, price)
            else:
                yield event

    def complete(self, request: ModelRequest) -> Completion:
        """One non-streamed call."""
        price = self.price()
        self.limits.check(self.slot, price.problem)
        start = time.perf_counter()
        result = None
        for event in self._attempts(request, stream=False):
            result = event
        assert isinstance(result, ProviderResult)
        return self._finish(request, result, start, price)

    async def acomplete(self, request: ModelRequest) -> Completion:
        """:meth:`complete` in a worker thread, so an event loop keeps running while the call is in flight."""
        return await asyncio.to_thread(self.complete, request)

    def close(self) -> None:
        """Close the HTTP connections; the next call opens new ones."""
        with self._lock:
            provider, self._provider = self._provider, None
        if provider is not None:
            provider.close()

    def _endpoint(self) -> Endpoint:
        p = self.provider_info
        base_url = self.base_url
        key, route = _key(p, base_url)
        status = "" if key or route is not None else self.key_status()
        if p.key_required and status.startswith("held by the key broker"):
            raise MissingKeyError(
                f"The {self.slot} slot would send {p.key_env} to {base_url}, but the key broker {status}: it "
                "sends a key only to the base URL it was given with (a *_BASE_URL set in a cell is not "
                f"trusted with a key). Point the slot there with %aries model {self.slot} {self.shortname} "
                f"--base-url {base_url} (or c.AriesModels.base_urls), then set the key again in a cell: "
                f"os.environ[{p.key_env!r}] = '...'."
            )
        if p.key_required and not key and route is None:
            raise MissingKeyError(
                f"The {self.slot} slot uses {p.label} ({self.shortname}), which needs an API key: "
                f"set {p.key_env} in the kernel's environment (export {p.key_env}=... before starting "
                f"Jupyter, or os.environ[{p.key_env!r}] = '...' in a cell; aries-kernel never writes keys "
                f"to disk). Or use a local server that needs no key: %aries model {self.slot} "
                f"ollama:<model> (Ollama) or %aries model {self.slot} local (llama.cpp server on "
                "http://localhost:8080/v1)."
            )
        if not base_url:
            raise ConfigurationError(
                f"The {self.slot} slot uses a {p.label} with no base URL: set "
                f"c.AriesModels.base_urls = {{{p.name!r}: 'http://host:port/v1'}} in a Jupyter config "
                f"file, or %aries model {self.slot} {self.shortname} --base-url http://host:port/v1."
            )
        return Endpoint(p.name, self.wire_model(), base_url, key, self.timeouts(), route)

    def _client(self) -> Provider:
        """The provider for the current key and URL, rebuilt when either changes (a key set late)."""
        endpoint = self._endpoint()
        with self._lock:
            if self._provider is None or self._provider.endpoint != endpoint:
                if self._provider is not None:
                    self._provider.close()
                self._provider = load_provider(self.provider_info.wire)(endpoint)
            return self._provider

    def _attempts(self, request: ModelRequest, *, stream: bool) -> Iterator[Any]:
        """The provider's events for ``request``, retrying failures that happen before the first event."""
        provider = self._client()
        retries = self.settings.max_retries
        by_kind = retries < 0
        attempts = (1 if self.local else 4) + 1 if by_kind else retries + 1
        for attempt in range(attempts):
            events = provider.execute(request, stream=stream)
            started = False
            try:
                for event in events:
                    # Content shown cannot be taken back, so a failure after it is not retried; a usage report
                    # (Anthropic's first event) is not content.
                    started = started or not isinstance(event, StreamUsage)
                    yield event
                return
            except ModelError:
                raise
            except Exception as exc:
                failure = provider.read_failure(exc)
                if failure is None:
                    raise
                delay = self._retry_delay(failure, attempt)
                hung = by_kind and self.local and failure.timed_out
                if started or hung or not failure.retryable or attempt == attempts - 1 or delay is None:
                    raise self._error(failure, attempt + 1, started=started, request=request) from exc
                log.info(
                    "%s: %s; retry %d in %.2fs",
                    self.slot,
                    failure.status or failure.message,
                    attempt + 1,
                    delay,
                )
                self._sleep(delay)
            finally:
                events.close()

    def _retry_delay(self, failure: Failure, attempt: int) -> float | None:
        """Seconds before the next try: the server's retry-after, else the retry policy's backoff."""
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= self.settings.retry_after_max else None
        return Backoff(float(self.settings.backoff_base), float(self.settings.backoff_max)).delay(attempt)

    def _error(
        self, failure: Failure, attempts: int, *, started: bool = False, request: ModelRequest | None = None
    ) -> ModelError:
        p = self.provider_info
        where = f"{p.label} ({self.model} at {self.base_url})"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        status, detail = failure.status, failure.message
        waits = self.timeouts()
        if failure.timed_out and failure.refused:
            return ProviderTimeoutError(
                f"No connection to {where} within {waits.connect:g}s{tries}: the host does not answer. Check "
                "that the machine is up and the base URL right, or raise c.AriesModels.connect_timeout."
            )
        if failure.timed_out and started:
            return ProviderTimeoutError(
                f"{where} went silent mid-answer for {waits.first_token:g}s and the answer was cut there. The "
                "server may be stuck: check its log, or raise c.AriesModels.timeout."
            )
        if failure.timed_out:
            return ProviderTimeoutError(
                f"No answer from {where} within {waits.first_token:g}s{tries}: it accepted the request but sent "
                "nothing back. Check the server, or raise c.AriesModels.timeout."
            )
        if status is None and started:
            return ProviderConnectionError(
                f"{where} closed the connection in the middle of its answer ({detail}); the answer was cut "
                "there. The server was reached, so it probably stopped or crashed: check it (its log, its "
                "memory) and ask again."
            )
        if status is None and failure.refused:
            return ProviderConnectionError(
                f"Could not reach {where}{tries}: the connection was refused ({detail}). Is the server running "
                f"and the base URL right ({p.base_url_env or 'c.AriesModels.base_urls'})?"
            )
        if status is None:
            return ProviderConnectionError(
                f"The connection to {where} failed{tries}: {detail}. Check the server and the base URL "
                f"({p.base_url_env or 'c.AriesModels.base_urls'})."
            )
        if status in (400, 413) and _OVERFLOW.search(detail):
            return self._overflow(status, detail, request)
        if status in (401, 403):
            variable = p.key_env or "the key variable"
            return AuthenticationError(
                f"{p.label} rejected the API key for the {self.slot} slot (HTTP {status}: {detail}). "
                f"Set a valid key in {variable} and call again.",
                status,
            )
        if status == 404:
            return ModelNotFoundError(
                f"{p.label} does not know the model {self.model!r} (HTTP 404: {detail}). Pick another with "
                f"%aries model {self.slot} <name>; shortnames: {', '.join(SHORTNAMES)}; or provider:model.",
                status,
            )
        if status == 429:
            wait = f" It asks to wait {failure.retry_after:g}s." if failure.retry_after else ""
            return RateLimitError(
                f"{p.label} is rate-limiting the {self.slot} slot (HTTP 429: {detail}){tries}.{wait} Try "
                "again later, or raise c.AriesModels.max_retries.",
                status,
            )
        return ProviderError(f"{where} answered HTTP {status}{tries}: {detail}", status)

    def charge_stopped(self, request: ModelRequest, reported: Usage | None, streamed: str) -> Usage:
        """Count a streamed call that was stopped (a Stop click, an interrupt) after its answer began: the
        provider bills the prompt it read and what it wrote, though no Completion came. The input is what the
        stream ``reported`` (Anthropic says it first), else this slot's estimate; the output is estimated
        from the text and arguments ``streamed`` so far. Returns the usage counted, with its cost."""
        usage = (
            dataclasses.replace(reported) if reported is not None else Usage(self.estimate_tokens(request))
        )
        usage.output_tokens = max(usage.output_tokens, estimate_text_tokens(streamed))
        self._charge(usage, self.price(), 0.0)
        return usage

    def _charge(self, usage: Usage, price: Price, seconds: float) -> None:
        """Price ``usage`` (setting its cost) and count it in this slot's totals and the spend limits."""
        usage.cost_usd = price.cost(
            usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
        )
        with self._lock:
            self.usage.add(usage, seconds)
            first_unpriced = self.usage.calls == 1 and not price.known
        if first_unpriced:
            log.warning("Its cost is counted as 0: %s.", price.problem)
        spent = usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.limits.record(spent, usage.cost_usd)

    def _overflow(self, status: int, detail: str, request: ModelRequest | None) -> ContextOverflowError:
        """The request did not fit: learn the window and the request's true size from the message, if given."""
        numbers = {
            name: int(next(group for group in found.groups() if group))
            for name, pattern in _OVERFLOW_NUMBERS.items()
            if (found := pattern.search(detail)) is not None
        }
        window = numbers.get("window")
        if window and self.local and self.base_url:
            learn_window(
                self.base_url, self.model, window, f"the server's context-overflow error (HTTP {status})"
            )
        if request is not None and numbers.get("prompt"):
            self.estimator.observe(request, numbers["prompt"])
        size = f"{window:,}-token " if window else ""
        return ContextOverflowError(
            f"The request is longer than the {size}context window of {self.model} at {self.base_url} "
            f"(HTTP {status}: {detail}). Compact the history (%aries compact), or give the model a larger "
            "window on the server.",
            status,
            window,
        )

    def _finish(
        self, request: ModelRequest, result: ProviderResult, start: float, price: Price
    ) -> Completion:
        usage = result.usage
        self.estimator.observe(
            request, usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        )
        seconds = time.perf_counter() - start
        self._charge(usage, price, seconds)
        completion = Completion(
            result.message, result.stop_reason, usage, result.model or self.model, self.slot, seconds
        )
        for observer in list(self._observers):
            observer(completion)
        return completion


_LOCAL_WINDOW = 32_768  # what a local server that publishes nothing is assumed to hold (as the table's local)
# How servers say a request does not fit the context window (llama.cpp, OpenAI and vLLM, Anthropic, others).
_OVERFLOW = re.compile(
    r"exceeds the available context size|context_length_exceeded|maximum context length|prompt is too long"
    r"|context window|too many tokens|context length",
    re.IGNORECASE,
)
_OVERFLOW_NUMBERS = {
    "window": re.compile(
        r"context size \((\d+) tokens\)|maximum context length is (?:only )?(\d+)|> (\d+) maximum", re.I
    ),
    "prompt": re.compile(r"request \((\d+) tokens\)|resulted in (\d+) tokens|too long: (\d+) tokens", re.I),
}


class ModelRouter:
    """The four slots and their clients. Cheap to build: no SDK import, no key lookup until a call."""

    def __init__(self, config: Any = None, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = AriesModels(config=config)
        self._specs = {slot: getattr(self.settings, slot).strip() for slot in SLOTS}
        self._clients: dict[str, SlotClient] = {}
        self._sleep = sleep
        self._lock = threading.Lock()
        self.limits = SpendLimits(self.settings)
        self._observers: list[UsageObserver] = []

    def __repr__(self) -> str:
        return "<ModelRouter " + ", ".join(f"{slot}={self.spec(slot)[0]}" for slot in SLOTS) + ">"

    def spec(self, slot: str) -> tuple[str, str]:
        """``(spec, source slot)``: the slot's own spec, or the one it falls back to when empty."""
        _check_slot(slot)
        for source in (slot, *_FALLBACK[slot]):
            if self._specs[source]:
                return self._specs[source], source
        raise ConfigurationError(
            f"No model is configured for the {slot} slot or the slots it falls back to; set one with "
            f"%aries model {slot} <shortname or provider:model>."
        )

    def resolution(self, slot: str) -> tuple[str, str, str]:
        """``(spec, source slot, why)``: where ``slot`` resolves now. An empty slot falls back along its
        chain. When primary is a local model, a slot whose provider needs a key that is not set follows its
        chain (bulk: cheap, then primary) to the first model it can call, instead of failing: a user with a
        local server has no key at all."""
        spec, source = self.spec(slot)
        why = "set" if source == slot else f"empty: falls back to {source}"
        if source == "primary" or _callable(spec, self.settings):
            return spec, source, why
        main = _provider_of(self.spec("primary")[0])
        if main is None or not (main.local or is_local_url(_base_url(main, self.settings))):
            return spec, source, why
        variable = _provider_of(spec).key_env  # type: ignore[union-attr]  # _callable said it has one
        for chained in _FALLBACK[slot]:
            target, target_source, _ = self.resolution(chained)
            if target_source == "primary" or _callable(target, self.settings):
                return target, target_source, f"{spec} needs {variable}, which is not set: follows {chained}"
        return spec, source, why

    def callable_wires(self) -> list[str]:
        """The wire formats (provider entry points) of the slots that can be called now, the primary slot's
        first, each once: the SDKs a first request may import. A slot that does not resolve, or whose provider
        needs a key that is not set, adds none."""
        wires: list[str] = []
        for slot in SLOTS:
            try:
                spec, _, _ = self.resolution(slot)
            except ModelError:
                continue
            provider = _provider_of(spec)
            if provider is not None and _callable(spec, self.settings) and provider.wire not in wires:
                wires.append(provider.wire)
        return wires

    def client(self, slot: str) -> SlotClient:
        """The client of ``slot`` (one of primary, reasoning, cheap, bulk), as it resolves now."""
        retired = None
        with self._lock:
            spec, _, _ = self.resolution(slot)
            if slot in self._clients and self._clients[slot].spec != spec:
                retired = self._clients.pop(slot)  # a key was set or unset since: the slot moves
            if slot not in self._clients:
                info = with_overrides(resolve(spec), self.settings.context_windows, self.settings.prices)
                self._clients[slot] = SlotClient(
                    slot,
                    info,
                    self.settings,
                    self._sleep,
                    spec=spec,
                    limits=self.limits,
                    observers=self._observers,
                )
            client = self._clients[slot]
        if retired is not None:
            retired.close()
        return client

    def set_slot(self, slot: str, spec: str, *, base_url: str | None = None) -> SlotClient:
        """Point ``slot`` at a shortname or ``provider:model`` (optionally with that provider's base URL)."""
        _check_slot(slot)
        info = resolve(spec)  # an unknown name fails here, before the slot changes
        if base_url:
            self.settings.base_urls = {**self.settings.base_urls, info.provider: base_url}
        with self._lock:
            self._specs[slot] = spec.strip()
            # Slots falling back to this one change with it; the others keep their client and usage.
            stale = [name for name, c in self._clients.items() if c.spec != self.resolution(name)[0]]
            retired = [self._clients.pop(name) for name in stale]
        for client in retired:
            client.close()
        return self.client(slot)

    @contextlib.contextmanager
    def observe(self, observer: UsageObserver) -> Iterator[None]:
        """Call ``observer`` with every call's Completion, on every slot, while the block runs."""
        self._observers.append(observer)
        try:
            yield
        finally:
            self._observers.remove(observer)

    def close(self) -> None:
        """Close every slot's HTTP connections (the router stays usable; clients reconnect on demand)."""
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            client.close()
        self.limits.close()

    def slots(self) -> pd.DataFrame:
        """One row per slot: model, provider, context window, prices, key and base URL."""
        rows: list[dict[str, Any]] = []
        for slot in SLOTS:
            try:
                client = self.client(slot)
            except ModelError as exc:
                rows.append({"slot": slot, "model": f"error: {exc}"})
                continue
            _, source, why = self.resolution(slot)
            info = client.info
            window, window_source = client.window()
            facts = client.facts()
            price = client.price()
            per_mtok_in, per_mtok_out = price.per_mtok()
            rows.append(
                {
                    "slot": slot,
                    "shortname": info.shortname if source == slot else f"{info.shortname} (from {source})",
                    "resolves": why,
                    "provider": info.provider,
                    "model": info.model,
                    "served_model": facts.served_model or "",
                    "context_window": window,
                    "window_from": window_source,
                    "tools": ""
                    if facts.tools is None
                    else ("yes" if facts.tools else f"no ({facts.tools_source})"),
                    "usd_per_mtok_in": per_mtok_in,
                    "usd_per_mtok_out": per_mtok_out,
                    "price": price.label(),
                    "key": client.key_status(),
                    "base_url": client.base_url,
                }
            )
        import pandas as pd

        return pd.DataFrame(rows).set_index("slot")

    def usage(self) -> pd.DataFrame:
        """Calls, tokens, cost and seconds so far, per slot that has a client."""
        rows = [{"slot": slot, "model": c.model, **vars(c.usage)} for slot, c in self._clients.items()]
        columns = ["slot", "model", *vars(SlotUsage())]
        import pandas as pd

        return pd.DataFrame(rows, columns=columns).set_index("slot")


def _base_url(p: ProviderInfo, settings: AriesModels) -> str | None:
    """The configured URL, else the provider's base-URL variable, else its default URL. The llama.cpp
    route also takes ``OPENAI_BASE_URL`` when that points at this machine or a private network: "point
    OPENAI_BASE_URL at your server and use ``local``" then works, and a remote OpenAI proxy is never taken for
    a local server."""
    env = os.environ.get(p.base_url_env) if p.base_url_env else None
    if env is None and p.name == "llamacpp":
        openai_url = os.environ.get("OPENAI_BASE_URL")
        env = openai_url if is_local_url(openai_url) else None
    return settings.base_urls.get(p.name) or env or p.base_url


def _key(p: ProviderInfo, base_url: str | None) -> tuple[str, BrokerRoute | None]:
    """The key of ``p`` for calls to ``base_url``: its value when the kernel holds it, else the key broker's
    route to it when the broker holds it for that URL (the broker adds it), else ``("", None)``."""
    if not p.key_env:
        return "", None
    value = environ_value(p.key_env)
    broker = key_broker.link()
    if value or broker is None or not base_url:
        return value, None
    return "", broker.route(p.key_env, base_url)


def _callable(spec: str, settings: AriesModels) -> bool:
    """Whether a call to ``spec`` can be sent: its provider needs no key, or its key is set (an unknown spec
    counts as callable, so its own error is the one reported)."""
    p = _provider_of(spec)
    if p is None or not p.key_required:
        return True
    key, route = _key(p, _base_url(p, settings))
    return bool(key) or route is not None


def _provider_of(spec: str) -> ProviderInfo | None:
    try:
        return PROVIDERS[resolve(spec).provider]
    except ModelError:
        return None


def _check_slot(slot: str) -> None:
    if slot not in SLOTS:
        raise ConfigurationError(f"Unknown slot {slot!r}; the slots are {', '.join(SLOTS)}.")
