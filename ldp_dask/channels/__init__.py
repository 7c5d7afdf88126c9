"""Local channels: one module per non-interactive channel, pure numpy."""

from __future__ import annotations

from typing import Any

from .._validation import LdpDaskError
from .base import Channel, NumericChannel, noise_scale_for
from .histogram import LaplaceHistogram
from .mean import LaplaceMean

__all__ = [
    "Channel",
    "NumericChannel",
    "LaplaceHistogram",
    "LaplaceMean",
    "CHANNELS",
    "channel_from_params",
    "noise_scale_for",
]

#: Registry of channels by their public name (used by summaries and the CLI).
CHANNELS: dict[str, type[Channel]] = {
    LaplaceHistogram.name: LaplaceHistogram,
    LaplaceMean.name: LaplaceMean,
}


def channel_from_params(name: str, params: dict[str, Any]) -> Channel:
    """Rebuild a channel from its registry name and :meth:`Channel.params`."""
    try:
        cls = CHANNELS[name]
    except KeyError:
        raise LdpDaskError(
            f"Unknown channel {name!r}; known channels: {', '.join(sorted(CHANNELS))}."
        ) from None
    return cls.from_params(dict(params))
