"""How a plan shares its ε (or its rows) among its statistics: the optimum of the weighted sum of their predicted
variances (:func:`ldp_dask.plans.check` builds the variance functions; nothing here knows a channel)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["split_epsilon", "split_rows", "SLSQP_CLASSES"]


def split_epsilon(variance: Sequence[Any], weights: Sequence[float], epsilon: float,
                  counts: Sequence[int] | None = None) -> np.ndarray:
    """ε_i ≥ 0 with Σ c_i ε_i = ε minimising Σ c_i w_i·variance_i(ε_i) (``variance`` a function of ε per statistic;
    ``counts`` c_i, default 1: how many identical statistics each entry stands for).

    Up to :data:`SLSQP_CLASSES` entries, SLSQP from the a/ε² model's optimum (its numerical gradient costs a pass
    over every entry per coordinate: quadratic); beyond, the separable problem is solved by its Lagrangian on a
    local power law v_i(ε) ≈ a_i ε^{−b_i} fitted at the current point, three rounds (linear in the entries)."""
    from scipy.optimize import minimize

    w = np.asarray(weights, float)
    c = np.ones(len(w)) if counts is None else np.asarray(counts, float)
    m = len(w)
    if m == 1:
        return np.array([epsilon / c[0]])
    a = np.array([max(v(epsilon) * epsilon**2, 1e-300) for v in variance])  # v ≈ a/ε² near the optimum
    start = (w * a) ** (1 / 3)
    start = epsilon * start / float(np.sum(c * start))

    def objective(x: np.ndarray) -> float:
        return float(sum(ci * wi * v(max(xi, 1e-9)) for ci, wi, v, xi in zip(c, w, variance, x)))

    if m > SLSQP_CLASSES:
        x = _split_by_power_laws(variance, w, c, epsilon, start)
    elif counts is None:  # the original problem, as it has always been solved
        res = minimize(objective, start, method="SLSQP", bounds=[(epsilon * 1e-4, epsilon)] * m,
                       constraints=[{"type": "eq", "fun": lambda x: x.sum() - epsilon}],
                       options={"ftol": 1e-12, "maxiter": 200})
        x = res.x
        x = x if res.success and objective(x) <= objective(start) else start
    else:
        res = minimize(objective, start, method="SLSQP", bounds=[(epsilon * 1e-4, epsilon)] * m,
                       constraints=[{"type": "eq", "fun": lambda x: float(np.sum(c * x)) - epsilon}],
                       options={"ftol": 1e-12, "maxiter": 200})
        x = res.x
        x = x if res.success and objective(x) <= objective(start) else start
    if m > SLSQP_CLASSES and objective(x) > objective(start):
        x = start
    return np.asarray(x) * epsilon / float(np.sum(c * x))


#: Up to this many distinct statistics a plan's ε split is refined by SLSQP (quadratic in them); beyond, by the
#: Lagrangian of local power laws (linear)
SLSQP_CLASSES = 16


def _split_by_power_laws(variance: Sequence[Any], w: np.ndarray, c: np.ndarray, epsilon: float,
                         x: np.ndarray) -> np.ndarray:
    """Three rounds of: fit v_i(ε) ≈ a_i ε^{−b_i} at x_i (two evaluations), then the exact optimum of the fitted
    problem, x_i = (w_i a_i b_i/λ)^{1/(b_i+1)} with λ found by bisection so that Σ c_i x_i = ε."""
    lo, hi = epsilon * 1e-4, epsilon
    for _ in range(3):
        v0 = np.array([max(v(xi), 1e-300) for v, xi in zip(variance, x)])
        v1 = np.array([max(v(xi * 1.05), 1e-300) for v, xi in zip(variance, x)])
        b = np.clip(-np.log(v1 / v0) / math.log(1.05), 0.25, 8.0)
        a = v0 * x**b

        def at(log_lam: float, a: np.ndarray = a, b: np.ndarray = b) -> np.ndarray:
            return np.clip(np.exp((np.log(w * a * b) - log_lam) / (b + 1)), lo, hi)

        left, right = -700.0, 700.0  # Σ c x falls in λ
        for _ in range(200):
            mid = (left + right) / 2
            left, right = (mid, right) if float(np.sum(c * at(mid))) > epsilon else (left, mid)
        x = at(right)
    return x


def split_rows(unit_variances: Sequence[float], weights: Sequence[float]) -> np.ndarray:
    """Shares ρ_i of the rows (Σ ρ_i = 1) minimising Σ w_i·v_i/ρ_i: ρ_i ∝ √(w_i v_i)."""
    r = np.sqrt(np.asarray(weights, float) * np.asarray(unit_variances, float))
    return r / r.sum()
