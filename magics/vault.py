"""``%aries vault``: search the vault from a cell, review and remove what the agent wrote in this kernel
(``--session``), and the Vault section of ``%aries status``."""

from __future__ import annotations

from typing import Any

from aries_kernel.magics.aries import HelpText, status_section, subcommand
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
@argument(
    "--session",
    action="store_true",
    help="List the notes the agent itself wrote in this kernel (its tools, Repl code, reflection, compaction).",
)
@argument("--forget", action="store_true", help="With --session: archive the notes it created (restorable).")
@argument(
    "--purge", action="store_true", help="With --session: remove them and their learned state for good."
)
@argument(
    "--yes", action="store_true", help="With --forget or --purge: do it without showing the list first."
)
@argument("query", nargs="*", help="What to search for.")
def _vault_args(line: str) -> None:
    """%aries vault [-n N] [--important | --warmth | --explore] <query>
    %aries vault --session [--forget | --purge] [--yes]"""


@subcommand(
    "vault",
    "search the vault: ranked notes with each signal's score (--important, --warmth, --explore); "
    "--session lists what the agent wrote in this kernel, --forget or --purge (with --yes) removes it",
)
def vault_command(magics: Any, args: str, cell: str | None) -> Any:
    """Show the ranked DataFrame for a query, or the vault's summary when no query is given."""
    parsed = parse_argstring(_vault_args, args)
    query = " ".join(parsed.query).strip() or (cell or "").strip()
    vault = get_vault(magics.context)
    if parsed.limit < 1:
        raise UsageError("-n/--limit must be at least 1.")
    if parsed.session or parsed.forget or parsed.purge or parsed.yes:
        return session_review(vault, parsed, query)
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


def session_review(vault: Any, parsed: Any, query: str) -> Any:
    """``--session``: the agent's notes of this kernel, and with ``--forget``/``--purge`` their removal, shown
    first and done only with ``--yes`` (as ``%aries rewind`` overwrites only with ``--force``)."""
    if not parsed.session:
        raise UsageError(
            "--forget, --purge and --yes go with --session: %aries vault --session --forget --yes"
        )
    if parsed.forget and parsed.purge:
        raise UsageError("Give --forget (archive, restorable) or --purge (for good), not both.")
    if query or parsed.important or parsed.warmth or parsed.explore:
        raise UsageError("--session takes no query and no --important, --warmth or --explore.")
    frame = vault.agent_notes()
    if not (parsed.forget or parsed.purge):
        if parsed.yes:
            raise UsageError("--yes confirms --forget or --purge; give one of them.")
        return frame if len(frame) else HelpText("The agent wrote no note in this kernel.")
    created = frame[frame["wrote"] == "created"]
    edited = frame[frame["wrote"] == "edited"]
    kept = (
        f"\nKept: {len(edited)} note(s) the agent edited but did not create "
        f"({_names(edited)}); vault.history(title) shows what it changed."
        if len(edited)
        else ""
    )
    if not len(created):
        return HelpText("The agent created no note in this kernel." + kept)
    verb = "purge" if parsed.purge else "forget"
    if not parsed.yes:
        how = (
            "for good, with their learned state"
            if parsed.purge
            else "to the archive (vault.restore undoes it)"
        )
        return HelpText(
            f"Would {verb} {len(created)} note(s) the agent created in this kernel, {how}:\n"
            + "\n".join(
                f"  [{r.source}] {r.title}  ({r.origin}, turn {r.turn})" for r in created.itertuples()
            )
            + kept
            + f"\nRun %aries vault --session --{verb} --yes to do it."
        )
    for r in created.itertuples():
        vault.forget(r.title, where=r.source, purge=parsed.purge)
    done = "Purged" if parsed.purge else "Forgot (archived)"
    return HelpText(
        f"{done} {len(created)} note(s) the agent created in this kernel: {_names(created)}." + kept
    )


def _names(frame: Any) -> str:
    return ", ".join(f"[[{title}]]" for title in frame["title"])


@status_section("Vault")
def vault_status(context: AriesContext) -> str | None:
    """Notes, links and last write of the global vault and the project brain, and what a rebuild lost."""
    vault = get_vault(context)
    lines = []
    for s in vault.summary():
        lines.append(
            f"{s['source']:<8} {s['notes']} notes, {s['links']} links, {s['archived']} archived, "
            f"last write {s['last_write']}  ({s['folder']})"
        )
    lines.extend(f"warning: {problem}" for problem in vault.problems)
    return "\n".join(lines)
