"""What the test servers (PostgreSQL, S3) share: a free port on 127.0.0.1, and stopping their process."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, wait: float) -> None:
    """Terminate ``proc``; kill it if it has not exited within ``wait`` seconds."""
    proc.terminate()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
