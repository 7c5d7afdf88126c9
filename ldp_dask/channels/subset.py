"""Subset selection on a categorical column (Ye and Barg 2018; Wang, Huang, Wang, Nie, Xu, Yang, Li and Qiao 2016;
docs/channels.md).

With d public categories and a subset size k (1 ≤ k < d), a row of category x reports a set Z of k categories:

    P(Z | x) = p_in / C(d − 1, k − 1)   if x ∈ Z,      P(Z | x) = (1 − p_in) / C(d − 1, k)   otherwise,

    p_in = k·e^α / (k·e^α + d − k),

that is, with probability p_in the row's own category and k − 1 others drawn uniformly, else k others. The ratio of
the two probabilities is p_in/(1 − p_in) · (d − k)/k = e^α, the largest ratio of any report's probability between
two categories: ``epsilon_spent()`` is that log, with p_in nudged down by ulps where float rounding would overspend.

Estimator: a row of category c has c in its set with probability p_in; a row of another category with
p_out = (p_in(k − 1) + (1 − p_in)k)/(d − 1). The count T_c of sets holding c gives the unbiased
θ̂_c = (T_c/n − p_out)/(p_in − p_out) with Var θ̂_c ≤ π_c(1 − π_c)/(n(p_in − p_out)²), π_c = p_out + (p_in − p_out)θ_c
(the rows are independent; the bound is Jensen's). For a rare category (θ_c → 0) and the best k this is the
smallest variance any ε-LDP frequency oracle is known to reach (Ye and Barg 2018 show it optimal up to 1 + o(1));
the optimized unary encoding, 4e^α/(n(e^α − 1)²), comes within 1% of it once the best k exceeds about 60, and k-ary
randomized response only when d is below about e^α, so subset selection matters where k is small: large ε, or few
categories (``--channel auto`` compares the three; :func:`optimal_size`).

Released statistic ``sum``: per category, the number of reports whose set holds it (length d). Summary mode draws
it exactly in law from the exact category counts N: Binomial(N_c, p_in) rows of category c hold c, and each row's
other members are a uniform subset of the d − 1 other categories, drawn by Floyd's algorithm for all rows at once
(O(k²) comparisons a row in numpy, O(k) draws and k²/2 comparisons in a fused kernel once a process has done
enough of them; k is at most :data:`MAX_SIZE`). Rows mode writes each row's k members (k columns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon
from .base import Option, nudge, use_fused
from .categorical import CATEGORIES_OPTION, OTHER_OPTION, CategoricalChannel

__all__ = ["SubsetSelection", "subset_variance", "optimal_size", "MAX_SIZE", "uniform_subsets", "floyd_picks",
           "resolve_picks"]

#: The largest subset size: a report costs O(k²) comparisons to draw, and past about 60 the optimized unary encoding
#: is within 1% of subset selection's variance anyway.
MAX_SIZE = 64
#: Rows drawn at once in summary mode (bounds the (rows, k) work arrays).
CHUNK = 1 << 20


def subset_variance(epsilon: float, d: int, k: int) -> float:
    """n·Var θ̂_c of a rare category (θ_c → 0) under subset selection of size ``k``: p_out(1 − p_out)/(p_in − p_out)²."""
    e = math.exp(epsilon)
    p_in = k * e / (k * e + d - k)
    p_out = (p_in * (k - 1) + (1 - p_in) * k) / (d - 1)
    return p_out * (1 - p_out) / (p_in - p_out) ** 2


def optimal_size(epsilon: float, d: int, limit: int = MAX_SIZE) -> int:
    """The subset size k ≤ min(d − 1, ``limit``) with the smallest rare-category variance.

    The variance is unimodal in k with its minimum near d/(e^ε + 1) (Ye and Barg 2018), so the sizes around that
    point are compared exactly."""
    top = min(d - 1, limit)
    guess = d / (math.exp(min(epsilon, 700.0)) + 1.0)
    lo, hi = max(1, math.floor(guess) - 2), max(1, min(top, math.ceil(guess) + 2))
    candidates = {1, top, *range(min(lo, top), hi + 1)}
    return min(sorted(candidates), key=lambda k: subset_variance(epsilon, d, k))


def floyd_picks(count: int, universe: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """The raw draws of Floyd's algorithm for ``count`` rows, one step a row of the result (shape (size, count),
    each step's draws contiguous): step i uniform on {0, …, universe − size + i}."""
    out = np.empty((size, count), dtype=np.int64)
    for i in range(size):
        out[i] = rng.integers(0, universe - size + i + 1, size=count)
    return out


def resolve_picks(picks: np.ndarray, universe: int) -> np.ndarray:
    """Floyd's subsets from :func:`floyd_picks`: at step i, the draw t is taken unless an earlier member holds it,
    when j = universe − size + i is taken instead (in place); returns the members, shape (count, size)."""
    size = picks.shape[0]
    for i in range(1, size):
        taken = (picks[:i] == picks[i]).any(axis=0)
        picks[i, taken] = universe - size + i
    return picks.T


def uniform_subsets(count: int, universe: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` independent uniform ``size``-subsets of {0, …, universe − 1}, one per row (shape (count, size)).

    Floyd's algorithm (Bentley and Floyd 1987) for every row at once: for j = universe − size, …, universe − 1, draw
    t uniform on {0, …, j} and take t, or j if t is already taken. Each step adds one new member, and every subset
    comes out with the same probability 1/C(universe, size)."""
    return resolve_picks(floyd_picks(count, universe, size, rng), universe)


class SubsetSelection(CategoricalChannel):
    """Subset selection over a public list of categories: a set of k categories per row.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    categories : sequence of str or int
        The public category domain (no duplicates).
    subset_size : int, optional
        k, the size of each reported set, 1 ≤ k ≤ min(d − 1, 64); default: the k of smallest rare-category
        variance (:func:`optimal_size`).
    other : bool
        Map values outside ``categories`` to an extra category ``"__other__"`` instead of failing.

    Notes
    -----
    ε spent: log(p_in/(1 − p_in) · (d − k)/k) ≤ α. Frequencies are unbiased with
    Var θ̂_c ≤ π_c(1 − π_c)/(n(p_in − p_out)²); for a rare category and the best k, the optimum of Ye and Barg
    (2018) up to 1 + o(1). Bias: none before the estimator's projection onto the simplex.
    """

    name = "subset"
    encoding = "subset"
    options = (CATEGORIES_OPTION,
               Option("subset_size", "k, the categories each row reports (default: the k of smallest variance)",
                      type=int, cli_name="subset-size"),
               OTHER_OPTION)

    def __init__(self, epsilon: float, categories: Sequence[Any], subset_size: int | None = None,
                 other: bool = False) -> None:
        self.epsilon = check_epsilon(epsilon)
        d = self.dim = self.size = self._set_categories(categories, other)
        top = min(d - 1, MAX_SIZE)
        if subset_size is None:
            subset_size = optimal_size(self.epsilon, d)
        if isinstance(subset_size, bool) or not isinstance(subset_size, (int, np.integer)) or not 1 <= subset_size <= top:
            raise LdpDaskError(f"The 'subset_size' parameter must be an integer from 1 to {top} (d − 1 = {d - 1}, "
                               f"at most {MAX_SIZE}). Got {subset_size!r} instead.")
        self.k = k = int(subset_size)
        e = math.exp(self.epsilon)
        self.p_in = nudge(k * e / (k * e + d - k), lambda p: math.log(p / (1.0 - p) * (d - k) / k), self.epsilon)
        self.p_out = (self.p_in * (k - 1) + (1.0 - self.p_in) * k) / (d - 1)

    def epsilon_spent(self) -> float:
        d, k = self.dim, self.k
        return math.log(self.p_in / (1.0 - self.p_in) * (d - k) / k)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "subset_size": self.k,
                "other": self.other}

    @property
    def view_dim(self) -> int:
        return self.k

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        members = np.asarray(z, dtype=np.float64).reshape(-1).astype(np.int64)
        return {"sum": np.bincount(members, minlength=self.dim).astype(np.float64)}

    def log_likelihood(self, z: np.ndarray, code: int) -> np.ndarray:
        d, k = self.dim, self.k
        holds = (np.asarray(z).reshape(-1, k).astype(np.int64) == code).any(axis=1)
        log_in = math.log(self.p_in) - (math.lgamma(d) - math.lgamma(k) - math.lgamma(d - k + 1))
        log_out = math.log1p(-self.p_in) - (math.lgamma(d) - math.lgamma(k + 1) - math.lgamma(d - k))
        return np.where(holds, log_in, log_out)

    # --- data ------------------------------------------------------------------------------------------------
    def _sets(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each row's reported set (shape (rows, k)): with probability p_in its own category and k − 1 of the
        d − 1 others, else k of them, uniformly."""
        x = np.asarray(x, dtype=np.int64)
        d, k = self.dim, self.k
        own = rng.random(len(x)) < self.p_in
        out = np.empty((len(x), k), dtype=np.int64)
        for rows, size in ((np.flatnonzero(own), k - 1), (np.flatnonzero(~own), k)):
            members = uniform_subsets(len(rows), d - 1, size, rng)
            out[rows, :size] = members + (members >= x[rows, None])  # skip the row's own category
        out[own, k - 1] = x[own]
        return out

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        counts = np.asarray(exact["counts"], dtype=np.int64)
        d, k = self.dim, self.k
        out = np.zeros(d, dtype=np.int64)
        codes = np.repeat(np.arange(d), counts)
        for start in range(0, len(codes), CHUNK):
            x = codes[start:start + CHUNK]
            own = rng.random(len(x)) < self.p_in
            out += np.bincount(x[own], minlength=d)
            for rows, size in ((x[own], k - 1), (x[~own], k)):
                picks = floyd_picks(len(rows), d - 1, size, rng)
                if use_fused(len(rows) * size * size):  # O(size²) a row in numpy's passes, O(size) in the kernel's
                    from .._kernels import floyd_counts

                    floyd_counts(picks, d - 1, rows, out)
                else:
                    members = resolve_picks(picks, d - 1)
                    out += np.bincount((members + (members >= rows[:, None])).ravel(), minlength=d)
        return {"sum": out.astype(np.float64)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._sets(x, rng).astype(np.float64)
