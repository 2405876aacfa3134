"""The shell context hands out one object per pillar, even when threads ask at the same moment."""

from __future__ import annotations

import threading
from pathlib import Path

from aries_kernel.context import AriesContext


def test_concurrent_first_uses_share_one_codebase(small_repo: Path) -> None:
    # The background indexing thread and the agent may both be first to ask for the codebase.
    for _ in range(5):
        context = AriesContext(None, root=small_repo)
        barrier = threading.Barrier(4)
        got: list[object] = []

        def first_use(
            context: AriesContext = context, barrier: threading.Barrier = barrier, got: list[object] = got
        ) -> None:
            barrier.wait()
            got.append(context.codebase)

        threads = [threading.Thread(target=first_use) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({id(codebase) for codebase in got}) == 1
        got[0].wait_ready()  # type: ignore[attr-defined]
