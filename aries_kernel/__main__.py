"""``python -m aries_kernel``: launch the kernel (``-f connection_file``) or run a command (``install``, ...)."""

from aries_kernel.cli import main

main()
