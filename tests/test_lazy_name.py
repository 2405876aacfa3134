"""LazyName's background build: a thread that joins it or uses the name while the build thread is being
started waits for the build instead of failing."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from aries_kernel.lazy import LazyName


def test_joining_while_the_build_thread_is_being_started_waits_for_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernel's warm-up thread joins `codebase` while a cell may start its build: each join or use made in
    # the moment between the build thread's creation and its start must not fail (two CI runs saw
    # "cannot join thread before it is started", once in a notebook cell and once in the warm-up thread).
    namespace: dict[str, Any] = {}
    built = object()
    lazy = LazyName("thing", lambda: built, namespace, "a thing")
    namespace["thing"] = lazy
    failures: list[BaseException] = []
    users: list[threading.Thread] = []
    original = threading.Thread.start

    def other_thread_uses_it() -> None:
        try:
            lazy.join()
            assert lazy.__dir__() == dir(built)
        except BaseException as exc:  # recorded for the assertion below, in the test's thread
            failures.append(exc)

    def start(thread: threading.Thread) -> None:
        if thread.name == "aries-thing":  # just before the build thread starts: another thread uses the name
            user = threading.Thread(target=other_thread_uses_it)
            users.append(user)
            original(user)
            user.join(timeout=0.5)  # it may wait for the lock this start is made under, and that is fine
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    lazy.build_in_background()
    assert lazy.join() is built
    for user in users:
        user.join()
    assert len(users) == 1 and failures == []
    assert namespace["thing"] is built
