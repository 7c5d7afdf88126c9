"""Test statistics of Lam-Weil, Laurent and Loubes (2022) and their exact Monte-Carlo null laws.

The mathematics: docs/goodness-of-fit.md.

With c = 2^{J/2}, a_k = c p0_k, released sums S_k = Σ_i Z_ik and centred sums
S_k^c = S_k − n a_k:

* U-statistic (needs the rows Z_i):
  T_J = Σ_k (S_k^c² − Q_k) / (n(n−1)),  Q_k = Σ_i (Z_ik − a_k)²;
* summary statistic (needs only S):
  T'_J = Σ_k [S_k^c² − n((c − 2a_k)(S_k^c/n + a_k) + a_k² + 2σ²)] / (n(n−1)),
  since E(Z − a)² = (c − 2a)θ + a² + 2σ² with θ = E φ_{Jk}(X) estimated
  without bias by S^c/n + a. Both are unbiased for ‖Π_J(f − f0)‖² (on the
  domain rescaled to [0, 1]).

* detail energy of one Haar detail level j (``split="details"``; rows report ±c, c = 2^{j/2}, on the
  left/right half of their cell), d0_k = c (p0(left_k) − p0(right_k)):
  E_j = [Σ_k (D_k − m d0_k)² − m 2^j (1 + v)] / m², v one row's noise variance; since
  Σ_k E ψ_{jk}(X)² = 2^j, E E_j = Σ_k (d_k − d0_k)² − Σ_k d_k²/m. The projection statistic of level J is
  S_J = Σ_{j<J} E_j.

Under H0 the released sums have an exact law that costs O(D) per replicate,
whatever n: N ~ Multinomial(n, p0), S = c N + σ(Gamma(n) − Gamma(n))
(a sum of n Lap(1) is a difference of two Gamma(n, 1)). Replicates are drawn
in fixed chunks from generators spawned from the caller's, on two threads
(numpy releases the GIL while sampling); the result depends only on the
caller's generator, not on thread timing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..channels.haar import HaarNoise

__all__ = [
    "summary_statistic", "u_statistic", "detail_statistic", "simulate_summary_statistic", "simulate_joint_statistics",
    "simulate_detail_statistics",
    "simulate_u_statistic", "pooled_p_values", "critical_value", "nested_statistics",
]

_CHUNK = 1024  # replicates per chunk, at most
_CHUNK_VALUES = 1 << 22  # values per chunk, at most (32 MiB of float64 per thread, whatever the level)


def summary_statistic(S: np.ndarray, n: int, a: np.ndarray, law: HaarNoise) -> np.ndarray:
    """T'_J for released sums ``S`` (last axis = bins; leading axes are replicates) of a level with noise ``law``."""
    Sc = S - n * a
    inner = Sc**2 - n * ((law.c - 2 * a) * (Sc / n + a) + a**2 + law.variance)
    return inner.sum(axis=-1) / (n * (n - 1.0))


def detail_statistic(D: np.ndarray, m: int, d0: np.ndarray, law: HaarNoise) -> np.ndarray:
    """E_j for released detail sums ``D`` (last axis = the 2^j coefficients) of m rows (module docstring)."""
    if m < 2:
        return np.zeros(np.shape(D)[:-1])
    size = np.shape(D)[-1]
    return (((D - m * d0) ** 2).sum(axis=-1) - m * size * (1.0 + law.variance)) / (m * float(m))


def detail_null(p0_fine: np.ndarray, j: int, c: float) -> tuple[np.ndarray, np.ndarray]:
    """(p0 of the 2^{j+1} half-cells, d0 of the 2^j coefficients) of detail level j from the finest bins."""
    halves = p0_fine.reshape(2 << j, -1).sum(axis=1)
    return halves, c * (halves[0::2] - halves[1::2])


def nested_statistics(sums: np.ndarray, group_n: np.ndarray, p0_fine: np.ndarray, laws: list[HaarNoise],
                      levels: list[int]) -> np.ndarray:
    """(S_J)_{J ∈ ``levels``} of the nested test from the released sums of detail levels 0, …, k−1
    (concatenated, 2^j values each) with ``group_n[j]`` rows each: S_J = E_0 + … + E_{J−1}."""
    offsets = np.concatenate([[0], np.cumsum([1 << j for j in range(len(laws))])])
    energies = [float(detail_statistic(sums[offsets[j]:offsets[j + 1]], int(group_n[j]),
                                       detail_null(p0_fine, j, law.c)[1], law)) for j, law in enumerate(laws)]
    return np.cumsum(energies)[np.asarray(levels) - 1]


def simulate_detail_statistics(group_n: np.ndarray, p0_fine: np.ndarray, laws: list[HaarNoise], B: int,
                               rng: np.random.Generator) -> np.ndarray:
    """B draws of (E_0, …, E_{k−1}) under H0 for detail levels 0..k−1 with m_j = ``group_n[j]`` rows each
    (disjoint rows, so independent): half-cell counts ~ Multinomial(m_j, p0), D = c(L − R) + noise.
    Returns shape (B, k)."""
    k = len(laws)

    def one(g: np.random.Generator, b: int) -> np.ndarray:
        out = np.zeros((b, k))
        for j, law in enumerate(laws):
            m = int(group_n[j])
            if m < 2:
                continue
            halves, d0 = detail_null(p0_fine, j, law.c)
            N = g.multinomial(m, halves, size=b).astype(np.float64)
            D = law.c * (N[:, 0::2] - N[:, 1::2])
            D += law.sums(g, m, D.shape)
            out[:, j] = detail_statistic(D, m, d0, law)
        return out

    return _chunked(B, rng, one, len(p0_fine))


def u_statistic(Z: np.ndarray, a: np.ndarray) -> float:
    """T_J from the rows ``Z`` (n, D) of a Haar channel."""
    n = Z.shape[0]
    Y = Z - a
    S = Y.sum(axis=0)
    Q = np.einsum("ij,ij->j", Y, Y)
    return float((S**2 - Q).sum() / (n * (n - 1.0)))


def _chunked(B: int, rng: np.random.Generator, fn: Callable[[np.random.Generator, int], np.ndarray],
             cells: int = 1) -> np.ndarray:
    """``fn(generator, b)`` over chunks of ``b`` replicates of ``cells`` values each (chunks are the same as
    before for up to 4,096 cells, so calibrations there are unchanged)."""
    chunk = max(1, min(_CHUNK, _CHUNK_VALUES // cells))
    sizes = [min(chunk, B - s) for s in range(0, B, chunk)]
    gens = rng.spawn(len(sizes))
    with ThreadPoolExecutor(max_workers=2) as ex:
        parts = list(ex.map(fn, gens, sizes))
    return np.concatenate(parts, axis=0)


def simulate_summary_statistic(n: int, p0: np.ndarray, law: HaarNoise, B: int,
                               rng: np.random.Generator) -> np.ndarray:
    """B draws of T'_J under H0 from the exact law of the sums: O(B·D), independent of n."""
    a = law.c * p0

    def one(g: np.random.Generator, b: int) -> np.ndarray:
        N = g.multinomial(n, p0, size=b).astype(np.float64)
        S = law.c * N + law.sums(g, n, N.shape)
        return summary_statistic(S, n, a, law)

    return _chunked(B, rng, one, len(p0))


def simulate_joint_statistics(n: int, p0_fine: np.ndarray, levels: list[int], laws: list[HaarNoise], B: int,
                              rng: np.random.Generator) -> np.ndarray:
    """B draws of (T'_J)_{J ∈ levels} under H0 when every row reports every level (shared rows).

    Counts at the finest level are multinomial; coarser counts are their dyadic sums;
    each level has its own independent noise. Returns shape (B, len(levels)).
    """
    D = len(p0_fine)

    def one(g: np.random.Generator, b: int) -> np.ndarray:
        N = g.multinomial(n, p0_fine, size=b)
        out = np.empty((b, len(levels)))
        for i, (j, law) in enumerate(zip(levels, laws)):
            cnt = N.reshape(b, 1 << j, D >> j).sum(axis=2).astype(np.float64)
            p0 = p0_fine.reshape(1 << j, -1).sum(axis=1)
            S = law.c * cnt + law.sums(g, n, cnt.shape)
            out[:, i] = summary_statistic(S, n, law.c * p0, law)
        return out

    return _chunked(B, rng, one, D)


def simulate_u_statistic(n: int, p0: np.ndarray, law: HaarNoise, B: int,
                         rng: np.random.Generator) -> np.ndarray:
    """B draws of T_J under H0 by privatizing n rows per replicate: O(B·n·D) (the paper's way)."""
    a = law.c * p0
    D = len(p0)

    def one(g: np.random.Generator, b: int) -> np.ndarray:
        out = np.empty(b)
        for r in range(b):
            bins = g.choice(D, size=n, p=p0)
            Z = law.rows(g, (n, D))
            Z[np.arange(n), bins] += law.c
            out[r] = u_statistic(Z, a)
        return out

    return _chunked(B, rng, one)


def pooled_p_values(obs: np.ndarray, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Monte-Carlo p-values of the observation and of every simulated replicate.

    The observation and the B replicates are exchangeable under H0; each value's
    p-value is #{pooled values ≥ it}/(B + 1), so the observation's is
    (1 + #{T_sim ≥ T_obs})/(B + 1). Works column-wise on (B, m) arrays.
    Returns (p_obs with shape (m,), p_sims with shape (B, m)).
    """
    sims = np.atleast_2d(np.asarray(sims, dtype=np.float64).T).T
    obs = np.atleast_1d(np.asarray(obs, dtype=np.float64))
    B = sims.shape[0]
    pooled = np.vstack([obs[None, :], sims])
    p = np.empty_like(pooled)
    for j in range(pooled.shape[1]):
        col = pooled[:, j]
        order = np.sort(col)
        # number of pooled values >= each value
        p[:, j] = (len(col) - np.searchsorted(order, col, side="left")) / (B + 1)
    return p[0], p[1:]


def critical_value(sims: np.ndarray, level: float) -> tuple[float, tuple[float, float]]:
    """The (1 − γ) Monte-Carlo quantile and a 95% interval for the true one.

    The critical value is the k-th smallest replicate, k = ⌈(B + 1)(1 − γ)⌉; the
    interval takes the order statistics at ranks B(1 − γ) ± 1.96 √(Bγ(1 − γ))
    (binomial count of replicates below the true quantile).
    """
    s = np.sort(np.asarray(sims, dtype=np.float64))
    B = len(s)
    k = min(B, max(1, math.ceil((B + 1) * (1 - level))))
    half = 1.96 * math.sqrt(B * level * (1 - level))
    lo = min(B - 1, max(0, math.floor(B * (1 - level) - half) - 1))
    hi = min(B - 1, max(0, math.ceil(B * (1 - level) + half) - 1))
    return float(s[k - 1]), (float(s[lo]), float(s[hi]))
