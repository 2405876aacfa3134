"""Names in the user namespace whose object is built on first use (or in the background) and then swapped in.

Importing pandas, tree-sitter and a 256-dimensional embedding model would delay the kernel's first reply, so the
namespace starts with :class:`LazyName` placeholders. The first attribute access builds the real object (waiting
for a background build that is already running), puts it in the namespace under the same name, and forwards the
access; afterwards the name is the real object and the placeholder is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["LazyName"]


class LazyName:
    """A placeholder for ``name`` in ``namespace`` that becomes ``factory()`` on first use."""

    def __init__(
        self, name: str, factory: Callable[[], Any], namespace: dict[str, Any], description: str
    ) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_factory", factory)
        object.__setattr__(self, "_namespace", namespace)
        object.__setattr__(self, "_description", description)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_value", None)
        object.__setattr__(self, "_error", None)
        object.__setattr__(self, "_thread", None)

    def build_in_background(self) -> None:
        """Start building the object in a daemon thread (once); a later access waits for it."""
        with self._lock:
            if self._thread is not None or self._value is not None:
                return
            thread = threading.Thread(target=self._build_quietly, name=f"aries-{self._name}", daemon=True)
            # Started before it is published: another thread that finds it (join, first use) joins it, and
            # joining a thread not started yet raises "cannot join thread before it is started" (seen in CI).
            thread.start()
            object.__setattr__(self, "_thread", thread)

    def join(self) -> Any | None:
        """Wait for a background build that has started; the object, or None if building failed or never began."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        return self._value

    def _build_quietly(self) -> None:
        try:
            self._resolve()
        except BaseException as exc:  # kept and re-raised on the user's first access, where it can be read
            object.__setattr__(self, "_error", exc)

    def _resolve(self) -> Any:
        with self._lock:
            if self._value is None:
                if self._error is not None:
                    raise self._error
                value = self._factory()
                object.__setattr__(self, "_value", value)
                # Swap in the real object only if the user has not rebound the name meanwhile.
                if self._namespace.get(self._name) is self:
                    self._namespace[self._name] = value
            return self._value

    def _wait(self) -> Any:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._error is not None:
            raise RuntimeError(f"Building `{self._name}` failed: {self._error}") from self._error
        return self._resolve()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_repr_") or attr in (
            "_ipython_display_",
            "_ipython_canary_method_should_not_exist_",
        ):
            # IPython's display machinery probes these; answering from the real object would build it just to
            # decide how to print the placeholder.
            if self._value is None:
                raise AttributeError(attr)
        return getattr(self._wait(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._wait(), attr, value)

    def __dir__(self) -> list[str]:
        return dir(self._wait())

    def __repr__(self) -> str:
        if self._value is not None:
            return repr(self._value)
        if self._error is not None:
            return f"<{self._name}: building it failed: {self._error!r}>"
        state = "being built in the background" if self._thread is not None else "built on first use"
        return f"<{self._name}: {self._description}; {state}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wait()(*args, **kwargs)
