"""Bounds on the CDF of the data from a wavelet summary, with no assumption about the density (docs/estimators.md).

A wavelet summary releases the sums S_k = Σ_i h_k(T_i) of the father functions h_k(t) = 2^{j/2} φ̃(2^j t − k)
(φ̃ the tabulated scaling function the channel privatizes with: linear between table points, or the lattice
mode's constant per table cell). Any combination H = Σ_k v_k φ̃(2^j t − k) has E H(T) = Σ_k v_k 2^{−j/2} E S_k/n,
estimated without bias from the release. If H ≥ 1[t < e] on [0, 1], then P(T < e) ≤ E H(T) for *every*
distribution of T; if H ≤ 1[t ≤ e], then P(T ≤ e) ≥ E H(T). Such envelopes exist in the span of the shifts of φ̃
(a partition of unity) and are found once per wavelet by a linear programme: minimise the area between H and the
step, subject to the inequality at every point of the table grid (exact, because H is linear, or constant, on
each grid cell), with a slack τ where the tabulated φ̃ makes the inequality impossible to meet exactly (its
tail changes sign; measured τ ≤ 5.2e−3 for db2, ≤ 4.1e−4 for coif1, ≤ 6e−6 for db4, db8, sym4, sym6, coif2, coif3,
0 for Haar; added to the bound). The envelope of an edge at u = m + r (u = 2^j t) is the one of r
shifted by m; r ∈ {0, 1/2}.

The release estimates E H(T) by Ĥ − λ(Û − 1), Û the same combination for H ≡ 1 (the partition of unity, whose
expectation is 1 up to the table's error η, added to the bound): λ is the mean weight, which minimises the noise
variance, as the histogram's CDF bridge does. Variance: Σ_k a_k² v/n (v one row's noise variance per coefficient,
a_k = 2^{−j/2}(v_k − λ)) plus at most R²/(4n) for sampling, R the range of H − λU over [0, 1].

Only the father block is used: for a summary with detail levels (``calibration="paper"``) the bounds are those of
its coarsest level j0, valid but wider.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..channels import WaveletLaplace
from ..channels.wavelet import LATTICE_QUANTUM
from ..summary import Summary

__all__ = ["cdf_envelope_bounds", "Envelope", "envelope", "OFFSETS"]

#: Edges per unit of u = 2^j t: at u = m + r for these r.
OFFSETS = (0.0, 0.5)
#: Free coefficients to the left of those whose support holds the edge (and S to its right, see envelope()).
_EXTRA = 2
#: Weight of the slack τ against the area (per grid point) in the linear programme.
_SLACK_WEIGHT = 1e3


@dataclass(frozen=True)
class Envelope:
    """H = c·Σ_{k < first} φ̃(u − k) + Σ_i v_i φ̃(u − (first + i)) for an edge at u = r (shift by m for m + r).

    ``upper``: H ≥ 1[u < r] − τ everywhere; else H ≤ 1[u ≤ r] + τ. ``h_min``, ``h_max``: the range of H, and
    ``pu_min``, ``pu_max`` that of the partition of unity Σ_k φ̃(u − k), on the grid.
    """

    first: int
    v: np.ndarray
    c: float
    tau: float
    h_min: float
    h_max: float
    pu_min: float
    pu_max: float


def _phi_table(wavelet: str, table_level: int, lattice: bool) -> tuple[np.ndarray, int, int, bool]:
    from ..bases import get_basis

    b = get_basis(wavelet, table_level)
    step = b.interpolation == "step" or lattice
    vals = b.lattice_values("phi", LATTICE_QUANTUM) / LATTICE_QUANTUM if lattice else b.function("phi")[1]
    return vals, b.support, b.per_unit, step


@lru_cache(maxsize=64)
def envelope(wavelet: str, table_level: int, lattice: bool, r: float, upper: bool) -> Envelope:
    """The envelope of an edge at u = r ∈ [0, 1) (module docstring), by linear programming (HiGHS)."""
    from scipy.optimize import linprog

    vals, S, P, step = _phi_table(wavelet, table_level, lattice)
    size = S * P + (0 if step else 1)  # step tables: cell i holds the value on [i/P, (i+1)/P)

    def phi_at(idx: np.ndarray) -> np.ndarray:
        out = np.zeros(idx.shape)
        ok = (idx >= 0) & (idx < size)
        out[ok] = vals[idx[ok]]
        return out

    ue = round(r * P)
    lo_u, hi_u = -2 * S - _EXTRA - 1, 2 * S + 2
    grid = np.arange(lo_u * P, hi_u * P + 1)
    # free: every shift whose support meets [u_e − S − _EXTRA, u_e + S]; the ones starting right of the edge
    # cancel the sign-changing tail of the asymmetric (dbN) scaling functions (without them db4 needs τ = 0.01
    # and weights up to 11; with them τ ≤ 2e−4 and weights ≤ 1.3)
    free = np.arange(-S - _EXTRA + 1, S + 1)
    left = np.arange(lo_u - S - 1, int(free[0]))
    Ff = np.stack([phi_at(grid - k * P) for k in free], axis=1)
    Fl = np.sum([phi_at(grid - k * P) for k in left], axis=0)
    pu = np.sum([phi_at(grid - k * P) for k in range(lo_u - S - 1, hi_u + 1)], axis=0)
    full = (grid >= (lo_u + S) * P) & (grid <= (hi_u - S - 1) * P)  # where every shift is present
    pu_min, pu_max = float(pu[full].min()), float(pu[full].max())
    # continuous H: H(u_e) must be ≥ 1 (upper) or ≤ 0 (lower) by continuity; step H: cell [u_e, u_e + 1/P) is
    # right of the edge for both (the point u_e itself is in 1[t ≤ e], so the lower bound may count it)
    ind = ((grid <= ue) if (upper and not step) else (grid < ue)).astype(float)
    c = 1.0 / pu_min if upper else 1.0 / pu_max
    rhs = ind - c * Fl
    area = Ff.sum(axis=0)
    one = np.ones((len(grid), 1))
    bounds = [(None, None)] * len(free) + [(0.0, None)]
    if upper:  # min area + W τ  s.t.  Ff v + τ ≥ rhs
        res = linprog(np.append(area, _SLACK_WEIGHT * P), A_ub=-np.hstack([Ff, one]), b_ub=-rhs, bounds=bounds,
                      method="highs")
    else:  # max area − W τ  s.t.  Ff v − τ ≤ rhs
        res = linprog(np.append(-area, _SLACK_WEIGHT * P), A_ub=np.hstack([Ff, -one]), b_ub=rhs, bounds=bounds,
                      method="highs")
    if res.status != 0:  # pragma: no cover - feasible for every orthogonal wavelet (τ absorbs the rest)
        raise RuntimeError(f"the CDF envelope programme for {wavelet} failed: {res.message}")
    v, tau = res.x[:-1], float(res.x[-1])
    H = Ff @ v + c * Fl
    # τ from the solver's tolerance: re-measure it on the grid, so the bound holds for the weights returned
    tau = float(max(tau, np.max(ind - H) if upper else np.max(H - ind), 0.0))
    # outside the programme's window H is c·Σφ̃ (left) or 0 (right)
    h_min, h_max = min(float(H.min()), 0.0, c * pu_min), max(float(H.max()), c * pu_max)
    return Envelope(int(free[0]), v, c, tau, h_min, h_max, pu_min, pu_max)


def cdf_envelope_bounds(summary: Summary, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, upper, lower)`` at edges t = (m + r)/2^j of [0, 1] (unit scale): upper ≥ P(T < t) and
    lower ≤ P(T ≤ t), each with probability ≥ Φ(z) (module docstring)."""
    ch = summary.channel
    if not isinstance(ch, WaveletLaplace):
        raise TypeError("cdf_envelope_bounds needs a wavelet summary")
    j, n = ch.j0, summary.n
    S = ch.basis.support
    sums = np.asarray(summary.sums["sum"][ch.slices[0]], dtype=np.float64)  # k = −S+1 .. 2^j − 1
    N = len(sums)
    kmin = -S + 1
    scale = 2.0 ** (-j / 2) / n
    prefix = np.concatenate([[0.0], np.cumsum(sums)])
    u_hat = scale * prefix[-1]  # Û: E = 1 up to the table's error
    var_row = float(ch.noise_variances[0])
    out_t, out_u, out_l = [], [], []
    for r in OFFSETS:
        ms = np.arange(0, (1 << j) + (1 if r == 0 else 0))
        t = (ms + r) / float(1 << j)
        for upper in (True, False):
            env = envelope(ch.wavelet, ch.table_level, ch.noise == "lattice", r, upper)
            lam, est, var = _estimates(env, ms, sums, prefix, kmin, N, scale)
            est = est - lam * (u_hat - 1.0)
            eta = max(env.pu_max - 1.0, 1.0 - env.pu_min, 0.0)
            slack = env.tau + np.abs(lam) * eta
            spread = (env.h_max - env.h_min) + np.abs(lam) * (env.pu_max - env.pu_min)  # range of H − λU
            sd = np.sqrt(var * var_row * 2.0 ** (-j) / n + spread**2 / (4.0 * n))
            if upper:
                up = est + slack + z * sd
            else:
                lo = est - slack - z * sd
        out_t.append(t)
        out_u.append(up)
        out_l.append(lo)
    t = np.concatenate(out_t)
    order = np.argsort(t, kind="stable")
    return t[order], np.concatenate(out_u)[order], np.concatenate(out_l)[order]


def _estimates(env: Envelope, ms: np.ndarray, sums: np.ndarray, prefix: np.ndarray, kmin: int, N: int,
               scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per edge m: λ (the mean weight over the N coefficients), Σ_k v_k·scale·S_k, and Σ_k (v_k − λ)²."""
    F = len(env.v)
    first = ms + env.first  # absolute k of the first free coefficient
    n_left = np.clip(first - kmin, 0, N)  # coefficients k < first, all weighted c
    idx = first[:, None] + np.arange(F)[None, :] - kmin  # positions of the free ones in the block
    ok = (idx >= 0) & (idx < N)
    vv = np.where(ok, env.v[None, :], 0.0)
    s_free = np.where(ok, sums[np.clip(idx, 0, N - 1)], 0.0)
    total_w = env.c * n_left + vv.sum(axis=1)
    lam = total_w / N
    est = scale * (env.c * prefix[n_left] + (vv * s_free).sum(axis=1))
    # Σ_k (v_k − λ)² = Σ v_k² − 2λ Σ v_k + N λ²
    ssq = env.c**2 * n_left + (vv**2).sum(axis=1) - 2 * lam * total_w + N * lam**2
    return lam, est, np.maximum(ssq, 0.0)
