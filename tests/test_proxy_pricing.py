"""Prices by what a server is, not where it is (issue 22, hole 7): a LiteLLM-style proxy on loopback serving a
paid model is priced as that model, so a USD limit stops it; $0 only for a server that identifies as llama.cpp,
vLLM or Ollama, or that the user names free; an unknown model behind a proxy is refused under a USD limit.

The proxy is the loopback server (``tests/loopback.py``) with ``present("LiteLLM")``: its models listed as
``owned_by: "openai"``, no ``/props``, no ``/api/version``, as a LiteLLM proxy answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from aries_kernel.agent import Agent
from aries_kernel.agent.events import RunFinished
from aries_kernel.agent.settings import AriesAgent
from aries_kernel.models import BudgetExceeded, ModelRouter
from aries_kernel.models.pricing import free_endpoint, list_price, price_of
from aries_kernel.models.server import ServerFacts, server_facts
from aries_kernel.models.shortnames import SHORTNAMES, resolve
from aries_kernel.models.types import Message, ModelRequest
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer

HELLO = ModelRequest([Message("user", "hello")], max_tokens=50)
BIG = {"input_tokens": 1_000_000, "output_tokens": 100_000}  # gpt-4o: $2.50 + $1.00; sonnet: $3.00 + $1.50


@pytest.fixture
def spend_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "spend.json"
    monkeypatch.setenv("ARIES_SPEND_FILE", str(path))
    return path


def chats(server: ScriptedModelServer) -> int:
    """Model calls the server answered (count_tokens requests left out)."""
    return sum(r.path.endswith(("/v1/messages", "/chat/completions")) for r in server.requests)


# ---------------------------------------------------------------------------- a proxy serving a paid model


@pytest.mark.parametrize(
    ("spec", "cost"),
    [("gpt4o", 3.5), ("custom:gpt-4o", 3.5), ("openai:openai/gpt-4o-2024-08-06", 3.5), ("sonnet", 4.5)],
)
def test_a_proxy_on_loopback_serving_a_paid_model_is_stopped_by_a_daily_usd_limit(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    spend_file: Path,
    spec: str,
    cost: float,
) -> None:
    server.present("LiteLLM", "gpt-4o")
    server.responder = lambda body: Reply(text="ok", **BIG)
    router = make_router(daily_budget_usd=5.0, base_urls={"custom": server.openai_url})
    client = router.set_slot("primary", spec)  # sonnet: the Anthropic format, through ANTHROPIC_BASE_URL
    assert client.local  # on loopback: short waits, asked what it is; but no local model server
    assert client.complete(HELLO).usage.cost_usd == pytest.approx(cost)
    client.complete(HELLO)  # below the limit before it: sent, and it crosses the limit
    with pytest.raises(BudgetExceeded, match=r"daily budget of \$5.0000 is reached"):
        client.complete(HELLO)
    assert chats(server) == 2
    assert router.limits.spend().today_usd == pytest.approx(2 * cost)
    row = router.slots().loc["primary"]
    assert row["price"].startswith(
        "list price of claude-sonnet-4-6" if spec == "sonnet" else "list price of gpt-4o"
    )
    assert row["usd_per_mtok_in"] == (3.0 if spec == "sonnet" else 2.5)


def test_an_agent_run_through_the_proxy_stops_at_the_limit(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path, tmp_path: Path
) -> None:
    server.present("LiteLLM", "gpt-4o")
    server.responder = lambda body: Reply(text="ok", input_tokens=2_000_000, output_tokens=100_000)
    router = make_router(daily_budget_usd=5.0)
    router.set_slot("primary", "gpt4o")
    agent = Agent(None, root=tmp_path, router=router, settings=AriesAgent())
    first = list(agent.run("hi"))[-1]
    assert isinstance(first, RunFinished) and first.reason == "done" and first.cost_usd == pytest.approx(6.0)
    second = list(agent.run("again"))[-1]
    assert isinstance(second, RunFinished) and second.reason == "budget"
    assert "daily budget of $5.0000 is reached ($6.0000 spent" in second.detail
    assert chats(server) == 1


def test_the_same_proxy_named_free_costs_nothing(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    server.present("LiteLLM", "gpt-4o")
    server.responder = lambda body: Reply(text="ok", **BIG)
    for entry in (
        server.url,
        server.openai_url + "/",
        f"127.0.0.1:{server.url.rsplit(':', 1)[1]}",
        "127.0.0.1",
    ):
        router = make_router(daily_budget_usd=5.0, free_endpoints=[entry])
        client = router.set_slot("primary", "gpt4o")
        for _ in range(3):
            assert client.complete(HELLO).usage.cost_usd == 0.0
        row = router.slots().loc["primary"]
        assert row["price"] == f"free: c.AriesModels.free_endpoints ({entry})"
        assert (row["usd_per_mtok_in"], row["usd_per_mtok_out"]) == (0.0, 0.0)
    assert chats(server) == 12
    other_port = make_router(free_endpoints=["127.0.0.1:1", "http://127.0.0.1", "https://" + server.url[7:]])
    assert other_port.set_slot("primary", "gpt4o").price().why == "list price of gpt-4o"


def test_prices_set_by_the_user_win_everywhere(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    server.present("llama.cpp")
    router = make_router(prices={"gpt4o": [1.0, 2.0]}, free_endpoints=[server.url])
    server.script(Reply(text="ok", input_tokens=1_000_000, output_tokens=1_000_000))
    assert router.set_slot("primary", "gpt4o").complete(HELLO).usage.cost_usd == pytest.approx(3.0)
    assert router.slots().loc["primary", "price"] == "c.AriesModels.prices['gpt4o']"


# ---------------------------------------------------------------------------- local model servers: $0


@pytest.mark.parametrize(
    ("kind", "spec", "source"),
    [
        ("llama.cpp", "local", "/props"),
        ("llama.cpp", "gpt4o", "/props"),  # whatever name is sent, llama-server runs its own weights
        ("vLLM", "custom:qwen", "/v1/models owned_by"),
        ("Ollama", "ollama:qwen3", "/api/version"),
    ],
)
def test_a_local_model_server_costs_nothing_under_a_usd_limit(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    spend_file: Path,
    kind: str,
    spec: str,
    source: str,
) -> None:
    server.present(kind, "qwen3" if kind == "Ollama" else "qwen")
    server.responder = lambda body: Reply(text="ok", **BIG)
    router = make_router(daily_budget_usd=0.01)
    client = router.set_slot("primary", spec, base_url=server.openai_url)
    for _ in range(3):
        assert client.complete(HELLO).usage.cost_usd == 0.0
    assert chats(server) == 3 and router.limits.spend().today_usd == 0.0
    assert router.slots().loc["primary", "price"] == f"free: {kind} server ({source})"


def test_what_each_server_says_it_is() -> None:
    for kind, expected in [
        ("llama.cpp", "llama.cpp"),
        ("vLLM", "vLLM"),
        ("Ollama", "Ollama"),
        ("LiteLLM", ""),
    ]:
        with ScriptedModelServer() as running:
            facts = server_facts(running.present(kind).openai_url, "m")
            assert facts.reached and facts.server == expected, kind
    with ScriptedModelServer() as silent:  # a server that publishes nothing at all (a bare proxy)
        assert server_facts(silent.openai_url, "m").server == ""
    with ScriptedModelServer() as pretender:  # a /props that is not llama.cpp's, models owned by "system"
        pretender.props = {"version": "1"}
        pretender.models = [{"id": "m", "object": "model", "owned_by": "system"}]
        assert server_facts(pretender.openai_url, "m").server == ""
    with ScriptedModelServer() as gateway:  # one vLLM backend among paid models: the gateway is no vLLM
        gateway.models = [{"id": "qwen", "owned_by": "vllm"}, {"id": "gpt-4o", "owned_by": "openai"}]
        assert server_facts(gateway.openai_url, "qwen").server == ""


# ---------------------------------------------------------------------------- an unknown model behind a proxy


def test_an_unknown_model_behind_a_proxy_is_refused_under_a_usd_limit_and_says_what_to_set(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path
) -> None:
    server.present("LiteLLM", "corp-model")
    router = make_router(daily_budget_usd=5.0, base_urls={"custom": server.openai_url})
    client = router.set_slot("primary", "custom:corp-model")
    with pytest.raises(BudgetExceeded) as refused:
        client.complete(HELLO)
    assert chats(server) == 0
    message = str(refused.value)
    assert message.startswith(
        "Spend limit: c.AriesModels.daily_budget_usd ($5.0000) cannot be checked for this primary call, so it "
        "was not sent: no price is known for 'corp-model'"
    )
    assert f"the server at {server.openai_url} does not identify as a local model server" in message
    assert "c.AriesModels.prices = {'corp-model': [input, output]}" in message
    assert f"c.AriesModels.free_endpoints = ['{server.openai_url}']" in message
    assert "set the USD limits to 0" in message
    assert not client.priced
    assert router.slots().loc["primary", "price"] == "unknown: counted as 0, refused under a USD limit"
    # Either remedy lets it run.
    priced = make_router(
        daily_budget_usd=5.0, base_urls=router.settings.base_urls, prices={"corp-model": [1, 1]}
    )
    server.script(Reply(text="ok", input_tokens=1_000_000, output_tokens=1_000_000))
    assert priced.set_slot("primary", "custom:corp-model").complete(HELLO).usage.cost_usd == pytest.approx(
        2.0
    )
    free = make_router(daily_budget_usd=5.0, base_urls=router.settings.base_urls, free_endpoints=[server.url])
    assert free.set_slot("primary", "custom:corp-model").complete(HELLO).usage.cost_usd == 0.0
    assert chats(server) == 2


def test_an_unknown_model_without_a_usd_limit_runs_counted_as_zero_and_says_so(
    server: ScriptedModelServer,
    make_router: Callable[..., ModelRouter],
    spend_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.present("LiteLLM", "corp-model")
    router = make_router(daily_budget_tokens=1_000, base_urls={"custom": server.openai_url})
    client = router.set_slot("primary", "custom:corp-model")
    with caplog.at_level(logging.WARNING, logger="aries_kernel.models.router"):
        assert client.complete(HELLO).usage.cost_usd == 0.0
        client.complete(HELLO)
    warned = [r.getMessage() for r in caplog.records if "counted as 0" in r.getMessage()]
    assert len(warned) == 1 and "no price is known for 'corp-model'" in warned[0]  # said once per slot
    assert router.limits.spend().today_tokens == 2 * (11 + 7)  # a token limit still counts it


def test_an_agent_run_on_an_unknown_model_under_a_usd_limit_stops_before_sending(
    server: ScriptedModelServer, make_router: Callable[..., ModelRouter], spend_file: Path, tmp_path: Path
) -> None:
    server.present("LiteLLM", "corp-model")
    router = make_router(session_budget_usd=1.0, base_urls={"custom": server.openai_url})
    router.set_slot("primary", "custom:corp-model")
    finished = list(Agent(None, root=tmp_path, router=router, settings=AriesAgent()).run("hi"))[-1]
    assert isinstance(finished, RunFinished) and finished.reason == "budget"
    assert "c.AriesModels.session_budget_usd ($1.0000) cannot be checked" in finished.detail
    assert chats(server) == 0


# ---------------------------------------------------------------------------- the rules, one by one


def test_a_gateway_on_a_private_network_is_priced_by_model() -> None:
    gateway = "http://10.20.30.40:4000/v1"
    reached = ServerFacts(reached=True)  # it answered, as no local model server
    price = price_of(
        resolve("custom:claude-sonnet-4-6"), "claude-sonnet-4-6", gateway, {}, [], lambda: reached
    )
    assert price.why == "list price of claude-sonnet-4-6" and price.cost(1_000_000, 0) == pytest.approx(3.0)
    unknown = price_of(resolve("custom:x"), "x", gateway, {}, [], lambda: ServerFacts())
    assert not unknown.known and "did not answer what it is" in unknown.problem
    named = price_of(resolve("custom:x"), "x", gateway, {}, ["10.20.30.40"], lambda: reached)
    assert named.free and named.cost(10**9, 10**9) == 0.0
    cloud = price_of(
        resolve("openrouter:meta/llama-4"), "meta/llama-4", "https://openrouter.ai/api/v1", {}, [], None
    )
    assert not cloud.known and "(the price table does not know it)" in cloud.problem


def test_list_prices_know_the_table_s_paid_models_by_name() -> None:
    gpt4o, sonnet = SHORTNAMES["gpt4o"], SHORTNAMES["sonnet"]
    for name in ("gpt-4o", "GPT-4o", "openai/gpt-4o", "gpt-4o-2024-08-06", "gpt4o"):
        assert list_price(name) is gpt4o, name
    for name in ("claude-sonnet-4-6", "anthropic/claude-sonnet-4-6", "claude-sonnet-4-6@20250929", "sonnet"):
        assert list_price(name) is sonnet, name
    for name in ("local", "devstral", "qwen2.5-coder-7b", "gpt-4o-mini", "corp-model", ""):
        assert list_price(name) is None, name  # the local shortnames' $0 is no list price


def test_free_endpoints_match_by_url_prefix_or_host() -> None:
    url = "http://gpu-box:8000/v1"
    assert free_endpoint(url, ["http://gpu-box:8000"]) == "http://gpu-box:8000"
    assert free_endpoint(url, ["http://GPU-box:8000/v1/"]) == "http://GPU-box:8000/v1/"
    assert free_endpoint(url, ["gpu-box"]) == "gpu-box"
    assert free_endpoint(url, ["gpu-box:8000"]) == "gpu-box:8000"
    for other in ("gpu-box:8001", "http://gpu-box", "https://gpu-box:8000", "http://gpu-box:8000/v2", "gpu"):
        assert free_endpoint(url, [other]) == "", other
    assert free_endpoint("https://gw.corp/v1", ["https://gw.corp:443"]) == "https://gw.corp:443"
    assert free_endpoint(None, ["gpu-box"]) == ""


# ---------------------------------------------------------------------------- in a real kernel


@pytest.mark.kernel
def test_a_kernel_behind_a_proxy_stops_at_its_daily_usd_limit(
    small_repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    server.present("LiteLLM", "claude-sonnet-4-6")
    server.responder = lambda body: Reply(text="ok", **BIG)  # every call: $4.50 at sonnet's list price
    folder = tmp_path / "jupyter"
    folder.mkdir()
    (folder / "jupyter_config.py").write_text("c.AriesModels.daily_budget_usd = 5.0\n")
    env = server.kernel_env(JUPYTER_CONFIG_DIR=str(folder), ARIES_SPEND_FILE=str(tmp_path / "spend.json"))
    km, kc = start_kernel(small_repo, env=env)
    try:
        outputs = [run_cell(kc, f"%aries question {i}") for i in range(3)]
        for cell in outputs:
            assert cell.error is None, cell.error
        assert chats(server) == 2  # $4.50, then $9.00: nothing more is sent
        last = outputs[-1].stdout + outputs[-1].stderr + str(outputs[-1].displays)
        assert "daily budget of $5.0000 is reached ($9.0000 spent" in last, last
    finally:
        stop_kernel(km, kc)
