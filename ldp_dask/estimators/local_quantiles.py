"""Local-DP quantiles: inverting the CDF of an LDP density estimate (docs/estimators.md).

Quantiles of a histogram (or Haar) or wavelet summary are read off the
estimated CDF (:meth:`DensityEstimate.quantile`): post-processing of the
summary, so they cost no further privacy. Their uncertainty comes from a
parametric bootstrap around the estimate: B replicate summaries are drawn
from the law the released sums would have if the estimate were the truth —
for histograms multinomial counts plus the exact Laplace-sum noise
σ(Gamma(n) − Gamma(n)); for wavelets the estimate's coefficients plus the same
noise (the privacy noise dominates the sampling noise by orders of magnitude
at any ε ≤ 4) — re-estimated with the same estimator, and the percentile
interval of each quantile is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import DECILES, LdpDaskError, check_draws, check_int, check_probability, check_q
from ..channels import HaarLaplace, LaplaceHistogram, WaveletLaplace
from ..summary import Summary, read_summary
from .histogram import histogram_density, project_simplex
from ..outputs import Described, Description, Table, fmt, jsonable, save_json, summary_facts, summary_info
from .results import DensityEstimate
from .wavelet import wavelet_density

__all__ = ["local_quantiles", "QuantileEstimate"]


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

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "local-quantiles", "q": self.q, "values": self.values, "ci_low": self.ci_low,
                          "ci_high": self.ci_high, "level": self.level, "B": self.B, "method": self.method,
                          "n": self.n, "epsilon": self.epsilon, "extra_epsilon": 0.0, **self.info})

    def save(self, path: Any, overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        rows = tuple((f"{q:g}", fmt(v), f"[{fmt(lo)}, {fmt(hi)}]")
                     for q, v, lo, hi in zip(self.q, self.values, self.ci_low, self.ci_high))
        return Description(
            title=f"Local-DP quantiles of {self.info.get('column', 'value')}",
            headline=f"local-DP quantiles from a {self.method} estimate, {self.level:.0%} bootstrap intervals",
            facts=(("estimate", self.method), ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
                   ("extra ε", "0 (post-processing of the summary)"),
                   ("intervals", f"{self.level:.0%} parametric bootstrap, B = {self.B}"), *summary_facts(self.info)),
            table=Table(("q", "value", f"{self.level:.0%} interval"), rows))


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


def local_quantiles(summary: Summary | str, q: Any = DECILES,
                    level: float = 0.95, B: int = 400, rng: np.random.Generator | int | None = None,
                    **estimator_kwargs: Any) -> QuantileEstimate:
    """Quantiles of the LDP density estimate of ``summary`` with parametric-bootstrap intervals."""
    s = read_summary(summary)
    ch = s.channel
    qs = check_q(q)
    level = check_probability(level, "level")
    B = check_int(B, "B", 10, 100_000)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = s.n
    if isinstance(ch, (LaplaceHistogram, HaarLaplace)):
        check_draws(B, ch.dim, f"the bootstrap of a {ch.dim:,}-bin summary", "lower B (--B)")
        est: DensityEstimate = histogram_density(s, **estimator_kwargs)
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
    else:
        raise LdpDaskError(f"local quantiles need a density summary (histogram, haar, wavelet); got {ch.name!r}.")
    alpha = (1 - level) / 2
    return QuantileEstimate(
        q=qs, values=np.asarray(est.quantile(qs)), ci_low=np.quantile(reps, alpha, axis=0),
        ci_high=np.quantile(reps, 1 - alpha, axis=0), level=level, B=B, method=est.method, n=n,
        epsilon=ch.epsilon, info=summary_info(s),
    )
