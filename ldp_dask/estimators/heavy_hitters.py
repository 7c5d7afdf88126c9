"""The most frequent values of a column nobody listed, from a heavy-hitter summary (docs/estimators.md "Heavy
hitters"; the channel: :mod:`ldp_dask.channels.heavy_hitters`).

**Search.** Level ℓ's candidates are every kept prefix of ℓ bytes extended by each byte b, both as a complete
value and as a proper prefix (level 0 also has the empty value). A candidate's score is the lower median (the
⌊h/2⌋-th smallest) of its group estimates f̂_g over the level's h groups, f̂_g = (m·θ̂_g − 1)/(m − 1) with
θ̂_g = (T_g/n_g − q)/(p − q) as in the count-mean sketch; the median shrugs off a collision with a heavier item
in a few of the h hash functions. The ``beam`` best candidates are kept: complete ones are found values, proper
prefixes are extended at the next level (at the last level they are found as truncated values). The found values
are ranked by their mean group estimate over the levels at which they are complete, and the ``top`` first are
listed.

**Estimates.** The listed values' frequencies come from the estimate groups alone (Student t from their spread,
as :func:`~ldp_dask.estimators.sketch_frequencies`): those rows took no part in the search, so the estimate of a
listed value is unbiased whichever values were listed (no winner's curse) and its interval covers at its level.

**Misses.** A value of share f ≥ τ is missed only if one of its prefixes scored below its level's cutoff c_ℓ
(the beam's last kept score), or its ranking score fell below the last listed one. Each group estimate of its
prefix is at least f − (1 − f)/(m − 1) in mean (collisions only add mass) with standard deviation σ_g(f) from the
optimized unary encoding (bucket mass θ = f + (1 − f)/m), so a lower median below c needs ⌊h/2⌋ of the h groups
below it: P ≤ P(Binomial(h, Φ((c − f + (1 − f)/(m − 1))/σ_g(f))) ≥ ⌊h/2⌋). The stated chance is the union bound
over levels and the ranking, maximized over f ∈ [τ, 1] (normal approximation of each group's count); the share
``sure_share`` is the smallest τ at which it is at most 5%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom, norm

from .._validation import LdpDaskError, check_int, check_probability
from ..channels.heavy_hitters import HeavyHitters
from ..outputs import Description, Table, summary_info
from ..summary import Summary, read_summary
from .frequencies import FrequencyEstimate
from .sketch import item_estimates, spread_intervals

__all__ = ["heavy_hitters", "HeavyHittersEstimate", "SURE_MISS"]

#: The miss chance at which ``sure_share`` is stated.
SURE_MISS = 0.05
#: The found values are ranked by their search estimate less this many standard errors.
RANK_Z = 2.0


@dataclass(frozen=True)
class HeavyHittersEstimate(FrequencyEstimate):
    """The listed values with their frequencies and intervals; ``info`` adds ``truncated`` (per value: longer
    than the search's bytes, listed as its first bytes), ``sure_share`` (a value of at least this share is listed
    with probability ≥ 95%), ``miss_chance`` (share, chance) at a given ``miss_share``, ``found``, ``searched``
    and ``beam``."""

    #: the summary, the search's level cutoffs and its ranking cutoff (for :meth:`miss_chance`)
    search: tuple[Summary, list[float], float] | None = field(default=None, repr=False, compare=False)

    def miss_chance(self, share: float) -> float:
        """The stated chance (a union bound, module docstring) that a value of at least ``share`` is not listed."""
        if self.search is None:
            raise LdpDaskError("This result does not hold its search (it was read back from a file).")
        return _miss_chance(*self.search, float(share))

    def describe(self) -> Description:
        d = super().describe()
        rows = tuple((lab + ("…" if cut else ""), *rest) for (lab, *rest), cut in
                     zip(d.table.rows, self.info["truncated"])) if d.table is not None else ()
        sure = self.info["sure_share"]
        facts = [("listed", f"{len(self.labels)} of {self.info['found']:,} values found ({self.info['searched']:,} "
                            f"candidates searched, beam {self.info['beam']})"),
                 ("missed", f"a value of share ≥ {sure:.4f} is listed with probability ≥ {1 - SURE_MISS:.0%}"
                  if sure <= 1 else "no share is listed with probability ≥ 95% at this size: more rows or ε")]
        if self.info.get("miss_chance") is not None:
            tau, chance = self.info["miss_chance"]
            facts.append(("miss chance", f"a value of share ≥ {tau:g} is missed with probability ≤ {chance:.3g}"))
        if any(self.info["truncated"]):
            facts.append(("truncated", f"values longer than {self.info['max_bytes']} bytes are listed as their "
                                       "first bytes, marked …; their share counts every value so starting"))
        return Description(title=f"Heavy hitters of {self.info.get('column', 'value')}",
                           headline=d.headline.replace("most frequent", "most frequent found"),
                           facts=(*d.facts[:1], *facts, *d.facts[1:]),
                           table=Table(("value", "frequency", "se", f"{self.level:.0%} interval"), rows))


def _text(b: bytes, truncated: bool) -> str | None:
    """A found item's text, or None when it cannot be a value (not UTF-8; a truncated one may end mid-character)."""
    for cut in range(4 if truncated else 1):
        try:
            return b[: len(b) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _search(s: Summary, ch: HeavyHitters, beam: int) -> tuple[list[tuple[bytes, bool, int]], list[float], int]:
    """Prefix extension over the levels: the found items (bytes, truncated, level of completion), each level's
    cutoff (−inf when every candidate was kept) and the candidates scored."""
    L, h = ch.levels, ch.hashes
    k = max(1, h // 2)
    parents = np.zeros((1, L + 1), dtype=np.uint8)  # the empty prefix
    found: list[tuple[bytes, bool, int]] = []
    cutoffs: list[float] = []
    searched = 0
    for lev in range(L):
        kids = np.repeat(parents, 256, axis=0)
        kids[:, 1 + lev] = np.tile(np.arange(256, dtype=np.uint8), len(parents))
        cand = np.concatenate([kids, kids] + ([np.zeros((1, L + 1), np.uint8)] if lev == 0 else []))
        nk = len(kids)
        cut = np.full(len(cand), lev + 1, dtype=np.int64)
        complete = np.r_[np.ones(nk, np.int64), np.zeros(nk, np.int64)]
        if lev == 0:
            cut[-1], complete = 0, np.r_[complete, 1]
        f = item_estimates(s, ch.candidate_hashes(cand, cut, complete), ch.level_groups(lev))
        score = np.partition(f, k - 1, axis=1)[:, k - 1]
        searched += len(cand)
        if len(cand) > beam:
            keep = np.argpartition(-score, beam - 1)[:beam]
            cutoffs.append(float(score[keep].min()))
        else:
            keep = np.arange(len(cand))
            cutoffs.append(-math.inf)
        for i in keep[complete[keep] == 1]:
            found.append((bytes(cand[i, 1:1 + cut[i]]), False, lev))
        prefixes = keep[complete[keep] == 0]
        if lev == L - 1:
            found.extend((bytes(cand[i, 1:1 + L]), True, L - 1) for i in prefixes)
        parents = cand[prefixes]
        if not len(parents):
            break
    return found, cutoffs, searched


def _sigma(ch: HeavyHitters, f: np.ndarray, rows: float) -> np.ndarray:
    """The standard deviation of one group estimate of an item of share f in a group of ``rows`` rows (privacy
    noise of the optimized unary encoding; bucket mass f plus the average collided mass)."""
    m = ch.width
    p, q = ch.report_probabilities
    theta = np.minimum(1.0, f + (1.0 - f) / m)
    var = (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (max(rows, 1.0) * (p - q) ** 2)
    return m / (m - 1.0) * np.sqrt(var)


def _miss_chance(s: Summary, cutoffs: list[float], final: float, tau: float) -> float:
    """The chance (union bound, module docstring) that a value of share ≥ ``tau`` is not listed, given the
    search's level cutoffs and the ranking cutoff ``final``."""
    ch: HeavyHitters = s.channel  # type: ignore[assignment]
    h, m = ch.hashes, ch.width
    k = max(1, h // 2)
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    f = np.linspace(tau, 1.0, 65)
    slack = (1.0 - f) / (m - 1.0)
    total = 0.0
    for lev, c in enumerate(cutoffs):
        if c == -math.inf:
            continue
        n_g = float(rows[ch.level_groups(lev)].min())
        below = norm.cdf((c - f + slack) / _sigma(ch, f, n_g))
        total += float(binom.sf(k - 1, h, below).max())
    if final > -math.inf:  # ranked by a mean over the levels where complete (1 to L levels of h groups) less
        n_g = float(rows[: ch.levels * h].min())  # RANK_Z of its standard errors: the worst number of levels
        se = [_sigma(ch, f, n_g) / math.sqrt(j * h) for j in range(1, ch.levels + 1)]
        total += max(float(norm.cdf((final + RANK_Z * e - f + slack) / e).max()) for e in se)
    return min(1.0, total)


def _sure_share(s: Summary, cutoffs: list[float], final: float) -> float:
    """The smallest share at which :func:`miss_chance` is at most :data:`SURE_MISS` (bisection; 2 when none)."""
    if _miss_chance(s, cutoffs, final, 1.0) > SURE_MISS:
        return 2.0
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _miss_chance(s, cutoffs, final, mid) <= SURE_MISS else (mid, hi)
    return hi


def heavy_hitters(summary: Summary | str, top: int = 10, level: float = 0.95, beam: int | None = None,
                  miss_share: float | None = None) -> HeavyHittersEstimate:
    """The ``top`` most frequent values of a heavy-hitter summary, found without a category list, with
    frequencies, intervals and the chance of a miss (module docstring).

    Parameters
    ----------
    summary : Summary or str
        A summary of the ``heavy-hitters`` channel.
    top : int
        K, the values listed (1 ≤ K ≤ 10,000).
    level : float
        The intervals' confidence level.
    beam : int, optional
        The candidates kept at each level (default max(32, 4K); at least K).
    miss_share : float, optional
        A share τ in (0, 1]: the result states the chance that a value of share ≥ τ is missed.

    Returns
    -------
    HeavyHittersEstimate
        The listed values, most frequent first; their frequencies are unbiased (the estimate groups took no part
        in the search), with Student t intervals from the estimate groups' spread.
    """
    s = read_summary(summary)
    if not isinstance(s.channel, HeavyHitters):
        raise LdpDaskError(f"heavy_hitters needs a summary of the 'heavy-hitters' channel; got {s.channel.name!r}.")
    ch: HeavyHitters = s.channel
    top = check_int(top, "top", 1, 10_000)
    beam = check_int(beam if beam is not None else max(32, 4 * top), "beam", top, 100_000)
    level = check_probability(level, "level")
    if miss_share is not None and not (isinstance(miss_share, (int, float)) and 0.0 < miss_share <= 1.0):
        raise LdpDaskError(f"The 'miss_share' parameter must be a share in (0, 1]. Got {miss_share!r} instead.")
    if s.n == 0:
        raise LdpDaskError("The summary holds no rows: no value has a frequency to estimate.")
    found, cutoffs, searched = _search(s, ch, beam)
    items = [(t, trunc, lev, b) for b, trunc, lev in found if (t := _text(b, trunc)) is not None]
    if not items:
        raise LdpDaskError("The search found no value (every candidate scored below the noise): more rows or ε.")
    L, h = ch.levels, ch.hashes
    cand = np.zeros((len(items), L + 1), dtype=np.uint8)
    for i, (_, _, _, b) in enumerate(items):
        cand[i, 1:1 + len(b)] = np.frombuffer(b, dtype=np.uint8)
    cut = np.array([len(b) for *_, b in items], dtype=np.int64)
    hashes = ch.candidate_hashes(cand, cut, np.array([0 if t else 1 for _, t, _, _ in items], dtype=np.int64))
    # rank by a lower bound: the mean group estimate over the search levels where each item is complete, less
    # RANK_Z of its standard errors (an item complete only at the last levels is pooled over few groups)
    f_search = item_estimates(s, hashes, np.arange(L * h))
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    first = np.array([lev * h for _, _, lev, _ in items])
    w = rows[None, : L * h] * (np.arange(L * h)[None, :] >= first[:, None])
    mean = (f_search * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1.0)
    n_g = float(rows[: L * h].min())
    rank = mean - RANK_Z * _sigma(ch, np.clip(mean, 0.0, 1.0), n_g) / np.sqrt(L * h - first)
    order = np.argsort(-rank, kind="stable")
    listed = order[:top]
    final = float(rank[listed[-1]]) if len(items) > top else -math.inf
    groups = ch.estimate_group_ids()
    raw, se, est, low, high = spread_intervals(item_estimates(s, hashes[listed], groups), rows[groups], level)
    show = np.argsort(-raw, kind="stable")
    labels = [items[listed[i]][0] for i in show]
    info = {**summary_info(s), "encoding": "heavy-hitters", "truncated": [bool(items[listed[i]][1]) for i in show],
            "sure_share": _sure_share(s, cutoffs, final), "found": len(items), "searched": searched, "beam": beam,
            "max_bytes": L, "estimate_rows": int(rows[groups].sum()),
            "miss_chance": None if miss_share is None else (float(miss_share),
                                                            _miss_chance(s, cutoffs, final, float(miss_share)))}
    return HeavyHittersEstimate(labels=labels, frequencies=est[show], se=se[show], ci_low=low[show],
                                ci_high=high[show], raw=raw[show], method="heavy-hitters", n=s.n,
                                epsilon=ch.epsilon, level=level, info=info, search=(s, cutoffs, final))
