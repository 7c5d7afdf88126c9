"""The central guarantee a summary-mode release also satisfies (docs/privacy.md, "The central guarantee").

A summary publishes sums of n locally private reports, drawn exactly in the law of the sum of n independent per-row
reports. A sum is a function of the multiset of the reports, so whatever holds for the *shuffled* reports holds for
the summary (post-processing). Two computations, for neighbouring tables that differ in one unit's data (one row
replaced; with a privacy unit, one person's rows), the smaller ε taken:

* :func:`shuffle_epsilon`, for every channel: privacy amplification by shuffling, by the numerical bound of
  Feldman, McMillan and Talwar (2021, "Hiding among the clones"). For ε₀-LDP reports of n units, the shuffled reports
  are (ε, δ)-DP whenever the pair of distributions P_c = α·Bin(c, ½) + (1 − α)·(Bin(c, ½) + 1) and
  Q_c = α·(Bin(c, ½) + 1) + (1 − α)·Bin(c, ½), mixed over C ~ Bin(n − 1, e^{−ε₀}) (α = e^{ε₀}/(e^{ε₀} + 1)), is. The
  likelihood ratio of P_c to Q_c falls in a, so the hockey-stick divergence of each c is a difference of two
  binomial CDFs at one cut-off: δ(ε) is their mixture over c, summed over at most 1,024 blocks of consecutive c,
  each charged the larger divergence of its two ends (an upper bound; exact where a block is one value), the rest
  of C's mass (at most 2·10⁻³⁰) added whole; ε is the smallest value with δ(ε) ≤ δ, by bisection (to 10⁻⁷ ε₀,
  rounded up).
* :func:`noise_sum_epsilon`, where the channel adds discrete Laplace noise to sums (the histogram and Haar channels
  on the lattice): the released sums are the exact sums plus, per coordinate, the sum of n iid discrete Laplace
  variables (a difference of two negative binomials), and one unit moves the exact sums by one lattice step on two
  coordinates. δ(ε) of that shift is computed exactly from the noise's probabilities (from its characteristic
  function by one FFT): the privacy loss is a sum of one independent copy per coordinate, and the expectation
  E[(1 − e^{ε − L})₊] is summed over sorted losses with cumulative sums. The tests check it against Google's
  ``dp_accounting`` and against a direct convolution.

Neither uses anything about the data but n (public), the channel and the unit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ._validation import LdpDaskError
from .options import DEFAULT_CENTRAL_DELTA

__all__ = ["central_statement", "central_line", "central_event", "worst_event", "shuffle_delta", "shuffle_epsilon",
           "noise_sum_delta", "noise_sum_epsilon", "smallest_epsilon", "homogeneous", "DEFAULT_DELTA", "SUMMARY_DELTA"]

#: δ of the central statement unless the run sets another (``RunOptions.central_delta``)
DEFAULT_DELTA = DEFAULT_CENTRAL_DELTA
#: the mass of C ~ Bin(n − 1, e^{−ε₀}) left out of the exact sum on each side (added to δ whole)
_C_TAIL = 1e-30
#: bisection accuracy on ε, relative to ε₀
_EPS_TOL = 1e-7
#: from this local ε on, a unit has no clones to hide among (e^{−ε₀} n < 10⁻⁵ for n ≤ 10⁸): ε = ε₀
NO_CLONES = 30.0
#: blocks of values of C over which δ is summed (each charged its worse end)
_BLOCKS = 1024
#: above this many units the bound is computed for this many (a unit hides better among more clones, so the bound
#: for fewer units holds for more; the binomial CDFs lose precision past about 10⁹ trials)
MAX_UNITS = 100_000_000


def _check(eps0: float, n: int, delta: float) -> None:
    if not (isinstance(eps0, (int, float)) and math.isfinite(eps0) and eps0 > 0):
        raise LdpDaskError(f"The local ε must be a positive finite number. Got {eps0!r} instead.")
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise LdpDaskError(f"The number of units n must be an integer >= 1. Got {n!r} instead.")
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise LdpDaskError(f"The 'delta' parameter must be in (0, 1). Got {delta!r} instead.")


def smallest_epsilon(delta_of: Callable[[float], float], delta: float, hi: float, tol: float,
                     relative: bool = False) -> float:
    """The smallest ε in [0, ``hi``] with ``delta_of(ε)`` ≤ ``delta``, for a ``delta_of`` that falls in ε and holds
    at ``hi``: 0 if it holds there, else by bisection until the bracket is narrower than ``tol`` × ``hi`` (the
    starting ``hi``, or with ``relative`` the current one), rounded up (the value returned always holds)."""
    if delta_of(0.0) <= delta:
        return 0.0
    lo, width = 0.0, tol * hi
    while hi - lo > (tol * hi if relative else width):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_of(mid) <= delta else (mid, hi)
    return hi


def shuffle_delta(eps: float, eps0: float, n: int) -> float:
    """The δ at which n shuffled ε₀-LDP reports are (ε, δ)-DP by the numerical bound of Feldman, McMillan and Talwar
    (2021) (module docstring): an upper bound on the true δ (the blocks of C round it up)."""
    if eps >= eps0:
        return 0.0
    n = min(int(n), MAX_UNITS)
    a = math.exp(eps0) / (math.exp(eps0) + 1.0)
    e = math.exp(eps)
    # p_c(a) - e^eps q_c(a) = b(a) (a - e (1 - a)) + b(a - 1) ((1 - a) - e a): positive while b(a)/b(a-1) > r
    r = (e * a - (1.0 - a)) / (a - e * (1.0 - a))
    first, last, mass = _clones(n, eps0)

    def divergence(c: np.ndarray) -> np.ndarray:
        # b(a)/b(a-1) = (c - a + 1)/a for Bin(c, 1/2): the set is a < (c + 1)/(1 + r); its largest element
        top = np.ceil((c + 1) / (1.0 + r)) - 1
        f_top, f_below = _half_cdf(top, c), _half_cdf(top - 1, c)
        return np.clip(a * f_top + (1 - a) * f_below - e * (a * f_below + (1 - a) * f_top), 0.0, None)

    # each block of c is charged the larger divergence of its two ends (the divergence is monotone in c):
    # an upper bound, exact where a block is one value
    worst = np.maximum(divergence(first), divergence(last))
    left_out = max(0.0, 1.0 - float(mass.sum()))
    return float(min(1.0, np.sum(mass * worst) + left_out))


def _half_cdf(k: np.ndarray, c: np.ndarray) -> np.ndarray:
    """P(Bin(c, ½) ≤ k), for any integers k and c ≥ 0 (scipy's bdtr is NaN outside 0 ≤ k < c)."""
    from scipy import special  # here: scipy's import costs every command half a second

    inside = (k >= 0) & (k < c)
    out = np.where(k >= c, 1.0, 0.0)
    out[inside] = special.bdtr(k[inside], c[inside], 0.5)
    return out


@lru_cache(maxsize=64)
def _clones(n: int, eps0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values of C ~ Bin(n − 1, e^{−ε₀}) that carry mass (all but 10⁻³⁰ on each side), in at most
    :data:`_BLOCKS` blocks of consecutive values: their first and last values and their probabilities."""
    from scipy import special

    p = math.exp(-eps0)
    # Bernstein's inequality for a sum of Bernoullis bounds each tail beyond t by exp(-t^2 / (2 (var + t/3)))
    # (scipy's quantiles of 1e-30 tails are not reliable: isf returns n - 1)
    mean, var, log_tail = (n - 1) * p, (n - 1) * p * (1 - p), math.log(1 / _C_TAIL)
    t = log_tail / 3 + math.sqrt((log_tail / 3) ** 2 + 2 * var * log_tail)
    lo, hi = max(int(mean - t) - 1, 0), min(int(mean + t) + 1, n - 1)
    edges = np.unique(np.linspace(lo, hi + 1, min(_BLOCKS, hi + 1 - lo) + 1).round().astype(np.int64))
    first, last = edges[:-1], edges[1:] - 1
    cdf = special.bdtr  # P(Bin(n - 1, p) <= k); P(... <= -1) = 0
    mass = cdf(last, n - 1, p) - np.where(first > 0, cdf(np.maximum(first - 1, 0), n - 1, p), 0.0)
    return first, last, mass


@lru_cache(maxsize=256)
def shuffle_epsilon(eps0: float, n: int, delta: float = DEFAULT_DELTA) -> float:
    """The central ε at ``delta`` of n shuffled ε₀-LDP reports (Feldman, McMillan and Talwar 2021, numerical bound;
    module docstring). At most ε₀: shuffling never weakens the local guarantee.

    Parameters
    ----------
    eps0 : float
        ε of one unit's report (> 0).
    n : int
        Units whose reports are shuffled together (a row hides among them).
    delta : float
        In (0, 1).
    """
    _check(eps0, n, delta)
    if n == 1 or eps0 >= NO_CLONES:
        return float(eps0)
    return smallest_epsilon(lambda eps: shuffle_delta(eps, eps0, n), delta, float(eps0), _EPS_TOL)


#: the largest FFT grid the noise-sum computation builds (64 MiB of complex values); a noise wider than that (a
#: tiny ε) gets the shuffle bound alone
NOISE_SUM_POINTS = 1 << 23


def _noise_sum_points(t: float, n: int) -> int:
    """The FFT grid :func:`_discrete_laplace_sum_pmf` would build for n units of discrete Laplace(t) noise."""
    q = math.exp(-1.0 / t)
    width = int(20 * math.sqrt(n * 2 * q) / (1 - q)) + 64
    return 1 << int(math.ceil(math.log2(2 * width + 1)))


def _discrete_laplace_sum_pmf(t: float, n: int) -> tuple[np.ndarray, int]:
    """The law of the sum of n iid discrete Laplace(t) variables (P(k) ∝ e^{−|k|/t}): its probabilities on the
    integers −W … W, from the characteristic function (p²/(1 − 2q cos θ + q²))^n, q = e^{−1/t}, by one inverse FFT.
    W is 20 standard deviations (the mass beyond counts as infinite privacy loss in the PLD); what the FFT's
    rounding leaves below 10⁻³⁰⁰ relative is dropped."""
    q = math.exp(-1.0 / t)
    sd = math.sqrt(n * 2 * q) / (1 - q)
    width = int(20 * sd) + 64
    m = 1 << int(math.ceil(math.log2(2 * width + 1)))
    theta = 2 * np.pi * np.arange(m) / m
    log_phi = n * (2 * math.log1p(-q) - np.log1p(q * q - 2 * q * np.cos(theta)))
    pmf = np.fft.ifft(np.exp(log_phi)).real
    pmf = np.concatenate([pmf[-width:], pmf[:width + 1]])  # k = -width ... width
    return np.clip(pmf, 0.0, None), width


@lru_cache(maxsize=64)
def _privacy_loss(t: float, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The privacy loss of one coordinate moved one lattice step: for X the summed noise of n units,
    l(x) = log P(X = x) − log P(X = x − 1), its values sorted and their probabilities under X, and the mass of X
    where the probabilities are too small to take logs of (charged to δ whole)."""
    pmf, width = _discrete_laplace_sum_pmf(t, n)
    shifted = np.r_[0.0, pmf[:-1]]  # P(X + 1 = x): the same noise around a sum one step higher
    usable = (pmf > 1e-280) & (shifted > 1e-280)
    loss = np.log(pmf[usable]) - np.log(shifted[usable])
    order = np.argsort(loss)
    return loss[order], pmf[usable][order], float(max(0.0, 1.0 - pmf[usable].sum()))


def noise_sum_delta(eps: float, t: float, n: int, coordinates: int = 2) -> float:
    """The exact δ at ``eps`` of sums that carry the summed discrete Laplace(t) noise of n units, when one unit moves
    them by one lattice step on ``coordinates`` (1 or 2) coordinates (module docstring).

    δ(ε) = E[(1 − e^{ε − L})₊] with L the privacy loss: a sum of one independent copy of ``l`` per coordinate (the
    noise is symmetric, so a step down has the loss of a step up). With the values of l sorted, the terms of the
    second copy that count for a given first value form a suffix, summed from cumulative sums: O(W log W), exact."""
    loss, prob, lost = _privacy_loss(t, n)
    if coordinates == 1:
        return float(np.sum(prob * np.clip(1.0 - np.exp(eps - loss), 0.0, None)) + lost)
    if coordinates != 2:
        raise LdpDaskError(f"The 'coordinates' parameter must be 1 or 2. Got {coordinates!r} instead.")
    # suffix sums of p_j and of p_j e^{-l_j} (the latter scaled to stay finite)
    tail_p = np.r_[np.cumsum(prob[::-1])[::-1], 0.0]
    shift = float(loss.min())
    tail_q = np.r_[np.cumsum((prob * np.exp(shift - loss))[::-1])[::-1], 0.0]
    start = np.searchsorted(loss, eps - loss, side="right")  # l_j > eps - l_i
    inner = tail_p[start] - np.exp(eps - loss - shift) * tail_q[start]
    return float(np.sum(prob * np.clip(inner, 0.0, None)) + 2 * lost)


@lru_cache(maxsize=256)
def noise_sum_epsilon(t: float, n: int, delta: float = DEFAULT_DELTA, coordinates: int = 2) -> float:
    """The central ε at ``delta`` of sums released with the summed noise of n units, each adding discrete Laplace(t)
    noise per coordinate, when one unit moves the exact sums by one lattice step on ``coordinates`` coordinates:
    the smallest ε with :func:`noise_sum_delta` ≤ δ, by bisection (to 10⁻⁹ relative, rounded up).

    Raises ``LdpDaskError`` above 10⁷ units (the FFT grid would pass 2²³ points); the shuffle bound covers those."""
    _check(1.0, n, delta)
    if n > 10_000_000:
        raise LdpDaskError("The noise-sum computation is limited to 10^7 units; use the shuffle bound beyond.")
    # every unit's own noise alone is (coordinates/t)-DP: the sum's loss is at most that
    return smallest_epsilon(lambda eps: noise_sum_delta(eps, t, n, coordinates), delta, coordinates / t, 1e-9,
                            relative=True)


#: the noise-sum computation runs for at most this many units; beyond, its value at this many is reported (more
#: rows add more independent noise to the same shift: the guarantee only improves)
NOISE_SUM_UNITS = 1_000_000
#: above this local ε the noise is so small that only the shuffle bound is computed (it is ε₀ there anyway)
NOISE_SUM_MAX_EPSILON = 10.0
#: the grids of units the two bounds are computed on (:func:`_grid_below`): at most 4.4% fewer units for the
#: shuffle bound (ε ∝ 1/√n: about 2% larger), 19% for the summed noise (an FFT of up to 2²³ points each)
SHUFFLE_GRID, NOISE_SUM_GRID = 16, 4
#: how the statement names its two computations
SHUFFLE = "shuffle amplification (Feldman, McMillan and Talwar 2021, numerical bound)"
NOISE_SUM = "exact privacy loss of the summed discrete Laplace noise"
NO_ROWS = "no rows"


def central_statement(channel: Any, n: int, *, mode: str = "summary", unit: str = "row", reports_per_unit: int = 1,
                      among: int | None = None, longitudinal: bool = False,
                      delta: float = DEFAULT_DELTA, partitions: int = 1) -> dict[str, Any] | None:
    """The central (ε, δ) a release's published values satisfy, for the same unit, or None where there is none.

    Parameters
    ----------
    channel : Channel
        The release's channel; its ε per report is ``epsilon_spent()``.
    n : int
        Reports in the release (units × ``reports_per_unit``).
    mode : str
        ``"rows"`` publishes each row's report: no central statement.
    unit : str
        ``"row"``, or the column naming a person (whose ``reports_per_unit`` reports are one unit).
    among : int, optional
        The reports a unit hides among, when fewer than ``n``: the smallest kept partition of a partitioned
        release (each partition's sums are published).
    longitudinal : bool
        Memoized reports repeat across nights: not covered here (None).
    delta : float
        The statement's δ.
    partitions : int
        The published partitions one unit may hold reports in, each with ``reports_per_unit`` reports of its own
        (a privacy-unit release over files bounds each file on its own, and a person may be in every file): the
        statement is their composition. 1 where a unit lies in one partition (a row; a release bounded once).

    Returns
    -------
    dict or None
        ``epsilon``, ``delta``, ``unit``, ``units`` (a unit hides among these), ``local_epsilon`` (ε₀ per unit, over
        every partition), ``partitions`` and ``method`` (which computation gave the smaller ε).

    Notes
    -----
    Over P > 1 partitions each partition is stated at δ_p = fδ/P (f ∈ {½, ⅒, 9⁄10}, the best kept) and the P
    copies are composed exactly (:func:`homogeneous`) at δ; never above P·ε₀ at δ 0 (basic composition of the
    local guarantee).
    """
    if mode != "summary" or longitudinal:
        return None
    if n == 0:  # a declared public group with no rows: nobody's data is in it
        return {"epsilon": 0.0, "delta": 0.0, "unit": unit, "units": 0, "local_epsilon": 0.0,
                "partitions": max(1, int(partitions)), "method": NO_ROWS}
    k = max(1, int(reports_per_unit))
    units = max(1, int(among if among is not None else n) // k)
    eps0 = float(channel.epsilon_spent()) * k
    count = max(1, int(partitions))
    if count == 1:
        best, method = _one_partition(channel, units, eps0, k, float(delta))
    else:
        best, method = count * eps0, "basic composition of the local guarantee"
        for share in (0.5, 0.1, 0.9):
            each = share * float(delta) / count
            one, how = _one_partition(channel, units, eps0, k, each)
            composed = homogeneous(one, each, count, float(delta))
            if composed < best:
                best, method = composed, f"{how}, per partition, composed over {count} partitions"
    return {"epsilon": float(best), "delta": float(delta), "unit": unit, "units": units,
            "local_epsilon": count * eps0, "partitions": count, "method": method}


def _one_partition(channel: Any, units: int, eps0: float, k: int, delta: float) -> tuple[float, str]:
    """The central ε at ``delta`` of one partition's sums (ε₀-LDP units, ``units`` of them) and how it was found."""
    best, method = shuffle_epsilon(eps0, _grid_below(units, SHUFFLE_GRID), delta), SHUFFLE
    t = _lattice_noise_scale(channel)
    n = _grid_below(min(units, NOISE_SUM_UNITS), NOISE_SUM_GRID)
    if t is not None and k == 1 and units > 1 and eps0 <= NOISE_SUM_MAX_EPSILON and _noise_sum_points(t, n) <= \
            NOISE_SUM_POINTS:
        summed = noise_sum_epsilon(t, n, delta)
        if summed < best:
            best, method = summed, NOISE_SUM
    return float(best), method


def homogeneous(epsilon: float, delta_each: float, k: int, delta: float) -> float:
    """The smallest ε at which k adaptively composed (ε, δ)-DP mechanisms are (ε, ``delta``)-DP, exactly.

    Their composition is dominated by the k-fold product of the (ε, δ) dominating pair (Kairouz, Oh and Viswanath
    2015): the privacy loss is +∞ with probability 1 − (1 − δ)^k, else ε(2B − k) with B ~ Bin(k, e^ε/(1 + e^ε)), and
    δ(ε') = 1 − (1 − δ)^k + (1 − δ)^k E[(1 − e^{ε' − L})₊] falls in ε' (:func:`smallest_epsilon`, to 10⁻¹⁰
    relative); ``inf`` when the δ's alone pass ``delta``."""
    from scipy.special import gammaln  # scipy.stats costs 0.8 s to import

    sure = -math.expm1(k * math.log1p(-delta_each))
    if sure > delta:
        return math.inf
    b = np.arange(k + 1)
    p = 1.0 / (1.0 + math.exp(-epsilon))
    pmf = np.exp(gammaln(k + 1) - gammaln(b + 1) - gammaln(k - b + 1) + b * math.log(p)
                 + (k - b) * math.log1p(-p)) * (1.0 - sure)
    loss = epsilon * (2.0 * b - k)

    def excess(eps: float) -> float:
        above = loss > eps
        return sure + float(np.sum(pmf[above] * -np.expm1(eps - loss[above])))

    return smallest_epsilon(excess, delta, k * epsilon, 1e-10, relative=True)


def central_event(summary: Any) -> tuple[float, float]:
    """The (ε, δ) with which a summary's release enters the ledger's composition (:mod:`ldp_dask.ledger.central`):
    its central statement, or its local ε per unit at δ = 0 where there is none or that is smaller (an ε-LDP
    output is ε-DP). For a privacy-unit summary over files, one file's (the ledger counts one copy per file
    released anew, :func:`ldp_dask.ledger.central.dataset_events`)."""
    if summary.n == 0:  # a declared public group with no rows: nobody's data is in it (the labels are public)
        return 0.0, 0.0
    local = float(summary.epsilon_per_unit)
    stated = summary.central_per_partition
    if stated is None or stated["epsilon"] >= local:
        return local, 0.0
    return float(stated["epsilon"]), float(stated["delta"])


def worst_event(events: Any) -> tuple[float, float]:
    """One (ε, δ) that holds for each of ``events``, mechanisms on disjoint units (parallel composition): the
    largest ε and the largest δ."""
    found = list(events)
    return max(e for e, _ in found), max(d for _, d in found)


#: how a δ is labelled where a summary is read alone: its own, set by the run that released it
SUMMARY_DELTA = "this summary's δ"


def central_line(statement: dict[str, Any] | None, whose: str = SUMMARY_DELTA) -> str:
    """One line for reports and the terminal: ``ε 0.0022 at δ 1e-09 (this summary's δ) per row, among 1,000,000
    rows (...)``; ``whose`` labels the δ (a reading of a dataset states every statement at the dataset's δ,
    :func:`ldp_dask.ledger.central.reading_delta`)."""
    if statement is None:
        return "none stated (rows mode publishes each report; longitudinal releases are not covered yet)"
    unit = statement["unit"]
    if statement["method"] == NO_ROWS:
        return f"ε 0 per {unit}: no rows, so nobody's data is in it"
    units = "rows" if unit == "row" else f"{unit} values"
    how = "shuffling" if statement["method"].startswith(SHUFFLE) else "the summed noise"
    if statement["method"].startswith("basic"):
        how = "composing the local guarantee"
    parts = statement.get("partitions", 1)
    over = f", composed over {parts:,} partitions a {unit} may be in" if parts > 1 else ""
    return (f"ε {statement['epsilon']:.3g} at δ {statement['delta']:g} ({whose}) per {unit}, hiding among "
            f"{statement['units']:,} {units}{over} (local ε {statement['local_epsilon']:g}; by {how})")


def _grid_below(n: int, steps: int) -> int:
    """The largest ⌊2^{j/steps}⌋ ≤ n: the bounds are computed on such a grid (fewer units only weaken a bound, so
    the value below n holds at n; at most a factor 2^{1/steps} fewer units, and each distinct value is computed
    once: a plan's fifty public groups of about 3,900 rows each took 6 ms a group without it)."""
    j = int(math.floor(steps * math.log2(n)))
    while int(2 ** ((j + 1) / steps)) <= n:
        j += 1
    while int(2 ** (j / steps)) > n:
        j -= 1
    return max(1, int(2 ** (j / steps)))


def _lattice_noise_scale(channel: Any) -> float | None:
    """t of the discrete Laplace noise a channel adds to one-hot lattice vectors (the Laplace histogram and the Haar
    level-J channel, whose one unit moves two coordinates by one lattice step), else None."""
    from .channels import HaarLaplace, LaplaceHistogram

    if type(channel) in (LaplaceHistogram, HaarLaplace) and getattr(channel, "noise", None) == "lattice":
        return float(channel.noise_scale) / (float(channel.sensitivity) / 2)
    return None
