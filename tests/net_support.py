"""A loopback port for a server a test starts, or for a client that must find nothing listening."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A loopback TCP port that was free a moment ago: bound to port 0 and released. The kernel hands ports out
    in turn, not the one just released, so a server started on it at once gets it (or fails loudly)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
