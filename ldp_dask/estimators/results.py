"""Small result objects: plain data, ``to_dict()``, plots; math lives elsewhere."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_probability
from ..outputs import (
    Described,
    Description,
    Table,
    finish_plot,
    fmt,
    fmt_interval,
    fmt_se,
    jsonable,
    new_axes,
    save_json,
    summary_facts,
    tidy_table,
)

__all__ = ["DensityEstimate", "MeanEstimate", "NoRows", "no_rows"]


#: Quantiles of an estimated density shown with it.
SHOWN_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: Tables show at most this many bins of a histogram estimate (evenly spaced); plots at most PLOTTED_BINS steps.
SHOWN_BINS = 64
PLOTTED_BINS = 4096
#: A density estimate warns when more than this share of its mass lies in 1/20 of the domain (or one bin).
MASS_WARNING = 0.5
#: A mean warns when the privacy noise makes more than this share of its variance.
NOISE_SHARE_WARNING = 0.9
#: An estimate is "mostly noise" when its standard error passes this share of its feasible range (a mean's domain,
#: a share's [0, 1]): its 95% interval, ±1.96 standard errors, would then span at least 98% of that range.
MOSTLY_NOISE = 0.25


@dataclass(frozen=True)
class DensityEstimate(Described):
    """A density estimate on a grid of bins, with pointwise uncertainty.

    Histogram estimates are piecewise constant on their bins. Wavelet
    estimates are smooth functions: ``evaluator`` computes them exactly at any
    point (used by :meth:`pdf` and :meth:`distance`), and the bins hold their
    values at the midpoints of a fine grid (used by :meth:`cdf`,
    :meth:`quantile`, the band and the plot).

    Attributes
    ----------
    edges : ndarray, shape (K+1,)
    density : ndarray, shape (K,)
        Estimated density on each bin.
    se : ndarray, shape (K,)
        Standard error of the *raw* estimate on each bin (sampling + privacy noise); NaN where the estimate has no
        band (the smoothed Square Wave estimate: its bias is not in any standard error).
    method : str
        ``"histogram"`` (raw, unbiased, may be negative),
        ``"histogram+simplex"`` (projected to a proper density), or
        ``"wavelet-<threshold>[+density]"``.
    n, epsilon : int, float
    level : float
        Confidence level of :meth:`band`.
    evaluator : callable, optional
        Exact pointwise evaluation of a smooth estimate.
    raw : ndarray, optional
        The unbiased density before its projection (a histogram's; may be negative), for those who combine
        releases; None where the estimate has no unbiased form.
    """

    edges: np.ndarray
    density: np.ndarray
    se: np.ndarray
    method: str
    n: int
    epsilon: float
    level: float = 0.95
    info: dict[str, Any] = field(default_factory=dict)
    evaluator: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False, compare=False)
    raw: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def smooth(self) -> bool:
        return self.evaluator is not None

    @property
    def has_band(self) -> bool:
        """Whether :meth:`band` is meaningful (False for estimates whose bias no standard error covers)."""
        return bool(np.all(np.isfinite(self.se)))

    @property
    def widths(self) -> np.ndarray:
        return np.diff(self.edges)

    @property
    def masses(self) -> np.ndarray:
        """Estimated probability of each bin."""
        return self.density * self.widths

    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise normal confidence band ``density ± z·se`` at :attr:`level`, intersected with what a density
        can be — at least 0, and, for a bin's average, at most 1/width (the bin holding all the mass) — and
        widened to hold the estimate. A true density lies in that set, so the intersection loses no coverage."""
        from scipy.stats import norm

        z = norm.ppf(0.5 + self.level / 2)
        low, high = self.density - z * self.se, self.density + z * self.se
        low = np.minimum(np.maximum(low, 0.0), self.density)
        if not self.smooth:
            high = np.maximum(np.minimum(high, 1.0 / self.widths), self.density)
        return low, high

    def pdf(self, x: Any) -> np.ndarray:
        """Density at ``x`` (0 outside the domain)."""
        x = np.asarray(x, dtype=np.float64)
        if self.evaluator is not None:
            inside = (x >= self.edges[0]) & (x <= self.edges[-1])
            return np.where(inside, self.evaluator(np.clip(x, self.edges[0], self.edges[-1])), 0.0)
        j = np.searchsorted(self.edges, x, side="right") - 1
        j = np.where(x == self.edges[-1], len(self.density) - 1, j)
        inside = (j >= 0) & (j < len(self.density))
        return np.where(inside, self.density[np.clip(j, 0, len(self.density) - 1)], 0.0)

    def _monotone_cdf_knots(self) -> np.ndarray:
        m = np.clip(self.masses, 0.0, None)
        total = m.sum()
        if total <= 0:
            m, total = np.ones_like(m), float(len(m))
        return np.concatenate([[0.0], np.cumsum(m) / total])

    def cdf(self, x: Any) -> np.ndarray:
        """CDF at ``x``: piecewise linear through the bin masses.

        Negative masses of a raw estimate are set to zero and the rest
        renormalised, so the CDF is monotone (a projection is better still).
        """
        return np.interp(np.asarray(x, dtype=np.float64), self.edges, self._monotone_cdf_knots())

    def quantile(self, q: Any) -> np.ndarray:
        """Inverse of :meth:`cdf` (linear within bins)."""
        q = np.asarray(q, dtype=np.float64)
        if np.any(~((q >= 0) & (q <= 1))):
            raise LdpDaskError(f"The 'q' parameter must lie in [0, 1]. Got {q!r} instead.")
        knots = self._monotone_cdf_knots()
        # strictly increasing knots for interpolation: drop repeated plateaus
        keep = np.concatenate([[True], np.diff(knots) > 0])
        return np.interp(q, knots[keep], self.edges[keep])

    def distance(self, pdf: Callable[[np.ndarray], np.ndarray], r: float = 2.0, grid: int = 1 << 14) -> float:
        """L^r distance ``(∫ |f̂ − f|^r)^{1/r}`` to a density ``pdf`` on the domain (r = inf: sup)."""
        lo, hi = float(self.edges[0]), float(self.edges[-1])
        x = lo + (np.arange(grid) + 0.5) * (hi - lo) / grid  # midpoint rule
        d = np.abs(self.pdf(x) - np.asarray(pdf(x), dtype=np.float64))
        if math.isinf(r):
            return float(d.max())
        if r <= 0:
            raise LdpDaskError(f"The 'r' parameter must be > 0. Got {r!r} instead.")
        return float((np.mean(d**r) * (hi - lo)) ** (1.0 / r))

    @functools.cached_property
    def warnings(self) -> tuple[str, ...]:
        """What the released estimate says about the choice of domain, from released values only.

        More than half of the estimated mass in 1/20 of the domain (or in one
        bin, when there are fewer than 20) means the domain is probably too
        wide, or the bins too few: most of the noise is spent on empty space.
        Computed once, by a running sum (O(bins)).
        """
        width = np.diff(self.edges)
        mass = np.clip(self.density, 0, None) * width
        total = float(mass.sum())
        if not total > 0:
            return ("the estimate has no positive mass: the privacy noise dominates (more rows, a larger ε or a "
                    "narrower domain would help)",)
        k = max(1, math.ceil(len(mass) / 20))
        running = np.concatenate([[0.0], np.cumsum(mass)])
        window = (running[k:] - running[:-k]) / total  # the mass of every k consecutive bins
        j = int(np.argmax(window))
        if window[j] <= MASS_WARNING:
            return ()
        part = "one bin" if k == 1 else f"{k} of its {len(mass)} bins (1/20 of the domain)"
        return (f"{window[j]:.0%} of the estimated mass lies in [{fmt(self.edges[j], 5)}, "
                f"{fmt(self.edges[j + k], 5)}], {part}: the domain [{fmt(self.edges[0])}, {fmt(self.edges[-1])}] "
                f"is probably too wide (or the bins too few) for this column",)

    def to_table(self) -> Any:
        """One row per bin: ``bin_low``, ``bin_high``, ``density``, ``se`` and the band's ``ci_low``/``ci_high``
        (null where the estimate has no band), with ``method``, ``n``, ``epsilon``, ``confidence`` as columns."""
        lo, hi = self.band() if self.has_band else (None, None)
        nulls = [None] * len(self.density)
        return tidy_table({"bin_low": self.edges[:-1], "bin_high": self.edges[1:], "density": self.density,
                           "se": self.se if self.has_band else nulls,
                           "ci_low": lo if self.has_band else nulls, "ci_high": hi if self.has_band else nulls,
                           "raw": self.raw if self.raw is not None else nulls},
                          {"column": self.info.get("column", "value"), "method": self.method, "n": self.n,
                           "epsilon": self.epsilon, "confidence": self.level})

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.band() if self.has_band else (None, None)
        return jsonable({
            "kind": "density", "method": self.method, "n": self.n, "epsilon": self.epsilon,
            "level": self.level, "edges": self.edges, "density": self.density,
            "se": self.se if self.has_band else None, "band_lo": lo, "band_hi": hi, "raw": self.raw, **self.info,
            "warnings": list(self.warnings),
        })

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        """Write :meth:`to_dict` as JSON, atomically."""
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        """The estimate's rows: method, shape, quantiles, and the density with its band per bin (or on 21 points)."""
        lo, hi = self.band()
        qs = self.quantile(SHOWN_QUANTILES)
        i = self.info
        if self.smooth:
            if "levels" in i:  # a split release
                shape = i["label"]
            elif i["j1"] < i["j0"]:
                shape = f"{i['wavelet']} wavelets, father level {i['j0']} alone (linear estimator)"
            else:
                shape = (f"{i['wavelet']} wavelets, levels {i['j0']}–{i['j1']} ({i['calibration']} calibration), "
                         f"γ = {i['gamma']:g}; details kept per level: {i['kept_per_level']}")
            mid = (self.edges[:-1] + self.edges[1:]) / 2
            xs = np.linspace(self.edges[0], self.edges[-1], 21)
            rows: tuple[tuple[str, ...], ...] = tuple((fmt(x, 5), fmt(float(self.pdf(x)), 4), fmt(float(np.interp(x, mid, lo)), 4),
                          fmt(float(np.interp(x, mid, hi)), 4)) for x in xs)
            table = Table(("x", "density", "band low", "band high"), rows, "the density on 21 points")
        else:
            K = len(self.density)
            shape = i.get("label", f"{K} bins")
            shown = np.unique(np.linspace(0, K - 1, min(K, SHOWN_BINS)).astype(np.intp))
            caption = (f"the density on its {K} bins" if len(shown) == K else
                       f"{len(shown)} of its {K:,} bins, evenly spaced (every bin is in the JSON output)")
            if self.has_band:
                rows = tuple((fmt(self.edges[j], 5), fmt(self.edges[j + 1], 5), fmt(self.density[j], 4),
                              fmt(lo[j], 4), fmt(hi[j], 4)) for j in shown)
                table = Table(("from", "to", "density", "band low", "band high"), rows, caption)
            else:
                rows = tuple((fmt(self.edges[j], 5), fmt(self.edges[j + 1], 5), fmt(self.density[j], 4))
                             for j in shown)
                table = Table(("from", "to", "density"), rows, caption)
        band = (f"{self.level:.0%} pointwise confidence band, privacy noise included" if self.has_band else
                "none: the smoothing's bias is in no standard error; quantile intervals that hold for every "
                "distribution: 'ldp-dask quantiles'")
        return Description(
            title=f"Locally private density of {i.get('column', 'value')}",
            # the estimate's quantiles carry no standard error here (ldp-dask quantiles gives their intervals):
            # four significant digits, not the float's noise
            headline=f"density estimate ({self.method}): 10/50/90% quantiles {fmt(qs[0], 4)} / {fmt(qs[2], 4)} / "
                     f"{fmt(qs[4], 4)}",
            facts=(("method", self.method), ("estimator", shape),
                   ("domain", f"[{fmt(self.edges[0])}, {fmt(self.edges[-1])}]"),
                   ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
                   ("band", band),
                   *((f"quantile {q:.0%} of the estimate", fmt(v, 4)) for q, v in zip(SHOWN_QUANTILES, qs)),
                   *summary_facts(i), *(("warning", w) for w in self.warnings)),
            table=table)

    def plot(self, path: str | os.PathLike[str] | None = None, truth: Callable[[np.ndarray], np.ndarray] | None = None,
             ax: Any = None, title: str | None = None, overwrite: bool = False) -> Any:
        """Step plot of the estimate, its confidence band and optionally the true density.

        Returns the matplotlib Axes; with ``path`` also writes a PNG atomically.
        """
        ax, own = new_axes(ax, (8, 4.5))
        lo, hi = self.band()
        e = self.edges
        if self.smooth:
            mid = (e[:-1] + e[1:]) / 2
            ax.fill_between(mid, lo, hi, alpha=0.25, color="tab:blue", label=f"{self.level:.0%} pointwise band")
            ax.plot(mid, self.density, color="tab:blue", label=f"estimate ({self.method})")
        elif not self.has_band:
            ax.step(e, np.append(self.density, self.density[-1]), where="post", color="tab:blue",
                    label=f"estimate ({self.method})")
        else:
            dens, g = self.density, 1
            if len(dens) > PLOTTED_BINS:  # a picture has no more pixels: bin means of groups of g bins
                g = -(-len(dens) // PLOTTED_BINS)
                cut = np.append(np.arange(0, len(dens), g), len(dens))
                w = np.diff(e)
                dens, lo, hi = (np.add.reduceat(v * w, cut[:-1]) / np.add.reduceat(w, cut[:-1]) for v in (dens, lo, hi))
                e = e[cut]
            means = "" if g == 1 else f" (means of {g} bins)"
            ax.fill_between(e, np.append(lo, lo[-1]), np.append(hi, hi[-1]), step="post", alpha=0.25,
                            color="tab:blue", label=f"{self.level:.0%} pointwise band{means}")
            ax.step(e, np.append(dens, dens[-1]), where="post", color="tab:blue",
                    label=f"estimate ({self.method}){means}")
        if truth is not None:
            x = np.linspace(e[0], e[-1], 1000)
            ax.plot(x, truth(x), color="black", lw=1.2, ls="--", label="true density")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel(self.info.get("column", "value"), parse_math=False)
        ax.set_ylabel("density")
        what = self.info.get("label") or f"K = {len(self.density)}"
        ax.set_title(title or f"Locally private density: n = {self.n:,}, ε = {self.epsilon:g}, {what}")
        ax.legend(loc="best", fontsize=8)
        return finish_plot(ax, path, own, overwrite)


@dataclass(frozen=True)
class MeanEstimate(Described):
    """A private mean with a confidence interval that includes the privacy noise.

    Attributes
    ----------
    value : float
        The estimate, in the domain: the unbiased θ̂ clamped to it (a mean lies in its domain; θ̂ may not, by
        the noise).
    se : float
        Standard error (conservative: Var X bounded by Bhatia–Davis, see
        :func:`ldp_dask.estimators.mean`).
    ci : (float, float)
        Normal interval at ``level`` around θ̂, intersected with the domain; it holds ``value``.
    noise_share : float
        Fraction of the variance due to the privacy noise.
    raw : float
        The unbiased estimate θ̂ = S/n itself (for those who average releases: clamping biases near the ends).
    """

    value: float
    se: float
    ci: tuple[float, float]
    level: float
    n: int
    epsilon: float
    domain: tuple[float, float]
    noise_share: float
    info: dict[str, Any] = field(default_factory=dict)
    raw: float | None = None

    def __post_init__(self) -> None:
        check_probability(self.level, "level")
        if self.raw is None:
            object.__setattr__(self, "raw", self.value)

    @property
    def warnings(self) -> tuple[str, ...]:
        """When the unbiased estimate fell outside the domain (the estimate is then the nearest end: mostly noise,
        with its standard error as a share of the domain), and when the privacy noise makes more than 90% of the
        variance (public: it depends on n, ε and the domain): the domain's width enters the noise variance
        squared, so a domain much wider than the data is costly."""
        out = []
        width = self.domain[1] - self.domain[0]
        if self.raw is not None and self.raw != self.value:
            out.append(f"the unbiased estimate {fmt(self.raw, 4)} fell outside the domain [{fmt(self.domain[0])}, "
                       f"{fmt(self.domain[1])}]: the estimate shown is its nearest end, and it is mostly noise (its "
                       f"standard error is {self.se / width:.0%} of the domain's width)")
        elif self.mostly_noise:
            out.append(f"mostly noise: the standard error is {self.se / width:.0%} of the domain's width, so the "
                       f"interval spans most of [{fmt(self.domain[0])}, {fmt(self.domain[1])}] (more rows, a larger "
                       "ε or a narrower domain would help)")
        if self.noise_share > NOISE_SHARE_WARNING:
            out.append(f"privacy noise makes {self.noise_share:.1%} of this estimate's variance: a narrower domain "
                       f"than [{fmt(self.domain[0])}, {fmt(self.domain[1])}] (its width enters the noise variance "
                       "squared), a larger ε or more rows would narrow the interval")
        return tuple(out)

    @property
    def mostly_noise(self) -> bool:
        """Whether the estimate is mostly noise: its unbiased form fell outside the domain, or its standard error
        passes :data:`MOSTLY_NOISE` of the domain's width."""
        width = self.domain[1] - self.domain[0]
        return bool((self.raw is not None and self.raw != self.value) or self.se > MOSTLY_NOISE * width)

    def to_table(self) -> Any:
        """One row: ``estimate`` (in the domain), ``se``, ``ci_low``, ``ci_high``, ``raw`` (the unbiased estimate),
        ``confidence``, ``noise_share``, ``n``, ``epsilon`` and the domain's ``domain_low``/``domain_high``."""
        return tidy_table({"estimate": [self.value], "se": [self.se], "ci_low": [self.ci[0]], "ci_high": [self.ci[1]],
                           "raw": [self.raw]},
                          {"column": self.info.get("column", "value"), "confidence": self.level,
                           "noise_share": self.noise_share, "n": self.n, "epsilon": self.epsilon,
                           "domain_low": self.domain[0], "domain_high": self.domain[1]})

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "kind": "mean", "value": self.value, "raw": self.raw, "se": self.se, "ci": list(self.ci), "level": self.level,
            "n": self.n, "epsilon": self.epsilon, "domain": list(self.domain),
            "noise_share": self.noise_share, "mostly_noise": self.mostly_noise, **self.info,
            "warnings": list(self.warnings),
        })

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        # numbers to the precision the standard error supports (two significant digits of it); to_dict() has them all
        ci = fmt_interval(self.ci[0], self.ci[1], self.se)
        mean, se = fmt_se(self.value, self.se), fmt(self.se, 2)
        return Description(
            title=f"Locally private mean of {self.info.get('column', 'value')}",
            headline=f"mean {mean} ± {se} (se), {self.level:.0%} interval {ci}"
                     + (f"; mostly noise (se {self.se / (self.domain[1] - self.domain[0]):.0%} of the domain)"
                        if self.mostly_noise else ""),
            facts=(("mean", mean), ("standard error", se),
                   (f"{self.level:.0%} confidence interval", ci),
                   ("share of the variance from privacy noise", f"{self.noise_share:.1%}"),
                   ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
                   ("public domain", f"[{fmt(self.domain[0])}, {fmt(self.domain[1])}]"),
                   *summary_facts(self.info), *(("warning", w) for w in self.warnings)))


@dataclass(frozen=True)
class NoRows(Described):
    """What a summary of no rows gives: a declared public group (or "other") with no row in tonight's data.

    There is nothing to estimate: no point estimate is given, and every interval is the whole feasible range — the
    public domain for a value, a density or a quantile, [0, 1] for a share. A group's size is released exactly
    (it was declared public), so "no rows" is itself the released fact.

    Attributes
    ----------
    target : str
        What would have been estimated: ``"mean"``, ``"density"``, ``"frequencies"`` or ``"quantiles"``.
    interval : (float, float)
        The interval every estimate of it gets: the feasible range.
    epsilon : float
        ε per row of the channel (spent on no row).
    """

    target: str
    interval: tuple[float, float]
    epsilon: float
    info: dict[str, Any] = field(default_factory=dict)

    n = 0

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "no-rows", "target": self.target, "n": 0, "value": None,
                         "ci": list(self.interval), "epsilon": self.epsilon, **self.info})

    def to_table(self) -> Any:
        """One row: ``estimate`` (null), ``ci_low``, ``ci_high`` (the feasible range), ``n`` (0)."""
        return tidy_table({"estimate": [None], "ci_low": [self.interval[0]], "ci_high": [self.interval[1]]},
                          {"column": self.info.get("column", "value"), "target": self.target, "n": 0,
                           "epsilon": self.epsilon})

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        lo, hi = (fmt(v) for v in self.interval)
        return Description(
            title=f"No rows: {self.info.get('column', 'value')}",
            headline=f"no rows: no estimate; every interval is the whole range [{lo}, {hi}]",
            facts=(("rows", "0"), ("what would be estimated", self.target),
                   ("interval", f"[{lo}, {hi}] (the whole feasible range)"), *summary_facts(self.info)))


def no_rows(summary: Any, target: str) -> NoRows:
    """The :class:`NoRows` result of a summary of no rows, for ``target``: its interval is the channel's domain, or
    [0, 1] for shares."""
    from ..outputs import summary_info

    domain = getattr(summary.channel, "domain", None)
    interval = (0.0, 1.0) if target == "frequencies" or domain is None else (float(domain[0]), float(domain[1]))
    return NoRows(target, interval, float(summary.channel.epsilon_spent()), summary_info(summary))
