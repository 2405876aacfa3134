"""Fixtures of the model-layer tests (``pytest_plugins``): a loopback server and routers pointing at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from traitlets.config import Config

from aries_kernel.models.router import ModelRouter
from tests.loopback import ScriptedModelServer

# One slot spec per wire format; both reach the loopback server through the SDKs' base-URL variables.
WIRES = {"anthropic": "sonnet", "openai": "gpt4o"}


def fast_config(**extra: object) -> Config:
    """Router settings for tests: real retries with short backoff (the behaviour is the same, only faster)."""
    config = Config()
    config.AriesModels.backoff_base = 0.01
    config.AriesModels.backoff_max = 0.05
    config.AriesModels.max_retries = 3
    for name, value in extra.items():
        setattr(config.AriesModels, name, value)
    return config


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModelServer]:
    """A loopback server, with both SDKs' base URLs and dummy keys pointing at it."""
    with ScriptedModelServer() as running:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.anthropic_url)
        monkeypatch.setenv("OPENAI_BASE_URL", running.openai_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield running


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> str:
    """Each wire format in turn."""
    return str(request.param)


@pytest.fixture
def wire_spec(wire: str) -> str:
    """The slot spec of ``wire``'s model (``sonnet`` or ``gpt4o``)."""
    return WIRES[wire]


@pytest.fixture
def make_router() -> Iterator[Callable[..., ModelRouter]]:
    """Build routers with :func:`fast_config` (keyword arguments are further ``AriesModels`` settings);
    their connections are closed after the test."""
    made: list[ModelRouter] = []

    def make(**settings: Any) -> ModelRouter:
        made.append(ModelRouter(config=fast_config(**settings)))
        return made[-1]

    yield make
    for router in made:
        router.close()


@pytest.fixture
def router(
    make_router: Callable[..., ModelRouter], server: ScriptedModelServer, wire_spec: str
) -> ModelRouter:
    """A router whose primary slot speaks ``wire`` to the loopback server."""
    models = make_router()
    models.set_slot("primary", wire_spec)
    return models
