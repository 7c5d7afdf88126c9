"""Termination signals during a release: abort cleanly before publishing, or finish publishing.

A scheduler stopping a job sends SIGTERM (systemd, Kubernetes, Prefect's
cancellation), a closed terminal SIGHUP, an operator SIGINT. Python's defaults
kill the process at once on the first two, leaving a reservation and staged
outputs for the ledger's recovery to settle. Inside :func:`terminations` (the
release path, in the main thread) each of them raises :class:`Terminated`, so
that the release's own cleanup runs — staged outputs removed, the reservation
aborted: nothing published, nothing charged — while the release is being
computed; from the moment its charge is settled until its outputs are
published and committed, the signal is held and raised only afterwards, so a
release is never left published in part.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Terminated", "Guard", "terminations"]

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """A termination signal stopped a release. ``published``: it came while the release was publishing, which
    was finished first (the outputs are published and charged); else nothing was."""

    def __init__(self, signum: int, published: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.published = published


class Guard:
    """What :func:`terminations` yields: set :attr:`publishing` when the release starts to publish."""

    def __init__(self) -> None:
        self.publishing = False
        self.held: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.publishing:
            self.held = self.held or signum
            return
        raise Terminated(signum)


@contextmanager
def terminations() -> Iterator[Guard]:
    """Turn SIGTERM, SIGHUP and SIGINT into :class:`Terminated` for the block (main thread only: elsewhere signals
    cannot be handled, and the block runs as before); a signal held while publishing is raised at the end."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = {}
    for s in SIGNALS:
        try:
            previous[s] = signal.signal(s, guard.handler)
        except (ValueError, OSError):  # pragma: no cover - an embedding that owns its signals
            pass
    try:
        yield guard
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if guard.held is not None:
        raise Terminated(guard.held, published=True)
