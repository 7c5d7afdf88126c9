"""Frequencies of candidate values from a count-mean sketch (docs/estimators.md; the channel:
:mod:`ldp_dask.channels.sketch`).

For a candidate v and each group j of the sketch (n_j rows, counts T_j at bucket H_j(v)):

    θ̂_j = (T_j/n_j − q)/(p − q),      f̂_j = (m·θ̂_j − 1)/(m − 1),      f̂ = Σ_j (n_j/n) f̂_j,

unbiased over hash functions that behave as random (a collision has probability 1/m). The groups hold disjoint rows
and independent hash functions, so the f̂_j are independent: the standard error is read from their spread,
se² = h/(h − 1) · Σ_j (n_j/n)² (f̂_j − f̂)², which counts the privacy noise and the collisions alike, and the
interval is Student's t on h − 1 degrees of freedom. Shown shares are possible ones: in [0, 1], and summing to at
most 1 over the (distinct) candidates (projected onto that set when the clipped estimates would sum above 1); the
interval is clipped to [0, 1] and holds the share shown; the unbiased estimate is kept as ``raw``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import t as student_t

from .._validation import LdpDaskError, check_probability
from ..channels.sketch import CountMeanSketch, value_hashes
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .frequencies import FrequencyEstimate
from .histogram import project_simplex

__all__ = ["sketch_frequencies", "group_estimates", "item_estimates", "item_buckets", "spread_intervals"]


def group_estimates(summary: Summary, candidates: Any) -> np.ndarray:
    """f̂_j of each candidate in each group: shape (candidates, h)."""
    ch: CountMeanSketch = summary.channel  # type: ignore[assignment]
    return item_estimates(summary, value_hashes(candidates, ch.salt), np.arange(ch.groups))


def item_buckets(ch: CountMeanSketch, hashes: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The bucket of each item (64-bit hash) in each of ``groups``: shape (items, groups)."""
    k = len(groups)
    return ch.buckets(np.repeat(hashes, k), np.tile(groups, len(hashes))).reshape(-1, k)


def item_estimates(summary: Summary, hashes: np.ndarray, groups: np.ndarray,
                   buckets: np.ndarray | None = None) -> np.ndarray:
    """f̂_j of the items of 64-bit hashes ``hashes`` in each of ``groups``: shape (items, groups) (``buckets``: their
    :func:`item_buckets`, when the caller has them)."""
    ch: CountMeanSketch = summary.channel  # type: ignore[assignment]
    m = ch.width
    if buckets is None:
        buckets = item_buckets(ch, hashes, groups)
    cells = groups[None, :] * m + buckets
    counts = np.asarray(summary.sums["sum"], dtype=np.float64)[cells]
    rows = np.asarray(summary.sums["rows"], dtype=np.float64)[groups]
    p, q = ch.report_probabilities
    theta = (counts / np.maximum(rows, 1.0)[None, :] - q) / (p - q)
    return (m * theta - 1.0) / (m - 1.0)


def sketch_frequencies(summary: Summary | str, candidates: Any = None, level: float = 0.95) -> FrequencyEstimate:
    """Frequencies of ``candidates`` (distinct strings or integers) in a count-mean sketch, with intervals
    (module docstring)."""
    s = read_summary(summary)
    if not isinstance(s.channel, CountMeanSketch):
        raise LdpDaskError(f"sketch_frequencies needs a summary of the 'sketch' channel; got {s.channel.name!r}.")
    if candidates is None or isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__len__"):
        raise LdpDaskError("A sketch estimates the values you ask about: pass candidates=[...] (strings or "
                           "integers), e.g. ldp_dask.estimate(summary, candidates=['a', 'b']).")
    labels = list(candidates)
    if not labels:
        raise LdpDaskError("The 'candidates' parameter must not be empty.")
    level = check_probability(level, "level")
    if s.n == 0:
        raise LdpDaskError("The sketch holds no rows: no value has a frequency to estimate.")
    f_j = group_estimates(s, labels)
    if len({int(v) for v in value_hashes(labels, s.channel.salt)}) < len(labels):
        raise LdpDaskError("The 'candidates' parameter has duplicates (values equal as text count as one).")
    raw, se, est, low, high = spread_intervals(f_j, np.asarray(s.sums["rows"], dtype=np.float64), level)
    return FrequencyEstimate(labels=labels, frequencies=est, se=se, ci_low=low, ci_high=high, raw=raw,
                             method="sketch", n=s.n, epsilon=s.channel.epsilon, level=level,
                             info={**summary_info(s), "encoding": "sketch", "hashes": len(f_j[0]),
                                   "width": s.channel.width})


def spread_intervals(f_j: np.ndarray, rows: np.ndarray, level: float,
                     use: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """From group estimates ``f_j`` (candidates × groups) over groups of ``rows`` rows (those marked in ``use``,
    candidates × groups, when given): the unbiased estimate (row-weighted mean), its standard error from the
    groups' spread, the shown shares (clipped to [0, 1], projected onto the simplex when they would sum above 1)
    and the Student t interval (h − 1 degrees of freedom for h groups used) clipped to [0, 1] and holding the shown
    share."""
    mask = np.ones(f_j.shape, dtype=bool) if use is None else np.asarray(use, dtype=bool)
    wr = rows[None, :] * mask
    w = wr / wr.sum(axis=1, keepdims=True)
    raw = (f_j * w).sum(axis=1)
    h = mask.sum(axis=1)
    se = np.sqrt(h / (h - 1) * ((f_j - raw[:, None]) ** 2 * w**2).sum(axis=1))
    half = student_t.ppf(0.5 + level / 2, h - 1) * se
    est = np.clip(raw, 0.0, 1.0)
    if est.sum() > 1.0:  # shares of distinct values sum to at most 1
        est = project_simplex(raw)
    low = np.minimum(np.clip(raw - half, 0.0, 1.0), est)
    high = np.maximum(np.clip(raw + half, 0.0, 1.0), est)
    return raw, se, est, low, high
