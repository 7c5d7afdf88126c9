"""Shared statistical checks of the tests (imported by name: the tests directory is on sys.path)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def same_discrete_law(a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
    """Whether two samples of a discrete quantity pass a chi-square test of one law at level ``alpha``, on their
    pooled support (values seen fewer than 10 times in all are dropped; fewer than two values left: passes)."""
    vals = np.union1d(a, b)
    ca = np.array([np.count_nonzero(a == v) for v in vals])
    cb = np.array([np.count_nonzero(b == v) for v in vals])
    keep = (ca + cb) >= 10
    return bool(keep.sum() < 2 or stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1] > alpha)
