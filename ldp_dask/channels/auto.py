"""``--channel auto``: the channel with the smallest predicted error for the column's ε and domain
(docs/channels.md, "Choosing a channel").

Predictions come from the channels' closed-form variances, computed from public quantities only (ε, the number of
categories d, the domain), so the choice spends nothing and reveals nothing about the data:

* categorical columns (frequencies): n·Var θ̂_c for a rare category (θ_c → 0), the regime that decides how many
  categories can be told apart (Wang, Blocki, Li and Jha 2017): k-ary randomized response (e^ε + d − 2)/(e^ε − 1)²,
  optimized unary encoding 4e^ε/(e^ε − 1)², subset selection at its best size k (Ye and Barg 2018;
  :func:`~ldp_dask.channels.subset.subset_variance`), Hadamard response (e^ε + 1)²/(e^ε − 1)². Subset selection is
  the smallest of all, but draws O(k) integers a row where the other two draw O(d) per partition, so it is chosen
  at k ≤ 16 when it is more than 1% below both (where its best k is small: large ε, or few categories). Hadamard response is exactly
  1 more than the optimized unary encoding ((e^ε + 1)² − 4e^ε = (e^ε − 1)²), so it is chosen only where a row's view
  must stay small: rows mode with many categories, where it writes one index per row instead of d bits — unless
  subset selection, whose view is its k ≤ 16 members, is smaller in variance.
* numeric columns, target ``mean``: the worst case over the value of the noise variance of one view, in units of
  the half-width of the domain: the Laplace mean 8/ε² against Piecewise, Duchi's and the Hybrid mechanism
  (:meth:`HybridMean.row_variance`).
* numeric columns, target ``distribution`` (the default for numeric columns): the Square Wave channel. Its estimate
  (EMS) is smoothed, so no closed-form variance predicts its error; the choice rests on the measured W1 and decile
  errors of every local channel in ``benchmarks/distributions.py`` (docs/channels.md, "Choosing a channel").

The chosen channel carries ``choice`` — what was compared and why — which the release records in its summary.
"""

from __future__ import annotations

import math
from typing import Any

from .._validation import LdpDaskError, check_epsilon
from .base import Channel
from .categorical import check_categories
from .hadamard import HadamardResponse
from .hybrid import MECHANISMS, HybridMean
from .rr import RandomizedResponse
from .square_wave import SquareWave
from .subset import SubsetSelection, optimal_size, subset_variance

__all__ = ["AUTO", "TARGETS", "choose_channel", "frequency_variances", "mean_variances"]

AUTO = "auto"
#: what ``auto`` optimises for: category frequencies (categorical columns), the distribution (densities, CDFs,
#: quantiles; the default for numeric columns) or the mean
TARGETS = ("frequencies", "distribution", "mean")
#: above this many categories, a rows-mode release uses Hadamard response (one index per row, not d bits)
ROWS_HADAMARD_CATEGORIES = 64
#: subset selection is chosen over the O(d) encodings when its variance is below theirs by more than this factor
SUBSET_GAIN = 1.01
#: the largest subset auto chooses: a summary draws O(k) integers and k²/2 comparisons a row (4·10^6 rows/s a core
#: at k = 16, benchmarks/huge_domains.py), and with k ≤ 16 the pick stays within 1.05 of the optimum over every
#: d ≤ 2^16 and ε in [0.1, 10] (docs/channels.md); in rows mode, the most columns it writes in place of Hadamard
#: response's one
AUTO_SUBSET_SIZE = 16


def frequency_variances(epsilon: float, d: int) -> dict[str, float]:
    """n·Var θ̂_c of a rare category for each frequency channel (k-ary, optimized unary, subset selection at its best
    size up to :data:`AUTO_SUBSET_SIZE`, Hadamard)."""
    e = math.exp(epsilon)
    return {"rr/kary": (e + d - 2) / (e - 1) ** 2, "rr/oue": 4 * e / (e - 1) ** 2,
            "subset": subset_variance(epsilon, d, optimal_size(epsilon, d, AUTO_SUBSET_SIZE)),
            "hadamard": (e + 1) ** 2 / (e - 1) ** 2}


def mean_variances(epsilon: float) -> dict[str, float]:
    """Worst-case noise variance of one view, in half-widths² of the domain, for each mean channel."""
    out = {"mean": 8 / epsilon**2}
    for m in MECHANISMS:
        out[f"hybrid-mean/{m}"] = HybridMean(epsilon, (-1.0, 1.0), mechanism=m, noise="continuous").worst_variance()
    return out


def choose_channel(epsilon: float, domain: Any = None, n: int | None = None, *, categories: Any = None,
                   other: bool = False, target: str | None = None, mode: str = "summary",
                   noise: str | None = None) -> Channel:
    """The channel with the smallest predicted error (see the module docstring), with its ``choice`` record.

    Parameters
    ----------
    epsilon : float
        ε per row.
    domain : (float, float), optional
        The public domain of a numeric column (target ``mean``).
    n : int, optional
        The public row count (recorded; the predictions scale as 1/n for every candidate alike).
    categories : sequence, optional
        The public categories of a categorical column (target ``frequencies``).
    other : bool
        Map values outside the categories to ``"__other__"``.
    target : {"frequencies", "distribution", "mean"}, optional
        Defaults to ``frequencies`` with categories and to ``distribution`` with a domain.
    mode : {"summary", "rows"}
        A rows-mode release of more than 64 categories uses Hadamard response, whose row view is one index.
    noise : {"lattice", "continuous"}, optional
        The noise mode of a mean channel (default lattice); the Square Wave's reports are indices and take none.
    """
    epsilon = check_epsilon(epsilon)
    if categories is not None:
        if domain is not None:
            raise LdpDaskError("--channel auto takes either categories (a categorical column) or a domain "
                               "(a numeric column), not both.")
        if target not in (None, "frequencies"):
            raise LdpDaskError(f"The 'target' of a categorical column is 'frequencies'. Got {target!r} instead.")
        cats = check_categories(categories)
        d = len(cats) + bool(other)
        pred = frequency_variances(epsilon, d)
        size = optimal_size(epsilon, d, AUTO_SUBSET_SIZE)
        if mode == "rows" and d > ROWS_HADAMARD_CATEGORIES:
            if pred["subset"] < pred["hadamard"]:
                best, why = "subset", (f"rows mode with {d} categories: {size} members per row instead of {d} bits, "
                                       f"at {pred['subset'] / min(pred.values()):.2f}× the smallest variance")
            else:
                best, why = "hadamard", (f"rows mode with {d} categories: one index per row instead of {d} bits, at "
                                         f"{pred['hadamard'] / min(pred.values()):.2f}× the smallest variance")
        else:
            best = min(("rr/kary", "rr/oue"), key=lambda k: pred[k])
            why = "smallest variance of a rare category's frequency"
            if pred["subset"] * SUBSET_GAIN < pred[best]:
                best, why = "subset", (f"smallest variance of a rare category's frequency, {pred[best] / pred['subset']:.3f}× "
                                       f"below {best}'s")
        ch: Channel = (HadamardResponse(epsilon, cats, other=other) if best == "hadamard" else
                       SubsetSelection(epsilon, cats, subset_size=size, other=other) if best == "subset" else
                       RandomizedResponse(epsilon, cats, encoding=best.split("/")[1], other=other))
        ch.choice = {"target": "frequencies", "chosen": best, "criterion": why, "categories": d, "n": n,  # type: ignore[attr-defined]
                     "predicted_n_var": pred}
        return ch
    if domain is None:
        raise LdpDaskError("--channel auto needs the public categories (a categorical column) or a domain "
                           "(a numeric column).")
    if target in (None, "distribution"):
        if noise is not None:
            raise LdpDaskError("--noise does not apply to the square-wave channel that --channel auto chooses for a "
                               "distribution (its reports are indices).")
        ch = SquareWave(epsilon, domain)
        ch.choice = {"target": "distribution", "chosen": "square-wave", "n": n,  # type: ignore[attr-defined]
                     "criterion": "smallest measured W1 and decile errors of the local channels "
                                  "(benchmarks/distributions.py; a smoothed estimate has no closed-form variance)"}
        return ch
    if target != "mean":
        raise LdpDaskError(f"The 'target' of a numeric column is 'distribution' or 'mean'. Got {target!r} instead.")
    from .mean import LaplaceMean

    pred = mean_variances(epsilon)
    best = min(pred, key=lambda k: pred[k])
    opts = {} if noise is None else {"noise": noise}
    chosen: Any = None
    if best != "mean":
        try:
            chosen = HybridMean(epsilon, domain, mechanism=best.split("/")[1], **opts)
        except LdpDaskError:  # views too wide for exact sums of their squares (a huge domain): the Laplace mean
            pred = {"mean": pred["mean"]}
            best = "mean"
    ch = chosen if chosen is not None else LaplaceMean(epsilon, domain, **opts)
    ch.choice = {"target": "mean", "chosen": best, "n": n,  # type: ignore[union-attr]
                 "criterion": "smallest worst-case noise variance of one view", "predicted_var_half_widths": pred}
    return ch
