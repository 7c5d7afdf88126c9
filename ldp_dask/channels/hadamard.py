"""Hadamard response on a categorical column (Acharya, Sun and Zhang 2019; docs/channels.md).

With d public categories, let K be the smallest power of two above d and H the K × K Sylvester–Hadamard matrix,
H[r, j] = (−1)^{popcount(r & j)}. Category c owns row r = c + 1 (row 0, all ones, is skipped) and its half of the
indices, C_c = {j : H[r, j] = +1}, |C_c| = K/2. A row of category c reports one index j ∈ {0, …, K − 1}:

    P(j | c) = 2s/K   for j ∈ C_c,      P(j | c) = 2(1 − s)/K   otherwise,      s = e^α/(e^α + 1).

Privacy: the likelihood ratio of any report between two categories is at most s/(1 − s) = e^α; ``epsilon_spent()``
is log(s/(1 − s)) with s nudged down by ulps where float rounding would overspend.

Estimator: two distinct rows of H agree on exactly K/2 indices, half of them in C_c, so a row of another category
lands in C_c with probability exactly 1/2, and one of category c with probability s. The count T_c of reports in C_c
is read off the K released report counts S by one fast Walsh–Hadamard transform, T = (n + H·S)/2 (O(K log K)), and
θ̂_c = (T_c/n − 1/2)/(s − 1/2) is unbiased with

    Var θ̂_c = π_c(1 − π_c)/(n(s − 1/2)²) ≤ (e^α + 1)²/(n(e^α − 1)²),   π_c = 1/2 + (s − 1/2)θ_c.

The variance does not grow with d, and each row reports log₂K bits (one index), against d bits for unary encodings.

Released statistic ``sum``: the number of reports of each index j (length K). Summary mode draws it exactly in law
from the exact category counts N: Binomial(N_c, s) rows of category c report inside C_c and the others outside,
uniformly; up to 2^20 category × index cells this is one multinomial per category and half, above it one uniform
index per row, made to land in the right half by flipping the lowest set bit of r (a bijection between the halves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import check_epsilon
from .base import nudge
from .categorical import CATEGORIES_OPTION, OTHER_OPTION, CategoricalChannel

__all__ = ["HadamardResponse", "fwht", "hadamard_size"]

#: Up to this many category × index cells the summary draws one multinomial per category and half; above it, one
#: uniform index per row (O(rows + K)).
MULTINOMIAL_MAX_CELLS = 1 << 20


def hadamard_size(d: int) -> int:
    """K, the smallest power of two strictly above ``d`` (rows 1..d of H_K are the categories' rows)."""
    return 1 << int(d).bit_length()


def fwht(v: np.ndarray) -> np.ndarray:
    """H·v for the Sylvester–Hadamard matrix of order len(v) (a power of two), in O(K log K)."""
    a = np.array(v, dtype=np.float64)
    k = len(a)
    h = 1
    while h < k:
        b = a.reshape(-1, 2, h)
        a = np.stack((b[:, 0] + b[:, 1], b[:, 0] - b[:, 1]), axis=1).reshape(k)
        h *= 2
    return a


def _odd(j: np.ndarray, r: np.ndarray | int) -> np.ndarray:
    """Whether H[r, j] = −1, i.e. popcount(r & j) is odd."""
    return (np.bitwise_count(np.bitwise_and(j, r)) & 1).astype(bool)


class HadamardResponse(CategoricalChannel):
    """Hadamard response over a public list of categories: one index in {0, …, K − 1} per row.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    categories : sequence of str or int
        The public category domain (no duplicates).
    other : bool
        Map values outside ``categories`` to an extra category ``"__other__"`` instead of failing.

    Notes
    -----
    ε spent: log(s/(1 − s)) ≤ α. Frequencies are unbiased with Var θ̂_c = π_c(1 − π_c)/(n(s − 1/2)²), at most
    (e^α + 1)²/(n(e^α − 1)²) whatever d (Acharya, Sun and Zhang 2019). Rows mode writes each row's index (one
    column, log₂K bits of information); summary mode releases the K report counts.
    """

    name = "hadamard"
    encoding = "hadamard"
    options = (CATEGORIES_OPTION, OTHER_OPTION)

    def __init__(self, epsilon: float, categories: Sequence[Any], other: bool = False) -> None:
        self.epsilon = check_epsilon(epsilon)
        d = self._set_categories(categories, other)
        self.dim = self.size = hadamard_size(d)
        e = math.exp(self.epsilon)
        self.inside = nudge(e / (e + 1.0), lambda s: math.log(s / (1.0 - s)), self.epsilon)

    def epsilon_spent(self) -> float:
        return math.log(self.inside / (1.0 - self.inside))

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "other": self.other}

    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(P(report in C_c | c), P(report in C_c | another category)) = (s, 1/2)."""
        return self.inside, 0.5

    def index_columns(self) -> dict[str, dict[str, list[Any]]]:
        return {}  # the K report counts are indexed by Hadamard index, not by category

    def support_counts(self, sums: np.ndarray) -> np.ndarray:
        s = np.asarray(sums, dtype=np.float64)
        return (s.sum() + fwht(s)[1 : len(self.labels) + 1]) / 2.0

    @property
    def view_dim(self) -> int:
        return 1

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        j = np.asarray(z, dtype=np.float64).reshape(-1).astype(np.int64)
        return {"sum": np.bincount(j, minlength=self.size).astype(np.float64)}

    def log_likelihood(self, z: np.ndarray, code: int) -> np.ndarray:
        j = np.asarray(z).reshape(-1).astype(np.int64)
        k = self.size
        return np.where(_odd(j, code + 1), math.log(2 * (1 - self.inside) / k), math.log(2 * self.inside / k))

    # --- data ------------------------------------------------------------------------------------------------
    def _indices(self, rows: np.ndarray, inside: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One uniform index per row in C (``inside``) or its complement, for Hadamard rows ``rows``."""
        j = rng.integers(0, self.size, size=len(rows))
        flip = _odd(j, rows) == inside  # in the wrong half: move across by the row's lowest set bit
        return np.where(flip, j ^ (rows & -rows), j)

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        N = np.asarray(exact["counts"], dtype=np.int64)
        d, k = len(N), self.size
        kept = rng.binomial(N, self.inside)
        moved = N - kept
        rows = np.arange(1, d + 1)
        if d * k > MULTINOMIAL_MAX_CELLS:
            r = np.concatenate([np.repeat(rows, kept), np.repeat(rows, moved)])
            inside = np.arange(len(r)) < kept.sum()
            return {"sum": np.bincount(self._indices(r, inside, rng), minlength=k).astype(np.float64)}
        odd = _odd(np.arange(k)[None, :], rows[:, None])  # (d, K): H[r, j] = −1
        halves = np.argsort(odd, axis=1, kind="stable")  # each row: C_c's indices, then the complement's
        half = np.full(k // 2, 2.0 / k)
        spread = np.concatenate([rng.multinomial(kept, half), rng.multinomial(moved, half)], axis=1)
        return {"sum": np.bincount(halves.ravel(), weights=spread.ravel(), minlength=k).astype(np.float64)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(x)
        inside = rng.random(n) < self.inside
        return self._indices(np.asarray(x, dtype=np.int64) + 1, inside, rng).astype(np.float64)[:, None]
