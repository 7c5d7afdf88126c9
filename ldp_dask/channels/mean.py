"""Laplace mean channel (seed 004 "Laplace noise (beyond paper)", SPEC §1.2).

For X_i ∈ [lo, hi] (half-width M = (hi − lo)/2), row ``i`` releases

    Z_i = X_i + (2M/α) W_i,   W_i iid Lap(1).

Privacy: two rows differ by at most Δ = hi − lo = 2M, so Laplace noise of
scale b = Δ/α makes the channel α-LDP; Δ is rounded up by one ulp so float
rounding of ``hi − lo`` cannot understate it, and :meth:`epsilon_spent`
returns Δ/b.

Estimator: θ̂ = mean(Z), unbiased, Var θ̂ = (Var X + 2b²)/n = Var(X)/n + 8M²/(nα²)
(SPEC §1.2).

Summary mode: Σ X_i exactly plus b·(Gamma(m,1) − Gamma(m,1)) (SPEC §4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_epsilon
from ..noise import laplace_sum
from .base import NumericChannel, noise_scale_for

__all__ = ["LaplaceMean"]


class LaplaceMean(NumericChannel):
    """Each row's value plus Laplace noise of scale (hi − lo)/ε.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    domain : (float, float)
        Public domain ``(lo, hi)`` with lo < hi.
    """

    name = "mean"

    def __init__(self, epsilon: float, domain: tuple[float, float]) -> None:
        self.epsilon = check_epsilon(epsilon)
        self._set_domain(domain)
        lo, hi = self.domain
        self.sensitivity = math.nextafter(hi - lo, math.inf)
        self.dim = 1
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain)}

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"sum": np.array([np.sum(x, dtype=np.float64)])}

    def add_noise(
        self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        # noise enters here, once per block
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.noise_scale, 1)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return (x + rng.laplace(0.0, self.noise_scale, size=len(x)))[:, None]
