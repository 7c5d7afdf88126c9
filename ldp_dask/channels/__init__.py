"""Local channels: one module per non-interactive channel, pure numpy."""

from __future__ import annotations

import inspect
from typing import Any

from .._validation import LdpDaskError
from .auto import AUTO, TARGETS, choose_channel
from .base import Channel, NumericChannel, Option, noise_scale_for
from .categorical import CategoricalChannel
from .group_histogram import GroupHistogram
from .group_mean import GroupMean
from .haar import ADAPTIVE_SPAN, HaarAdaptive, HaarLaplace, adaptive_levels, haar_level
from .hadamard import HadamardResponse
from .heavy_hitters import HeavyHitters
from .histogram import LaplaceHistogram, default_bins
from .hybrid import HybridMean
from .mean import LaplaceMean
from .memo import MemoFrequencies, MemoHistogram, Memoized, MemoMean
from .memo_hash import CappedFrequencies, CappedHistogram, CappedMean, memoized
from .rr import ENCODINGS, RandomizedResponse
from .sketch import CountMeanSketch
from .square_wave import SquareWave
from .subset import SubsetSelection
from .wavelet import CALIBRATIONS, WaveletLaplace, linear_level, wavelet_levels
from .wavelet_split import WaveletSplit, default_release, split_levels

__all__ = [
    "Channel",
    "NumericChannel",
    "LaplaceHistogram",
    "LaplaceMean",
    "HybridMean",
    "SquareWave",
    "WaveletLaplace",
    "WaveletSplit",
    "split_levels",
    "wavelet_levels",
    "linear_level",
    "HaarLaplace",
    "HaarAdaptive",
    "RandomizedResponse",
    "HadamardResponse",
    "SubsetSelection",
    "CountMeanSketch",
    "HeavyHitters",
    "CategoricalChannel",
    "ENCODINGS",
    "haar_level",
    "adaptive_levels",
    "ADAPTIVE_SPAN",
    "CALIBRATIONS",
    "CHANNELS",
    "channel_from_params",
    "channel_class",
    "noise_scale_for",
    "default_bins",
    "build_channel",
    "choose_channel",
    "value_kind_of",
    "AUTO",
    "TARGETS",
    "channel_options",
    "Option",
    "GroupMean",
    "GroupHistogram",
    "PLAN_CHANNELS",
    "MEMO_CHANNELS",
    "MemoHistogram",
    "MemoFrequencies",
    "MemoMean",
    "CappedHistogram",
    "CappedFrequencies",
    "CappedMean",
    "Memoized",
    "memoized",
]

#: Registry of channels by their public name (used by summaries and the CLI).
CHANNELS: dict[str, type[Channel]] = {
    LaplaceHistogram.name: LaplaceHistogram,
    LaplaceMean.name: LaplaceMean,
    HybridMean.name: HybridMean,
    SquareWave.name: SquareWave,
    WaveletLaplace.name: WaveletLaplace,
    WaveletSplit.name: WaveletSplit,
    HaarLaplace.name: HaarLaplace,
    HaarAdaptive.name: HaarAdaptive,
    RandomizedResponse.name: RandomizedResponse,
    HadamardResponse.name: HadamardResponse,
    SubsetSelection.name: SubsetSelection,
    CountMeanSketch.name: CountMeanSketch,
    HeavyHitters.name: HeavyHitters,
}


#: Memoized channels (longitudinal releases, docs/how-to/longitudinal.md): each person's report depends on the person.
MEMO_CHANNELS: dict[str, type[Channel]] = {c.name: c for c in (CappedHistogram, CappedFrequencies, CappedMean,
                                                               MemoHistogram, MemoFrequencies, MemoMean)}

#: Channels that release a pair of columns (a group and a value): run by plans only, not offered on one column.
PLAN_CHANNELS: dict[str, type[Channel]] = {GroupMean.name: GroupMean, GroupHistogram.name: GroupHistogram}


def channel_class(name: str) -> type[Channel]:
    """The channel class registered under ``name`` (``histogram``, ``mean``, ``wavelet``, ...)."""
    try:
        return CHANNELS.get(name) or PLAN_CHANNELS.get(name) or MEMO_CHANNELS[name]
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
    """Build a channel by name from ε, the public domain, the public row count and its declared options.

    ``name="auto"`` chooses the channel with the smallest predicted error (:func:`choose_channel`; options
    ``categories``, ``other``, ``target``, ``noise`` and the release's ``mode``).

    The options a channel takes are declared in its module (``cls.options``,
    see :class:`~ldp_dask.channels.base.Option`); None means "default". Options
    whose default depends on the data's size (histogram ``bins="auto"``, wavelet
    ``j0``/``j1``, Haar ``level``, adaptive Haar ``levels``) are derived from
    ``n`` and ε by the channel's :meth:`~Channel.build`. ``bins`` is the
    histogram's option, kept as a positional parameter.
    """
    given = {k: v for k, v in options.items() if v is not None}
    if name == AUTO:
        extra = sorted(set(given) - {"categories", "other", "target", "mode", "noise"}
                       | ({"bins"} if bins not in (None, "auto") else set()))
        if extra:
            raise LdpDaskError(f"The option(s) {', '.join(extra)} do not apply to --channel auto; it takes "
                               "categories, other, target and noise.")
        return choose_channel(epsilon, domain, n, **given)
    cls = channel_class(name)
    if bins is not None:
        given["bins"] = bins
    declared = [o.name for o in cls.options]
    extra = sorted(set(given) - set(declared))
    if extra:
        takes = f"it takes {', '.join(declared)}" if declared else "it takes none"
        raise LdpDaskError(f"The option(s) {', '.join(extra)} do not apply to the {name!r} channel; {takes}.")
    if cls is WaveletLaplace:  # the default wavelet release splits the rows among three levels
        split = default_release(epsilon, domain, n, given)
        if split is not None:
            return split
    return cls.build(epsilon, domain, n=n, **given)


def value_kind_of(name: str, categories: Any = None) -> str:
    """What the column must hold for channel ``name``: "numeric" or "categorical" (``auto``: categorical when
    categories are given)."""
    if name == AUTO:
        return "categorical" if categories is not None else "numeric"
    return channel_class(name).value_kind


def channel_options() -> dict[str, tuple[Option, list[str]]]:
    """Every declared option by name, with the channels that take it (the CLI's flags).

    Channels that share an option name must declare it alike.
    """
    out: dict[str, tuple[Option, list[str]]] = {}
    for cname, cls in CHANNELS.items():
        for opt in cls.options:
            if opt.name in out:
                first, users = out[opt.name]
                if (first.type, first.choices, first.many, first.switch, first.default) != \
                        (opt.type, opt.choices, opt.many, opt.switch, opt.default):
                    raise TypeError(f"channels {users} and {cname!r} declare option {opt.name!r} differently")
                users.append(cname)
            else:
                out[opt.name] = (opt, [cname])
    return out
