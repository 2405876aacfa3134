"""The warm-up's background imports never run beside a cell: a cell that starts waits for the one under way, and
the next waits for the cell's end (two threads importing SQLAlchemy at once can see it half initialized)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from aries_kernel import extension


def test_a_cell_waits_for_the_import_under_way_and_the_next_waits_for_the_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, release = threading.Event(), threading.Event()
    imported: list[str] = []

    def slow_import(name: str) -> None:
        imported.append(name)
        started.set()
        release.wait(10)

    class Ready:
        ready = True

    class Index:
        def join(self) -> Any:
            return Ready()

    monkeypatch.setattr(extension, "_warm_modules", lambda context: ["first", "second"])
    monkeypatch.setattr(extension, "_import_quietly", slow_import)
    idle = threading.Event()
    idle.set()
    worker = threading.Thread(target=extension._import_warm_modules, args=(None, Index(), idle), daemon=True)
    worker.start()
    assert started.wait(10)
    idle.clear()  # a cell starts while "first" is imported: it waits for that import to end
    assert not extension._background_import.acquire(timeout=0.2)
    release.set()
    assert extension._background_import.acquire(timeout=10)
    extension._background_import.release()
    started.clear()
    assert not started.wait(0.3) and imported == ["first"]  # nothing imported while the cell runs
    idle.set()  # the cell ended
    worker.join(10)
    assert imported == ["first", "second"]
