"""Central-DP quantile mechanisms on the driver (docs/central-quantiles.md).

Neighbouring data sets differ by one replaced record; n is public. Every
mechanism takes :class:`~ldp_dask.central.data.PrivateData` (exact, in driver
memory), the public bounds [a, b], a budget and an explicit generator, and
returns values only. Single-quantile mechanisms answer k quantiles with ε/k
each (basic composition); :func:`joint_exp` spends ε once for all of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .data import PrivateData

__all__ = [
    "above_threshold", "histogram_method", "inverse_sensitivity", "laplace_baseline", "joint_exp",
    "default_steps", "inverse_sensitivity_density", "joint_exp_log_density", "accuracy_bound",
]


def above_threshold(answers: Callable[[int, int], np.ndarray], n_queries: int, threshold: float, epsilon: float,
                    rng: np.random.Generator, chunk: int = 1 << 16) -> int | None:
    """AboveThreshold (sparse vector): index of the first query above a noisy threshold, or None.

    T̂ = T + Lap(2/ε); return the first i (0-based) with q_i(D) + Lap(4/ε) > T̂.
    ``answers(i, j)`` returns the exact answers q_i..q_{j−1}; queries are drawn
    lazily in chunks, so the cost is proportional to the index returned.

    Privacy (Dwork & Roth 2014, Thm 3.23), queries of
    sensitivity 1: fix the noises ν_i of the queries before k and let
    g = max_{i<k} (q_i(D) + ν_i). The output is k iff T̂ > g and q_k + ν_k ≥ T̂.
    For a neighbour D', g' ≤ g + 1 and q_k' ≥ q_k − 1; substituting
    T̂' = T̂ + 1 (a factor e^{ε/2} in the Lap(2/ε) density) and
    ν_k' = ν_k + 2 (a factor e^{ε/2} in the Lap(4/ε) density) maps the event
    for D onto the event for D', so P(k | D) ≤ e^ε P(k | D'). The event "none"
    is handled the same way with the first substitution only. ε-DP.
    """
    t_hat = threshold + rng.laplace(0.0, 2.0 / epsilon)
    for start in range(0, n_queries, chunk):
        stop = min(n_queries, start + chunk)
        noisy = answers(start, stop) + rng.laplace(0.0, 4.0 / epsilon, size=stop - start)
        hit = np.flatnonzero(noisy > t_hat)
        if hit.size:
            return int(start + hit[0])
    return None


def default_steps(n: int) -> int:
    """steps = 1.5 n / log n (Canesse 2022), at least 2."""
    return max(2, math.ceil(1.5 * n / math.log(max(n, 3))))


def histogram_method(data: PrivateData, q: np.ndarray, epsilon: float, rng: np.random.Generator,
                     steps: int | None = None) -> np.ndarray:
    """HistogramMethod (Canesse 2022) with ε/k per quantile.

    [a, b] is cut into ``steps`` equal intervals; for quantile q the queries are
    f_i = #{x < a + i(b − a)/steps}, i = 1..steps (sensitivity 1: one replaced
    record moves one count by one), the threshold is T = q·n, and the answer is
    a + i(b − a)/steps for the index i returned by AboveThreshold — with the
    ``a +`` that the report's pseudo-code omits (its answers are shifted by −a
    whenever a ≠ 0; docs/corrections.md). If no query crosses, b is returned. The f_i are prefix
    counts of one sorted array, computed per chunk.
    """
    a, b = data.bounds
    steps = steps or default_steps(data.n)
    width = (b - a) / steps
    eps_each = epsilon / len(q)

    def answers(i: int, j: int) -> np.ndarray:
        edges = a + np.arange(i + 1, j + 1) * width
        return data.count_below(edges).astype(np.float64)

    out = np.empty(len(q))
    for k, qq in enumerate(q):
        idx = above_threshold(answers, steps, qq * data.n, eps_each, rng)
        out[k] = b if idx is None else a + (idx + 1) * width
    return out


def inverse_sensitivity(data: PrivateData, q: np.ndarray, epsilon: float, rng: np.random.Generator,
                        rho: float = 0.0) -> np.ndarray:
    """Smooth inverse sensitivity (Asi and Duchi 2020), exact sampling, ε/k per quantile.

    Density on [a, b] ∝ exp(−len^ρ(x, t) ε/2), where len(x, t) is the number
    of records to change for the empirical q-quantile x_(m), m = ⌈qn⌉, to
    equal t — m − #{x < t} left of x_(m) and #{x < t} − m + 1 right of it —
    and len^ρ(t) = min_{|s−t| ≤ ρ} len(s): 0 on [x_(m) − ρ, x_(m) + ρ],
    len(t + ρ) left of it, len(t − ρ) right of it. len^ρ changes by at most 1
    when one record is replaced, so the mechanism is ε-DP (Asi and Duchi
    2020). It is piecewise constant with breakpoints at x_i ± ρ, so it is
    sampled exactly: a piece with probability ∝ width · weight, then uniform.
    """
    eps_each = epsilon / len(q)
    sampler = _InverseSensitivitySampler(data, rho, eps_each)
    return np.array([sampler.sample(float(qq), rng) for qq in q])


class _InverseSensitivitySampler:
    """Exact sampling of :func:`inverse_sensitivity_density` in O(K) once, then O(log K) per quantile.

    Left of x_(m) − ρ the pieces are (p_{k−1} − ρ, p_k − ρ), k ≤ k_m, with weight
    width_k · exp(−ε(m − C_k)/2) = [width_k e^{εC_k/2}] · e^{−εm/2}; right of
    x_(m) + ρ they are (p_k + ρ, p_{k+1} + ρ), k ≥ k_m, with weight
    [width_k e^{−εC_{k+1}/2}] · e^{ε(m−1)/2}. The pieces do not depend on m,
    only a constant factor does, so prefix (left) and suffix (right) log-sums
    of the bracketed terms serve every quantile: a region is chosen by its
    exact mass, then a piece by binary search, then a point uniformly.
    """

    def __init__(self, data: PrivateData, rho: float, epsilon: float) -> None:
        a, b = data.bounds
        self.data, self.rho, self.eps = data, rho, epsilon
        pts, C = data.points, data.cumulative
        self.C = C
        with np.errstate(divide="ignore"):
            le = np.clip(np.concatenate([[a + rho], pts]) - rho, a, b)  # left edges: a, p_0 − ρ, ...
            self.left_lo, self.left_hi = le[:-1], le[1:]
            lw = np.log(self.left_hi - self.left_lo) + epsilon * C[:-1] / 2.0
            re = np.clip(np.concatenate([pts, [b - rho]]) + rho, a, b)  # right edges: p_0 + ρ, ..., b
            self.right_lo, self.right_hi = re[:-1], re[1:]
            rw = np.log(self.right_hi - self.right_lo) - epsilon * C[1:] / 2.0
        self.left_cum = np.logaddexp.accumulate(lw)  # log Σ_{i ≤ k} (−inf terms allowed)
        self.right_cum = np.logaddexp.accumulate(rw[::-1])[::-1]  # log Σ_{i ≥ k}

    def sample(self, q: float, rng: np.random.Generator) -> float:
        d, eps, rho = self.data, self.eps, self.rho
        a, b = d.bounds
        m = max(1, math.ceil(q * d.n))
        km = int(np.searchsorted(self.C[1:], m, side="left"))
        xm = float(d.points[km])
        lo_mid, hi_mid = max(a, xm - rho), min(b, xm + rho)
        with np.errstate(divide="ignore"):
            logs = np.array([self.left_cum[km] - eps * m / 2.0,
                             math.log(hi_mid - lo_mid) if hi_mid > lo_mid else -np.inf,
                             self.right_cum[km] + eps * (m - 1) / 2.0])
        region = _sample_log(logs, rng)
        if region == 1:
            return float(lo_mid + rng.random() * (hi_mid - lo_mid))
        u = math.log(rng.random() or 5e-324)
        if region == 0:  # first k ≤ km with prefix sum ≥ U · total
            k = min(int(np.searchsorted(self.left_cum[:km + 1], self.left_cum[km] + u, side="left")), km)
            lo, hi = self.left_lo[k], self.left_hi[k]
        else:  # suffix sums decrease with k: search the reversed array
            rev = self.right_cum[km:][::-1]
            j = min(int(np.searchsorted(rev, self.right_cum[km] + u, side="left")), len(rev) - 1)
            k = len(self.right_cum) - 1 - j
            lo, hi = self.right_lo[k], self.right_hi[k]
        return float(lo + rng.random() * (hi - lo))


def inverse_sensitivity_density(data: PrivateData, q: float, epsilon: float, rho: float = 0.0
                                ) -> tuple[np.ndarray, np.ndarray]:
    """The unnormalised log density −len^ρ(x, t) ε/2 of :func:`inverse_sensitivity`, piecewise constant.

    Returns (edges, log_w): on [edges[i], edges[i+1]) the log density is log_w[i].
    Built in O(K) for K distinct points, without sorting: left of x_(m) − ρ the
    breakpoints are the p_k − ρ (where t + ρ crosses a point), right of
    x_(m) + ρ they are the p_k + ρ, and in between len^ρ = 0. Pieces may have
    zero width (ties of breakpoints); the sampler skips them.
    """
    a, b = data.bounds
    m = max(1, math.ceil(q * data.n))
    C = data.cumulative  # C[k] = records among the first k distinct points
    km = int(np.searchsorted(C[1:], m, side="left"))  # x_(m) = points[km]
    xm = float(data.points[km])
    lo_mid, hi_mid = max(a, xm - rho), min(b, xm + rho)
    # left: pieces (p_{k-1} − ρ, p_k − ρ) ∩ [a, x_m − ρ), len = m − C[k]  (k = 0..km, p_{-1} − ρ := a)
    left_edges = np.clip(data.points[:km + 1] - rho, a, lo_mid)
    left_e = np.concatenate([[a], left_edges])
    left_len = m - C[:km + 1]
    # right: pieces (p_k + ρ, p_{k+1} + ρ) ∩ (x_m + ρ, b], len = C[k+1] − m + 1  (k = km..K−1, p_K + ρ := b)
    right_edges = np.clip(data.points[km + 1:] + rho, hi_mid, b)
    right_e = np.concatenate([[hi_mid], right_edges, [b]])
    right_len = C[km + 1:] - m + 1
    edges = np.concatenate([left_e, right_e])
    length = np.concatenate([left_len, [0], right_len]).astype(np.float64)
    # the middle piece [lo_mid, hi_mid] joins the last left edge and the first right edge
    return edges, -epsilon * length / 2.0


def laplace_baseline(data: PrivateData, q: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """The naive method (Canesse 2022): empirical quantile + Lap((b − a)k/ε), clipped to [a, b].

    One replaced record can move an empirical quantile across the whole
    domain, so its global sensitivity is b − a: the noise is as wide as the
    domain, which is why the method is known to fail. A baseline only.
    """
    a, b = data.bounds
    m = np.maximum(1, np.ceil(q * data.n)).astype(np.int64)
    exact = data.order_statistic(m)
    return np.clip(exact + rng.laplace(0.0, (b - a) * len(q) / epsilon, size=len(q)), a, b)


def joint_exp(data: PrivateData, q: np.ndarray, epsilon: float, rng: np.random.Generator,
              max_intervals: int = 2048) -> np.ndarray:
    """JointExp (Gillenwater, Joseph & Kulesza, ICML 2021): all quantiles in one exponential mechanism.

    For sorted outputs a ≤ o_1 ≤ … ≤ o_k ≤ b the utility is
    u(o) = −Σ_{j=1}^{k+1} |#{x ∈ [o_{j−1}, o_j)} − (q_j − q_{j−1}) n| (o_0 = a,
    o_{k+1} = b). Replacing one record moves it from one gap to another, so
    Δu = 2 and the density ∝ exp(ε u(o)/(2Δu)) = exp(ε u/4) on ordered tuples
    is ε-DP for the whole set of quantiles. Between consecutive data points
    the gap counts are constant, so the density is sampled exactly by dynamic
    programming over intervals, with the volume L^r/r! of r ordered outputs in
    one interval of length L tracked by a run-length state; then uniform draws
    inside the chosen intervals, sorted. All weights stay in the log domain
    (for large n every transition weight is below e^−745 and would underflow);
    the transition is a fused numba kernel, O(k K²/2) for K intervals; when the
    data have more than ``max_intervals`` distinct points they are first
    rounded to the midpoints of ``max_intervals`` public cells (per-record
    rounding: still ε-DP on the raw data).
    """
    t = _joint_exp_tables(data, q, epsilon, max_intervals)
    k = len(q)
    i, r = divmod(_sample_log(t.final.ravel(), rng), k)
    chosen = np.zeros(k, dtype=np.intp)
    chosen[k - 1] = i
    for j in range(k - 1, 0, -1):
        if r > 0:  # the previous output is in the same interval
            r -= 1
            chosen[j - 1] = i
            continue
        w = t.alpha[j - 1][:i] + (-t.beta * np.abs(t.CC[i] - t.CC[:i] - t.gaps[j]))[:, None]
        i, r = divmod(_sample_log(w.ravel(), rng), k)
        chosen[j - 1] = i
    out = t.e[chosen] + rng.random(k) * t.L[chosen]
    # outputs sharing an interval are the order statistics of uniforms inside it
    for iv in np.unique(chosen):
        sel = np.flatnonzero(chosen == iv)
        out[sel] = np.sort(out[sel])
    return out


def _sample_log(log_w: np.ndarray, rng: np.random.Generator) -> int:
    """Index drawn with probability ∝ exp(log_w) (−inf allowed)."""
    p = np.exp(log_w - np.max(log_w))
    return min(int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right")), len(p) - 1)


class _Tables:
    """Forward tables of JointExp's dynamic programme (attributes named by the caller)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    def __getattr__(self, name: str) -> Any:  # for type checkers: the attributes come from ``kw``
        raise AttributeError(name)


def _joint_exp_tables(data: PrivateData, q: np.ndarray, epsilon: float, max_intervals: int) -> _Tables:
    from .._kernels import joint_exp_transition

    a, b = data.bounds
    d = data if len(data.points) <= max_intervals else data.coarsen(max_intervals)
    n, k = d.n, len(q)
    e = np.concatenate([[a], d.points, [b]])  # interval i = [e_i, e_{i+1}), i = 0..K
    L = np.diff(e)
    with np.errstate(divide="ignore"):
        logL = np.where(L > 0, np.log(np.where(L > 0, L, 1.0)), -np.inf)
    CC = np.concatenate([[0], np.cumsum(d.counts)]).astype(np.float64)  # #{x < o} for o inside interval i
    K1 = len(L)
    beta = epsilon / 4.0
    gaps = np.diff(np.concatenate([[0.0], q, [1.0]])) * n  # target counts n_1..n_{k+1}
    # alpha[j][i, r]: log weight of outputs 1..j+1 with the last in interval i, the (r+1)-th in it
    alpha = np.full((k, K1, k), -np.inf)
    alpha[0][:, 0] = logL - beta * np.abs(CC - gaps[0])
    moved = np.empty(K1)
    for j in range(1, k):
        prev = alpha[j - 1]
        stay = -beta * gaps[j]
        for r in range(1, k):
            alpha[j][:, r] = prev[:, r - 1] + logL - math.log(r + 1) + stay
        joint_exp_transition(np.ascontiguousarray(np.logaddexp.reduce(prev, axis=1)), CC, float(gaps[j]), beta,
                             moved)
        alpha[j][:, 0] = moved + logL
    final = alpha[k - 1] - beta * np.abs(n - CC - gaps[k])[:, None]
    return _Tables(d=d, e=e, L=L, CC=CC, gaps=gaps, beta=beta, alpha=alpha, final=final, n=n)


def joint_exp_log_density(data: PrivateData, q: np.ndarray, epsilon: float, o: np.ndarray,
                          max_intervals: int = 2048) -> np.ndarray:
    """log of JointExp's density at sorted outputs ``o`` (shape (k,) or (N, k)): ε u(o)/4 − log Z.

    Z comes from the dynamic programme; used by the tests to check it against
    brute-force integration and the e^ε bound.
    """
    t = _joint_exp_tables(data, q, epsilon, max_intervals)
    finite = t.final[np.isfinite(t.final)]
    log_z = float(np.max(finite) + np.log(np.sum(np.exp(finite - np.max(finite)))))
    o = np.atleast_2d(np.asarray(o, dtype=np.float64))
    below = t.d.count_below(o)
    full = np.hstack([np.zeros((len(o), 1)), below, np.full((len(o), 1), t.n)])
    u = -np.sum(np.abs(np.diff(full, axis=1) - t.gaps), axis=1)
    return t.beta * u - log_z


def accuracy_bound(method: str, k: int, epsilon: float, bounds: tuple[float, float], *, rho: float = 0.0,
                   steps: int | None = None, n: int = 1, confidence: float = 0.95) -> dict[str, Any]:
    """A-priori accuracy of a release of k quantiles, from the mechanism's law alone (no data, no ε).

    Holds for all k quantiles at once with probability ≥ ``confidence`` (a union
    bound, β/k each with β = 1 − confidence); ``epsilon`` is what the mechanism
    runs with (ε/k per quantile for the single-quantile methods). Rank error of an
    output o for quantile q is |#{x < o} − ⌈qn⌉|-type distance, as stated per method:

    * ``inverse-sensitivity`` (ρ > 0): the density is ∝ exp(−ε' len^ρ/2), len^ρ = 0 on
      an interval of width ≥ min(ρ, b − a) and the whole domain has width b − a, so
      P(len^ρ ≥ r) ≤ (b − a)/min(ρ, b − a) · e^{−ε' r/2}. With probability ≥ 1 − β/k the
      output lies within ρ of a value s that fewer than ``rank`` records separate from
      being the empirical quantile. With ρ = 0 the zero set can be a point: no bound.
    * ``histogram`` (AboveThreshold with T = qn on the prefix counts f_i of a grid of
      width w = (b − a)/steps): P(|Lap(2/ε')| > t₁) = e^{−ε't₁/2} and
      P(max_i |Lap(4/ε')| > t₂) ≤ steps · e^{−ε't₂/4}; with t₁, t₂ at β/(2k) each and
      r = t₁ + t₂, the output grid point o has #{x ≤ o} > qn − r and
      #{x < o − w} ≤ qn + r (Dwork and Roth 2014, Thm 3.24, with its two tails kept apart;
      ≤ because the output b when no count crosses may carry a point mass).
    * ``laplace``: a value bound, |o − x_(m)| ≤ (b − a)k/ε · log(k/β) (clipping only helps).
    * ``joint-exp``: none. Its law depends on the spacing of the data (the volume of
      near-optimal output tuples), so no bound holds without looking at them.
    """
    a, b = bounds
    beta = (1.0 - confidence) / k
    eps_each = epsilon / k
    out: dict[str, Any] = {"confidence": confidence, "simultaneous": k}
    if method == "inverse-sensitivity" and rho > 0:
        r = (2.0 / eps_each) * math.log((b - a) / (min(rho, b - a) * beta))
        out.update(rank=r, value_slack=rho,
                   statement=f"each output is within ρ = {rho:.3g} of a value fewer than {r:,.0f} records away from "
                             "being the exact quantile")
    elif method == "histogram":
        st = steps or default_steps(n)
        r = (2.0 / eps_each) * math.log(2.0 / beta) + (4.0 / eps_each) * math.log(2.0 * st / beta)
        w = (b - a) / st
        out.update(rank=r, value_slack=w,
                   statement=f"each output o has #{{x ≤ o}} > qn − {r:,.0f} and #{{x < o − {w:.3g}}} ≤ qn + {r:,.0f}")
    elif method == "laplace":
        v = (b - a) * k / epsilon * math.log(1.0 / beta)
        out.update(rank=None, value=v, statement=f"each output is within {v:.3g} of the exact quantile (a value bound)")
    else:
        out.update(rank=None, statement=(
            "none a priori: JointExp's accuracy depends on the spacing of the data"
            if method == "joint-exp" else "none a priori: inverse sensitivity with ρ = 0"))
    return out
