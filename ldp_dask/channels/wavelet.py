"""Multilevel wavelet Laplace channel (Butucea, Dubois, Kroll and Saumard 2020, eq. (4)).

The mathematics, with the privacy argument: docs/channels.md, "Multilevel wavelet channel".

Row ``i`` (mapped to t_i ∈ [0, 1], see :mod:`ldp_dask.bases`) releases

    Z_{i,j0−1,k} = φ_{j0k}(t_i) + σ_{j0−1} W,   k ∈ N_{j0−1}
    Z_{i,j,k}    = ψ_{jk}(t_i)  + σ_j W,        k ∈ N_j,  j0 ≤ j ≤ j1

with W iid Lap(1). Privacy: two rows' level-ℓ vectors differ in L1 by at most
Δ_ℓ = 2 · 2^{ℓ/2} · sup_u Σ_k |f(u − k)| (f = φ for the father level, ψ
otherwise), so the channel spends Σ_ℓ Δ_ℓ / σ_ℓ (basic composition over the
levels), which :meth:`WaveletLaplace.epsilon_spent` computes from the
tabulated basis itself.

Levels. Given neither j0 nor j1, the tight calibration builds the split release
(:class:`~ldp_dask.channels.wavelet_split.WaveletSplit`: father levels J − 1, J, J + 1
around J = :func:`linear_level`, one per row; with ``noise="continuous"``, which it
cannot split in summary mode, the father level alone at J, the whole ε on it);
``calibration="paper"`` gives the paper's levels (:func:`wavelet_levels`); an explicit
j0 alone gives the father level alone at j0, and an explicit j1 asks for detail levels and
takes j0 from the paper's rule.

Two calibrations of the σ's:

``"paper"``
    The paper's §3: σ_{j0−1} = 4 c_A ‖φ‖∞ 2^{j0/2}/α and
    σ_j = 4(2ν−1) c_A ‖ψ‖∞ (j∨1)^ν 2^{j/2} / ((ν−1)α), c_A = 2⌈A⌉ + 1.
    Its proof bounds Δ_ℓ by 2 c_A ‖·‖∞ 2^{ℓ/2} and the infinite series
    Σ_j (j∨1)^−ν by (2ν−1)/(ν−1), so it spends well under α (measured:
    α/11 for db4 at ν = 1.5, with 6× the tight noise on the father level
    and 50–100× on the details).
``"tight"`` (default; beyond the paper, see docs/corrections.md)
    σ_ℓ = Δ_ℓ / (w_ℓ α) with the exact tabulated Δ_ℓ and weights w: 1/2 on
    the father level and ∝ (j∨1)^−ν on j0..j1 renormalised to 1/2 — the
    whole budget α is spent on the finite set of levels. Noise is 4–10×
    smaller than the paper's (16–100× in variance).

``noise="lattice"`` (docs/privacy.md): a row's level-j values are those of the
table at the midpoint u_c of the row's table cell (width 2^−L in u = 2^j t),
2^{j/2}ψ̃(u_c − k), rounded to the public lattice g_j·ℤ, g_j = 2^{j/2}/2^12 — the
lattice coordinate is floor(ψ̃(u_c − k)·2^12 + 0.5) — and get discrete Laplace
noise of scale t_ℓ in lattice units. Σ_k |ψ̃(u − k)| is convex on each cell, so
the midpoint values do not exceed the sup Δ_ℓ is computed from; rounding moves
each of the ≤ S nonzero coordinates of a row by at most one unit, so the
integer sensitivity is Δ_{g,ℓ} = ⌈Δ_ℓ/g_ℓ⌉ + 2S, and t_ℓ = Δ_{g,ℓ}/(w_ℓ α)
(tight) or σ_ℓ Δ_{g,ℓ}/Δ_ℓ (paper: the same ε share per level). Sums are
g_ℓ·(Σ coordinates + NB − NB). A lattice value is constant on each table cell,
within half a cell's change of the interpolated one.

Summary mode: the exact coefficient sums of a block come from the rows per
table cell of the finest level (two matrix products per level), or for small
blocks from S table lookups per row and level
(:meth:`ldp_dask.bases.WaveletBasis.accumulate_levels`); the sum of the block's m
noise vectors is drawn as σ_ℓ(Gamma(m) − Gamma(m)) or NB(m) − NB(m) per
coefficient (docs/privacy.md): O(m + 2^{j1+L}·S + dim), never O(m × dim).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from ..bases import DEFAULT_TABLE_LEVEL, WaveletBasis, get_basis
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, NumericChannel, Option, check_noise, require_n

__all__ = ["WaveletLaplace", "wavelet_levels", "linear_level", "CALIBRATIONS", "MAX_DIM", "LATTICE_QUANTUM"]

#: Lattice mode: values are rounded to 2^{j/2}/LATTICE_QUANTUM.
LATTICE_QUANTUM = 4096.0

CALIBRATIONS = ("tight", "paper")
#: Largest coefficient vector a channel may have (per row in rows mode).
MAX_DIM = 1 << 24


def _check_nu(nu: Any) -> float:
    try:
        v = float(nu)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(nu, bool) or not (math.isfinite(v) and v > 1.0):
        raise LdpDaskError(f"The 'nu' parameter must be a finite number > 1. Got {nu!r} instead.")
    return v


class WaveletLaplace(NumericChannel):
    """Wavelet coefficients at levels j0−1 (father), j0..j1 plus Laplace noise (Butucea et al. 2020, eq. (4)).

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    domain : (float, float)
        Public domain ``(lo, hi)``; the basis lives on t = (x − lo)/(hi − lo).
    j0, j1 : int
        Coarsest (father) and finest detail level, 0 ≤ j0 ≤ j1 + 1; j1 = j0 − 1
        releases the father level alone. See :func:`wavelet_levels` for the
        paper's choice from n and α, :func:`linear_level` for the default.
    wavelet : str
        ``haar``, ``dbN``, ``symN`` or ``coifN`` (default ``db4``).
    calibration : {"tight", "paper"}
        How the budget is turned into noise scales (module docstring).
    nu : float
        ν > 1: the level weights decay like (j∨1)^−ν (both calibrations).
    table_level : int
        Resolution 2^−L of the tabulated φ, ψ.
    noise : {"lattice", "continuous"}
        Lattice outputs with discrete Laplace noise (default: floating-point safe, no
        accuracy cost), or Laplace noise on doubles.
    """

    name = "wavelet"
    options = (
        Option("wavelet", "haar, dbN, symN or coifN", default="db4"),
        Option("j0", "coarsest (father) level (default from n and ε: the linear level, or the paper's with "
                     "calibration=paper)", type=int),
        Option("j1", "finest detail level; j0 - 1 for none (default: none, or the paper's with calibration=paper)",
               type=int),
        Option("calibration", "noise calibration: exact sensitivities (tight) or the paper's bounds",
               default="tight", choices=CALIBRATIONS),
        Option("nu", "level-weight exponent ν > 1", type=float, default=1.5),
        Option("table_level", "resolution 2^-L of the tabulated basis", type=int, default=DEFAULT_TABLE_LEVEL,
               cli=False),
        NOISE_OPTION,
    )

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, wavelet: str = "db4",
               j0: int | None = None, j1: int | None = None, **options: Any) -> WaveletLaplace:
        if j0 is None or j1 is None:
            if options.get("calibration") == "paper" or j1 is not None:
                # the paper's levels (Thm 4.1); an explicit j0 above the automatic j1 pulls j1 up with it
                auto_j0, auto_j1 = wavelet_levels(require_n(n, "the automatic wavelet levels"), epsilon, wavelet)
                if j0 is None:
                    j0 = min(auto_j0, j1) if isinstance(j1, int) and not isinstance(j1, bool) else auto_j0
                if j1 is None:
                    j1 = max(auto_j1, j0) if isinstance(j0, int) else auto_j1
            else:
                # one father level, with the whole budget (the linear estimator). By name, build_channel gives the
                # split release instead when neither j0 nor continuous noise is asked for (wavelet_split.py)
                if j0 is None:
                    j0 = linear_level(require_n(n, "the automatic wavelet level"), epsilon, wavelet)
                j1 = j0 - 1 if isinstance(j0, int) and not isinstance(j0, bool) else j0
        return cls(epsilon=epsilon, domain=domain, j0=j0, j1=j1, wavelet=wavelet, **options)

    def __init__(
        self,
        epsilon: float,
        domain: tuple[float, float],
        j0: int,
        j1: int,
        wavelet: str = "db4",
        calibration: str = "tight",
        nu: float = 1.5,
        table_level: int = DEFAULT_TABLE_LEVEL,
        noise: str = "lattice",
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self._set_domain(domain)
        self.basis: WaveletBasis = get_basis(wavelet, table_level)
        self.wavelet, self.table_level = wavelet, self.basis.table_level
        self.j0 = self.basis.check_level(j0, "j0")
        if isinstance(j1, int) and not isinstance(j1, bool) and j1 == self.j0 - 1:
            self.j1 = j1  # no detail level: the father level alone
        else:
            self.j1 = self.basis.check_level(j1, "j1")
        if self.j1 < self.j0 - 1:
            raise LdpDaskError(f"The 'j1' parameter must be >= j0 - 1 = {self.j0 - 1} (j0 - 1: no detail level). "
                               f"Got {j1!r} instead.")
        if calibration not in CALIBRATIONS:
            raise LdpDaskError(
                f"The 'calibration' parameter must be one of {', '.join(CALIBRATIONS)}. Got {calibration!r} instead."
            )
        self.calibration = calibration
        self.nu = _check_nu(nu)
        b = self.basis
        #: (kind, j) for each block of the coefficient vector, father first
        self.levels: list[tuple[str, int]] = [("phi", self.j0)] + [("psi", j) for j in range(self.j0, self.j1 + 1)]
        sizes = [b.n_coefs(j) for _, j in self.levels]
        self.dim = int(sum(sizes))
        if self.dim > MAX_DIM:
            raise LdpDaskError(f"levels j0={self.j0}, j1={self.j1} give {self.dim:,} coefficients; the limit is {MAX_DIM:,}.")
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.slices = [slice(int(a), int(c)) for a, c in zip(offsets[:-1], offsets[1:])]
        #: L1 sensitivity of each block: 2 · 2^{j/2} · sup Σ_k |f(u − k)|
        self.sensitivities = np.array([2.0 * 2.0 ** (j / 2) * b.sup_sum[kind] for kind, j in self.levels])
        self.sigmas = self._calibrate()
        if self.noise == "lattice":
            self.granularities = np.array([2.0 ** (j / 2) / LATTICE_QUANTUM for _, j in self.levels])
            S = b.support
            self.lattice_sensitivities = np.array(
                [math.ceil(2.0 * b.sup_sum[kind] * LATTICE_QUANTUM) + 2 * S for kind, _ in self.levels], dtype=float)
            t = self.sigmas * self.lattice_sensitivities / self.sensitivities
            while math.fsum(self.lattice_sensitivities / t) > self.epsilon:
                t = t * (1.0 + 2.0**-50)
            self.lattice_scales = t
            self.sigmas = t * self.granularities  # the equivalent Laplace scale in value units (estimators)
        spent = self.epsilon_spent()
        if spent > self.epsilon:
            raise LdpDaskError(
                f"this configuration would spend ε = {spent!r} > the requested {self.epsilon!r}; refusing to build it."
            )
        self.scales = np.repeat(self.sigmas, sizes)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # pickle by parameters: workers rebuild the tables from their own cache
        return (_from_params, (self.params(),))

    # --- calibration ----------------------------------------------------------------
    @property
    def linear(self) -> bool:
        """True when the channel releases the father level alone (j1 = j0 − 1)."""
        return self.j1 < self.j0

    def level_weights(self) -> np.ndarray:
        """Budget share of each block (tight calibration): 1/2, then ∝ (j∨1)^−ν summing to 1/2; 1 if no details."""
        if self.linear:
            return np.array([1.0])
        d = np.array([max(j, 1) ** -self.nu for _, j in self.levels[1:]])
        return np.concatenate([[0.5], 0.5 * d / d.sum()])

    def _calibrate(self) -> np.ndarray:
        a, b, nu = self.epsilon, self.basis, self.nu
        if self.calibration == "paper":
            c = b.c_A
            father = 4 * c * b.sup_abs["phi"] * 2.0 ** (self.j0 / 2) / a
            details = [
                4 * (2 * nu - 1) * c * b.sup_abs["psi"] * max(j, 1) ** nu * 2.0 ** (j / 2) / ((nu - 1) * a)
                for _, j in self.levels[1:]
            ]
            return np.array([father, *details])
        sig = self.sensitivities / (self.level_weights() * a)
        # float rounding of Δ/(wα) and of the sum may overspend by ulps: scale up until it does not
        while math.fsum(self.sensitivities / sig) > a:
            sig = sig * (1.0 + 2.0**-50)
        return sig

    def epsilon_spent(self) -> float:
        """Σ_ℓ Δ_ℓ/σ_ℓ over the father and detail levels (basic composition); lattice: Σ Δ_{g,ℓ}/t_ℓ."""
        if self.noise == "lattice":
            return math.fsum(self.lattice_sensitivities / self.lattice_scales)
        return math.fsum(self.sensitivities / self.sigmas)

    def params(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon, "domain": list(self.domain), "j0": self.j0, "j1": self.j1,
            "wavelet": self.wavelet, "calibration": self.calibration, "nu": self.nu,
            "table_level": self.table_level, "noise": self.noise,
        }

    # --- data ---------------------------------------------------------------------------
    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """t = (x − lo)/(hi − lo), clamped into [0, 1] against rounding."""
        lo, hi = self.domain
        t = (np.asarray(x, dtype=np.float64) - lo) / (hi - lo)
        return np.clip(t, 0.0, 1.0, out=t)

    @property
    def integer_sums(self) -> bool:
        return self.noise == "lattice"  # sums of coefficients rounded to the lattice

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        quantum = LATTICE_QUANTUM if self.noise == "lattice" else 0.0
        lo, hi = self.domain
        return {"sum": self.basis.accumulate_levels(np.asarray(x, dtype=np.float64), self.levels, quantum=quantum,
                                                    lo=lo, width=hi - lo)}

    def add_noise(
        self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        # noise enters here, once per block: σ_ℓ (Gamma(m) − Gamma(m)) per coefficient
        if self.noise == "lattice":
            out = np.empty(self.dim)
            for sl, g, t in zip(self.slices, self.granularities, self.lattice_scales):
                out[sl] = g * (exact["sum"][sl] + discrete_laplace_sum(rng, m, t, sl.stop - sl.start))
            return {"sum": out}
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.scales, self.dim)}

    @property
    def noise_variances(self) -> np.ndarray:
        """Per-level variance of one row's noise on one coefficient (value units)."""
        if self.noise == "lattice":
            return np.array([g**2 * discrete_laplace_variance(t) for g, t in zip(self.granularities, self.lattice_scales)])
        return 2.0 * self.sigmas**2

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        t = self.to_unit(x)
        if self.noise == "lattice":
            z = np.empty((len(t), self.dim))
            for (kind, j), sl, g, sc in zip(self.levels, self.slices, self.granularities, self.lattice_scales):
                coords = self.basis.design(t, j, kind, quantum=LATTICE_QUANTUM)  # type: ignore[arg-type]
                z[:, sl] = g * (coords + discrete_laplace(rng, sc, coords.shape))
            return z
        z = rng.laplace(0.0, 1.0, size=(len(t), self.dim))
        z *= self.scales
        for (kind, j), sl in zip(self.levels, self.slices):
            z[:, sl] += self.basis.design(t, j, kind)  # type: ignore[arg-type]
        return z


def _from_params(params: dict[str, Any]) -> WaveletLaplace:
    return WaveletLaplace(**params)


def wavelet_levels(n: int, epsilon: float, wavelet: str = "db4", regularity: int = 1) -> tuple[int, int]:
    """Levels of Butucea et al. (2020), Thm 4.1: 2^{j0} ≍ (nα²)^{1/(2N+2)}, 2^{2 j1} ≍ nα²/log(nα²).

    N (``regularity``) is the paper's index in Hypothesis 1.1: φ is N + 1
    times weakly differentiable, an integer N > 0, and the estimator adapts
    to Besov smoothness s < N + 1. The default N = 1 is the smallest the
    paper allows and the only one that db4/sym4/coif2 satisfy (their φ are
    Hölder 1.6–1.8, not twice differentiable); it gives 2^{j0} ≍ (nα²)^{1/4},
    the linear rate-optimal resolution for s = 1, like the histogram's K.
    A larger N lowers j0: the paper's theory then relies on the detail levels,
    which local noise makes expensive (``benchmarks/wavelet_rates.py``).

    Both levels are rounded to the nearest integer, j1 ≥ j0 ≥ 0; with
    nα² ≤ e the log is not positive and j1 = j0. ``n`` is public (the number of
    reports) and α is fixed before privatizing, so the choice costs no privacy.
    """
    check_int(n, "n", 1)
    epsilon = check_epsilon(epsilon)
    N = check_int(regularity, "regularity", 1, 20)
    b = get_basis(wavelet)
    na2 = n * epsilon**2
    j0 = max(0, round(math.log2(max(na2, 1.0)) / (2 * N + 2)))
    j1 = j0
    if na2 > math.e:
        j1 = max(j0, round(0.5 * math.log2(na2 / math.log(na2))))
    return min(j0, b.max_level), min(j1, b.max_level)


def linear_level(n: int, epsilon: float, wavelet: str = "db4") -> int:
    """The default level J of the father-level-only release: the noise of the default histogram.

    The linear estimator at level J has integrated noise variance
    (2^J + S − 1) · 2σ_J²/n with σ_J = 2 · 2^{J/2} s_φ/ε (s_φ = sup_u Σ_k |φ(u − k)|,
    S the support length), and the default histogram with K = ⌈(nε²)^{1/4}⌉ bins
    (:func:`~ldp_dask.channels.histogram.default_bins`) has K · K · 8/(nε²). J is
    the level whose noise variance is nearest the histogram's on a log scale,
    i.e. 2^J ≈ K/s_φ: the same rate-optimal resolution for s = 1 as the
    histogram (and the paper's j0), one step coarser for wavelets whose
    translates overlap (db4: s_φ = 1.68). ``n`` is public and ε fixed before
    privatizing, so the choice costs no privacy.
    """
    from .histogram import default_bins

    check_int(n, "n", 1)
    epsilon = check_epsilon(epsilon)
    b = get_basis(wavelet)
    target = math.log(default_bins(n, epsilon) ** 2)
    s_phi, S = b.sup_sum["phi"], b.support

    def gap(J: int) -> float:
        return abs(math.log((2**J + S - 1) * 2**J * s_phi**2) - target)

    return min(range(b.max_level + 1), key=gap)
