"""Import what the first ``%aries`` needs in a background thread, so its request leaves at once.

A fresh kernel answers its first request quickly because it imports almost nothing. The first ``%aries`` then
used to pay for the agent loop, the memory plug-in (the vault, SQLAlchemy), the provider SDKs (anthropic, openai)
and ipywidgets, about four seconds, before its request could leave. :func:`warm_up_in_background` imports them
in a daemon thread started after the kernel's first reply (by :func:`aries_kernel.extension.install`, with the
indexing); a prompt that comes sooner simply waits for the imports it needs, as it would have anyway.
"""

from __future__ import annotations

import importlib
import logging
import threading

__all__ = ["WARM_MODULES", "warm_up_in_background"]

log = logging.getLogger(__name__)

WARM_MODULES = (
    "aries_kernel.magics.agent",  # the %aries prompt handler, and with it the agent loop and its tools
    "aries_kernel.agent.memory",  # the memory hook the agent loads as a plug-in: the vault, SQLAlchemy
    "aries_kernel.models.anthropic_provider",  # the anthropic SDK and httpx
    "aries_kernel.models.openai_provider",  # the openai SDK
    "aries_kernel.widgets",  # ipywidgets, for the panel
    "igraph",  # the communities of the code map in the agent's system prompt
)

_started = threading.Event()


def _import_all() -> None:
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the same import fails again, visibly, where the user needs the module
            log.debug("warm-up import of %s failed: %r", name, exc)


def warm_up_in_background() -> None:
    """Start importing :data:`WARM_MODULES` in a daemon thread (once per process)."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_import_all, name="aries-warm-up", daemon=True).start()
