"""The one retry policy (aries_kernel.retry): waits that double up to a ceiling, each with jitter."""

from __future__ import annotations

import ast
import itertools

from traitlets.config import Config

from aries_kernel.models.provider import Failure
from aries_kernel.models.router import AriesModels, SlotClient
from aries_kernel.models.shortnames import resolve
from aries_kernel.retry import Backoff
from tests.package_sources import package_trees


def test_the_waits_double_up_to_the_longest_with_jitter() -> None:
    policy = Backoff(0.01, 0.5)
    for attempt, ceiling in enumerate([0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]):
        waits = [policy.delay(attempt) for _ in range(200)]
        assert all(ceiling * 0.5 <= wait <= ceiling for wait in waits)
        assert len(set(waits)) > 1  # jitter: callers that failed together do not retry together
    assert all(0.25 <= wait <= 0.5 for wait in itertools.islice(policy.delays(), 10, 20))


def test_the_router_waits_by_the_policy_unless_the_server_says_how_long() -> None:
    settings = AriesModels(config=Config(AriesModels={"backoff_base": 2.0, "backoff_max": 5.0}))
    client = SlotClient("primary", resolve("local"), settings)
    failure = Failure(503, "busy")
    assert 1.0 <= client._retry_delay(failure, 0) <= 2.0
    assert 2.5 <= client._retry_delay(failure, 3) <= 5.0
    assert client._retry_delay(Failure(429, "slow down", retry_after=7.0), 0) == 7.0


def test_no_module_draws_its_own_jitter() -> None:
    """Backoff with jitter is written once: no other module calls random.random or random.uniform."""
    own = [
        f"{rel}:{node.lineno}"
        for rel, tree in package_trees(skip=("aries_kernel/retry.py",))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in {"random.random", "random.uniform"}
    ]
    assert not own, own
