"""Memoized channels for longitudinal releases: a person whose value stays in its bucket repeats its report.

RAPPOR (Erlingsson, Pihur and Korolova 2014) gives each client a *permanent* randomized response per value,
memoized, so that reporting an unchanged value again reveals nothing new; Ding, Kulkarni and Yekhanin (2017)
collect counters daily with one memoized bit per rounded value (1BitMean with α-point rounding). Here a person's
report for a column is a deterministic keyed function of (memo key, person, state), the *state* being the
value's bucket:

``memo-histogram`` (numeric, ``bins`` equal cells of the domain) and ``memo-rr`` (categories)
    the state is the cell or category j of d; the report is an optimized unary encoding (Wang, Blocki, Li and Jha
    2017) drawn once per (person, state): bit j is 1 with probability p_in = 1/2, every other bit with p_out ≈
    1/(e^ε + 1). Two states' reports differ in law at two bits: ε_memo = ln(p_in(1 − p_out)/((1 − p_in)p_out)).
    ``memo-rr`` with ``encoding="kary"`` memoizes generalized randomized response instead (the category, or one of
    the others exactly uniformly): ε_memo = ln(p_in(d − 1)/(1 − p_in)).
``memo-mean`` (numeric, domain [lo, hi])
    the value is rounded to one of ``levels + 1`` grid points by its person's α-point: with t = levels·(x −
    lo)/(hi − lo), cell c = min(⌊t⌋, levels − 1) and f = t − c, the state is z = c + 1 when f ≥ 1 − α, else c.
    α is uniform in [0, 1) and fixed per person (keyed), so E z = t: unbiased, and a change of the value moves
    the state only when it crosses the person's α-point of its cell. The report is one bit, 1 with probability
    T_z/2^32, T_z linear in z from T_0 ≈ 2^32/(e^ε + 1) to 2^32 − T_0: ε_memo = ln((2^32 − T_0)/T_0).

Every probability is an integer threshold out of 2^32 (:mod:`ldp_dask._memo_kernels`), so ε_memo is computed
from the exact rationals the channel uses and never exceeds the ε requested.

An optional *instantaneous* layer (``instant``, RAPPOR's IRR) flips each bit of the memoized report afresh every
night with probability r = 1/(e^{instant} + 1). In summary mode it is drawn in distribution per released count
(Binomial(C_j, 1 − r) + Binomial(n − C_j, r)), so still only sums leave a worker. What a person spends, as a
function of how many distinct memoized reports of theirs were released, is in docs/privacy.md ("Longitudinal
releases"); :func:`ldp_dask.ledger.memos.spend_of` computes it.

This module is numpy (and the numba kernels it calls): it knows nothing of Dask, files or ledgers.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from ..noise import philox_blocks
from .base import NumericChannel, Option, grid_index
from .categorical import CATEGORIES_OPTION, OTHER_OPTION, CategoricalChannel
from .rr import RandomizedResponse

__all__ = ["Memoized", "MemoHistogram", "MemoFrequencies", "MemoMean",
           "INSTANT_OPTION", "LEVELS_OPTION", "SCALE", "unary_thresholds", "flip_threshold", "bit_thresholds",
           "kary_threshold"]

#: The counter's last word: which draw of a (person, state) a block is (:mod:`ldp_dask._memo_kernels`, imported
#: when a channel draws: numba is too heavy for ``--help``).
USE_BITS, USE_ALPHA = 1, 4
#: Probabilities are integer thresholds out of 2^32 (32-bit uniforms from the keyed Philox blocks).
SCALE = 1 << 32
#: A bucket's persons are drawn in batches of this many (the digest pairs are kept; the bits are summed).
_BATCH = 1 << 20

INSTANT_OPTION = Option("instant", "ε of a fresh per-night randomization of the memoized report (RAPPOR's "
                                   "instantaneous layer; none by default)", type=float, default=None)
LEVELS_OPTION = Option("levels", "cells of the α-point rounding of a memoized mean (changes within a cell rarely "
                                 "move a person's report)", type=int, default=1)


def _log_ratio(a: int, b: int) -> float:
    return math.log(a) - math.log(b)


def unary_thresholds(epsilon: float) -> tuple[int, int]:
    """(t_in, t_out) out of 2^32 for an optimized unary encoding spending at most ``epsilon``: t_in = 2^31, t_out
    the smallest threshold ≥ 2^32/(e^ε + 1) whose ln(t_in(2^32 − t_out)/((2^32 − t_in)t_out)) ≤ ε."""
    t_in = SCALE // 2
    t_out = max(1, math.ceil(SCALE / (math.exp(epsilon) + 1)))
    while _log_ratio(t_in * (SCALE - t_out), (SCALE - t_in) * t_out) > epsilon:
        t_out += 1
    return t_in, t_out


def flip_threshold(epsilon: float) -> int:
    """t out of 2^32: the instantaneous layer flips a bit with probability t/2^32, ln((2^32 − t)/t) ≤ ε."""
    t = max(1, math.ceil(SCALE / (math.exp(epsilon) + 1)))
    while _log_ratio(SCALE - t, t) > epsilon:
        t += 1
    return t


def kary_threshold(epsilon: float, d: int) -> int:
    """T out of 2^32: a memoized k-ary report keeps its category with probability T/2^32, the largest T with
    ln(T(d − 1)/(2^32 − T)) ≤ ε (the others share the rest exactly uniformly)."""
    t = min(SCALE - 1, math.floor(SCALE * math.exp(epsilon) / (math.exp(epsilon) + d - 1)))
    while _log_ratio(t * (d - 1), SCALE - t) > epsilon:
        t -= 1
    return t


def bit_thresholds(epsilon: float, levels: int) -> np.ndarray:
    """T_0..T_levels out of 2^32, linear in z, from T_0 to 2^32 − T_0 with ln((2^32 − T_0)/T_0) ≤ ε (T_0 raised
    until the steps are whole, so that E[bit] is exactly linear in the rounded value)."""
    t0 = max(1, math.ceil(SCALE / (math.exp(epsilon) + 1)))
    while (SCALE - 2 * t0) % levels or _log_ratio(SCALE - t0, t0) > epsilon:
        t0 += 1
    step = (SCALE - 2 * t0) // levels
    return np.array([t0 + z * step for z in range(levels + 1)], dtype=np.uint64)


class Memoized:
    """What the memoized channels share: the instantaneous layer, the persons' draws, the spend of a history."""

    memo: ClassVar[bool] = True
    epsilon: float
    instant: float | None
    name: ClassVar[str]

    def _set_instant(self, instant: Any) -> None:
        self.instant = None if instant is None else check_epsilon(instant)
        self.t_flip = 0 if self.instant is None else flip_threshold(self.instant)

    @property
    def flip(self) -> float:
        """r: the probability that the instantaneous layer flips a bit (0 without it)."""
        return self.t_flip / SCALE

    def epsilon_bits(self) -> float:
        """ε_bits: ε of one night's report against *any* other memoized report (how the instantaneous layer hides
        a change of report): the bits that may differ times ln((1 − r)/r); infinite without the layer. A person
        spends min(reports·ε_memo, nights·ε_bits) over a series (:func:`ldp_dask.ledger.memos.spend_of`)."""
        if self.instant is None:
            return math.inf
        return self.report_bits * _log_ratio(SCALE - self.t_flip, self.t_flip)

    @property
    def report_bits(self) -> int:
        raise NotImplementedError

    def epsilon_spent(self) -> float:
        """ε_memo: what a person's first report of a state costs (the permanent randomization, exact thresholds)."""
        raise NotImplementedError

    def night_epsilon(self) -> float:
        """ε of one night's report about the value (permanent and instantaneous layers together)."""
        raise NotImplementedError

    def instantaneous(self, counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        """The instantaneous layer on released bit counts, drawn in distribution: of ``counts[j]`` 1-bits among
        ``m`` reports, Binomial(counts[j], 1 − r) stay 1 and Binomial(m − counts[j], r) of the 0-bits flip."""
        counts = np.asarray(counts, dtype=np.int64)
        if self.instant is None:
            return counts
        r = self.flip
        return rng.binomial(counts, 1.0 - r) + rng.binomial(m - counts, r)

    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The exact sums of the prepared values' memoized reports under the 128-bit memo ``key``, and each
        person's (person digest, report digest) pair for the ledger. Worker side; the sums get
        :meth:`instantaneous` before they leave."""
        raise NotImplementedError

    def reports(self, x: np.ndarray, person: np.ndarray, key: int) -> np.ndarray:
        """Each person's memoized report (rows of 0/1 bits, before the instantaneous layer), drawn by the numpy
        Philox (:func:`ldp_dask.noise.philox_blocks`): what :meth:`memo_stats` sums without materializing it. For
        audits and tests; a release never builds it."""
        raise NotImplementedError

    # --- what the single-row channel contract cannot do --------------------------------------------------------
    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise LdpDaskError(f"the {self.name!r} channel runs in a longitudinal release only (summary mode, with a "
                           "privacy unit): its reports depend on the person, not the row")

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        raise LdpDaskError(f"the {self.name!r} channel's sums need each row's person (memo_stats)")

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"sum": self.instantaneous(exact["sum"], m, rng)}


def _keys(key: int) -> tuple[np.uint64, np.uint64]:
    return np.uint64(key & 0xFFFFFFFFFFFFFFFF), np.uint64((key >> 64) & 0xFFFFFFFFFFFFFFFF)


def _blocks(key: int, person: np.ndarray, state: np.ndarray, lane: int, use: int) -> np.ndarray:
    n = len(person)
    counters = np.stack([np.asarray(person, np.uint64), np.asarray(state, np.uint64), np.full(n, lane, np.uint64),
                         np.full(n, use, np.uint64)], axis=1)
    return philox_blocks(key, counters)


class _MemoUnary(Memoized):
    """A memoized optimized unary encoding over d states (:func:`unary_thresholds`)."""

    encoding = "memo-oue"
    dim: int

    def _set_unary(self, epsilon: Any, d: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.t_in, self.t_out = unary_thresholds(self.epsilon)
        self.dim = d

    @property
    def report_bits(self) -> int:
        return self.dim

    def epsilon_spent(self) -> float:
        return _log_ratio(self.t_in * (SCALE - self.t_out), (SCALE - self.t_in) * self.t_out)

    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(p_in, p_out) of one night's report, both layers together: P(bit j = 1 | state j), P(… | state ≠ j)."""
        r = self.flip
        p, q = self.t_in / SCALE, self.t_out / SCALE
        return p * (1 - r) + (1 - p) * r, q * (1 - r) + (1 - q) * r

    def night_epsilon(self) -> float:
        p, q = self.report_probabilities
        return math.log(p * (1 - q)) - math.log((1 - p) * q)

    def support_counts(self, sums: np.ndarray) -> np.ndarray:
        return np.asarray(sums, dtype=np.float64)

    def _states(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def reports(self, x: np.ndarray, person: np.ndarray, key: int) -> np.ndarray:
        state = self._states(x)
        out = np.empty((len(state), self.dim), np.uint8)
        for lane in range((self.dim + 7) // 8):
            w = _blocks(key, person, state, lane, USE_BITS)
            u = np.empty((len(state), 8), np.uint64)
            u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
            cols = range(lane * 8, min(self.dim, lane * 8 + 8))
            for t, j in enumerate(cols):
                thr = np.where(state == j, self.t_in, self.t_out).astype(np.uint64)
                out[:, j] = u[:, t] < thr
        return out

    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        state = self._states(x)
        counts = np.zeros(self.dim, np.int64)
        pairs = np.empty((len(state), 2), np.uint64)
        from .._memo_kernels import memo_unary

        k0, k1 = _keys(key)
        person = np.ascontiguousarray(person, dtype=np.uint64)
        for a in range(0, len(state), _BATCH):
            b = min(len(state), a + _BATCH)
            memo_unary(person[a:b], state[a:b], k0, k1, np.uint64(self.t_in), np.uint64(self.t_out),
                               counts, pairs[a:b])
        return {"sum": counts}, pairs


class MemoHistogram(_MemoUnary, NumericChannel):
    """A memoized histogram: ``bins`` equal cells of the public domain, one memoized unary report per
    (person, cell).

    Parameters
    ----------
    epsilon : float
        ε_memo: what a person's report of a new cell costs (ε of the permanent layer, exact thresholds).
    bins : int
        Cells of the domain (states). A person's report changes only when their value changes cell.
    domain : (lo, hi)
        The public domain.
    instant : float, optional
        ε of the instantaneous layer (per bit), drawn afresh each night.

    Notes
    -----
    Each night's cell shares are unbiased, θ̂_j = (T_j/n − p_out)/(p_in − p_out), with Var θ̂_j =
    π_j(1 − π_j)/(n(p_in − p_out)²): a fresh one-night optimized unary encoding's (Wang et al. 2017), since
    distinct persons' reports are independent. Across nights the estimates are correlated (the same reports).
    """

    name = "memo-histogram"
    options = (Option("bins", "cells of the domain", type=int), INSTANT_OPTION)

    def __init__(self, epsilon: float, bins: int, domain: tuple[float, float], instant: float | None = None) -> None:
        self._set_domain(domain)
        self.bins = check_int(bins, "bins", 2, 4096)
        self._set_unary(epsilon, self.bins)
        self._set_instant(instant)
        lo, hi = self.domain
        edges = np.linspace(lo, hi, self.bins + 1)
        self.labels = [f"[{a:g}, {b:g})" for a, b in zip(edges[:-1], edges[1:])]

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "bins": self.bins, "domain": list(self.domain), "instant": self.instant}

    def _states(self, x: np.ndarray) -> np.ndarray:
        return grid_index(x, self.domain, self.bins)


class MemoFrequencies(_MemoUnary, CategoricalChannel):
    """Memoized frequencies over public categories: one memoized report per (person, category).

    Parameters
    ----------
    epsilon : float
        ε_memo: what a person's report of a new category costs.
    categories : sequence of str or int
        The public categories.
    other : bool
        Map values outside them to ``"__other__"`` instead of failing.
    instant : float, optional
        ε of the instantaneous layer (per bit for ``oue``; per report for ``kary``).
    encoding : {"oue", "kary"}
        ``oue``: a memoized optimized unary encoding (Wang, Blocki, Li and Jha 2017). ``kary``: memoized
        generalized randomized response — the category itself with probability p_in = T/2³² (T the largest
        threshold with ln(p_in(d − 1)/(1 − p_in)) ≤ ε), else one of the d − 1 others exactly uniformly — and its
        instantaneous layer is k-ary randomized response on the memoized category, ε_bits = instant whatever d.
        k-ary has the smaller variance below d ≈ 3e^ε + 2.

    Notes
    -----
    Each night's frequencies are a one-night encoding's: θ̂_j = (T_j/n − p_out)/(p_in − p_out), variance
    π_j(1 − π_j)/(n(p_in − p_out)²), with (p_in, p_out) of both layers together.
    """

    name = "memo-rr"
    options = (CATEGORIES_OPTION, OTHER_OPTION, INSTANT_OPTION,
               Option("encoding", "memoized report: optimized unary (oue) or k-ary randomized response (kary)",
                      default="oue", choices=("oue", "kary")))

    def __init__(self, epsilon: float, categories: Any, other: bool = False, instant: float | None = None,
                 encoding: str = "oue") -> None:
        d = self._set_categories(categories, other)
        if encoding not in ("oue", "kary"):
            raise LdpDaskError(f"The 'encoding' parameter must be 'oue' or 'kary'. Got {encoding!r} instead.")
        self.kary = encoding == "kary"
        self.encoding = f"memo-{encoding}"
        self._set_unary(epsilon, d)
        self._set_instant(instant)
        if self.kary:
            self.t_keep = kary_threshold(self.epsilon, d)
            self._irr = None if self.instant is None else RandomizedResponse(self.instant, list(range(d)))

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "other": self.other,
                "instant": self.instant, "encoding": self.encoding.removeprefix("memo-")}

    def _states(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)  # prepare() made the codes

    # --- k-ary: one category, not d bits ----------------------------------------------------------------------
    def epsilon_spent(self) -> float:
        if not self.kary:
            return super().epsilon_spent()
        return _log_ratio(self.t_keep * (self.dim - 1), SCALE - self.t_keep)

    @property
    def report_probabilities(self) -> tuple[float, float]:
        if not self.kary:
            return super().report_probabilities
        d, p = self.dim, self.t_keep / SCALE
        q = 1.0 if self._irr is None else self._irr.p_in  # the instantaneous layer keeps the report with q
        return p * q + (1 - p) * (1 - q) / (d - 1), (1 - p) / (d - 1) * q + (1 - (1 - p) / (d - 1)) * (1 - q) / (d - 1)

    def night_epsilon(self) -> float:
        if not self.kary:
            return super().night_epsilon()
        p, q = self.report_probabilities
        return math.log(p) - math.log(q)

    def epsilon_bits(self) -> float:
        if not self.kary:
            return super().epsilon_bits()
        return math.inf if self._irr is None else self._irr.epsilon_spent()

    def instantaneous(self, counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        if not self.kary or self._irr is None:
            return super().instantaneous(counts, m, rng)
        return self._irr.add_noise({"counts": np.asarray(counts, np.int64)}, m, rng)["sum"].astype(np.int64)

    def reports(self, x: np.ndarray, person: np.ndarray, key: int) -> np.ndarray:
        if not self.kary:
            return super().reports(x, person, key)
        state = self._states(x)
        d, others = self.dim, self.dim - 1
        limit = SCALE // others * others
        report = np.full(len(state), -1, np.int64)
        lane, first = 0, 1
        while (report < 0).any():
            w = _blocks(key, person, state, lane, USE_BITS)
            u = np.empty((len(state), 8), np.uint64)
            u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
            if lane == 0:
                keep = u[:, 0] < np.uint64(self.t_keep)
                report[keep] = state[keep]
            for t in range(first, 8):
                take = (report < 0) & (u[:, t] < np.uint64(limit))
                j = (u[take, t] % np.uint64(others)).astype(np.int64)
                report[take] = j + (j >= state[take])
            lane, first = lane + 1, 0
        out = np.zeros((len(state), d), np.uint8)
        out[np.arange(len(state)), report] = 1
        return out

    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        if not self.kary:
            return super().memo_stats(x, person, key)
        from .._memo_kernels import memo_kary

        state = self._states(x)
        counts = np.zeros(self.dim, np.int64)
        pairs = np.empty((len(state), 2), np.uint64)
        k0, k1 = _keys(key)
        memo_kary(np.ascontiguousarray(person, dtype=np.uint64), state, k0, k1, np.uint64(self.t_keep), counts,
                  pairs)
        return {"sum": counts}, pairs


class MemoMean(Memoized, NumericChannel):
    """A memoized bounded mean: α-point rounding to ``levels + 1`` grid points, one memoized bit per
    (person, grid point) (Ding, Kulkarni and Yekhanin 2017, 1BitMean with α-point rounding).

    Parameters
    ----------
    epsilon : float
        ε_memo: what a person's report of a new grid point costs.
    domain : (lo, hi)
        The public domain.
    levels : int
        Cells of the rounding grid (1: the two ends of the domain). A value moves its person's report only when
        it crosses the person's α-point in its cell, so a person makes at most ``levels + 1`` distinct reports.
    instant : float, optional
        ε of the instantaneous layer.

    Notes
    -----
    With S̄ the share of 1s among n reports, E S̄ = r + (1 − 2r)(T_0 + step·E t)/2^32 where t = levels(x − lo)/
    (hi − lo), so the mean is unbiased whatever ``levels`` and the α-points (which are uniform and independent
    across persons); its variance is at most S̄(1 − S̄)/n times (hi − lo)²·2^64/((1 − 2r)·step·levels)², one
    night's 1BitMean variance (the rounding adds none, since a person's bit is Bernoulli in E t alone).
    """

    name = "memo-mean"
    report_bits = 1
    options = (LEVELS_OPTION, INSTANT_OPTION)

    def __init__(self, epsilon: float, domain: tuple[float, float], levels: int = 1,
                 instant: float | None = None) -> None:
        self._set_domain(domain)
        self.epsilon = check_epsilon(epsilon)
        self.levels = check_int(levels, "levels", 1, 1 << 16)
        self.thresholds = bit_thresholds(self.epsilon, self.levels)
        self.dim = 1
        self._set_instant(instant)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "levels": self.levels,
                "instant": self.instant}

    def epsilon_spent(self) -> float:
        t0 = int(self.thresholds[0])
        return _log_ratio(SCALE - t0, t0)

    def _one(self, z: int) -> float:
        """P(one night's report is 1 | rounded level z), both layers."""
        r = self.flip
        return r + (1 - 2 * r) * int(self.thresholds[z]) / SCALE

    def night_epsilon(self) -> float:
        hi, lo = self._one(self.levels), self._one(0)
        return max(math.log(hi) - math.log(lo), math.log(1 - lo) - math.log(1 - hi))

    def estimate(self, ones: float, n: int) -> tuple[float, float]:
        """(mean, standard error) from the released count of 1s among ``n`` reports (see the class notes)."""
        r, t0 = self.flip, int(self.thresholds[0])
        step = int(self.thresholds[1]) - t0
        lo, hi = self.domain
        rate = ones / n
        scale = (hi - lo) * SCALE / ((1 - 2 * r) * step * self.levels)
        value = lo + ((rate - r) / (1 - 2 * r) * SCALE - t0) * (hi - lo) / (step * self.levels)
        pi = min(max(rate, 0.0), 1.0)
        return value, scale * math.sqrt(pi * (1 - pi) / n)

    def levels_of(self, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Each value's rounded grid point z in 0..levels, by its person's α-point (α in [0, 1))."""
        lo, hi = self.domain
        t = (np.asarray(x, dtype=np.float64) - lo) * (self.levels / (hi - lo))
        c = np.minimum(np.floor(t), self.levels - 1)
        return (c + (t - c >= 1.0 - alpha)).astype(np.int64)

    def reports(self, x: np.ndarray, person: np.ndarray, key: int) -> np.ndarray:
        zero = np.zeros(len(person), np.uint64)
        a = _blocks(key, person, zero, 0, USE_ALPHA)[:, 0]
        level = self.levels_of(x, (a >> np.uint64(11)).astype(np.float64) / 2.0**53)
        u = _blocks(key, person, level, 0, USE_BITS)[:, 0] & np.uint64(0xFFFFFFFF)
        return (u < self.thresholds[level])[:, None].astype(np.uint8)

    def _rounded(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
        """The persons (contiguous) and each one's rounded level by its keyed α-point (the kernels' draw)."""
        from .._memo_kernels import alpha_points

        k0, k1 = _keys(key)
        person = np.ascontiguousarray(person, dtype=np.uint64)
        alpha = np.empty(len(person))
        alpha_points(person, k0, k1, alpha)
        return person, self.levels_of(x, alpha)

    def memo_stats(self, x: np.ndarray, person: np.ndarray, key: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        from .._memo_kernels import memo_bit

        person, level = self._rounded(x, person, key)
        ones = np.zeros(1, np.int64)
        pairs = np.empty((len(level), 2), np.uint64)
        memo_bit(person, level, *_keys(key), self.thresholds, ones, pairs)
        return {"sum": ones}, pairs
