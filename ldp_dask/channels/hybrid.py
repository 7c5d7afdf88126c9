"""Bounded means by the Piecewise, Duchi and Hybrid mechanisms (Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu
2019; Duchi, Jordan and Wainwright 2018; docs/channels.md).

A value x ∈ [lo, hi] is scaled to t = 2(x − lo)/(hi − lo) − 1 ∈ [−1, 1]; the row releases one value t* with
E[t* | t] = t, reported in the column's units as mid + half·t* (mid = (lo + hi)/2, half = (hi − lo)/2).

``duchi`` (Duchi, Jordan and Wainwright 2018, one dimension)
    t* = ±B with B = (e^α + 1)/(e^α − 1) and P(t* = +B | t) = (1 + t/B)/2. Likelihood ratio at most
    (1 + 1/B)/(1 − 1/B) = e^α. Var[t* | t] = B² − t².
``piecewise`` (Wang et al. 2019)
    with h = e^{α/2} and C = (h + 1)/(h − 1), t* ∈ [−C, C]; with probability h/(h + 1) it is uniform on the band
    [ℓ(t), ℓ(t) + C − 1], ℓ(t) = (C + 1)t/2 − (C − 1)/2, else uniform on the rest of [−C, C]. The densities on and
    off the band are in ratio e^α. Var[t* | t] = t²/(h − 1) + (h + 3)/(3(h − 1)²).
``hybrid`` (Wang et al. 2019, the default)
    each row uses the Piecewise mechanism with probability β = 1 − e^{−α/2} when α > 0.61, else Duchi's. A
    mixture of two α-LDP laws is α-LDP. Var[t* | t] = β·Var_PM + (1 − β)·Var_Duchi, whose worst case over t is
    below both mechanisms' worst cases at every α, and below the Laplace mean's 8/α² at every α.

``epsilon_spent()`` is the log of the largest likelihood ratio computed from the channel's own probabilities
(nudged by ulps where float rounding would overspend).

``noise="lattice"`` (docs/privacy.md): Duchi's outputs are the two public constants ±B; the Piecewise output is
rounded to the public lattice g·ℤ, g = 2^⌈log₂C⌉/2^20 (a power of two, so every lattice point is an exact double;
post-processing, so no ε is added), and floating-point rounding of the uniform draw can no longer show through its
low bits. Rounding moves E[t*] by less than g/2 ≤ C/2^20.

Released statistics: ``sum`` = Σ z and ``sumsq`` = Σ z² of the rows' views z (a function of the private views
only: post-processing). The view's law depends on each row's value, not on a finite summary of the block, so
summary mode draws each row's view and sums them (O(rows), exact in law by construction); the block's values,
which key the noise, never leave the worker. ``sumsq`` gives the estimator the spread of the views, so the mean's
interval needs no bound on the data's variance.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon
from .base import NOISE_OPTION, NumericChannel, Option, check_noise, nudge

__all__ = ["HybridMean", "MECHANISMS", "HYBRID_THRESHOLD"]

MECHANISMS = ("hybrid", "piecewise", "duchi")
#: Below this ε the hybrid uses Duchi's mechanism alone (Wang et al. 2019, ε* ≈ 0.61).
HYBRID_THRESHOLD = 0.61
LATTICE_STEPS = 1 << 20


class HybridMean(NumericChannel):
    """One bounded, unbiased report per row for the mean: Piecewise, Duchi's or the Hybrid mechanism.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    domain : (float, float)
        Public domain ``(lo, hi)`` with lo < hi.
    mechanism : {"hybrid", "piecewise", "duchi"}
        See the module docstring; ``hybrid`` has the smallest worst-case variance at every α.
    noise : {"lattice", "continuous"}
        Piecewise outputs on a public lattice (default, floating-point safe) or as doubles.

    Notes
    -----
    ε spent: the log of the largest likelihood ratio, ≤ α. The mean of the views is unbiased (up to the lattice's
    C/2^20 in t units); Var θ̂ = half²·(Var t + E Var[t* | t])/n with the per-mechanism variances above
    (:meth:`row_variance`). The worst case over t, in t units: Duchi B², Piecewise 1/(h − 1) + (h + 3)/(3(h − 1)²).
    """

    name = "hybrid-mean"
    options = (
        Option("mechanism", "bounded-mean mechanism: hybrid (Piecewise or Duchi's per row), piecewise or duchi",
               default="hybrid", choices=MECHANISMS),
        NOISE_OPTION,
    )

    def __init__(self, epsilon: float, domain: tuple[float, float], mechanism: str = "hybrid",
                 noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        if mechanism not in MECHANISMS:
            raise LdpDaskError(f"The 'mechanism' parameter must be one of {', '.join(MECHANISMS)}. "
                               f"Got {mechanism!r} instead.")
        self.mechanism = mechanism
        self.noise = check_noise(noise)
        self._set_domain(domain)
        lo, hi = self.domain
        self.mid, self.half = (lo + hi) / 2.0, (hi - lo) / 2.0
        self.dim = 1
        eps = self.epsilon
        # Duchi: P(+B | t) = (1 + c·t)/2 with c = 1/B; ratio (1 + c)/(1 − c) ≤ e^ε
        c = _duchi_c(eps)  # (e^ε − 1)/(e^ε + 1), nudged
        self.duchi_c, self.duchi_b = c, 1.0 / c
        # Piecewise: band probability P = h/(h + 1) on length C − 1, the rest on length C + 1
        h = math.exp(eps / 2)
        self.pm_h = h
        self.pm_c = (h + 1) / (h - 1)
        self.pm_band = _pm_band(eps)
        if mechanism == "piecewise":
            self.beta = 1.0
        elif mechanism == "duchi":
            self.beta = 0.0
        else:
            self.beta = -math.expm1(-eps / 2) if eps > HYBRID_THRESHOLD else 0.0
        # a power of two: lattice points g·k are exact doubles
        self.granularity = math.ldexp(1.0, math.ceil(math.log2(self.pm_c))) / LATTICE_STEPS
        # a view z lies within mid ± half·max(C, B); Σ z² is summed exactly, below 2^99, over up to 2^30 rows a task
        widest = abs(self.mid) + self.half * max(self.pm_c, self.duchi_b)
        if widest * widest > 2.0 ** 69:
            raise LdpDaskError(f"hybrid-mean with epsilon={eps:g} on the domain ({lo:g}, {hi:g}) reports views up "
                               f"to {widest:.3g} in magnitude, whose squares the exact sums cannot hold (at most "
                               f"{2.0 ** 34.5:.3g}): rescale the column, or use the 'mean' channel")

    def _pm_ratio(self, p: float) -> float:
        return _pm_ratio(self.pm_c, p)

    def epsilon_spent(self) -> float:
        spent = []
        if self.beta > 0:
            spent.append(self._pm_ratio(self.pm_band))
        if self.beta < 1:
            spent.append(math.log((1 + self.duchi_c) / (1 - self.duchi_c)))
        return max(spent)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "mechanism": self.mechanism,
                "noise": self.noise}

    # --- variances (t units) ------------------------------------------------------------------------------
    def row_variance(self, t: np.ndarray | float) -> np.ndarray | float:
        """Var[t* | t] in t units (the estimator's and the benchmark's closed form)."""
        h, b = self.pm_h, self.duchi_b
        pm = np.square(t) / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
        duchi = b * b - np.square(t)
        return self.beta * pm + (1 - self.beta) * duchi

    def worst_variance(self) -> float:
        """max over t ∈ [−1, 1] of Var[t* | t] (the variance is a quadratic in t, largest at 0 or ±1)."""
        return float(max(self.row_variance(0.0), self.row_variance(1.0)))

    # --- data -------------------------------------------------------------------------------------------------
    def to_unit(self, x: np.ndarray) -> np.ndarray:
        return np.clip((np.asarray(x, dtype=np.float64) - self.mid) / self.half, -1.0, 1.0)

    def draw(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One view t* per value t ∈ [−1, 1], in t units."""
        n = len(t)
        use_pm = rng.random(n) < self.beta if 0 < self.beta < 1 else np.full(n, self.beta == 1.0)
        out = np.empty(n)
        d = ~use_pm
        if d.any():
            plus = rng.random(int(d.sum())) < (1 + self.duchi_c * t[d]) / 2
            out[d] = np.where(plus, self.duchi_b, -self.duchi_b)
        if use_pm.any():
            tp = t[use_pm]
            c = self.pm_c
            left = (c + 1) / 2 * tp - (c - 1) / 2
            band = rng.random(len(tp)) < self.pm_band
            v = rng.random(len(tp))
            w = (c + 1) * v - c  # uniform on [−C, 1): the off-band length C + 1, folded around the band
            y = np.where(band, left + (c - 1) * v, np.where(w < left, w, w + (c - 1)))
            if self.noise == "lattice":
                y = self.granularity * np.rint(y / self.granularity)
            out[use_pm] = y
        return out

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return (self.mid + self.half * self.draw(self.to_unit(x), rng))[:, None]

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        # the law of the sum depends on every value: the block itself is the sufficient statistic (never released)
        return {"values": np.asarray(x, dtype=np.float64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.row_sums(self.privatize(exact["values"], rng))

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        z = np.asarray(z, dtype=np.float64)
        return {"sum": z.sum(axis=0), "sumsq": np.square(z).sum(axis=0)}

    # --- the audit's statistic ------------------------------------------------------------------------------
    def log_likelihood(self, z: np.ndarray, x: Any) -> np.ndarray:
        """log of the view's density (Piecewise part) or mass (Duchi's ±B) given the value ``x``."""
        ts = (np.asarray(z, dtype=np.float64).ravel() - self.mid) / self.half
        t = float(self.to_unit(np.array([x]))[0])
        atom = np.isclose(np.abs(ts), self.duchi_b, rtol=0, atol=1e-9 * self.duchi_b) if self.beta < 1 else \
            np.zeros(len(ts), bool)
        out = np.empty(len(ts))
        if self.beta < 1:
            plus = ts[atom] > 0
            p = (1 + self.duchi_c * t) / 2
            out[atom] = math.log(1 - self.beta) + np.where(plus, math.log(p), math.log1p(-p))
        if self.beta > 0:
            c = self.pm_c
            left = (c + 1) / 2 * t - (c - 1) / 2
            y = ts[~atom]
            inside = (y >= left) & (y <= left + c - 1)
            dens_in = self.pm_band / (c - 1)
            dens_out = (1 - self.pm_band) / (c + 1)
            out[~atom] = math.log(self.beta) + np.where(inside, math.log(dens_in), math.log(dens_out))
        return out

    def worst_pair(self) -> tuple[float, float]:
        return self.domain


# The response probabilities depend on ε alone: computed once per ε (a plan's split builds each mean channel at
# many ε, and the automatic choice builds four mechanisms at each)
@functools.lru_cache(maxsize=4096)
def _duchi_c(eps: float) -> float:
    return nudge(math.tanh(eps / 2), lambda c: math.log((1 + c) / (1 - c)), eps)


@functools.lru_cache(maxsize=4096)
def _pm_band(eps: float) -> float:
    h = math.exp(eps / 2)
    c = (h + 1) / (h - 1)
    return nudge(h / (h + 1), lambda p: _pm_ratio(c, p), eps)


def _pm_ratio(c: float, p: float) -> float:
    """ε of the piecewise mechanism's band probability p at half-width C."""
    return math.log((p / (c - 1)) / ((1 - p) / (c + 1)))
