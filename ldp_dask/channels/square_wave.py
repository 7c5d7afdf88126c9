"""Square Wave on a numeric column (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić 2020; docs/channels.md).

The public domain [lo, hi] is cut into d equal cells (default 1024); a value x falls in cell i = ⌊d·u⌋,
u = (x − lo)/(hi − lo) (hi goes to cell d − 1). A row reports one index j ∈ {0, …, D − 1}, D = d + 2B, which stands
for the report value u* = (j − B + 1/2)/d ∈ (−b, 1 + b) of the paper: the discrete square wave of half-width
B = round(b·d) cells around the value's cell, with the paper's mutual-information-maximising half-width

    b = (α e^α − e^α + 1) / (2 e^α (e^α − 1 − α))   (a fraction of the domain).

A row in cell i reports

    P(j | i) = p   for i ≤ j ≤ i + 2B (its band of 2B + 1 indices),      P(j | i) = q   for the other d − 1,
    p = e^α q,   q = 1/((2B + 1) e^α + d − 1).

Privacy: every index has probability p or q under every input, so the likelihood ratio of any report between two
values is at most p/q = e^α. :meth:`SquareWave.epsilon_spent` computes it from the floats the sampler uses (the band
probability is nudged down by ulps where rounding would overspend). Rounding the value to its cell is a function of
the value alone, so it costs nothing; it moves the value by less than one cell, (hi − lo)/d, and the estimator
targets the cells' probabilities.

Released statistic ``sum``: the D report counts. Given a block's cell counts N, their exact law is a sum of
Multinomial(N_i, P(· | i)), one per cell. Summary mode draws it from the split P(j | i) = q + (p − q)·1[j in band(i)]:
each row reports uniformly on all D indices with probability Dq, otherwise uniformly on its band, so the counts are
Multinomial(U, 1/D) plus, for every cell, Multinomial(R_i, 1/(2B + 1)) shifted onto its band, with
R_i ~ Binomial(N_i, 1 − Dq) and U = m − Σ R_i. The band part is drawn per row (O(Σ R_i)) when the block has fewer
rows than d·(2B + 1) cell × offset pairs, else as one multinomial per cell (O(d·B)): the same law either way.

The estimate (:func:`ldp_dask.estimators.square_wave_density`) is expectation–maximisation with smoothing (EMS) on
the driver; quantile intervals come from bounds on the CDF that hold for every distribution (docs/estimators.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_epsilon, check_int
from .base import NumericChannel, Option, grid_counts, grid_index, nudge

__all__ = ["SquareWave", "wave_half_width", "DEFAULT_CELLS", "MAX_CELLS"]

DEFAULT_CELLS = 1024
MAX_CELLS = 1 << 16


def wave_half_width(epsilon: float) -> float:
    """The paper's half-width b(α) = (α e^α − e^α + 1)/(2 e^α (e^α − 1 − α)), as a fraction of the domain
    (it tends to 1/2 as α → 0 and to 0 as α grows)."""
    e = math.exp(epsilon)
    den = 2 * e * (math.expm1(epsilon) - epsilon)
    if den <= 0:  # α so small that e^α − 1 − α underflows: the limit
        return 0.5
    return (epsilon * e - e + 1) / den


class SquareWave(NumericChannel):
    """One index per row from the discrete square wave around the value's cell.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    domain : (float, float)
        Public domain ``(lo, hi)`` with lo < hi.
    cells : int
        Number d of equal input cells, 2 ≤ d ≤ 2^16 (default 1024, as in Li et al. 2020).

    Notes
    -----
    ε spent: log(p/q) ≤ α (module docstring). Each row's view is one index out of D = d + 2B; the released sums are
    the D report counts, E[count_j]/n = q + (p − q)·(mass of the cells whose band holds j). The EMS estimate is
    biased by its smoothing (it trades variance for bias); its error is measured in ``benchmarks/distributions.py``.
    """

    name = "square-wave"
    options = (
        Option("cells", "number d of equal input cells of the square wave (its reports cover d + 2B indices)",
               type=int, default=DEFAULT_CELLS),
    )

    def __init__(self, epsilon: float, domain: tuple[float, float], cells: int = DEFAULT_CELLS) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.cells = check_int(cells, "cells", 2, MAX_CELLS)
        self._set_domain(domain)
        d = self.cells
        self.half_width = wave_half_width(self.epsilon)
        self.band = round(self.half_width * d)  # B
        w = 2 * self.band + 1
        self.dim = self.size = d + 2 * self.band
        e = math.exp(self.epsilon)
        #: probability that a row reports inside its band (2B + 1 indices) rather than on the other d − 1
        self.inside = nudge(w * e / (w * e + d - 1), lambda s: self._ratio(s), self.epsilon)

    def _ratio(self, inside: float) -> float:
        w, d = 2 * self.band + 1, self.cells
        return math.log((inside / w) / ((1.0 - inside) / (d - 1)))

    def epsilon_spent(self) -> float:
        return self._ratio(self.inside)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "cells": self.cells}

    @property
    def probabilities(self) -> tuple[float, float]:
        """(p, q): the probability of one index inside a row's band and of one outside it."""
        return self.inside / (2 * self.band + 1), (1.0 - self.inside) / (self.cells - 1)

    @property
    def edges(self) -> np.ndarray:
        """The d + 1 cell edges."""
        lo, hi = self.domain
        return np.linspace(lo, hi, self.cells + 1)

    @property
    def view_dim(self) -> int:
        return 1

    # --- data -------------------------------------------------------------------------------------------------
    @property
    def integer_sums(self) -> bool:
        return True  # cell counts

    def cell_index(self, x: np.ndarray) -> np.ndarray:
        """Cell of each value (already inside the domain); ``hi`` goes to cell d − 1."""
        return grid_index(x, self.domain, self.cells)

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"counts": grid_counts(x, self.domain, self.cells)}

    def _reports(self, cells: np.ndarray, inside: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One index per row: uniform on the row's band where ``inside``, else uniform on the other d − 1."""
        w = 2 * self.band + 1
        j = rng.integers(0, self.cells - 1, size=len(cells))
        off = np.where(j < cells, j, j + w)
        return np.where(inside, cells + rng.integers(0, w, size=len(cells)), off)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        i = self.cell_index(x)
        inside = rng.random(len(i)) < self.inside
        return self._reports(i, inside, rng).astype(np.float64)[:, None]

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        N = np.asarray(exact["counts"], dtype=np.int64)
        d, w, D = self.cells, 2 * self.band + 1, self.size
        q = (1.0 - self.inside) / (d - 1)
        R = rng.binomial(N, max(0.0, 1.0 - D * q))  # rows reporting on their band (uniformly), per cell
        out = rng.multinomial(int(N.sum() - R.sum()), np.full(D, 1.0 / D)).astype(np.float64)
        if m < d * w:
            j = np.repeat(np.arange(d), R) + rng.integers(0, w, size=int(R.sum()))
            out += np.bincount(j, minlength=D)
        else:
            spread = rng.multinomial(R, np.full(w, 1.0 / w))  # (d, w): cell i's band counts at offsets 0..2B
            idx = np.arange(d)[:, None] + np.arange(w)[None, :]
            out += np.bincount(idx.ravel(), weights=spread.ravel(), minlength=D)
        return {"sum": out}

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        j = np.asarray(z, dtype=np.float64).reshape(-1).astype(np.int64)
        return {"sum": np.bincount(j, minlength=self.size).astype(np.float64)}

    # --- the audit's statistic ------------------------------------------------------------------------------
    def log_likelihood(self, z: np.ndarray, x: Any) -> np.ndarray:
        """log P(report z | value x)."""
        j = np.asarray(z).reshape(-1).astype(np.int64)
        i = int(self.cell_index(self.prepare(np.array([x], dtype=np.float64))[0])[0])
        p, q = self.probabilities
        return np.where((j >= i) & (j <= i + 2 * self.band), math.log(p), math.log(q))

    def worst_pair(self) -> tuple[float, float]:
        return self.domain
