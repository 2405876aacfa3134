"""``%aries model``: show the four model slots, or point one at another model at run time."""

from __future__ import annotations

import html
import math
import numbers
from typing import Any

import pandas as pd
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.context import AriesContext
from aries_kernel.key_broker import where_keys_live
from aries_kernel.models.errors import ModelError
from aries_kernel.models.router import SLOTS
from aries_kernel.models.shortnames import SHORTNAMES
from aries_kernel.pillars import shared_models

from .aries import status_section, subcommand

__all__ = ["SlotTable", "model_command"]


class SlotTable(pd.DataFrame):
    """A DataFrame of the model slots, one a row. Its plain-text form shows every column (``jupyter console``
    would elide the base URLs); its HTML is a list, a slot a line and its fields wrapping as the width asks: as a
    table its 14 columns were clipped at JupyterLab's default width, with model names broken over three lines.
    """

    def __repr__(self) -> str:
        return self.to_string()

    def _repr_html_(self) -> str:
        slots = []
        for slot, row in self.iterrows():
            fields = " ".join(_field_html(str(name), value) for name, value in row.items() if _shown(value))
            name = f'<b style="display:inline-block;min-width:6em">{html.escape(str(slot))}</b>'
            slots.append(f'<div style="{_SLOT}">{name} {fields}</div>')
        return f'<div class="aries-slots">{"".join(slots)}</div>'


_SLOT = "border-top:1px solid #d0d7de;padding:3px 0"
_FIELD = "display:inline-block;margin-right:1.2em"
_LONG = 60  # a longer value (an error, a long URL) may wrap; a shorter one, a model name, never does


def _shown(value: Any) -> bool:
    """A field worth a place: not empty, not a missing number (an error row has no price)."""
    missing = isinstance(value, numbers.Real) and math.isnan(value)
    return not (value is None or (isinstance(value, str) and not value) or missing)


def _field_html(name: str, value: Any) -> str:
    """One field of a slot: its column name, dimmed, then its value (numbers grouped: 200,000)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        text = f"{int(value):,}"
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        text = f"{float(value):g}"
    else:
        text = str(value)
    wrap = "white-space:nowrap" if len(text) <= _LONG else "overflow-wrap:anywhere"
    return (
        f'<span style="{_FIELD};{wrap}"><span style="color:#57606a">{html.escape(name)}</span> '
        f"{html.escape(text)}</span>"
    )


@subcommand("model", "show the model slots, or set one: %aries model [slot] <shortname or provider:model>")
@magic_arguments()
@argument("words", nargs="*", help="[slot] <shortname or provider:model>; the slot defaults to primary")
@argument("--base-url", default=None, help="base URL of the model's provider (Ollama, llama.cpp, custom)")
@argument("--usage", action="store_true", help="show calls, tokens and cost per slot instead")
def model_command(magics: Any, args: str, cell: str | None) -> Any:
    """Show the model slots (primary, reasoning, cheap, bulk), or change one.

    Examples::

        %aries model                         the slot table
        %aries model haiku                   primary slot -> haiku
        %aries model bulk ollama:llama3      bulk slot -> a local Ollama model
        %aries model cheap custom:my-model --base-url http://gpu-box:8000/v1
        %aries model --usage                 calls, tokens and cost per slot

    The table says where each slot resolves and why (``resolves``: set, an empty slot's fallback, or a slot
    without a key following a local primary), the model the server serves, the context window and where it
    comes from (``window_from``: the settings, the server's metadata, or the table), and whether the server's
    chat template takes tools.
    """
    parsed = parse_argstring(model_command, args)
    router = shared_models(magics.context)
    if parsed.usage:
        return SlotTable(router.usage())
    words = parsed.words
    if not words:
        return SlotTable(router.slots())
    if len(words) > 2 or (len(words) == 2 and words[0] not in SLOTS):
        raise UsageError(
            f"Usage: %aries model [slot] <shortname or provider:model>; slots: {', '.join(SLOTS)}; "
            f"shortnames: {', '.join(SHORTNAMES)}."
        )
    slot, spec = (words[0], words[1]) if len(words) == 2 else ("primary", words[0])
    if spec in SLOTS:
        raise UsageError(
            f"Name a model for the {spec} slot: %aries model {spec} <shortname or provider:model>."
        )
    try:
        router.set_slot(slot, spec, base_url=parsed.base_url)
    except ModelError as exc:
        raise UsageError(str(exc)) from exc
    return SlotTable(router.slots())


@status_section("Models")
def models_status(context: AriesContext) -> str | None:
    """One line per slot: model, context window (and where it comes from), key, and why a slot follows another;
    then where the provider keys live (the key broker, or the kernel process)."""
    router = shared_models(context)
    lines = []
    for slot, row in router.slots().iterrows():
        if "provider" not in row or not isinstance(row.get("provider"), str):
            lines.append(f"{slot:<10} {row['model']}")
            continue
        lines.append(
            f"{slot:<10} {row['shortname']:<22} {row['provider']}:{row['model']}  "
            f"{row['context_window']:,} tokens ({row['window_from']})  key {row['key']}"
            + ("" if row["resolves"] == "set" else f"  [{row['resolves']}]")
        )
    lines.append(where_keys_live())
    return "\n".join(lines)
