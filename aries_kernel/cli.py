"""The ``aries-kernel`` command: install/uninstall the kernelspec, open a console, serve the REPL body over MCP,
or launch the kernel (after starting the key broker with the provider keys: :mod:`aries_kernel.key_broker`)."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]

_COMMANDS = ("install", "uninstall", "console", "mcp")


def _parser() -> argparse.ArgumentParser:
    # Imported here: the kernel's launch path (main) imports as little as it can.
    from aries_kernel.agent.permissions import MODES

    parser = argparse.ArgumentParser(
        prog="aries-kernel",
        description="The Aries Jupyter kernel. With no command (or -f CONNECTION_FILE) it runs the kernel.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser("install", help="install the 'aries' kernelspec")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true", help="install into this Python environment")
    where.add_argument("--prefix", metavar="DIR", help="install under DIR/share/jupyter/kernels")
    install.add_argument("--name", default="aries", help="kernelspec name (default: aries)")
    uninstall = commands.add_parser("uninstall", help="remove the 'aries' kernelspec")
    uninstall.add_argument("--name", default="aries", help="kernelspec name (default: aries)")
    commands.add_parser(
        "console",
        help="install the kernelspec into this environment if needed and open "
        "a jupyter console on the Aries kernel in the current directory (extra arguments go to the console)",
    )
    mcp = commands.add_parser(
        "mcp",
        help="serve the REPL body (codebase, vault; with --kernel, a repl in a running Aries kernel) to MCP "
        "clients over stdio, or over streamable HTTP on loopback with --http",
    )
    mcp.add_argument("--root", help="the repository (default: found from the working directory)")
    mcp.add_argument(
        "--kernel",
        metavar="ID_OR_FILE",
        help="attach to a running Aries kernel (its id, or its connection file) and serve the repl tool",
    )
    mcp.add_argument(
        "--mode",
        choices=MODES,
        help="permission mode of the repl tool (default: the kernel's c.AriesAgent.permission_mode)",
    )
    mcp.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    mcp.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one, printed)")
    mcp.add_argument(
        "--token", help="HTTP bearer token (default: $ARIES_MCP_TOKEN, else one generated and printed)"
    )
    return parser


def _require(extra: str, command: str) -> None:
    """Exit with the message naming the extra when ``command``'s optional part is not installed."""
    from aries_kernel.extras import MissingExtraError, require

    try:
        require(extra, command)
    except MissingExtraError as exc:
        raise SystemExit(f"aries-kernel: {exc}") from None


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``aries-kernel`` and ``python -m aries_kernel``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*_COMMANDS, "-h", "--help"):
        from aries_kernel import key_broker

        if key_broker.LINK_ENV in os.environ:
            key_broker.adopt()  # exec'd by the launcher below: the broker holds the keys
        else:
            key_broker.launch(argv)  # starts the broker and execs this command again; returns if it cannot
        from ipykernel.kernelapp import IPKernelApp

        from aries_kernel.kernel import AriesKernel

        IPKernelApp.launch_instance(argv=argv, kernel_class=AriesKernel)
        return

    from aries_kernel.kernelspec import install_kernelspec, uninstall_kernelspec

    if argv[0] == "console":
        _require("console", "aries-kernel console")
        install_kernelspec(prefix=sys.prefix)
        from aries_kernel.console import AriesConsoleApp

        AriesConsoleApp.launch_instance(argv=["--kernel", "aries", *argv[1:]])
        return
    args = _parser().parse_args(argv)
    if args.command == "mcp":
        _require("mcp", "aries-kernel mcp")
        from aries_kernel.mcp_server import main as serve_mcp

        serve_mcp(args)
    elif args.command == "install":
        prefix = sys.prefix if args.sys_prefix else args.prefix
        path = install_kernelspec(user=args.user, prefix=prefix, name=args.name)
        print(f"Installed kernelspec {args.name!r} in {path}")
    else:
        try:
            print(f"Removed kernelspec {args.name!r} from {uninstall_kernelspec(args.name)}")
        except KeyError as exc:
            sys.exit(str(exc.args[0]))
