"""Randomized response on a categorical column (Duchi, Jordan and Wainwright 2018; Warner 1965; Wang, Blocki, Li
and Jha 2017; docs/channels.md).

The category domain c_1..c_d is public (given by the user); a value outside
it is an error unless ``other=True`` maps it to an extra category. Encodings:

``kary`` (generalized randomized response, the default)
    report the true category with probability p = e^α/(e^α + d − 1), else one
    of the d − 1 others uniformly. Likelihood ratio p/((1 − p)/(d − 1)) = e^α.
``unary`` (Duchi, Jordan and Wainwright 2018: per-coordinate RR on the one-hot vector)
    keep each of the d bits with probability q = e^{α/2}/(1 + e^{α/2}), flip it
    otherwise. Two one-hot vectors differ in two bits: ratio (q/(1−q))² = e^α.
``oue`` (optimized unary encoding, Wang, Blocki, Li and Jha 2017)
    the true category's bit is 1 with probability p_in = 1/2, every other bit
    is 1 with probability p_out = 1/(e^α + 1). Two one-hot vectors differ in two
    bits: ratio p_in(1 − p_out)/((1 − p_in)p_out) = e^α. The variance of a
    frequency, 4e^α/(n(e^α − 1)²) for rare categories, does not grow with d and
    is the smallest of the unary encodings.
``warner`` (Warner 1965; d = 2)
    report the true bit with probability e^α/(1 + e^α).

``epsilon_spent()`` is the log of the largest likelihood ratio, computed from
the channel's own probabilities (nudged by ulps where float rounding of a
probability would overspend).

Released statistic ``sum``: per category, the number of rows reporting it
(kary, warner) or reporting its bit as 1 (unary, oue). Summary mode draws it
exactly in distribution from the exact counts N (docs/privacy.md): unary/oue:
Binomial(N_c, p_in) + Binomial(m − N_c, p_out) per bit; kary: per true category
Binomial(N_c, p) keep their category and the rest are spread as
Multinomial(·, uniform over the d − 1 others).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon
from .base import Option, nudge
from .categorical import CATEGORIES_OPTION, MAX_CATEGORIES, OTHER, OTHER_OPTION, CategoricalChannel

__all__ = ["RandomizedResponse", "ENCODINGS", "OTHER", "MAX_CATEGORIES"]

ENCODINGS = ("kary", "unary", "oue", "warner")
#: encodings that release one bit per category (independent bits)
BIT_ENCODINGS = ("unary", "oue")
#: Up to this many categories the k-ary summary draws one multinomial per true category (O(d²), cheap for small
#: d); above it, one uniform draw per moved row (O(rows + d)).
MULTINOMIAL_MAX_CATEGORIES = 1024


class RandomizedResponse(CategoricalChannel):
    """Randomized response over a public list of categories.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    categories : sequence of str or int
        The public category domain (no duplicates).
    encoding : {"kary", "unary", "oue", "warner"}
        See the module docstring; ``warner`` needs exactly two categories.
    other : bool
        Map values outside ``categories`` to an extra category ``"__other__"``
        instead of failing.

    Notes
    -----
    Frequency variance per category (ldp_dask.estimators.frequencies): π_c(1 − π_c)/(n(p_in − p_out)²) with
    π_c = p_out + (p_in − p_out)θ_c; for a rare category that is (e^α + d − 2)/(n(e^α − 1)²) (kary),
    e^{α/2}/(n(e^{α/2} − 1)²) (unary) and 4e^α/(n(e^α − 1)²) (oue).
    """

    name = "rr"
    options = (
        CATEGORIES_OPTION,
        Option("encoding", "generalized k-ary (kary), per-bit unary, optimized unary (oue), or Warner's "
                           "(two categories)", default="kary", choices=ENCODINGS),
        OTHER_OPTION,
    )

    def __init__(self, epsilon: float, categories: Sequence[Any], encoding: str = "kary", other: bool = False) -> None:
        self.epsilon = check_epsilon(epsilon)
        if encoding not in ENCODINGS:
            raise LdpDaskError(f"The 'encoding' parameter must be one of {', '.join(ENCODINGS)}. Got {encoding!r} instead.")
        self.encoding = encoding
        d = self.dim = self._set_categories(categories, other)
        if encoding == "warner" and d != 2:
            raise LdpDaskError(f"The 'warner' encoding needs exactly two categories; got {d}.")
        e = math.exp(self.epsilon)
        if encoding == "unary":
            h = math.exp(self.epsilon / 2)
            self.p_in = nudge(h / (1.0 + h), lambda p: 2 * math.log(p / (1 - p)), self.epsilon)
            self.p_out = 1.0 - self.p_in
        elif encoding == "oue":
            self.p_in = 0.5
            self.p_out = nudge(1.0 / (e + 1.0), lambda q: math.log((1 - q) / q), self.epsilon, toward=1.0)
        else:
            self.p_in = nudge(e / (e + d - 1), lambda p: math.log(p / ((1.0 - p) / (d - 1))), self.epsilon)
            self.p_out = (1.0 - self.p_in) / (d - 1)

    def epsilon_spent(self) -> float:
        p, q = self.p_in, self.p_out
        if self.encoding in BIT_ENCODINGS:  # two bits differ between two one-hot vectors
            return math.log(p * (1 - q) / ((1 - p) * q))
        return math.log(p / q)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "encoding": self.encoding,
                "other": self.other}

    def log_likelihood(self, z: np.ndarray, code: int) -> np.ndarray:
        z = np.asarray(z) == 1
        p, q = self.p_in, self.p_out
        if self.encoding in BIT_ENCODINGS:
            base = np.where(z, math.log(q), math.log1p(-q)).sum(axis=1)
            return base + np.where(z[:, code], math.log(p / q), math.log((1 - p) / (1 - q)))
        return np.where(z[:, code], math.log(p), math.log(q))

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        N = np.asarray(exact["counts"], dtype=np.int64)
        d = self.dim
        if self.encoding in BIT_ENCODINGS:
            ones = rng.binomial(N, self.p_in) + rng.binomial(m - N, self.p_out)
            return {"sum": ones.astype(np.float64)}
        kept = rng.binomial(N, self.p_in)
        moved = N - kept
        out = kept.astype(np.int64)
        if d > MULTINOMIAL_MAX_CATEGORIES:
            # each moved row draws its report uniformly among the d − 1 other categories: O(rows + d) in time
            # and memory, the same law as the multinomials below, which cost O(d²)
            true = np.repeat(np.arange(d), moved)
            slot = rng.integers(0, d - 1, size=len(true))
            out += np.bincount(slot + (slot >= true), minlength=d)
            return {"sum": out.astype(np.float64)}
        uniform = np.full(d - 1, 1.0 / (d - 1))
        for start in range(0, d, 1024):  # bound memory at 1024 × (d − 1) counts
            stop = min(d, start + 1024)
            spread = rng.multinomial(moved[start:stop], uniform)  # (rows, d − 1): among the *other* categories
            cats = np.arange(start, stop)[:, None]
            others = np.arange(d - 1)[None, :]
            cols = others + (others >= cats)  # slot i of true category c is category i, skipping c
            out += np.bincount(cols.ravel(), weights=spread.ravel(), minlength=d).astype(np.int64)
        return {"sum": out.astype(np.float64)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = len(x), self.dim
        if self.encoding in BIT_ENCODINGS:
            own = np.zeros((n, d), dtype=bool)
            own[np.arange(n), x] = True
            u = rng.random((n, d))
            return np.where(own, u < self.p_in, u >= 1.0 - self.p_out).astype(np.float64)
        stay = rng.random(n) < self.p_in
        other = rng.integers(0, d - 1, size=n)
        other += other >= x  # uniform over the d − 1 categories other than x
        report = np.where(stay, x, other)
        z = np.zeros((n, d))
        z[np.arange(n), report] = 1.0
        return z
