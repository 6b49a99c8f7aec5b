"""Free local TCP ports for tests that start TensorFlow servers."""

from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """`n` distinct ports that were free a moment ago on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
