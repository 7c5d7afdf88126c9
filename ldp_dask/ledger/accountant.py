"""The composition of copies of a few (ε, δ)-DP mechanisms: a privacy-loss distribution that is exact per kind of
mechanism and discretized once, for the sum (docs/privacy.md, "Composed in the ledger").

An (ε, δ)-DP mechanism is dominated by the pair whose privacy loss is +ε with probability (1 − δ)e^ε/(1 + e^ε), −ε
with probability (1 − δ)/(1 + e^ε) and +∞ with probability δ (Kairouz, Oh and Viswanath 2015), and the adaptive
composition of mechanisms by the sum of their pairs' independent losses. c copies of one pair have a binomial loss,
ε(2B − c) with B ~ Bin(c, e^ε/(1 + e^ε)), +∞ with probability 1 − (1 − δ)^c. A dataset's releases are G kinds of
pairs with c_j copies each, so its composed loss is the sum of G independent binomial losses:

* each kind's binomial is computed exactly (log-gamma), its probabilities below 10⁻³⁰ folded pessimistically (the
  lower tail onto the lowest loss kept, the upper tail to +∞);
* each kind's losses are rounded *up* onto one grid of step h, once per kind (not once per copy, as composing the
  copies one by one on a grid would: at 10^5 releases that rounding overstated ε by 9%), with h the span of the
  kinds' kept losses over 2^13 points, so the composed ε is at most G·h above the exact one (at 10^5 releases in
  two kinds, 0.016 above 23.72: 0.07%);
* the kinds are convolved with :func:`scipy.signal.fftconvolve`; each convolution's rounding is bounded by
  8·u·N·log₂N·‖a‖₂‖b‖₂ in total mass (u the double's unit roundoff, N the output's length), which is added to the
  mass at +∞;
* the hockey-stick divergence δ(ε) = P(L = ∞) + E[(1 − e^{ε − L})₊] of the grid distribution is computed for every
  grid point at once by a suffix sum and a first-order recurrence (:func:`scipy.signal.lfilter`), and the smallest ε
  with δ(ε) ≤ the target is solved in closed form between two grid points.

The result is a valid upper bound on the smallest ε of the composition (never below it: every step is pessimistic),
in O(Σ c_j + 2^13 log 2^13) time whatever the number of copies: 1.1 ms at 10^5 releases in two kinds, where Google's
``dp-accounting`` (which the tests use as a reference) took 50–180 ms and its per-copy rounding stated 25.97.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["grouped_epsilon", "grid_distribution", "epsilon_for_delta", "POINTS"]

#: grid points over the span of the kinds' kept losses
POINTS = 1 << 13
#: a kind's binomial probabilities below this are folded (pessimistically)
_TAIL = 1e-30
_UNIT_ROUNDOFF = 2.0**-53


def _kind(epsilon: float, delta: float, copies: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The losses and probabilities of ``copies`` copies of the (``epsilon``, ``delta``) pair, the tails folded, and
    their mass at +∞."""
    from scipy.special import gammaln  # scipy.stats costs 0.8 s to import

    survive = math.exp(copies * math.log1p(-delta))
    if epsilon == 0:
        return np.zeros(1), np.array([survive]), 1.0 - survive
    b = np.arange(copies + 1)
    p = 1.0 / (1.0 + math.exp(-epsilon))
    log_pmf = (gammaln(copies + 1) - gammaln(b + 1) - gammaln(copies - b + 1) + b * math.log(p)
               + (copies - b) * math.log1p(-p))
    kept = np.flatnonzero(log_pmf >= math.log(_TAIL))
    lo, hi = int(kept[0]), int(kept[-1])
    pmf = np.exp(log_pmf[lo:hi + 1])
    pmf[0] += float(np.exp(log_pmf[:lo]).sum())  # the lower tail moves up: a larger loss is the worse case
    above = float(np.exp(log_pmf[hi + 1:]).sum())
    return epsilon * (2.0 * b[lo:hi + 1] - copies), pmf * survive, 1.0 - survive * (1.0 - above)


def grid_distribution(groups: Mapping[tuple[float, float], int]) -> tuple[np.ndarray, int, float, float]:
    """The composed loss of ``groups`` ({(ε, δ): copies}) on a grid, pessimistically: ``(pmf, base, step,
    infinity)``, the finite losses being ``(base + i)·step`` with probability ``pmf[i]``."""
    from scipy.signal import fftconvolve

    kinds = [_kind(float(e), float(d), int(c)) for (e, d), c in sorted(groups.items()) if c > 0]
    span = sum(float(loss[-1] - loss[0]) for loss, _, _ in kinds)
    step = span / POINTS if span > 0 else 1.0
    pmf, base, finite = None, 0, 1.0
    for loss, mass, infinity in kinds:
        index = np.ceil(loss / step - 1e-9).astype(np.int64)  # rounded up; −1e-9: an exact multiple stays put
        dense = np.bincount(index - index[0], weights=mass)
        base += int(index[0])
        finite *= 1.0 - infinity
        if pmf is None:
            pmf = dense
            continue
        out = fftconvolve(pmf, dense)
        n = len(out)
        norms = math.sqrt(float(np.vdot(pmf, pmf)) * float(np.vdot(dense, dense)))
        finite *= 1.0 - 8.0 * _UNIT_ROUNDOFF * n * math.log2(n) * norms  # the convolution's rounding, to +∞
        pmf = np.clip(out, 0.0, None)
    assert pmf is not None, "no mechanism to compose"
    return pmf, base, step, 1.0 - finite


def epsilon_for_delta(pmf: np.ndarray, base: int, step: float, infinity: float, delta: float) -> float:
    """The smallest ε ≥ 0 with δ(ε) = infinity + Σ_{L > ε} pmf(L)(1 − e^{ε − L}) ≤ ``delta``, losses L = (base + i)
    ·step; ``inf`` when the mass at +∞ alone passes ``delta``."""
    from scipy.signal import lfilter

    if infinity > delta:
        return math.inf
    tail = np.cumsum(pmf[::-1])[::-1]  # Σ_{j ≥ i} pmf_j
    # Σ_{j ≥ i} pmf_j e^{(i − j)·step}: every factor ≤ 1, so nothing overflows
    near = lfilter([1.0], [1.0, -math.exp(-step)], pmf[::-1])[::-1]
    # δ at ε = L_i: the losses above it are j > i
    at = infinity + np.r_[tail[1:], 0.0] - math.exp(-step) * np.r_[near[1:], 0.0]
    ok = at <= delta
    i = int(np.argmax(ok))  # the first grid point where δ holds (δ falls in ε; it holds at the last point)
    below = (base + i - 1) * step if i > 0 else -math.inf  # below the lowest loss, every loss is above ε
    here = (base + i) * step
    # between L_{i−1} and L_i the losses above ε are j ≥ i: δ(ε) = infinity + tail_i − e^{ε − L_i}·near_i
    excess = infinity + tail[i] - delta
    eps = here if near[i] <= 0 or excess <= 0 else here + math.log(excess / near[i])
    eps = min(max(eps, below), here)
    return max(0.0, eps * (1 + 1e-12) if eps > 0 else eps)


def grouped_epsilon(groups: Mapping[tuple[float, float], int], delta: float) -> float:
    """The smallest ε (rounded up) at which the adaptive composition of ``groups`` — {(ε, δ): copies} of
    (ε, δ)-DP mechanisms — is (ε, ``delta``)-DP: at most (number of kinds) × the grid step above the exact value."""
    return epsilon_for_delta(*grid_distribution(groups), delta)
