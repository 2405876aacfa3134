"""What a call to one model at one server costs: by what the server is, not where it runs.

In this order:

1. ``c.AriesModels.prices`` for the shortname or model id: that price, wherever the model runs.
2. A base URL the user names free (``c.AriesModels.free_endpoints``): $0.
3. A server that identifies as a local model server (llama.cpp, vLLM, Ollama; ``server.py`` says how it is told):
   $0.
4. A model name the price table knows (``claude-sonnet-4-6``, ``gpt-4o``, a shortname; a provider prefix such as
   ``openai/`` or a date suffix such as ``-2024-08-06`` is ignored): its list price, behind any endpoint, so a
   LiteLLM-style proxy on localhost or a gateway on a private network costs what the model costs.
5. Anything else: the price is unknown. It is counted as $0 when no USD limit is set (and said so); under a USD
   limit the call is refused before it is sent (``budget.py``), since the limit cannot be checked. Pricing it at
   the dearest known rate instead would still let a dearer model through and stop a cheap one early; the user
   names the price or the endpoint free, in one line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from aries_kernel.models.server import ServerFacts
from aries_kernel.models.shortnames import PROVIDERS, SHORTNAMES, ModelInfo, with_overrides

__all__ = ["Price", "free_endpoint", "list_price", "price_of"]

_LOCAL_SERVERS = "llama.cpp, vLLM or Ollama"
_SUFFIX = re.compile(r"[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # -20250514, -2024-08-06, @20250514, -latest


@dataclass(frozen=True)
class Price:
    """The price of one slot's calls: ``rates`` carries the per-token prices; ``free`` means $0."""

    why: str  # where the price comes from, e.g. "llama.cpp server (/props)", or why it is unknown
    rates: ModelInfo | None = None
    free: bool = False
    problem: str = ""  # when unknown: what is missing and how to give it (for the refusal under a USD limit)

    @property
    def known(self) -> bool:
        """Whether the cost of a call can be counted."""
        return self.free or self.rates is not None

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """USD for one call; 0 when free or unknown."""
        if self.free or self.rates is None:
            return 0.0
        return self.rates.cost(input_tokens, output_tokens, cache_read, cache_write)

    def per_mtok(self) -> tuple[float | None, float | None]:
        """USD per million input and output tokens: 0 when free, None when unknown."""
        if self.free:
            return 0.0, 0.0
        return (self.rates.input_price, self.rates.output_price) if self.rates else (None, None)

    def label(self) -> str:
        """A short phrase for the slot table: "free: llama.cpp server (/props)", "list price of gpt-4o"..."""
        if self.free:
            return f"free: {self.why}"
        return self.why if self.rates is not None else "unknown: counted as 0, refused under a USD limit"


def price_of(
    info: ModelInfo,
    wire_model: str,
    base_url: str | None,
    prices: dict[str, list[float]],
    free_endpoints: Sequence[str],
    facts: Callable[[], ServerFacts] | None,
) -> Price:
    """The price of ``info`` sent as ``wire_model`` to ``base_url`` (see the module docstring for the order);
    ``facts`` asks the server what it is (called only when the settings do not decide; None: a server that is
    not asked, as a cloud API is not)."""
    for key in (info.shortname, info.model, wire_model):
        if key in prices:
            return Price(
                f"c.AriesModels.prices[{key!r}]", with_overrides(info, {}, {info.shortname: prices[key]})
            )
    entry = free_endpoint(base_url, free_endpoints)
    if entry:
        return Price(f"c.AriesModels.free_endpoints ({entry})", free=True)
    told = facts() if facts is not None else ServerFacts()
    if told.server:
        return Price(f"{told.server} server ({told.server_source})", free=True)
    for name in (info.shortname, info.model, wire_model):
        listed = list_price(name)
        if listed is not None:
            return Price(f"list price of {listed.model}", listed)
    where = "the price table does not know it"
    if facts is not None and told.reached:
        where += (
            f", and the server at {base_url} does not identify as a local model server ({_LOCAL_SERVERS})"
        )
    elif facts is not None:
        where += f", and the server at {base_url} did not answer what it is"
    problem = (
        f"no price is known for {wire_model!r} ({where}); give its price "
        f"(c.AriesModels.prices = {{{wire_model!r}: [input, output]}}, USD per million tokens) or, if it costs "
        f"nothing, name the endpoint free (c.AriesModels.free_endpoints = [{base_url or 'its base URL'!r}])"
    )
    return Price(f"unknown: {where}", problem=problem)


@functools.lru_cache(maxsize=256)  # asked before and after every call: a pure function of the name
def list_price(model: str) -> ModelInfo | None:
    """The table's entry of a paid model named ``model`` (shortname or model id, with a provider prefix or a
    date suffix ignored), or None. The local shortnames' $0 is no list price: a server has to say it is local."""
    name = _SUFFIX.sub("", model.strip().lower().rsplit("/", 1)[-1])
    for info in SHORTNAMES.values():
        if not PROVIDERS[info.provider].local and info.priced and name in (info.shortname, info.model):
            return info
    return None


def free_endpoint(base_url: str | None, entries: Sequence[str]) -> str:
    """The entry of ``c.AriesModels.free_endpoints`` that names ``base_url``, or "". An entry is a URL (it
    names every base URL under it: ``http://gpu-box:8000`` names ``http://gpu-box:8000/v1``) or a host with an
    optional port (``gpu-box``, ``10.0.0.5:8000``)."""
    if not base_url or not entries:
        return ""
    url = urlsplit(base_url.strip())
    host, port = (url.hostname or "").lower(), url.port or (443 if url.scheme == "https" else 80)
    path = url.path.rstrip("/")
    for entry in entries:
        text = entry.strip()
        named = urlsplit(text if "://" in text else f"//{text}")
        if (named.hostname or "").lower() != host:
            continue
        if named.port is not None and named.port != port:
            continue
        if "://" in text:
            default = 443 if named.scheme == "https" else 80
            if named.scheme != url.scheme or (named.port or default) != port:
                continue
            prefix = named.path.rstrip("/")
            if path != prefix and not path.startswith(prefix + "/"):
                continue
        return text
    return ""
