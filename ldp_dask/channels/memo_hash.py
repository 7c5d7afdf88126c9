"""Capped memoized channels: a person's keyed hash of the cell into g values is memoized, so a series costs at most ε.

LOLOHA (Arcolezi, Pinzón, Palamidessi and Gambs, EDBT 2023) hashes each person's value with a hash function of
the person's own into g values before memoizing, so that a person can ever make at most g distinct memoized
reports, whatever the number of changes. Here:

* the *hash* of cell c for person u comes from the keyed Philox blocks at counters (u, lane, 0,
  :data:`~ldp_dask._memo_kernels.USE_HASH`) under the series' memo key: for g = 2 it is bit c mod 256 of block
  ⌊c/256⌋ (one block serves 256 cells), else ⌊w·g/2^32⌋ with w the 32-bit word c mod 8 of block ⌊c/8⌋. A keyed
  function of the person and the cell, fixed for the series, unknown without the key; H_u(c) and H_u(c′) are
  independent for c ≠ c′ and each is uniform on 0..g−1 (exactly for g = 2, up to 1/2^32 otherwise);
* the *memoized report* of h = H_u(c) is generalized randomized response over g values, drawn once per
  (person, h) from the keyed blocks at (u, h, lane, USE_BITS): h kept with probability p₁ = T/2^32, T the largest
  threshold with ln(T(g − 1)/(2^32 − T)) ≤ ε/g, else one of the g − 1 others exactly uniformly. A person has at
  most g hashed states, so at most g distinct memoized reports over any history: ε_memo = ε/g per report, and
  ``epsilon_spent()`` = g·ε_memo ≤ ε — the series' whole cost per person, known before its first night;
* an optional *instantaneous* layer (``instant``, ε_I) applies k-ary randomized response over the g values to the
  memoized report every night, afresh (keyed by the night): kept with p₂ = T_I/2^32, else uniform among the
  others; ε_bits = ε_I against any other memoized report.

What a night releases is the *support* of every cell, S_c = Σ_u 1[H_u(c) = y_u] (y_u the night's report), summed on
the worker: a function of the persons' (hash, report) pairs. A person in cell c supports it with probability
p_s = p₁p₂ + (1 − p₁)(1 − p₂)/(g − 1); a person elsewhere supports c with probability 1/g (their hash of c is
independent of their report). So θ̂_c = (S_c/n − 1/g)/(p_s − 1/g) is unbiased, with variance
[θ_c p_s(1 − p_s) + (1 − θ_c)(1/g)(1 − 1/g)]/(n(p_s − 1/g)²) ≤ π_c(1 − π_c)/(n(p_s − 1/g)²), π_c = E S_c/n (a sum of
independent Bernoullis varies at most as a binomial of their mean): the estimator and its intervals are the
unary channels' with (p_in, p_out) = (p_s, 1/g) (:func:`ldp_dask.estimators.frequencies`).

``g`` defaults to ``"auto"``: the g in 2..max(2, min(d, 64)) whose one-night variance at a rare cell,
(1/g)(1 − 1/g)/(p_s − 1/g)², is smallest for the series' ε and ε_I — LOLOHA's own criterion with the cap fixed. It is
2 for every ε ≤ 4 (g = 3 from about ε = 8 without the layer).

A mean needs no hash: its memoized state, the α-point rounding to one of ``levels + 1`` grid points
(:class:`~ldp_dask.channels.MemoMean`), already takes at most ``levels + 1`` values per person. :class:`CappedMean`
is that channel at ε_memo = ε/(levels + 1), charged as a capped series: ε is again the series' whole cost.

This module is numpy (and the numba kernels it calls): it knows nothing of Dask, files or ledgers.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from .base import Channel, Option, grid_index
from .categorical import CategoricalChannel
from .memo import (
    LEVELS_OPTION,
    SCALE,
    USE_BITS,
    MemoFrequencies,
    MemoHistogram,
    Memoized,
    MemoMean,
    _blocks,
    _keys,
    _log_ratio,
    kary_threshold,
)

__all__ = ["CappedHistogram", "CappedFrequencies", "CappedMean", "G_OPTION", "choose_g", "support_probabilities",
           "memoized"]

#: The hash's own counter word (:data:`ldp_dask._memo_kernels.USE_HASH`).
USE_HASH = 5
#: Persons drawn per batch when a night's supports are summed (bounded memory per bucket).
_BATCH = 1 << 20
#: The largest g ``"auto"`` considers.
MAX_AUTO_G = 64

G_OPTION = Option("g", "values each person's cells are hashed into before memoizing: a person makes at most g "
                       "distinct reports, so the series costs at most ε ('auto': the variance-minimizing g, 2 "
                       "for ε ≤ 4)", default="auto")


def support_probabilities(epsilon: float, g: int, instant: float | None) -> tuple[float, float, int, int]:
    """(p_s, 1/g, T, T_I): the probability a person supports their own cell and anyone's chance to support another,
    both layers together, with the two integer thresholds (T_I = 2^32 without the layer)."""
    t = kary_threshold(epsilon / g, g)
    t_i = SCALE if instant is None else kary_threshold(instant, g)
    p1, p2 = t / SCALE, t_i / SCALE
    return p1 * p2 + (1 - p1) * (1 - p2) / (g - 1), 1.0 / g, t, t_i


def choose_g(epsilon: float, instant: float | None, cells: int) -> int:
    """The g in 2..max(2, min(cells, 64)) whose one-night variance at a rare cell is smallest (module docstring)."""
    best, best_var = 2, math.inf
    for g in range(2, max(2, min(cells, MAX_AUTO_G)) + 1):
        p_s, q, _, _ = support_probabilities(epsilon, g, instant)
        var = q * (1 - q) / (p_s - q) ** 2 if p_s > q else math.inf
        if var < best_var * (1 - 1e-12):
            best, best_var = g, var
    return best


class _Hashed:
    """What the capped channels share: the hash, the memoized k-ary report over g, the night's supports."""

    name: ClassVar[str]
    epsilon: float
    instant: float | None
    dim: int
    encoding = "memo-hash"

    def _set_hashed(self, epsilon: Any, g: Any, instant: Any, cells: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.instant = None if instant is None else check_epsilon(instant, "instant")
        self.g = choose_g(self.epsilon, self.instant, cells) if g == "auto" else check_int(g, "g", 2, 1 << 16)
        self.p_s, _, self.t_keep, self.t_instant = support_probabilities(self.epsilon, self.g, self.instant)
        self.t_flip = 0  # the unary layer's flip (Memoized.flip): this channel's layer is k-ary over g
        self.dim = cells

    # --- what a person spends ----------------------------------------------------------------------------------
    def epsilon_memo(self) -> float:
        """ε of one memoized report (exact thresholds): at most ε/g."""
        return _log_ratio(self.t_keep * (self.g - 1), SCALE - self.t_keep)

    def epsilon_spent(self) -> float:
        """The series' cap: g·ε_memo ≤ ε, what a person spends through the memoized layer over any history."""
        return self.g * self.epsilon_memo()

    def cap(self) -> float:
        return self.epsilon_spent()

    def epsilon_bits(self) -> float:
        """ε of one night's report against any other memoized report: the instantaneous layer's (infinite
        without it)."""
        if self.instant is None:
            return math.inf
        return _log_ratio(self.t_instant * (self.g - 1), SCALE - self.t_instant)

    @property
    def report_bits(self) -> int:
        return 1

    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(p_s, 1/g): a person's chance to support their own cell, and another cell (module docstring)."""
        return self.p_s, 1.0 / self.g

    def night_epsilon(self) -> float:
        """ε of one night's report about the value: ln(p_s(g − 1)/(1 − p_s)) over the g hashed values."""
        return math.log(self.p_s * (self.g - 1)) - math.log(1 - self.p_s)

    def support_counts(self, sums: np.ndarray) -> np.ndarray:
        return np.asarray(sums, dtype=np.float64)

    def _states(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # --- a night -----------------------------------------------------------------------------------------------
    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The cells' supports by the memoized reports (before the instantaneous layer) under the memo ``key``; no
        (person, report) digests: a capped series is charged its cap, not per person. With the layer, what it
        needs is kept in the exact statistics, which never leave the worker (:meth:`add_noise`)."""
        from .._memo_kernels import hashed_night

        cell = np.ascontiguousarray(self._states(x), dtype=np.int64)
        person = np.ascontiguousarray(person, dtype=np.uint64)
        k0, k1 = _keys(key)
        memo = np.empty(len(person), np.int64)
        counts = np.zeros(self.dim, np.int64)
        for a in range(0, len(person), _BATCH):
            hashed_night(person[a:a + _BATCH], cell[a:a + _BATCH], k0, k1, np.uint64(self.g), np.uint64(self.t_keep),
                         memo[a:a + _BATCH], counts)
        if self.instant is None:  # the night's supports are these sums: they are the whole content
            return {"sum": counts}, np.empty((0, 2), np.uint64)
        # the layer redraws each person's report: the content is every (person, report), kept for add_noise
        return ({"sum": counts, "memo": memo, "person": person, "key": np.array([k0, k1], np.uint64)},
                np.empty((0, 2), np.uint64))

    def _supports(self, person: np.ndarray, report: np.ndarray, words: np.ndarray) -> np.ndarray:
        from .._memo_kernels import hashed_support

        counts = np.zeros(self.dim, np.int64)
        for a in range(0, len(person), _BATCH):
            hashed_support(person[a:a + _BATCH], report[a:a + _BATCH], words[0], words[1], np.uint64(self.g), counts)
        return counts

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The night's supports: of the memoized reports as they are, or after the instantaneous layer drawn
        per person from ``rng`` (keyed by the night), each report kept with p₂ or moved to one of the g − 1
        others uniformly."""
        if self.instant is None:
            return {"sum": exact["sum"]}
        memo = exact["memo"]
        keep = rng.integers(0, SCALE, len(memo), dtype=np.uint64) < np.uint64(self.t_instant)
        other = rng.integers(0, self.g - 1, len(memo))
        night = np.where(keep, memo, other + (other >= memo))
        return {"sum": self._supports(exact["person"], night, exact["key"])}

    def instantaneous(self, counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        raise LdpDaskError(f"the {self.name!r} channel's instantaneous layer is drawn per person (add_noise), not on "
                           "released counts")

    def reports(self, x: np.ndarray, person: np.ndarray, key: int) -> np.ndarray:
        """Each person's supports by their memoized report (rows of 0/1 over the cells), drawn by the numpy Philox
        (:func:`ldp_dask.noise.philox_blocks`), independently of the kernels: what :meth:`memo_stats` sums. For
        audits and tests."""
        cell = np.asarray(self._states(x), dtype=np.int64)
        hashes = self._hashes(person, key)
        h = hashes[np.arange(len(cell)), cell]
        w = _blocks(key, person, h, 0, USE_BITS)
        u = np.empty((len(h), 8), np.uint64)
        u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
        report = np.where(u[:, 0] < np.uint64(self.t_keep), h, -1).astype(np.int64)
        others = self.g - 1
        limit = np.uint64(SCALE // others * others)
        lane, first = 0, 1
        while (report < 0).any():
            if lane:
                w = _blocks(key, person, h, lane, USE_BITS)
                u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
            for t in range(first, 8):
                take = (report < 0) & (u[:, t] < limit)
                j = (u[take, t] % np.uint64(others)).astype(np.int64)
                report[take] = j + (j >= h[take])
            lane, first = lane + 1, 0
        return (hashes == report[:, None]).astype(np.uint8)

    def _hashes(self, person: np.ndarray, key: int) -> np.ndarray:
        """H_u(c) for every person and cell (m × d): for g = 2 bit c mod 256 of the person's block ⌊c/256⌋ (bit j
        of word j // 64, least significant first), else ⌊w·g/2^32⌋ of the 32-bit word c mod 8 of block ⌊c/8⌋."""
        person = np.asarray(person, np.uint64)
        out = np.empty((len(person), self.dim), np.int64)
        per = 256 if self.g == 2 else 8
        for lane in range((self.dim + per - 1) // per):
            w = _blocks(key, person, np.full(len(person), lane, np.uint64), 0, USE_HASH)
            cols = min(per, self.dim - lane * per)
            if self.g == 2:
                bits = (w[:, :, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)  # (m, 4 words, 64 bits)
                out[:, lane * per:lane * per + cols] = bits.reshape(len(person), 256)[:, :cols].astype(np.int64)
                continue
            u = np.empty((len(person), 8), np.uint64)
            u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
            out[:, lane * per:lane * per + cols] = ((u[:, :cols] * np.uint64(self.g)) >> np.uint64(32)).astype(np.int64)
        return out


class CappedHistogram(_Hashed, MemoHistogram):
    """A capped memoized histogram: ``bins`` equal cells of the public domain, each person's cell hashed into g
    values and the hash memoized (LOLOHA; module docstring).

    Parameters
    ----------
    epsilon : float
        The series' whole cost per person: each memoized report at ε/g, at most g of them over any history.
    bins : int
        Cells of the domain.
    domain : (lo, hi)
        The public domain.
    instant : float, optional
        ε_I of the instantaneous layer (k-ary randomized response over the g values, afresh each night).
    g : int or "auto"
        The hash's range (module docstring).

    Notes
    -----
    θ̂_c = (S_c/n − 1/g)/(p_s − 1/g), unbiased, variance ≤ π_c(1 − π_c)/(n(p_s − 1/g)²); at ε = 1, g = 2, no layer,
    (p_s − 1/2)² = 0.0153 against a memoized unary encoding's (p_in − p_out)² = 0.0534 at ε_memo = 1 — the price of
    the cap, paid once and not per change.
    """

    name = "capped-histogram"
    options = (Option("bins", "cells of the domain", type=int), MemoHistogram.options[1],  # type: ignore[assignment]
               G_OPTION)

    def __init__(self, epsilon: float, bins: int, domain: tuple[float, float], instant: float | None = None,
                 g: int | str = "auto") -> None:
        self._set_domain(domain)
        self.bins = check_int(bins, "bins", 2, 4096)
        self._set_hashed(epsilon, g, instant, self.bins)
        lo, hi = self.domain
        edges = np.linspace(lo, hi, self.bins + 1)
        self.labels = [f"[{a:g}, {b:g})" for a, b in zip(edges[:-1], edges[1:])]

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "bins": self.bins, "domain": list(self.domain), "instant": self.instant,
                "g": self.g}

    def _states(self, x: np.ndarray) -> np.ndarray:
        return grid_index(x, self.domain, self.bins)


class CappedFrequencies(_Hashed, MemoFrequencies):
    """Capped memoized frequencies over public categories: each person's category hashed into g values and the
    hash memoized (LOLOHA; module docstring).

    Parameters
    ----------
    epsilon : float
        The series' whole cost per person (each memoized report at ε/g, at most g of them).
    categories : sequence of str or int
        The public categories.
    other : bool
        Map values outside them to ``"__other__"`` instead of failing.
    instant : float, optional
        ε_I of the instantaneous layer (k-ary randomized response over the g values).
    g : int or "auto"
        The hash's range (module docstring).

    Notes
    -----
    As :class:`CappedHistogram`: unbiased shares, variance ≤ π_c(1 − π_c)/(n(p_s − 1/g)²).
    """

    name = "capped-rr"
    options = (*MemoFrequencies.options[:3], G_OPTION)

    def __init__(self, epsilon: float, categories: Any, other: bool = False, instant: float | None = None,
                 g: int | str = "auto") -> None:
        d = self._set_categories(categories, other)
        self.kary = False
        self._set_hashed(epsilon, g, instant, d)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "other": self.other,
                "instant": self.instant, "g": self.g}

    def _states(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)


class CappedMean(MemoMean):
    """A capped memoized mean: :class:`~ldp_dask.channels.MemoMean` (α-point rounding to ``levels + 1`` grid
    points, one memoized bit per (person, grid point); Ding, Kulkarni and Yekhanin 2017) at ε_memo = ε/(levels + 1),
    so that a person's at most ``levels + 1`` reports cost at most ε over any history, charged once (module
    docstring).

    Parameters
    ----------
    epsilon : float
        The series' whole cost per person.
    domain : (lo, hi)
        The public domain.
    levels : int
        Cells of the rounding grid.
    instant : float, optional
        ε of the instantaneous layer (one bit, flipped afresh each night).

    Notes
    -----
    The estimate and its variance are :class:`~ldp_dask.channels.MemoMean`'s at ε_memo = ε/(levels + 1): unbiased,
    variance at most S̄(1 − S̄)/n · ((hi − lo)·2^32/((1 − 2r)·step·levels))².
    """

    name = "capped-mean"
    options = (LEVELS_OPTION, MemoMean.options[1])

    def __init__(self, epsilon: float, domain: tuple[float, float], levels: int = 1,
                 instant: float | None = None) -> None:
        cap = check_epsilon(epsilon)
        levels = check_int(levels, "levels", 1, 1 << 16)
        super().__init__(cap / (levels + 1), domain, levels, instant)
        self.epsilon = cap

    def params(self) -> dict[str, Any]:
        return {**super().params(), "epsilon": self.epsilon}

    def epsilon_memo(self) -> float:
        """ε of one memoized bit (exact thresholds): at most ε/(levels + 1)."""
        return MemoMean.epsilon_spent(self)

    def epsilon_spent(self) -> float:
        """The series' cap, (levels + 1)·ε_memo ≤ ε."""
        return (self.levels + 1) * self.epsilon_memo()

    def cap(self) -> float:
        return self.epsilon_spent()

    @property
    def g(self) -> int:
        return self.levels + 1

    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """:class:`~ldp_dask.channels.MemoMean`'s sum of 1-bits, without the per-person digests (charged its cap).
        The night's layer acts on the sum alone, so the sum is the whole content a night is keyed by."""
        from .._memo_kernels import memo_bit_sum

        person, level = self._rounded(x, person, key)
        ones = np.zeros(1, np.int64)
        memo_bit_sum(person, level, *_keys(key), self.thresholds, ones)
        return {"sum": ones}, np.empty((0, 2), np.uint64)


def memoized(channel: Channel, instant: float | None = None, levels: int = 1, capped: bool = True,
             g: int | str = "auto") -> Channel:
    """The memoized counterpart of a one-night channel. ``capped`` (the default): ε is the series' whole cost per
    person whatever its changes — a histogram (``bins`` and domain kept) →
    :class:`~ldp_dask.channels.CappedHistogram`, randomized or Hadamard response (categories kept) →
    :class:`~ldp_dask.channels.CappedFrequencies` (each person's cell hashed into ``g`` values, the hash memoized),
    a mean → :class:`~ldp_dask.channels.CappedMean` (``levels + 1`` grid points). ``capped=False``: ε per distinct
    report, charged per person's changes — :class:`MemoHistogram`, :class:`MemoFrequencies`, :class:`MemoMean`. A
    memoized channel passes through (the options must then be left out)."""
    if isinstance(channel, Memoized):
        return channel
    eps = float(channel.epsilon)
    name = channel.name
    if name == "histogram":
        if capped:
            return CappedHistogram(eps, channel.bins, channel.domain, instant, g)  # type: ignore[attr-defined]
        return MemoHistogram(eps, channel.bins, channel.domain, instant)  # type: ignore[attr-defined]
    if isinstance(channel, CategoricalChannel):
        if capped:
            return CappedFrequencies(eps, channel.categories, channel.other, instant, g)
        encoding = "kary" if getattr(channel, "encoding", None) in ("kary", "warner") else "oue"
        return MemoFrequencies(eps, channel.categories, channel.other, instant, encoding)
    if name in ("mean", "hybrid-mean"):
        mean = CappedMean if capped else MemoMean
        return mean(eps, channel.domain, levels, instant)  # type: ignore[attr-defined]
    raise LdpDaskError(f"a longitudinal release memoizes a histogram, frequencies or a mean; the {name!r} channel "
                       "has no memoized form (use 'histogram', 'rr' or 'mean')")
