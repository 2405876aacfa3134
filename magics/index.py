"""``%aries index [path]``: re-index the codebase, or index another folder; and the Codebase part of ``%aries status``."""

from __future__ import annotations

from typing import Any

from aries_kernel.magics.aries import status_section, subcommand
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from aries_kernel.context import AriesContext

__all__ = ["codebase_status", "index"]


@magic_arguments()
@argument("path", nargs="?", default=None, help="Index this folder instead (replaces `codebase`).")
@argument("--background", action="store_true", help="Return at once; the index builds in the background.")
def _index_args(line: str) -> None:
    """%aries index [path] [--background]"""


@subcommand("index", "re-index changed files, or index another folder: index [path] [--background]")
def index(magics: Any, args: str, cell: str | None) -> Any:
    """Without a path: re-index changed files and return the changes (file, change). With a path: build the
    codebase of that folder, make it ``codebase`` in the namespace, and return it once ready."""
    from aries_kernel.codebase import Codebase, CodebaseError

    options = parse_argstring(_index_args, args)  # raises UsageError on bad input
    context: AriesContext = magics.context
    if options.path is None:
        if options.background:
            raise UsageError(
                "--background applies to indexing another folder: %aries index PATH --background"
            )
        changes = context.codebase.reindex()
        print(context.codebase.status())
        return changes
    try:
        codebase = Codebase(options.path, config=context.config)
    except CodebaseError as exc:
        raise UsageError(str(exc)) from exc
    codebase.index_in_background()
    context.set_codebase(codebase)
    if magics.shell is not None:
        magics.shell.user_ns["codebase"] = codebase
    if not options.background:
        codebase.wait_ready()
    return codebase


@status_section("Codebase")
def codebase_status(context: AriesContext) -> str | None:
    """Root and state of the index."""
    codebase = context.built("codebase")
    if codebase is None:
        return (
            f"{context.root}: not started yet (indexing begins in the background once the kernel is up)\n"
            f"root: {context.root_reason}"
        )
    return f"{codebase.root}: {codebase.status()}"
