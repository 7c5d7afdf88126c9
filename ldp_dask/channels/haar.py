"""Haar channels for goodness-of-fit testing (Lam-Weil, Laurent and Loubes 2022; docs/channels.md).

On the domain rescaled to [0, 1], level J has D = 2^J bins and
φ_{Jk} = 2^{J/2} 1[k 2^−J, (k+1) 2^−J). :class:`HaarLaplace` releases

    Z_ik = φ_{Jk}(X_i) + σ W_ik,   σ = 2^{J/2+1}/α,   W iid Lap(1),

whose L1 sensitivity is Δ = 2 · 2^{J/2} (two one-hot vectors scaled by
c = 2^{J/2}), so it is α-LDP; ``epsilon_spent()`` = Δ/σ.

:class:`HaarAdaptive` serves the adaptive test over a collection 𝒥 of levels
(docs/goodness-of-fit.md) in two designs:

``split="rows"`` (sample splitting, full α per row; the paper's design)
    every row picks one level g uniformly at random, independently of its
    value, and releases (g, its level-J_g Haar view with σ_g = 2^{J_g/2+1}/α).
    The level is independent of the data, so this is a mixture of α-LDP
    channels with data-independent weights and reveals the level: α-LDP,
    ``epsilon_spent()`` = max_g Δ_g/σ_g. The levels use disjoint rows, hence
    are independent.
``split="epsilon"``
    every row releases all levels with budget α/|𝒥| each (basic
    composition, ``epsilon_spent()`` = Σ_J Δ_J/σ_J ≤ α); the levels share rows.
``split="details"`` (nested; the default)
    every row picks one *detail* level j ∈ {0, …, max 𝒥 − 1} uniformly at
    random, independently of its value, and releases (j, its Haar wavelet
    coefficients at level j: 2^{j/2}(1[left half of cell k] − 1[right half])
    for its cell k, ±2^{j/2} or 0, plus noise σ_j = 2^{j/2+1}/α). The L1
    sensitivity of a level is 2 · 2^{j/2}, so by the same mixture argument the
    channel is α-LDP with ``epsilon_spent()`` = max_j Δ_j/σ_j. The projection
    of f − f0 onto level J is the sum of the detail energies of the levels
    below J, so one release serves every J ∈ 𝒥 and no level's rows are
    wasted on the others (docs/goodness-of-fit.md).

Summary mode is exact in distribution (docs/privacy.md): from the exact counts at the
finest level, the random split of each bin's rows among the levels is
Multinomial(count, 1/|𝒥|, …), coarser counts are sums of dyadic children, and
each level's noise is σ(Gamma(m) − Gamma(m)) with m its number of rows.

``noise="lattice"`` (docs/privacy.md): a level-J view is 2^{J/2}·(one-hot + L) with L
discrete Laplace(t), t = σ/2^{J/2} (integer sensitivity 2 in units of 2^{J/2},
same ε); sums are 2^{J/2}·(counts + NB − NB). Every released value is a
public multiple of 2^{J/2}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, NumericChannel, Option, check_noise, chunk_sum, noise_scale_for, require_n, use_fused

__all__ = ["HaarLaplace", "HaarAdaptive", "HaarNoise", "haar_level", "adaptive_levels", "MAX_HAAR_LEVEL", "SPLITS",
           "DEFAULT_SPLIT", "ADAPTIVE_SPAN"]

MAX_HAAR_LEVEL = 20
SPLITS = ("rows", "epsilon", "details")
#: The adaptive channel's default design: the nested one, the most powerful measured (benchmarks/RESULTS.md).
DEFAULT_SPLIT = "details"
#: Levels of the default adaptive collection 𝒥 = {1, …, 4}: departures best seen at 2 to 16 bins
#: (:func:`adaptive_levels`, docs/goodness-of-fit.md#the-adaptive-test).
ADAPTIVE_SPAN = 4


#: The adaptive channel splits a partition's rows among its k levels per row (one uniform draw each) while the
#: partition has at most this many rows per (bin, level) cell, else by one multinomial per bin: the same law,
#: drawn at the lower cost (per row about 5 ns, per cell of a multinomial about 57 ns, measured).
PER_ROW_SPLIT_MAX = 10.0


def _split_levels(counts: np.ndarray, levels: list[int], rng: np.random.Generator) -> np.ndarray:
    """The rows of each finest bin split among the levels, as counts per level at that level's resolution.

    Per bin b, Multinomial(counts[b], uniform over the k levels), independently; the rows a level gets are
    counted in the dyadic parents of their bins at that level. Returns the levels' blocks concatenated
    (Σ_g 2^{J_g} counts). Drawn as one uniform level per row (O(m + D)), or as D multinomials of k cells
    (O(D·k) draws of a costlier kind), whichever costs less; the law is the same.
    """
    from .._kernels import split_to_levels

    D, m, k = len(counts), int(counts.sum()), len(levels)
    finest = D.bit_length() - 1
    shifts = np.array([finest - j for j in levels], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([1 << j for j in levels])]).astype(np.int64)
    out = np.zeros(int(offsets[-1]), dtype=np.int64)
    if m > PER_ROW_SPLIT_MAX * D * k:
        alloc = rng.multinomial(counts, np.full(k, 1.0 / k))
        split_to_levels(counts, np.zeros(0, dtype=np.uint8), alloc, shifts, offsets, out)
    else:
        row_level = rng.integers(0, k, size=m, dtype=np.uint8)
        split_to_levels(counts, row_level, np.zeros((0, k), dtype=np.int64), shifts, offsets, out)
    return out


def _bin_index(t: np.ndarray, bins: int) -> np.ndarray:
    idx = (t * bins).astype(np.intp)  # t >= 0: truncation is floor
    np.minimum(idx, bins - 1, out=idx)
    return idx


@dataclass(frozen=True)
class HaarNoise:
    """The noise law of one Haar level, defined once: the channels draw from it, and so does the
    goodness-of-fit calibration (:mod:`ldp_dask.gof.calibration`).

    Each coordinate of a row's view carries Laplace(σ) noise (``"continuous"``),
    or c × discrete Laplace(σ/c) (``"lattice"``: values on the public lattice c·ℤ,
    c = 2^{J/2}, same ε). The sum of m rows' noise is σ(Gamma(m) − Gamma(m)), or
    c(NB(m, p) − NB(m, p)) with p = 1 − e^{−c/σ}.
    """

    c: float
    sigma: float
    noise: str

    def sums(self, rng: np.random.Generator, m: int, shape: Any) -> np.ndarray:
        """Sums of m rows' noise, one per coordinate of ``shape``: O(size), not O(m·size)."""
        if self.noise == "lattice":
            return self.c * discrete_laplace_sum(rng, m, self.sigma / self.c, shape)
        return laplace_sum(rng, m, self.sigma, shape)

    def rows(self, rng: np.random.Generator, shape: Any) -> np.ndarray:
        """One row's noise per coordinate of ``shape``."""
        if self.noise == "lattice":
            return self.c * discrete_laplace(rng, self.sigma / self.c, shape)
        return rng.laplace(0.0, self.sigma, size=shape)

    @property
    def variance(self) -> float:
        """Variance of one row's noise on one coordinate: 2σ², or c²·Var(discrete Laplace(σ/c))."""
        if self.noise == "lattice":
            return self.c**2 * discrete_laplace_variance(self.sigma / self.c)
        return 2.0 * self.sigma**2


class _HaarBase(NumericChannel):
    def to_unit(self, x: np.ndarray) -> np.ndarray:
        lo, hi = self.domain
        t = (np.asarray(x, dtype=np.float64) - lo) / (hi - lo)
        return np.clip(t, 0.0, 1.0, out=t)


class HaarLaplace(_HaarBase):
    """Haar coefficients at level J plus Laplace noise (Lam-Weil, Laurent and Loubes 2022; docs/channels.md).

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    level : int
        J, 0 ≤ J ≤ 20: D = 2^J bins on the domain.
    domain : (float, float)
        Public domain ``(lo, hi)``.
    """

    name = "haar"
    options = (
        Option("level", "Haar level J, 2^J bins (default: 2^J ≍ (n ε²)^(2/(4s+3)) with the smoothness s)", type=int,
               cli_name="haar-level"),
        Option("smoothness", "smoothness s that sets the default level", type=float, default=1.0),
        NOISE_OPTION,
    )

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, level: int | None = None,  # type: ignore[override]
               smoothness: float = 1.0, noise: str = "lattice") -> HaarLaplace:
        if level is None:
            level = haar_level(require_n(n, f"the automatic levels of the {cls.name!r} channel"), epsilon, smoothness)
        return cls(epsilon, level, domain, noise)

    def __init__(self, epsilon: float, level: int, domain: tuple[float, float], noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self.level = check_int(level, "level", 0, MAX_HAAR_LEVEL)
        self._set_domain(domain)
        self.dim = 1 << self.level
        self.c = 2.0 ** (self.level / 2)
        self.sensitivity = 2.0 * self.c
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    @property
    def bins(self) -> int:
        return self.dim

    @property
    def edges(self) -> np.ndarray:
        lo, hi = self.domain
        return np.linspace(lo, hi, self.dim + 1)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "level": self.level, "domain": list(self.domain), "noise": self.noise}

    @property
    def noise_law(self) -> HaarNoise:
        """The noise of this level (:class:`HaarNoise`)."""
        return HaarNoise(self.c, self.noise_scale, self.noise)

    @property
    def noise_variance(self) -> float:
        """Variance of one row's noise on one coordinate."""
        return self.noise_law.variance

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        if not use_fused(len(x)):
            binned = chunk_sum(x, lambda c: np.bincount(_bin_index(self.to_unit(c), self.dim), minlength=self.dim),
                               np.zeros(self.dim, dtype=np.int64))
            return {"sum": binned * self.c}
        from .._kernels import fine_histogram

        lo, hi = self.domain
        counts = np.zeros(self.dim)  # floor(2^J t) per row, t = 1 in the last bin: the cells of _bin_index
        fine_histogram(np.ascontiguousarray(x, dtype=np.float64), lo, hi - lo, self.level, counts, np.zeros(0))
        return {"sum": counts * self.c}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"sum": exact["sum"] + self.noise_law.sums(rng, m, self.dim)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        z = self.noise_law.rows(rng, (len(x), self.dim))
        z[np.arange(len(x)), _bin_index(self.to_unit(x), self.dim)] += self.c
        return z


class HaarAdaptive(_HaarBase):
    """Haar views at several levels for the adaptive test (docs/goodness-of-fit.md).

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    levels : list of int
        The collection 𝒥 (distinct, 0 ≤ J ≤ 20); see :func:`adaptive_levels`.
    domain : (float, float)
        Public domain ``(lo, hi)``.
    split : {"details", "rows", "epsilon"}
        One detail level per row with full α, shared by every J (default),
        one level per row with full α (the paper's sample splitting), or α/|𝒥|
        per level (module docstring).

    Notes
    -----
    Released statistics: ``sum`` (the blocks' sums, concatenated: the levels
    of ``levels`` in order, or for ``split="details"`` the detail levels
    0, …, max 𝒥 − 1) and ``group_n`` (rows per block: Multinomial(n, 1/k) for
    the k blocks of ``split="rows"`` and ``"details"``, n for every level with
    ``"epsilon"`` — a function of the public randomness only).
    ``blocks`` lists the blocks as ("level", J) or ("detail", j).
    """

    name = "haar-adaptive"
    options = (
        Option("levels", "the levels J of the adaptive test (default: 1 to 4, fewer when 2^J > (n ε²)^(2/3))", type=int,
               many=True),
        Option("split", "one random level per row with the full ε (rows), ε/|J| per level (epsilon), or one random "
                        "detail level per row, shared by every J (details)", default=DEFAULT_SPLIT,
               choices=SPLITS),
        NOISE_OPTION,
    )

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, levels: list[int] | None = None,  # type: ignore[override]
               split: str = DEFAULT_SPLIT, noise: str = "lattice") -> HaarAdaptive:
        if levels is None:
            levels = adaptive_levels(require_n(n, f"the automatic levels of the {cls.name!r} channel"), epsilon)
        return cls(epsilon, levels, domain, split, noise)

    def __init__(self, epsilon: float, levels: list[int], domain: tuple[float, float], split: str = DEFAULT_SPLIT,
                 noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
            raise LdpDaskError(f"The 'levels' parameter must be a list of integers. Got {levels!r} instead.")
        lv = [check_int(j, "levels", 0, MAX_HAAR_LEVEL) for j in levels]
        if not lv or len(set(lv)) != len(lv):
            raise LdpDaskError(f"The 'levels' parameter must be a non-empty list of distinct levels. Got {levels!r} instead.")
        self.levels = sorted(lv)
        if split not in SPLITS:
            raise LdpDaskError(f"The 'split' parameter must be one of {', '.join(SPLITS)}. Got {split!r} instead.")
        self.split = split
        self._set_domain(domain)
        self.finest = max(self.levels)
        if split == "details":
            if self.levels[0] < 1:
                raise LdpDaskError(f"split='details' tests levels J >= 1 (level 0 has no detail below it). "
                                   f"Got levels {levels!r}.")
            self.blocks = [("detail", j) for j in range(self.finest)]
        else:
            self.blocks = [("level", j) for j in self.levels]
        m = len(self.blocks)
        self.sizes = [1 << j for _, j in self.blocks]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.dim = m + int(self.offsets[-1])  # rows mode: block one-hot, then the blocks
        self.cs = np.array([2.0 ** (j / 2) for _, j in self.blocks])
        self.sensitivities = 2.0 * self.cs
        if split != "epsilon":
            self.sigmas = np.array([noise_scale_for(d, self.epsilon) for d in self.sensitivities])
        else:
            sig = np.array([noise_scale_for(d, self.epsilon / m) for d in self.sensitivities])
            while math.fsum(self.sensitivities / sig) > self.epsilon:
                sig = sig * (1.0 + 2.0**-50)
            self.sigmas = sig

    @property
    def noise_laws(self) -> list[HaarNoise]:
        """The noise of each block, in the order of ``blocks`` (:class:`HaarNoise`)."""
        return [HaarNoise(float(c), float(s), self.noise) for c, s in zip(self.cs, self.sigmas)]

    def epsilon_spent(self) -> float:
        per_level = self.sensitivities / self.sigmas
        return math.fsum(per_level) if self.split == "epsilon" else float(per_level.max())

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "levels": list(self.levels), "domain": list(self.domain), "split": self.split,
                "noise": self.noise}

    def block(self, g: int) -> slice:
        """Slice of block ``blocks[g]`` in the ``sum`` statistic (level ``levels[g]`` unless split="details")."""
        return slice(int(self.offsets[g]), int(self.offsets[g + 1]))

    def aggregate(self, fine_counts: np.ndarray, level: int) -> np.ndarray:
        """Counts at ``level`` from counts at the finest level (dyadic sums; last axis)."""
        fine = np.asarray(fine_counts)
        return fine.reshape(*fine.shape[:-1], 1 << level, -1).sum(axis=-1)

    @property
    def integer_sums(self) -> bool:
        return True  # counts of the finest bins

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        from .._kernels import fine_histogram

        lo, hi = self.domain
        counts = np.zeros(1 << self.finest)  # floor(2^J t) per row, t = 1 in the last bin (as _bin_index)
        fine_histogram(np.ascontiguousarray(x, dtype=np.float64), lo, hi - lo, self.finest, counts, np.zeros(0))
        return {"counts": counts.astype(np.int64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        counts = np.asarray(exact["counts"], dtype=np.int64)
        k = len(self.blocks)
        if self.split == "details":  # each bin's rows split among the detail levels; a level-j coefficient is
            # (rows in the left half of its cell − rows in the right half), halves at resolution 2^{j+1}
            split = _split_levels(counts, [j + 1 for _, j in self.blocks], rng)
            halves = [split[2 * int(self.offsets[g]): 2 * int(self.offsets[g + 1])] for g in range(k)]
            per_level = [h[0::2] - h[1::2] for h in halves]
            group_n = np.array([h.sum() for h in halves])
        elif self.split == "rows":  # each bin's rows split among the levels, Multinomial(counts_b, 1/k each)
            split = _split_levels(counts, self.levels, rng)
            per_level = [split[self.block(g)] for g in range(k)]
            group_n = np.array([c.sum() for c in per_level])
        else:
            group_n = np.full(k, m)
            per_level = [self.aggregate(counts, j) for j in self.levels]
        sums = [c * cnt + law.sums(rng, int(ng), len(cnt))
                for c, cnt, ng, law in zip(self.cs, per_level, group_n, self.noise_laws)]
        return {"sum": np.concatenate(sums), "group_n": group_n.astype(np.float64)}

    def signal(self, t: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
        """Block ``g``'s noiseless view of rows at unit positions ``t``: (index in the block, value) per row —
        c at the row's bin for a level, ±c (left/right half of its cell) for a detail level."""
        kind, j = self.blocks[g]
        if kind == "detail":
            half = _bin_index(t, 2 * self.sizes[g])
            return half >> 1, np.where(half & 1, -self.cs[g], self.cs[g])
        return _bin_index(t, self.sizes[g]), np.full(len(t), self.cs[g])

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k, n = len(self.blocks), len(x)
        t = self.to_unit(x)
        z = np.zeros((n, self.dim))
        rows = np.arange(n)
        if self.split != "epsilon":
            g = rng.integers(k, size=n)
            z[rows, g] = 1.0
            for gi in range(k):
                sel = rows[g == gi]
                b = self.block(gi)
                z[sel, k + b.start: k + b.stop] = self.noise_laws[gi].rows(rng, (len(sel), self.sizes[gi]))
                idx, val = self.signal(t[sel], gi)
                z[sel, k + b.start + idx] += val
        else:
            z[:, :k] = 1.0
            for gi in range(len(self.levels)):
                b = self.block(gi)
                z[:, k + b.start: k + b.stop] = self.noise_laws[gi].rows(rng, (n, self.sizes[gi]))
                z[rows, k + b.start + _bin_index(t, self.sizes[gi])] += self.cs[gi]
        return z

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        k = len(self.blocks)
        z = np.asarray(z, dtype=np.float64)
        return {"sum": z[:, k:].sum(axis=0), "group_n": z[:, :k].sum(axis=0)}


def haar_level(n: int, epsilon: float, smoothness: float = 1.0) -> int:
    """J with 2^J ≍ (nα²)^{2/(4s+3)} (Lam-Weil, Laurent and Loubes 2022), at least 1.

    The private separation rate is then (nα²)^{−2s/(4s+3)}. ``n`` is public
    and α fixed before privatizing.
    """
    check_int(n, "n", 1)
    epsilon = check_epsilon(epsilon)
    s = float(smoothness)
    if not (math.isfinite(s) and s > 0):
        raise LdpDaskError(f"The 'smoothness' parameter must be a finite number > 0. Got {smoothness!r} instead.")
    return int(min(MAX_HAAR_LEVEL, max(1, round(2.0 / (4 * s + 3) * math.log2(max(n * epsilon**2, 1.0))))))


def adaptive_levels(n: int, epsilon: float, max_level: int = 16, span: int | None = ADAPTIVE_SPAN) -> list[int]:
    """The default collection 𝒥 of the adaptive test (docs/goodness-of-fit.md#the-adaptive-test).

    𝒥 = {1, …, min(``span``, J_top, ``max_level``)} with J_top the largest J such that
    2^J ≤ (nα²)^{2/3} (at least 1); ``span=None`` gives every J ≤ J_top.

    The test adapts over departures from f0 that are best seen at 2 to 2^span
    bins on the domain. Every extra level costs separation: in a noise-only
    model, with the shares of rows that minimise the worst case over 𝒥, the
    noise of the nested statistic of the best level is up to 1.11, 1.49 and 1.87
    times the single best level's for m = 3, 4 and 5 levels, and the detectable
    separation grows like its square root, times the price of the maximum.
    With the default span of 4 levels the measured separation at power 0.8 is
    1.16–1.66× (median 1.43) that of the best single level chosen with
    hindsight (``benchmarks/gof_power.py --separation``).
    """
    check_int(n, "n", 1)
    epsilon = check_epsilon(epsilon)
    top = math.floor(2.0 / 3.0 * math.log2(max(n * epsilon**2, 1.0)))
    if span is not None:
        top = min(top, check_int(span, "span", 1, MAX_HAAR_LEVEL))
    return list(range(1, max(1, min(top, max_level)) + 1))
