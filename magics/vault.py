"""``%aries vault``: search the vault from a cell, and the Vault section of ``%aries status``."""

from __future__ import annotations

from typing import Any

from aries_kernel.magics.aries import status_section, subcommand
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.context import AriesContext
from aries_kernel.pillars import shared_vault as get_vault  # the one factory of the kernel's `vault`

__all__ = ["get_vault", "vault_command", "vault_status"]


@magic_arguments()
@argument("-n", "--limit", type=int, default=10, help="How many notes to show (default 10).")
@argument("--important", action="store_true", help="Rank by PageRank authority instead of the query.")
@argument("--warmth", action="store_true", help="Show the warmth field (among the query's matches if given).")
@argument("--explore", action="store_true", help="Explore the link graph from the query's best notes.")
@argument("query", nargs="*", help="What to search for.")
def _vault_args(line: str) -> None:
    """%aries vault [-n N] [--important | --warmth | --explore] <query>"""


@subcommand(
    "vault", "search the vault: ranked notes with each signal's score (--important, --warmth, --explore)"
)
def vault_command(magics: Any, args: str, cell: str | None) -> Any:
    """Show the ranked DataFrame for a query, or the vault's summary when no query is given."""
    parsed = parse_argstring(_vault_args, args)
    query = " ".join(parsed.query).strip() or (cell or "").strip()
    vault = get_vault(magics.context)
    if parsed.limit < 1:
        raise UsageError("-n/--limit must be at least 1.")
    if parsed.important:
        return vault.query_important(limit=parsed.limit)
    if parsed.warmth:
        return vault.query_warmth(query or None, limit=parsed.limit)
    if not query:
        return vault
    try:
        if parsed.explore:
            return vault.explore(query, limit=parsed.limit)
        return vault.query_ranked(query, limit=parsed.limit)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


@status_section("Vault")
def vault_status(context: AriesContext) -> str | None:
    """Notes, links and last write of the global vault and the project brain."""
    lines = []
    for s in get_vault(context).summary():
        lines.append(
            f"{s['source']:<8} {s['notes']} notes, {s['links']} links, {s['archived']} archived, "
            f"last write {s['last_write']}  ({s['folder']})"
        )
    return "\n".join(lines)
