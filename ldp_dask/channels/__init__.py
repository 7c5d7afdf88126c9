"""Local channels: one module per non-interactive channel, pure numpy."""

from __future__ import annotations

import inspect
from typing import Any

from .._validation import LdpDaskError
from .base import Channel, NumericChannel, noise_scale_for
from .haar import HaarAdaptive, HaarLaplace, adaptive_levels, haar_level
from .histogram import LaplaceHistogram, default_bins
from .mean import LaplaceMean
from .rr import ENCODINGS, RandomizedResponse
from .wavelet import CALIBRATIONS, WaveletLaplace, wavelet_levels

__all__ = [
    "Channel",
    "NumericChannel",
    "LaplaceHistogram",
    "LaplaceMean",
    "WaveletLaplace",
    "wavelet_levels",
    "HaarLaplace",
    "HaarAdaptive",
    "RandomizedResponse",
    "ENCODINGS",
    "haar_level",
    "adaptive_levels",
    "CALIBRATIONS",
    "CHANNELS",
    "channel_from_params",
    "channel_class",
    "noise_scale_for",
    "default_bins",
    "build_channel",
]

#: Registry of channels by their public name (used by summaries and the CLI).
CHANNELS: dict[str, type[Channel]] = {
    LaplaceHistogram.name: LaplaceHistogram,
    LaplaceMean.name: LaplaceMean,
    WaveletLaplace.name: WaveletLaplace,
    HaarLaplace.name: HaarLaplace,
    HaarAdaptive.name: HaarAdaptive,
    RandomizedResponse.name: RandomizedResponse,
}


def channel_class(name: str) -> type[Channel]:
    """The channel class registered under ``name`` (``histogram``, ``mean``, ``wavelet``, ...)."""
    try:
        return CHANNELS[name]
    except (KeyError, TypeError):
        raise LdpDaskError(f"Unknown channel {name!r}; known channels: {', '.join(sorted(CHANNELS))}.") from None


def channel_from_params(name: str, params: dict[str, Any]) -> Channel:
    """Rebuild a channel from its registry name and :meth:`Channel.params`."""
    cls = channel_class(name)
    params = dict(params)
    # summaries written before lattice noise existed (format 1, no "noise" key) used continuous noise
    if "noise" not in params and "noise" in inspect.signature(cls.__init__).parameters:
        params["noise"] = "continuous"
    return cls.from_params(params)


def build_channel(
    name: str,
    epsilon: float,
    domain: tuple[float, float] | list[float] | None = None,
    bins: int | str | None = None,
    n: int | None = None,
    **options: Any,
) -> Channel:
    """Build a channel from flat parameters (CLI and flows).

    ``bins="auto"`` (or None for a histogram) uses :func:`default_bins` with
    the public row count ``n``. Wavelet ``options``: ``wavelet``, ``j0``,
    ``j1`` (None: :func:`wavelet_levels` from ``n`` and ε), ``calibration``,
    ``nu``, ``table_level``. Randomized response (``rr``, no domain):
    ``categories``, ``encoding``, ``other``. Haar: ``level`` (None: :func:`haar_level` from
    ``n``, ε and ``smoothness``, default 1). Adaptive Haar: ``levels`` (None:
    :func:`adaptive_levels`) and ``split``.
    """
    if name not in CHANNELS:
        raise LdpDaskError(f"Unknown channel {name!r}; known channels: {', '.join(sorted(CHANNELS))}.")
    options = {k: v for k, v in options.items() if v is not None}
    allowed = {"wavelet": {"wavelet", "j0", "j1", "calibration", "nu", "table_level", "noise"},
               "haar": {"level", "smoothness", "noise"}, "haar-adaptive": {"levels", "split", "noise"},
               "rr": {"categories", "encoding", "other"}, "histogram": {"noise"}, "mean": {"noise"}}.get(name, set())
    extra = sorted(set(options) - allowed)
    if extra:
        raise LdpDaskError(f"The option(s) {', '.join(extra)} do not apply to the {name!r} channel.")
    if name != "histogram" and bins not in (None, "auto"):
        raise LdpDaskError(f"The 'bins' parameter does not apply to the {name!r} channel.")
    if name == "rr":
        if domain is not None:
            raise LdpDaskError("The 'rr' channel takes a list of categories, not a numeric 'domain'.")
        if "categories" not in options:
            raise LdpDaskError("The 'rr' channel needs the public list of categories ('categories').")
        return RandomizedResponse(epsilon=epsilon, **options)
    if domain is None:
        raise LdpDaskError(f"The {name!r} channel needs a public 'domain' (lo, hi).")
    if name == "histogram":
        if bins is None or bins == "auto":
            if n is None:
                raise LdpDaskError("bins='auto' needs the number of rows n.")
            bins = default_bins(n, epsilon)
        elif isinstance(bins, str):
            try:
                bins = int(bins)
            except ValueError:
                raise LdpDaskError(f"The 'bins' parameter must be an integer or 'auto'. Got {bins!r} instead.") from None
        return LaplaceHistogram(epsilon=epsilon, bins=bins, domain=tuple(domain), **options)
    if name == "wavelet":
        wavelet = options.pop("wavelet", "db4")
        if options.get("j0") is None or options.get("j1") is None:
            if n is None:
                raise LdpDaskError("automatic wavelet levels need the number of rows n.")
            j0, j1 = wavelet_levels(n, epsilon, wavelet)
            options.setdefault("j0", j0)
            if "j1" not in options:  # an explicit j0 above the automatic j1 pulls j1 up with it
                options["j1"] = max(j1, options["j0"]) if isinstance(options["j0"], int) else j1
        return WaveletLaplace(epsilon=epsilon, domain=tuple(domain), wavelet=wavelet, **options)
    if name in ("haar", "haar-adaptive") and n is None and not ({"level", "levels"} & set(options)):
        raise LdpDaskError(f"automatic levels of the {name!r} channel need the number of rows n.")
    if name == "haar":
        level = options.get("level")
        if level is None:
            level = haar_level(n, epsilon, options.get("smoothness", 1.0))  # type: ignore[arg-type]
        return HaarLaplace(epsilon=epsilon, level=level, domain=tuple(domain), **({"noise": options["noise"]}
                                                                                   if "noise" in options else {}))
    if name == "haar-adaptive":
        levels = options.get("levels")
        if levels is None:
            levels = adaptive_levels(n, epsilon)  # type: ignore[arg-type]
        return HaarAdaptive(epsilon=epsilon, levels=levels, domain=tuple(domain), split=options.get("split", "rows"),
                            noise=options.get("noise", "lattice"))
    return LaplaceMean(epsilon=epsilon, domain=tuple(domain), **options)
