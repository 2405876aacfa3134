"""The ``aries-kernel`` command: install/uninstall the kernelspec, open a console, or launch the kernel."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]

_COMMANDS = ("install", "uninstall", "console")


def _parser() -> argparse.ArgumentParser:
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
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``aries-kernel`` and ``python -m aries_kernel``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*_COMMANDS, "-h", "--help"):
        from ipykernel.kernelapp import IPKernelApp

        from aries_kernel.kernel import AriesKernel

        IPKernelApp.launch_instance(argv=argv, kernel_class=AriesKernel)
        return

    from aries_kernel.kernelspec import install_kernelspec, uninstall_kernelspec

    if argv[0] == "console":
        install_kernelspec(prefix=sys.prefix)
        from aries_kernel.console import AriesConsoleApp

        AriesConsoleApp.launch_instance(argv=["--kernel", "aries", *argv[1:]])
        return
    args = _parser().parse_args(argv)
    if args.command == "install":
        prefix = sys.prefix if args.sys_prefix else args.prefix
        path = install_kernelspec(user=args.user, prefix=prefix, name=args.name)
        print(f"Installed kernelspec {args.name!r} in {path}")
    else:
        try:
            print(f"Removed kernelspec {args.name!r} from {uninstall_kernelspec(args.name)}")
        except KeyError as exc:
            sys.exit(str(exc.args[0]))
