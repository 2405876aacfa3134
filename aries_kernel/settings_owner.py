"""The one owner of the settings that decide what runs unasked: only the user changes them, in a cell of theirs.

Those settings (:data:`PROTECTED`: the permission mode, auto-approve, the keys passed through, the MCP servers,
the model base URLs, prices and spend limits) are read from the Jupyter config once, when the kernel starts,
and are owned from then on by one :class:`SettingsOwner` per shell (``context.settings_owner``). Every settings
object built later (the agent's ``AriesAgent``, the router's ``AriesModels``) is *adopted*: its protected traits
get the owner's values, whatever the config says by then.

Code the user did not type runs *untrusted* (:meth:`SettingsOwner.untrusted`): an agent run, an MCP client's
``repl`` step. While it runs, and afterwards from anything it left behind (a thread, a callback compiled from
its code), an assignment to a protected trait is refused with a :class:`~traitlets.TraitError`; a change made
behind the traits' back (a list mutated in place, the trait storage or the config written) is found at the next
boundary (:meth:`SettingsOwner.settle`: a step's end, a cell's start or end, a run's start) and set back. Before
any untrusted code has run in the kernel, such changes are the user's and are kept; after, only the traits'
own doors (``%aries config``, attribute assignment in a cell) change a protected setting. Every refusal is kept
in :attr:`SettingsOwner.reports` and shown at the start of the user's next cell.

This is a lock on the settings' doors, not a sandbox: code running in the kernel can still rewrite Aries' own
objects in memory. What keeps the provider keys out of reach is that they are not in the kernel at all (the
key broker); what keeps files and commands in check is the Repl guard.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from traitlets import TraitError
from traitlets.config import Config, Configurable
from traitlets.config.loader import LazyConfigValue

__all__ = ["ONLY_YOU", "PROTECTED", "SettingsOwner", "check_change", "note_untrusted_code"]

# Settings, by class, that decide what runs without asking or what it may cost. An MCP server is a command the
# kernel runs; a base URL is where prompts (and keys) go; prices and limits stop spending.
PROTECTED: dict[str, tuple[str, ...]] = {
    "AriesAgent": ("permission_mode", "auto_approve", "pass_env_keys", "mcp_servers"),
    "AriesModels": (
        "base_urls",
        "prices",
        "free_endpoints",
        "session_budget_usd",
        "session_budget_tokens",
        "daily_budget_usd",
        "daily_budget_tokens",
        "team_daily_budget_usd",
        "spend_file",
    ),
}

# File names of the code untrusted steps compiled (process-wide: one kernel, one interpreter). A frame of one of
# these on the stack means the change comes from such code, even when it runs later from a callback.
_UNTRUSTED_CODE: set[str] = set()
_MISSING = object()
ONLY_YOU = (
    "Only you change the permission mode, approval, keys passed through, MCP servers, model endpoints, prices "
    "and spend limits, in a cell of your own (`%aries config name=value`, or a Jupyter config file)."
)


def note_untrusted_code(filename: str) -> None:
    """Record that ``filename`` names code an untrusted step compiled (the agent's Repl, an MCP ``repl``)."""
    _UNTRUSTED_CODE.add(filename)


def check_change(settings: Configurable, name: str, value: Any) -> Any:
    """The validator of a protected trait: ``value`` if its owner allows the change, else a :class:`TraitError`.

    A settings object no owner has adopted changes freely."""
    owner: SettingsOwner | None = getattr(settings, "_aries_owner", None)
    if owner is not None:
        owner._validate(settings, name, value)
    return value


class SettingsOwner:
    """The protected settings of one shell: their trusted values and who may change them."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config
        self._trusted_config = self._config_values()
        self._owned: list[Configurable] = []
        self._trusted: dict[tuple[int, str], Any] = {}
        self._untrusted: list[str] = []  # who is running untrusted code, innermost last
        # Untrusted code has run here: a change found later, past the checks, may be its leftovers'.
        self._tainted = False
        self._state = threading.local()  # .writing: the owner itself is setting a trait
        self._lock = threading.RLock()
        self.reports: list[str] = []  # refusals and set-backs, oldest first
        self._shown = 0  # reports[:_shown] were shown to the user

    # ------------------------------------------------------------------------------------------- adoption

    def adopt(self, settings: Configurable) -> Configurable:
        """Own ``settings``: from now on only the user changes its protected traits.

        With a config (a kernel's owner), they take the values the config had at start, with the user's changes
        since, whatever the config holds now; without one, the values ``settings`` has are the trusted ones."""
        names = self._names(settings)
        if not names or getattr(settings, "_aries_owner", None) is self:
            return settings
        with self._lock:
            if self.refusal_reason() is None:
                self.settle("user")
            section = self._trusted_config.get(type(settings).__name__, {})
            with self._writing():
                for name in names if self.config is not None else ():
                    value = section.get(name, _MISSING)
                    if value is _MISSING:
                        value = settings.traits()[name].default()
                    settings.set_trait(name, _copied(value))
            settings._aries_owner = self  # type: ignore[attr-defined]
            self._owned.append(settings)
            for name in names:
                self._trusted[(id(settings), name)] = _copied(getattr(settings, name))
        return settings

    # ------------------------------------------------------------------------------------ untrusted code

    @property
    def untrusted_running(self) -> str | None:
        """Who runs untrusted code right now ("the agent", "an MCP client"), else None."""
        return self._untrusted[-1] if self._untrusted else None

    @contextmanager
    def untrusted(self, who: str) -> Iterator[None]:
        """Run the block as code the user did not type: protected settings are refused to it, and whatever it
        changed behind their back is set back when it ends (reported as changed by ``who``)."""
        with self._lock:
            if not self._untrusted:
                self.settle("user")  # what the user's own cell changed so far is theirs
            self._untrusted.append(who)
            self._tainted = True
        try:
            yield
        finally:
            with self._lock:
                self._untrusted.pop()
                self.settle(who)

    def settle(self, who: str, *, report: bool = True) -> list[str]:
        """Compare the protected settings with their trusted values and return the names that differ.

        ``who`` is "user" when only the user's own code ran since the last look (a cell's end, a run's start):
        the differences are kept as theirs, unless untrusted code has run in this process, whose leftovers
        (a thread, a callback) may have made them. Otherwise (``"between cells"``, or who ran untrusted code)
        they are set back and reported."""
        with self._lock:
            changed: list[str] = []
            keep = who == "user" and not self._tainted
            live = self._config_values()
            for section, names in PROTECTED.items():
                for name in names:
                    before = self._trusted_config.get(section, {}).get(name, _MISSING)
                    now = live.get(section, {}).get(name, _MISSING)
                    if _comparable(now) == _comparable(before):
                        continue
                    changed.append(f"{section}.{name}")
                    if keep:
                        self._set_trusted_config(section, name, now)
                    else:
                        self._put_config(section, name, before)
            for settings in self._owned:
                for name in self._names(settings):
                    key, now = (id(settings), name), getattr(settings, name)
                    if now == self._trusted[key]:
                        continue
                    changed.append(f"{type(settings).__name__}.{name}")
                    if keep:
                        self._trusted[key] = _copied(now)
                    else:
                        with self._writing():
                            settings.set_trait(name, _copied(self._trusted[key]))
            if changed and not keep and report:
                self.report(f"{_changed_by(who)} changed {', '.join(changed)}; set back.")
            return changed

    # -------------------------------------------------------------------------------------------- reports

    def unshown_reports(self) -> list[str]:
        """The reports not yet shown to the user (marked shown)."""
        with self._lock:
            new, self._shown = self.reports[self._shown :], len(self.reports)
        return new

    def report(self, text: str) -> None:
        """Keep ``text`` (a refusal, a set-back) for the user's next cell and ``%aries status``."""
        self.reports.append(text)

    # ----------------------------------------------------------------------------------------- validation

    def _validate(self, settings: Configurable, name: str, value: Any) -> None:
        if getattr(self._state, "writing", False):
            return
        reason = self.refusal_reason()
        if reason is not None:
            self.report(f"Refused: {type(settings).__name__}.{name} = {value!r} {reason}.")
            raise TraitError(f"{name} cannot be changed {reason}. {ONLY_YOU}")
        with self._lock:
            self._trusted[(id(settings), name)] = _copied(value)

    def refusal_reason(self) -> str | None:
        """Why the code running now may not change a protected setting (None: it is the user's own cell)."""
        if self._untrusted:
            who = self._untrusted[-1]
            return (
                "while an agent run is in progress"
                if who == "the agent"
                else f"while {who}'s step is running"
            )
        if threading.current_thread() is not threading.main_thread():
            return "from a thread (only a cell of yours, in the kernel's main thread, can)"
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in _UNTRUSTED_CODE:
                return "by code an agent or MCP step left behind (a callback of its code)"
            frame = frame.f_back
        return None

    # -------------------------------------------------------------------------------------------- helpers

    @contextmanager
    def _writing(self) -> Iterator[None]:
        self._state.writing = True
        try:
            yield
        finally:
            self._state.writing = False

    @staticmethod
    def _names(settings: Configurable) -> tuple[str, ...]:
        traits = settings.traits()
        return tuple(name for name in PROTECTED.get(type(settings).__name__, ()) if name in traits)

    def _config_values(self) -> dict[str, dict[str, Any]]:
        """The protected keys the config sets now (a copy), by section."""
        values: dict[str, dict[str, Any]] = {}
        if self.config is None:
            return values
        for section, names in PROTECTED.items():
            if not dict.__contains__(self.config, section):
                continue
            part = dict.__getitem__(self.config, section)
            if isinstance(part, dict):
                values[section] = {
                    n: _copied(dict.__getitem__(part, n)) for n in names if dict.__contains__(part, n)
                }
        return values

    def _set_trusted_config(self, section: str, name: str, value: Any) -> None:
        part = self._trusted_config.setdefault(section, {})
        if value is _MISSING:
            part.pop(name, None)
        else:
            part[name] = _copied(value)

    def _put_config(self, section: str, name: str, value: Any) -> None:
        assert self.config is not None
        part = self.config[section] if isinstance(self.config.get(section), Config) else None
        if part is None:
            part = Config()
            dict.__setitem__(self.config, section, part)
        if value is _MISSING:
            dict.pop(part, name, None)
        else:
            dict.__setitem__(part, name, _copied(value))


def _changed_by(who: str) -> str:
    if who == "between cells":
        return "Code running between your cells (a thread or callback)"
    if who == "user":
        return "Code that wrote past the settings' checks (in place, or into get_ipython().config) after agent or MCP code had run here"
    return who[:1].upper() + who[1:]


def _comparable(value: Any) -> Any:
    # A LazyConfigValue (c.X.list.append(...)) compares by identity; what it would do is what counts.
    return ("lazy", repr(value.to_dict())) if isinstance(value, LazyConfigValue) else value


def _copied(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, list | dict | set) else value
