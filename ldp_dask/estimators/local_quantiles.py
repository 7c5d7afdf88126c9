"""Local-DP quantiles: inverting the CDF of an LDP density estimate (docs/estimators.md).

Quantiles of a histogram (or Haar) or wavelet summary are read off the
estimated CDF (:meth:`DensityEstimate.quantile`): post-processing of the
summary, so they cost no further privacy.

Intervals (``interval=``):

``"bins"`` (default for histogram and Haar summaries)
    A confidence band for the CDF at the bin edges, inverted. The CDF at edge
    k is estimated without bias by the bridge F̂_k = L_k − (k/K)(L_K − 1), L_k the
    cumulative noisy bin sums over n (F(e_K) = 1 exactly, so the total noise is
    known and is taken out in proportion): its variance is
    (v·k(K − k)/K + F(1 − F))/n, v the variance of one row's noise on one bin, a
    Brownian bridge that is smallest in the tails. F nondecreasing gives, with
    bounds U_k, L_k that hold at every interior edge at once,
    θ_q ≥ e_k wherever U_k < q and θ_q ≤ e_k wherever L_k > q: the interval
    is [max{e_k : U_k < q}, min{e_k : L_k > q}]. The inversion takes a
    maximum over edges, so the bounds must hold simultaneously: F̂_k ± z·sd_k
    with z the normal quantile at 1 − (1 − level)/(2(K − 1)) (Bonferroni over
    the K − 1 interior edges; z grows like √(2 log K)). Pointwise bounds fail
    at some edge almost surely once many edges share F(e_k) = q (a flat CDF at
    a quantile level, or many bins). Every quantile's interval then holds at
    once with probability at least ``level``; an interval that comes out
    inverted (possible only when the band fails) is widened to the domain. No
    assumption about the density within a bin, so its width is at least one
    bin.
``"band"``
    The same simultaneous band, linearly interpolated between edges and inverted: narrower,
    but it assumes the CDF is close to linear within each bin (the binning bias
    is ignored) and under-covers where the density changes fast within a bin.
``"envelope"`` (default for wavelet and square-wave summaries)
    Bounds on the CDF at a grid from combinations of the released sums whose
    weights lie above, or below, the step 1[t < e] everywhere: valid for every
    density, so no assumption either; inverted as ``"bins"`` is. Wavelets
    (:mod:`ldp_dask.estimators.envelopes`): father coefficients at a dyadic
    grid, width at least about one and a half cells of the father level.
    Square Wave (:func:`~ldp_dask.estimators.square_wave.square_wave_cdf_bounds`):
    report counts at the cell edges, width up to the wave's 2b of the domain.
``"bootstrap"``
    A parametric bootstrap around the estimate: B replicate summaries drawn
    from the law the released sums would have if the estimate were the truth
    — for histograms multinomial counts plus the channel's own summary-mode
    noise; for wavelets the estimate's coefficients plus the same noise —
    re-estimated with the same estimator; the percentile interval of each
    quantile. It ignores the binning bias and the bias projection pushes into
    the tails (measured coverage: ``benchmarks/quantile_coverage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import DECILES, LdpDaskError, check_draws, check_int, check_probability, check_q
from ..channels import HaarLaplace, LaplaceHistogram, SquareWave, WaveletLaplace, WaveletSplit
from ..outputs import (
    Described,
    Description,
    Table,
    finish_plot,
    fmt_interval,
    fmt_se,
    interval_scale,
    jsonable,
    new_axes,
    save_json,
    summary_facts,
    summary_info,
)
from ..summary import Summary, read_summary
from .histogram import histogram_density, project_simplex
from .results import NoRows, no_rows
from .square_wave import square_wave_cdf_bounds, square_wave_density
from .wavelet import wavelet_density

__all__ = ["local_quantiles", "QuantileEstimate", "cdf_band", "INTERVALS"]

#: The interval methods, described (module docstring).
INTERVALS = {
    "bins": "CDF band at the bin edges, simultaneous over the edges, inverted (no assumption within a bin; all "
            "the intervals hold at once)",
    "band": "the same band interpolated within bins, inverted (assumes a near-linear CDF within each bin)",
    "envelope": "CDF bounds from envelopes of the step (wavelet, square-wave), simultaneous over the grid, "
                "inverted (no assumption about the density; all the intervals hold at once)",
    "bootstrap": "parametric bootstrap percentile (ignores the estimator's bias; under-covers, see the docs)",
}
_SHORT = {"bins": "CDF-band", "band": "interpolated CDF-band", "envelope": "CDF-envelope", "bootstrap": "bootstrap"}


@dataclass(frozen=True)
class QuantileEstimate(Described):
    """Quantiles read off a local-DP density estimate, with bootstrap intervals."""

    q: np.ndarray
    values: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    level: float
    B: int
    method: str
    n: int
    epsilon: float
    info: dict[str, Any] = field(default_factory=dict)
    #: how the intervals were made: "bins", "band", "envelope" or "bootstrap" (module docstring)
    interval: str = "bootstrap"

    def __post_init__(self) -> None:
        # each interval holds its quantile: the quantile is read off the projected estimate, the interval from
        # bounds on the unprojected one, and the two may part where the noise is large (widening loses no coverage)
        values = np.asarray(self.values, dtype=np.float64)
        object.__setattr__(self, "ci_low", np.minimum(np.asarray(self.ci_low, dtype=np.float64), values))
        object.__setattr__(self, "ci_high", np.maximum(np.asarray(self.ci_high, dtype=np.float64), values))

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "local-quantiles", "q": self.q, "values": self.values, "ci_low": self.ci_low,
                          "ci_high": self.ci_high, "level": self.level, "interval": self.interval,
                          "B": self.B, "method": self.method,
                          "n": self.n, "epsilon": self.epsilon, "extra_epsilon": 0.0, **self.info})

    def save(self, path: Any, overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        # each value to the precision its interval supports (the interval rounded outward); to_dict() has them all
        rows = tuple((f"{q:g}", fmt_se(v, interval_scale(lo, hi, self.level)),
                      fmt_interval(lo, hi, interval_scale(lo, hi, self.level)))
                     for q, v, lo, hi in zip(self.q, self.values, self.ci_low, self.ci_high))
        return Description(
            title=f"Local-DP quantiles of {self.info.get('column', 'value')}",
            headline=f"local-DP quantiles from a {self.method} estimate, {self.level:.0%} "
                     f"{_SHORT[self.interval]} intervals",
            facts=(("estimate", self.method), ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
                   ("extra ε", "0 (post-processing of the summary)"),
                   ("intervals", f"{self.level:.0%}, {INTERVALS[self.interval]}"
                    + (f", B = {self.B}" if self.interval == "bootstrap" else "")), *summary_facts(self.info)),
            table=Table(("q", "value", f"{self.level:.0%} interval"), rows))

    def plot(self, path: Any = None, ax: Any = None, overwrite: bool = False) -> Any:
        """The estimated quantile function with each quantile's interval as a whisker."""
        ax, own = new_axes(ax, (7, 4.5))
        err = np.vstack([self.values - self.ci_low, self.ci_high - self.values]).clip(0, None)
        ax.errorbar(self.q, self.values, yerr=err, fmt="o-", color="tab:blue", capsize=3, lw=1,
                    label=f"estimate, {self.level:.0%} {_SHORT[self.interval]} intervals")
        ax.set_xlabel("probability q")
        ax.set_ylabel("value")
        ax.set_title(f"Local-DP quantiles ({self.method}), ε = {self.epsilon:g} per row, n = {self.n:,}")
        ax.legend(fontsize=8)
        return finish_plot(ax, path, own, overwrite)


def _hist_quantiles(p: np.ndarray, edges: np.ndarray, q: np.ndarray) -> np.ndarray:
    knots = np.concatenate([[0.0], np.cumsum(np.clip(p, 0, None))])
    knots /= knots[-1] if knots[-1] > 0 else 1.0
    keep = np.concatenate([[True], np.diff(knots) > 0])
    return np.interp(q, knots[keep], edges[keep])


def _multinomial_rows(gen: np.random.Generator, n: int, p: np.ndarray, B: int) -> Any:
    """B multinomial(n, p) rows, drawn in blocks of at most 2^22 values (one block, so the same draws as before,
    up to 10^4 bins at B = 400)."""
    block = max(1, min(B, (1 << 22) // len(p)))
    for start in range(0, B, block):
        yield from gen.multinomial(n, p, size=min(block, B - start))


def cdf_band(summary: Summary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CDF at the bin edges of a histogram or Haar summary: ``(edges, F̂, variance)``.

    F̂_k = L_k − (k/K)(L_K − 1) with L_k = Σ_{i<k} S_i/(c n) (the bridge: F(e_K) = 1 exactly), unbiased, with
    variance (v·k(K − k)/K + F(1 − F))/n, v = Var of one row's noise on one bin (in count units), F(1 − F) the
    sampling term (F clipped to [0, 1] in the plug-in). F̂_0 = 0 and F̂_K = 1 exactly.
    """
    ch: Any = summary.channel  # a histogram channel (edges, noise variance)
    n, c = summary.n, getattr(ch, "c", 1.0)
    p = summary.sums["sum"] / (c * n)
    K = len(p)
    k = np.arange(K + 1)
    cum = np.concatenate([[0.0], np.cumsum(p)])
    F = cum - k / K * (cum[-1] - 1.0)
    F[0], F[-1] = 0.0, 1.0
    Fc = np.clip(F, 0.0, 1.0)
    var = (ch.noise_variance / c**2 * k * (K - k) / K + Fc * (1.0 - Fc)) / n
    return ch.edges, F, var


def band_z(level: float, edges: int) -> float:
    """The normal quantile of a band that holds at ``edges`` points at once with probability ≥ ``level``:
    Φ⁻¹(1 − (1 − level)/(2·edges)) (Bonferroni)."""
    from scipy.stats import norm

    return float(norm.isf((1.0 - level) / (2.0 * max(1, edges))))


def _band_intervals(summary: Summary, qs: np.ndarray, level: float, within_bins: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Invert the simultaneous band F̂ ± z·sd at the bin edges (module docstring, "bins" and "band")."""
    edges, F, var = cdf_band(summary)
    z = band_z(level, len(edges) - 2)  # the K − 1 interior edges; F̂ is exact at both ends
    upper, lower = F + z * np.sqrt(var), F - z * np.sqrt(var)
    if within_bins:
        lo, hi = _invert(edges, upper, lower, qs)
    else:
        up, dn = np.maximum.accumulate(upper), np.maximum.accumulate(lower)  # nondecreasing, for the crossings
        lo, hi = _crossings(up, edges, qs), _crossings(dn, edges, qs)
    return _widen_inverted(lo, hi, (float(edges[0]), float(edges[-1])))


def _envelope_intervals(summary: Summary, qs: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Invert the envelope bounds (module docstring, "envelope"): θ_q ≥ t where the upper bound on P(T < t) is
    below q, θ_q ≤ t where the lower bound on P(T ≤ t) is above q; the bounds hold at every grid point at once."""
    from .envelopes import OFFSETS, cdf_envelope_bounds

    ch = summary.channel
    if isinstance(ch, WaveletSplit):
        # each level's rows are a random sample of the rows, a one-level release of its own: its bounds hold for
        # the same population CDF; the union of all levels' grids, Bonferroni over every point of every level
        n_g = np.asarray(summary.sums["group_n"], dtype=np.float64)
        parts = [(p, int(m), summary.sums["sum"][ch.block(g)]) for g, (p, m) in enumerate(zip(ch.parts, n_g)) if m > 0]
        points = sum(len(OFFSETS) * (1 << p.j0) - 1 for p, _, _ in parts)
        bounds = [cdf_envelope_bounds(Summary(p, m, {"sum": np.asarray(S)}, summary.metadata), band_z(level, points))
                  for p, m, S in parts]
        t = np.concatenate([b_[0] for b_ in bounds])
        order = np.argsort(t, kind="stable")
        t, upper, lower = t[order], np.concatenate([b_[1] for b_ in bounds])[order], \
            np.concatenate([b_[2] for b_ in bounds])[order]
    else:
        points = len(OFFSETS) * (1 << ch.j0) - 1  # type: ignore[attr-defined]  # the interior grid
        t, upper, lower = cdf_envelope_bounds(summary, band_z(level, points))
    a, b = ch.domain  # type: ignore[attr-defined]
    return _widen_inverted(*_invert(a + t * (b - a), upper, lower, qs), (a, b))


def _widen_inverted(lo: np.ndarray, hi: np.ndarray, domain: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """An interval that comes out inverted (only where the bounds failed) becomes the domain: no claim rather than
    a wrong one."""
    inverted = lo > hi
    lo[inverted], hi[inverted] = domain
    return lo, hi


def _invert(x: np.ndarray, upper: np.ndarray, lower: np.ndarray, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals from bounds at increasing points x (x[0], x[-1] the domain's ends): θ_q ≥ x_k wherever the
    upper bound U_k < q (then F(x_k−) < q), θ_q ≤ x_k wherever the lower bound L_k > q."""
    lo = np.array([x[upper < qq].max(initial=x[0]) for qq in qs])
    hi = np.array([x[lower > qq].min(initial=x[-1]) for qq in qs])
    return lo, hi


def _crossings(curve: np.ndarray, edges: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """For a nondecreasing curve given at the edges and linear between them: the first x where it reaches q."""
    out = np.empty(len(qs))
    for i, qq in enumerate(qs):
        j = int(np.searchsorted(curve, qq, side="left"))
        if j == 0 or j >= len(curve):
            out[i] = edges[0] if j == 0 else edges[-1]
            continue
        a, b = curve[j - 1], curve[j]
        out[i] = edges[j - 1] + (qq - a) / (b - a) * (edges[j] - edges[j - 1]) if b > a else edges[j]
    return out


def local_quantiles(summary: Summary | str, q: Any = DECILES,
                    level: float = 0.95, B: int = 400, rng: np.random.Generator | int | None = None,
                    interval: str | None = None, **estimator_kwargs: Any) -> QuantileEstimate | NoRows:
    """Quantiles of the LDP density estimate of ``summary``, with intervals (:class:`~ldp_dask.estimators.NoRows`
    for a summary of no rows: no quantile, every interval the whole domain).

    Parameters
    ----------
    summary : Summary or path
        A ``histogram``, ``haar``, ``wavelet`` or ``square-wave`` summary.
    q : quantile levels in (0, 1) (default: the deciles)
    level : float
        Confidence level. "bins", "band", "envelope": of all the intervals at once (CDF bounds that hold at
        every edge or grid point simultaneously); "bootstrap": of each interval.
    B : int
        Bootstrap replicates (``interval="bootstrap"`` only).
    rng : Generator or seed
        Randomness of the bootstrap.
    interval : {"bins", "band", "envelope", "bootstrap"}
        How intervals are made (module docstring). Default: "bins" for
        histogram and Haar summaries, "envelope" for wavelet and square-wave
        summaries (both assumption-free); "bootstrap" (histogram, Haar,
        wavelet) is narrower and under-covers.
    """
    s = read_summary(summary)
    if s.n == 0:  # a declared public group with no rows tonight
        return no_rows(s, "quantiles")
    ch = s.channel
    qs = check_q(q)
    level = check_probability(level, "level")
    B = check_int(B, "B", 10, 100_000)
    binned = isinstance(ch, (LaplaceHistogram, HaarLaplace))
    wavelet = isinstance(ch, (WaveletLaplace, WaveletSplit))
    wave = isinstance(ch, SquareWave)
    if interval is None:
        interval = "envelope" if wavelet or wave else "bins"
    if interval not in INTERVALS:
        raise LdpDaskError(f"The 'interval' parameter must be one of {', '.join(INTERVALS)}. Got {interval!r} instead.")
    if interval in ("bins", "band") and wavelet:
        raise LdpDaskError(f"interval={interval!r} needs a histogram or Haar summary; wavelet summaries support "
                           "'envelope' and 'bootstrap'.")
    if interval == "envelope" and not (wavelet or wave):
        raise LdpDaskError("interval='envelope' needs a wavelet or square-wave summary; histogram and Haar "
                           "summaries use 'bins'.")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = s.n
    if wave:
        if interval != "envelope":
            raise LdpDaskError("square-wave summaries support interval='envelope' only: a bootstrap that refits EMS "
                               "ignores the smoothing's bias, and its coverage is not measured.")
        est = square_wave_density(s, **estimator_kwargs)
        # bounds at every interior cell edge at once (Bonferroni: each edge at 1 − (1 − level)/(d − 1))
        cells = int(ch.cells)  # type: ignore[attr-defined]  # a square-wave channel (wave)
        edges, upper, lower = square_wave_cdf_bounds(s, 1.0 - (1.0 - level) / max(1, cells - 1))
        lo, hi = _widen_inverted(*_invert(edges, upper, lower, qs), (float(edges[0]), float(edges[-1])))
        return QuantileEstimate(q=qs, values=np.asarray(est.quantile(qs)), ci_low=lo, ci_high=hi, level=level, B=0,
                                method=est.method, n=n, epsilon=ch.epsilon, info=summary_info(s), interval=interval)
    if interval == "envelope":
        est = wavelet_density(s, **estimator_kwargs)
        lo, hi = _envelope_intervals(s, qs, level)
        return QuantileEstimate(q=qs, values=np.asarray(est.quantile(qs)), ci_low=lo, ci_high=hi, level=level, B=0,
                                method=est.method, n=n, epsilon=ch.epsilon, info=summary_info(s), interval=interval)
    if isinstance(ch, WaveletSplit):
        raise LdpDaskError("wavelet-split summaries support interval='envelope' only: their bootstrap would have to "
                           "redraw the split and the shrinkage, and its coverage is not measured.")
    if binned and interval != "bootstrap":
        est = histogram_density(s, **estimator_kwargs)
        lo, hi = _band_intervals(s, qs, level, within_bins=interval == "bins")
        return QuantileEstimate(q=qs, values=np.asarray(est.quantile(qs)), ci_low=lo, ci_high=hi, level=level, B=0,
                                method=est.method, n=n, epsilon=ch.epsilon, info=summary_info(s), interval=interval)
    if binned:
        check_draws(B, ch.dim, f"the bootstrap of a {ch.dim:,}-bin summary", "lower B (--B)")
        est = histogram_density(s, **estimator_kwargs)
        c = getattr(ch, "c", 1.0)
        p_fit = np.clip(est.masses, 0, None)
        p_fit /= p_fit.sum()
        project = estimator_kwargs.get("projection", "simplex") == "simplex"
        reps = np.empty((B, len(qs)))
        for b, row in enumerate(_multinomial_rows(gen, n, p_fit, B)):  # memory: a block of rows, not B × bins
            # the channel's own summary-mode noise, continuous or lattice, around the fitted counts
            S = ch.add_noise({"sum": c * row}, n, gen)["sum"]
            reps[b] = _hist_quantiles(project_simplex(S / (c * n)) if project else S / (c * n), est.edges, qs)
    elif isinstance(ch, WaveletLaplace):
        check_draws(B, ch.dim, f"the bootstrap of a {ch.dim:,}-coefficient summary", "lower B (--B)")
        est = wavelet_density(s, **estimator_kwargs)
        center = np.concatenate([cf for cf in est.evaluator.coefs]) * n  # type: ignore[union-attr]
        reps = np.empty((B, len(qs)))
        for b in range(B):
            Sb = center + ch.add_noise({"sum": np.zeros(ch.dim)}, n, gen)["sum"]  # the channel's own noise law
            reps[b] = wavelet_density(Summary(ch, n, {"sum": Sb}, s.metadata), grid=len(est.density),
                                      **estimator_kwargs).quantile(qs)
    elif not wave:
        raise LdpDaskError(f"local quantiles need a density summary (histogram, haar, wavelet, square-wave); got "
                           f"{ch.name!r}.")
    alpha = (1 - level) / 2
    return QuantileEstimate(
        q=qs, values=np.asarray(est.quantile(qs)), ci_low=np.quantile(reps, alpha, axis=0),
        ci_high=np.quantile(reps, 1 - alpha, axis=0), level=level, B=B, method=est.method, n=n,
        epsilon=ch.epsilon, info=summary_info(s),
    )
