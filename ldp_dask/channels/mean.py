"""Laplace mean channel (Duchi, Jordan and Wainwright 2018; docs/channels.md).

For X_i ∈ [lo, hi] (half-width M = (hi − lo)/2), row ``i`` releases

    Z_i = X_i + (2M/α) W_i,   W_i iid Lap(1).

Privacy: two rows differ by at most Δ = hi − lo = 2M, so Laplace noise of
scale b = Δ/α makes the channel α-LDP; Δ is rounded up by one ulp so float
rounding of ``hi − lo`` cannot understate it, and :meth:`epsilon_spent`
returns Δ/b.

Estimator: θ̂ = mean(Z), unbiased, Var θ̂ = (Var X + 2b²)/n = Var(X)/n + 8M²/(nα²)
(docs/channels.md).

Summary mode: Σ X_i exactly plus b·(Gamma(m,1) − Gamma(m,1)) (docs/privacy.md).

``noise="lattice"`` (docs/privacy.md): each value is rounded to the public lattice
lo + g·ℤ, g = (hi − lo)/2^16, i.e. u = round((x − lo)/g) ∈ {0, …, 2^16} —
integer sensitivity 2^16 — and the row releases lo + g·(u + L) with L
discrete Laplace(t), t = 2^16/α; the sum of m rows is lo·m + g·(Σu + NB − NB).
Rounding moves the mean by at most g/2 = (hi − lo)/2^17.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_epsilon
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, NumericChannel, check_noise, chunk_sum, noise_scale_for, use_fused

LATTICE_STEPS = 1 << 16

__all__ = ["LaplaceMean"]


class LaplaceMean(NumericChannel):
    """Each row's value plus Laplace noise of scale (hi − lo)/ε.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    domain : (float, float)
        Public domain ``(lo, hi)`` with lo < hi.
    noise : {"lattice", "continuous"}
        Outputs on a public lattice with discrete Laplace noise (default: floating-point
        safe, no accuracy cost), or Laplace noise on doubles.
    """

    name = "mean"
    options = (NOISE_OPTION,)

    def __init__(self, epsilon: float, domain: tuple[float, float], noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self._set_domain(domain)
        lo, hi = self.domain
        self.dim = 1
        if self.noise == "lattice":
            self.granularity = (hi - lo) / LATTICE_STEPS
            self.sensitivity = float(LATTICE_STEPS)  # in lattice units
        else:
            self.sensitivity = math.nextafter(hi - lo, math.inf)
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "noise": self.noise}

    @property
    def noise_variance(self) -> float:
        """Variance of one row's noise, in the column's units."""
        if self.noise == "lattice":
            return self.granularity**2 * discrete_laplace_variance(self.noise_scale)
        return 2.0 * self.noise_scale**2

    def _lattice(self, x: np.ndarray) -> np.ndarray:
        lo, _ = self.domain
        return np.clip(np.rint((x - lo) / self.granularity), 0, LATTICE_STEPS)

    @property
    def integer_sums(self) -> bool:
        return self.noise == "lattice"  # a sum of lattice coordinates

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        if self.noise == "lattice":  # an integer: the lattice coordinates' sum (exact in float64, below 2^53)
            if not use_fused(len(x)):
                return {"sum": np.array([float(chunk_sum(x, lambda c: self._lattice(c).sum(), 0.0))])}
            from .._kernels import lattice_sum  # the same steps per value, fused

            lo, _ = self.domain
            total = lattice_sum(np.ascontiguousarray(x, dtype=np.float64), float(lo), self.granularity, LATTICE_STEPS)
            return {"sum": np.array([float(total)])}
        return {"sum": np.array([np.sum(x, dtype=np.float64)])}

    def add_noise(
        self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        # noise enters here, once per block
        if self.noise == "lattice":
            k = exact["sum"] + discrete_laplace_sum(rng, m, self.noise_scale, 1)
            return {"sum": self.domain[0] * m + self.granularity * k}
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.noise_scale, 1)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.noise == "lattice":
            k = self._lattice(x) + discrete_laplace(rng, self.noise_scale, len(x))
            return (self.domain[0] + self.granularity * k)[:, None]
        return (x + rng.laplace(0.0, self.noise_scale, size=len(x)))[:, None]
