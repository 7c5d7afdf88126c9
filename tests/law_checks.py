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


def threshold_loss(llr_a: np.ndarray, llr_b: np.ndarray, alpha: float) -> float:
    """A lower bound on the privacy loss between two inputs from the log-likelihood ratios of their views (equal
    counts): every event {LLR ≥ t} and its complement, each bounded by one-sided Clopper–Pearson intervals,
    Bonferroni-split at ``alpha`` over the thresholds."""
    from ldp_dask.audit import event_loss_lower_bound

    rows = len(llr_a)
    cuts = np.unique(np.round(np.r_[llr_a, llr_b], 9))
    each = alpha / (2 * len(cuts))
    best = 0.0
    for c in cuts:
        ka, kb = int(np.sum(llr_a >= c - 1e-9)), int(np.sum(llr_b >= c - 1e-9))
        best = max(best, event_loss_lower_bound(ka, kb, rows, each),
                   event_loss_lower_bound(rows - ka, rows - kb, rows, each))
    return best
