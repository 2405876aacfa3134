"""What a model server says about itself: what it is, its context window, the model it serves, whether it takes
tools.

A local server's window is whatever it was started with, not what a table assumes: llama.cpp's ``llama-server``
publishes it in ``/props`` (``default_generation_settings.n_ctx``, the window of one slot) and in
``/v1/models`` (``data[].meta.n_ctx``); vLLM in ``/v1/models`` (``data[].max_model_len``); Ollama in
``/api/show`` (a ``num_ctx`` parameter, which the server uses, else ``model_info["<arch>.context_length"]``).
llama.cpp says whether its chat template takes tools (``chat_template_caps.supports_tools``, or a template that
never mentions them), Ollama in ``capabilities``.

What it is (:attr:`ServerFacts.server`) decides whether its calls cost nothing (``pricing.py``), so only answers
no proxy gives count: llama.cpp's ``/props`` (its ``default_generation_settings``) or ``owned_by: "llamacpp"`` on
every model of ``/v1/models``, vLLM's ``owned_by: "vllm"`` there, Ollama's ``/api/version``. A LiteLLM-style proxy
or a gateway lists its models as ``owned_by: "openai"`` (or a mix of owners) and answers none of these, so it is
no local model server, wherever it runs. vLLM's ``/version`` is not read: a bare ``{"version": ...}`` at that path says nothing
about what answers it.

:func:`server_facts` asks once per (base URL, model) and keeps the answer for the process; a server that could
not be asked is asked again after :data:`RETRY_SECONDS` (it may still be starting). Only servers on this
machine or a private network are asked (:func:`is_local_url`): a cloud API's window is in the table.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import threading
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RETRY_SECONDS", "ServerFacts", "forget", "is_local_url", "learn_window", "server_facts"]

RETRY_SECONDS = 60.0
_PROBE_TIMEOUT = (1.0, 3.0)  # connect, read: a local server answers its metadata at once or not at all


@dataclass(frozen=True)
class ServerFacts:
    """What one server published; None where it said nothing (or could not be asked)."""

    context_window: int | None = None
    window_source: str = ""  # e.g. "llama.cpp /props n_ctx"
    served_model: str | None = None  # the model id the server reports
    tools: bool | None = None  # whether its chat template takes tool schemas
    tools_source: str = ""
    server: str = ""  # the local model server it identified as: "llama.cpp", "vLLM", "Ollama"; "" for none
    server_source: str = ""  # the answer that said so, e.g. "/props"
    reached: bool = False


_cache: dict[tuple[str, str], tuple[ServerFacts, float]] = {}
_lock = threading.Lock()


@functools.lru_cache(maxsize=256)  # asked on every call (waits, pricing): a pure function of the URL
def is_local_url(url: str | None) -> bool:
    """Whether ``url`` is on this machine or a private network (loopback, RFC 1918, link-local, ``.local``)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def server_facts(base_url: str, model: str, *, provider: str = "") -> ServerFacts:
    """The facts of the server at ``base_url`` for ``model`` (cached; see the module docstring)."""
    key = (base_url.rstrip("/"), model)
    with _lock:
        cached = _cache.get(key)
    if cached is not None and (cached[0].reached or time.monotonic() - cached[1] < RETRY_SECONDS):
        return cached[0]
    facts = _ask(key[0], model, provider)
    with _lock:
        _cache[key] = (facts, time.monotonic())
    return facts


def learn_window(base_url: str, model: str, window: int, source: str) -> None:
    """Record a window the server stated another way (in a context-overflow error), over what was read."""
    key = (base_url.rstrip("/"), model)
    with _lock:
        old = _cache.get(key, (ServerFacts(), 0.0))[0]
        _cache[key] = (
            replace(old, context_window=window, window_source=source, reached=True),
            time.monotonic(),
        )


def forget(base_url: str | None = None) -> None:
    """Drop the cached facts of ``base_url`` (every server when None), so they are asked again."""
    with _lock:
        for key in [k for k in _cache if base_url is None or k[0] == base_url.rstrip("/")]:
            del _cache[key]


def _root(base_url: str) -> str:
    """The server's root: ``http://host:8080/v1`` -> ``http://host:8080``."""
    return re.sub(r"/v1$", "", base_url.rstrip("/"))


def _ask(base_url: str, model: str, provider: str) -> ServerFacts:
    import httpx  # loaded on the first question, not at import

    root = _root(base_url)
    facts = ServerFacts()
    with httpx.Client(timeout=httpx.Timeout(_PROBE_TIMEOUT[1], connect=_PROBE_TIMEOUT[0])) as http:

        def get(method: str, url: str, **kwargs: Any) -> Any:
            nonlocal facts
            try:
                response = http.request(method, url, **kwargs)
            except httpx.HTTPError:
                return None
            facts = replace(facts, reached=True)
            if response.status_code != 200:
                return None
            try:
                return response.json()
            except ValueError:
                return None

        # Each answer is read before ``facts`` is passed on: ``get`` notes in it that the server was reached.
        if provider == "ollama" or urlsplit(root).port == 11434:
            body = get("POST", f"{root}/api/show", json={"model": model})
            facts = _read_ollama(facts, body)
        if facts.context_window is None:
            body = get("GET", f"{root}/props")
            facts = _read_props(facts, body)
        if facts.context_window is None or facts.served_model is None or not facts.server:
            body = get("GET", f"{root}/v1/models")
            facts = _read_models(facts, body, model)
        if not facts.server:
            body = get("GET", f"{root}/api/version")
            facts = _read_ollama_version(facts, body)
    return facts


def _positive(value: Any) -> int | None:
    return (
        int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def _read_props(facts: ServerFacts, body: Any) -> ServerFacts:
    """llama.cpp's ``/props``."""
    if not isinstance(body, dict):
        return facts
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict):
        facts = replace(facts, server="llama.cpp", server_source="/props")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if n_ctx is not None:
        facts = replace(facts, context_window=n_ctx, window_source="llama.cpp /props n_ctx")
    caps = body.get("chat_template_caps")
    if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
        facts = replace(facts, tools=caps["supports_tools"], tools_source="llama.cpp chat_template_caps")
    elif isinstance(body.get("chat_template"), str):
        takes = "tool" in body["chat_template"]
        facts = replace(facts, tools=takes, tools_source="llama.cpp chat template")
    path = body.get("model_path")
    if isinstance(path, str) and path and facts.served_model is None:
        facts = replace(facts, served_model=path.rsplit("/", 1)[-1])
    return facts


def _read_models(facts: ServerFacts, body: Any, model: str) -> ServerFacts:
    """``/v1/models``: llama.cpp's ``meta.n_ctx``, vLLM's ``max_model_len``; the served model's id; who owns
    the models (llama.cpp and vLLM name themselves)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return facts
    entries = [e for e in entries if isinstance(e, dict)]
    owners = {e.get("owned_by") for e in entries}  # one local server owns them all: not a gateway's mix
    server = _OWNERS.get(owners.pop(), "") if len(owners) == 1 else ""
    if server and not facts.server:
        facts = replace(facts, server=server, server_source="/v1/models owned_by")
    chosen = next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else None)
    if chosen is None:
        return facts
    if isinstance(chosen.get("id"), str):
        facts = replace(facts, served_model=chosen["id"])
    if facts.context_window is None:
        meta = chosen.get("meta")
        n_ctx = _positive(meta.get("n_ctx")) if isinstance(meta, dict) else None
        if n_ctx is not None:
            facts = replace(facts, context_window=n_ctx, window_source="llama.cpp /v1/models meta.n_ctx")
        elif (length := _positive(chosen.get("max_model_len"))) is not None:
            facts = replace(facts, context_window=length, window_source="vLLM /v1/models max_model_len")
    return facts


_OWNERS = {"llamacpp": "llama.cpp", "vllm": "vLLM"}  # ``owned_by`` values that name the server itself


def _read_ollama_version(facts: ServerFacts, body: Any) -> ServerFacts:
    """Ollama's ``/api/version``: ``{"version": "0.6.2"}``."""
    if isinstance(body, dict) and isinstance(body.get("version"), str):
        facts = replace(facts, server="Ollama", server_source="/api/version")
    return facts


def _read_ollama(facts: ServerFacts, body: Any) -> ServerFacts:
    """Ollama's ``/api/show``: ``num_ctx`` in ``parameters`` (what it runs with), else the model's length."""
    if not isinstance(body, dict):
        return facts
    found = re.search(r"(?m)^\s*num_ctx\s+(\d+)", str(body.get("parameters") or ""))
    if found:
        facts = replace(facts, context_window=int(found.group(1)), window_source="Ollama /api/show num_ctx")
    else:
        info = body.get("model_info")
        lengths = [
            _positive(v)
            for k, v in (info.items() if isinstance(info, dict) else ())
            if k.endswith(".context_length")
        ]
        if lengths and lengths[0] is not None:
            facts = replace(
                facts, context_window=lengths[0], window_source="Ollama /api/show model_info context_length"
            )
    capabilities = body.get("capabilities")
    if isinstance(capabilities, list):
        facts = replace(facts, tools="tools" in capabilities, tools_source="Ollama capabilities")
    return facts
