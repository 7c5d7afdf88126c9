"""Means per private group: a Laplace channel over (one-hot group × (value, 1)) (docs/channels.md, "Groups").

A row holds a group index g ∈ {0, …, G−1} (its label among the declared keys, or the "other" bucket) and a value
x ∈ [lo, hi], rescaled to t = (x − mid)/M ∈ [−1, 1] (mid the middle of the domain, M its half-width). It releases
the 2G-vector

    Z = e_g ⊗ (t, 1) + b·W,   W iid Lap(1) on every coordinate,

so that neither the row's group nor any group's size is released exactly: the sums are S_g = Σ t_i 1[g_i = g] and
C_g = #{i : g_i = g}, each plus noise. Two rows' vectors differ in L1 by at most (|t| + 1) + (|t'| + 1) ≤ 4 (other
groups), or |t − t'| ≤ 2 (the same group): Δ = 4, b = Δ/α, α-LDP; ``epsilon_spent()`` = Δ/b.

``noise="lattice"`` (the default; docs/privacy.md): t is rounded to the public lattice a/2^15, a ∈ [−2^15, 2^15],
and a row's count is 2^15 in the same units, so a view is an integer vector of L1 sensitivity 2^17 with discrete
Laplace noise t_d = 2^17/α; sums are divided by 2^15. Rounding moves a value by at most M/2^16.

Summary mode draws each coordinate's noise as the sum of m rows' (docs/privacy.md), so a summary is distributed
exactly as the sums of m genuine views. The estimator (:func:`ldp_dask.estimators.group_means`) is the ratio
S_g/C_g with Fieller's interval.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import InputDataError, check_epsilon, check_int
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, NumericChannel, Option, check_noise, check_values, noise_scale_for

__all__ = ["GroupMean", "LATTICE_HALF"]

#: The lattice of t: a/2^15 with a ∈ [−2^15, 2^15]; a row's count is 2^15 in these units.
LATTICE_HALF = 1 << 15
#: The most groups (declared keys and "other") a private group may have: 2G noisy coordinates per row.
MAX_GROUPS = 4096


class GroupMean(NumericChannel):
    """Each row's value and count in its group's two coordinates of a 2G-vector, plus Laplace noise on all 2G.

    Parameters
    ----------
    epsilon : float
        α > 0 per row.
    domain : (float, float)
        The value's public domain.
    groups : int
        G: the declared keys and the "other" bucket.
    noise : {"lattice", "continuous"}
        Discrete Laplace on a public lattice (default), or Laplace on doubles.

    Notes
    -----
    Variance: with p_g the group's share and σ_g² the variance of t in it, the ratio S_g/C_g has approximate
    variance (n p_g σ_g² + n v (1 + μ_g²)) / (n p_g)², v the noise variance of one row's coordinate (2b², or the
    discrete Laplace's over 2^30): a group needs n p_g well above √(n v) rows for its mean to be more than noise.
    """

    name = "group-mean"
    options = (Option("groups", "the number of groups: the declared keys and 'other'", type=int), NOISE_OPTION)

    def __init__(self, epsilon: float, domain: tuple[float, float], groups: int, noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self._set_domain(domain)
        self.groups = check_int(groups, "groups", 2, MAX_GROUPS)
        self.dim = 2 * self.groups
        lo, hi = self.domain
        self.mid, self.half = (lo + hi) / 2, (hi - lo) / 2
        self.sensitivity = 4.0 * LATTICE_HALF if self.noise == "lattice" else math.nextafter(4.0, math.inf)
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "groups": self.groups, "noise": self.noise}

    @property
    def noise_variance(self) -> float:
        """Variance of one row's noise on one coordinate, in units of t (the half-width)."""
        if self.noise == "lattice":
            return discrete_laplace_variance(self.noise_scale) / LATTICE_HALF**2
        return 2.0 * self.noise_scale**2

    def prepare(self, x: np.ndarray, clip: bool = False) -> tuple[np.ndarray, int]:
        """``x``: rows of (group index, value); the values are checked against the domain."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != 2:
            raise InputDataError("the 'group-mean' channel releases (group, value) pairs: it runs in a plan, as a "
                                 "mean with a private group_by")
        values, clipped = check_values(x[:, 1], self.domain, clip)
        g = x[:, 0]
        if len(g) and (g.min() < 0 or g.max() >= self.groups):  # pragma: no cover - the plan maps the labels
            raise InputDataError(f"group indices must lie in [0, {self.groups})")
        return np.column_stack([g, values]), clipped

    def _coordinates(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Group indices and each row's t (lattice integers a, or doubles)."""
        g = x[:, 0].astype(np.intp)
        t = (x[:, 1] - self.mid) / self.half
        if self.noise == "lattice":
            t = np.clip(np.rint(t * LATTICE_HALF), -LATTICE_HALF, LATTICE_HALF)
        return g, t

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        g, t = self._coordinates(x)
        unit = LATTICE_HALF if self.noise == "lattice" else 1
        s = np.bincount(g, weights=t, minlength=self.groups)
        c = np.bincount(g, minlength=self.groups).astype(np.float64) * unit
        return {"sum": np.concatenate([s, c])}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.noise == "lattice":
            return {"sum": (exact["sum"] + discrete_laplace_sum(rng, m, self.noise_scale, self.dim)) / LATTICE_HALF}
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.noise_scale, self.dim)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        g, t = self._coordinates(x)
        unit = LATTICE_HALF if self.noise == "lattice" else 1
        z = np.zeros((len(g), self.dim))
        rows = np.arange(len(g))
        z[rows, g] = t
        z[rows, self.groups + g] = unit
        if self.noise == "lattice":
            return (z + discrete_laplace(rng, self.noise_scale, z.shape)) / LATTICE_HALF
        return z + rng.laplace(0.0, self.noise_scale, size=z.shape)

    # --- the audit's statistic ------------------------------------------------------------------------------
    def log_likelihood(self, z: np.ndarray, x: Any) -> np.ndarray:
        """log of each view's density (Laplace) or mass (discrete Laplace) given the row ``x`` = (group, value), up
        to a constant that does not depend on ``x`` (the privacy audit's statistic is a difference of two)."""
        g, t = self._coordinates(np.array([x], dtype=np.float64))
        unit = LATTICE_HALF if self.noise == "lattice" else 1
        mean = np.zeros(self.dim)
        mean[g[0]], mean[self.groups + g[0]] = t[0], unit
        return -np.abs(np.asarray(z, dtype=np.float64) * unit - mean).sum(axis=1) / self.noise_scale

    def worst_pair(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Two rows whose views are 4 apart in L1 (the sensitivity): the top of the domain in the first group, the
        bottom in the second."""
        lo, hi = self.domain
        return (0.0, hi), (1.0, lo)
