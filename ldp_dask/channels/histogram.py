"""Laplace histogram channel (Duchi, Jordan and Wainwright 2018; docs/channels.md).

The domain ``[a, b]`` is cut into ``K`` equal bins ``G_1..G_K`` and row ``i``
releases

    Z_i = ( 1{X_i ∈ G_j} + (2/α) W_ij )_{j=1..K},   W_ij iid Lap(1).

Privacy: two one-hot vectors differ in at most two coordinates by one each, so
the L1 sensitivity is Δ = 2 and Laplace noise of scale b = Δ/α makes the
channel α-LDP; :meth:`epsilon_spent` returns Δ/b computed in floating point.

Estimator (docs/channels.md): f̂(x) = K/(b−a) · (1/n) Σ_i Z_{i, j(x)}. The bin mass
p̂_j = S_j/n is unbiased for p_j with variance (p_j(1−p_j) + 2·(2/α)²)/n;
bias of f̂ is O(K^−β) for β-Hölder f, variance O(K²/(nα²)), and
K ≍ (nα²)^{1/(2β+2)} gives MSE (nα²)^{−2β/(2β+2)}.

Summary mode: the bin counts of a block are exact (``bincount``) and the sum
of ``m`` rows' Laplace noise is drawn as b·(Gamma(m,1) − Gamma(m,1)) per bin
(docs/privacy.md): O(m + K) per block instead of O(m·K).

``noise="lattice"`` (docs/privacy.md, floating-point safe): every released value is an
integer; each row's noise is discrete Laplace with P(k) ∝ exp(−|k|/t), t = 2/α
(integer sensitivity 2, so still α-LDP), and the sum of m of them is
NB(m, p) − NB(m, p), p = 1 − e^{−1/t}. Its variance 2r/(1 − r)², r = e^{−1/t},
is slightly *below* the continuous 2t²: it costs no accuracy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, NumericChannel, Option, check_noise, grid_counts, grid_index, noise_scale_for, require_n

__all__ = ["LaplaceHistogram", "MAX_BINS"]

MAX_BINS = 1 << 24


class LaplaceHistogram(NumericChannel):
    """K-bin histogram with Laplace noise on each row's one-hot vector.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    bins : int
        Number K of equal-width bins, 1 ≤ K ≤ 2^24.
    domain : (float, float)
        Public domain ``(lo, hi)`` with lo < hi.
    noise : {"lattice", "continuous"}
        Integer outputs with discrete Laplace noise (default: floating-point safe, no
        accuracy cost, ``benchmarks/RESULTS.md`` "Lattice noise"), or Laplace noise on doubles.
    """

    name = "histogram"
    options = (
        Option("bins", "number K of equal bins, or 'auto' = ceil((n ε²)^(1/4))", default="auto"),
        NOISE_OPTION,
    )
    sensitivity = 2.0  # L1 distance between two one-hot vectors

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, bins: int | str = "auto",  # type: ignore[override]
               noise: str = "lattice") -> LaplaceHistogram:
        if bins == "auto":
            bins = default_bins(require_n(n, "bins='auto'"), epsilon)
        elif isinstance(bins, str):
            try:
                bins = int(bins)
            except ValueError:
                raise LdpDaskError(f"The 'bins' parameter must be an integer or 'auto'. Got {bins!r} instead.") from None
        return cls(epsilon, bins, domain, noise)

    def __init__(self, epsilon: float, bins: int, domain: tuple[float, float], noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self.bins = check_int(bins, "bins", 1, MAX_BINS)
        self._set_domain(domain)
        self.dim = self.bins
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)
        if self.epsilon_spent() > self.epsilon:  # the proof relies on this
            raise AssertionError("noise calibration overspends")  # pragma: no cover

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "bins": self.bins, "domain": list(self.domain), "noise": self.noise}

    @property
    def noise_variance(self) -> float:
        """Variance of one row's noise in one bin."""
        if self.noise == "lattice":
            return discrete_laplace_variance(self.noise_scale)
        return 2.0 * self.noise_scale**2

    @property
    def edges(self) -> np.ndarray:
        """The K+1 bin edges."""
        lo, hi = self.domain
        return np.linspace(lo, hi, self.bins + 1)

    def index_columns(self) -> dict[str, dict[str, list[Any]]]:
        e = self.edges
        return {"sum": {"bin_low": e[:-1].tolist(), "bin_high": e[1:].tolist()}}

    @property
    def integer_sums(self) -> bool:
        return True  # bin counts

    def bin_index(self, x: np.ndarray) -> np.ndarray:
        """Bin of each value of ``x`` (already inside the domain); ``hi`` goes to bin K−1."""
        return grid_index(x, self.domain, self.bins)

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"sum": grid_counts(x, self.domain, self.bins).astype(np.float64)}

    def add_noise(
        self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        # noise enters here, once per block
        if self.noise == "lattice":
            return {"sum": exact["sum"] + discrete_laplace_sum(rng, m, self.noise_scale, self.bins)}
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.noise_scale, self.bins)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.noise == "lattice":
            z = discrete_laplace(rng, self.noise_scale, (len(x), self.bins))
        else:
            z = rng.laplace(0.0, self.noise_scale, size=(len(x), self.bins))
        z[np.arange(len(x)), self.bin_index(x)] += 1.0
        return z


def default_bins(n: int, epsilon: float, beta: float = 1.0) -> int:
    """K ≍ (nα²)^{1/(2β+2)} (docs/channels.md), the MSE-optimal order for β-Hölder densities.

    ``n`` is public (the number of reports) and α is chosen before privatizing,
    so the choice costs no privacy. β = 1 (Lipschitz) by default.
    """
    check_int(n, "n", 1)
    check_epsilon(epsilon)
    return int(min(MAX_BINS, max(1, np.ceil((n * epsilon**2) ** (1.0 / (2 * beta + 2))))))
