"""The most frequent values of a column nobody listed, from a heavy-hitter summary (docs/estimators.md "Heavy
hitters"; the channel: :mod:`ldp_dask.channels.heavy_hitters`).

**Search.** Level 0's candidates are every value of at most two bytes (complete), every two-byte prefix and the empty
value; level ℓ's are every kept prefix of ℓ + 1 bytes extended by each byte (of ``alphabet``, if given), as a
complete value and as a proper prefix. Each candidate has a group estimate f̂_g in each of the level's h groups, f̂_g
= (m·θ̂_g − 1)/(m − 1) with θ̂_g = (T_g/n_g − q)/(p − q) as in the count-mean sketch. A proper prefix's score is the
mean of f̂_g over the groups where its bucket holds neither a heavy candidate but itself (one of the ``beam`` of
highest lower median, the ⌊h/2⌋-th smallest f̂_g, whose lower median passes RANK_Z of its standard errors) nor a
heavy value found complete at an earlier level (the same item here), so that a collision with a heavier item cannot
lift it; the lower median when fewer than five groups are so free. Groups shared with noise are kept: avoiding them
cost every score a group or two for nothing. A complete value is the same item at every later level, so its score is
the mean over levels ℓ..L − 1 of its median group estimate there: √(L − ℓ) times less noisy. Complete values are
found, never extended, so they do not compete with the prefixes: the ``beam`` best of each are kept (one beam at the
last level, where every item is found: complete, or a prefix found as a truncated value). The found values are ranked
by the mean, over the levels where they are complete, of their group estimates there (over the groups where their
bucket holds no other heavy item: a kept item scoring past RANK_Z standard errors; the median where fewer than five
are so free), less RANK_Z of its standard errors, and the ``top`` first are listed. RANK_Z = 3 is about the largest
noise among the 10³ candidates a level scores: a value found on one level's rows must stand that far above them to
outrank a value measured on many. Before that score comes the *pool*: the complete values one level scored (at the
last level, the complete and the truncated ones apart) are a pool of N candidates, *live* when one of its found
values has a mean past Φ⁻¹(1 − LIVE_ALPHA/N) of its standard errors (LIVE_ALPHA = 0.2: a pool of noise alone is live
with chance at most 0.2, Bonferroni). The values of live pools are listed first. Where every value has one length,
the other levels' complete values are noise alone, and their best would otherwise outrank the values of the last
level, measured on one level's rows.

**Estimates.** The listed values' frequencies come from the estimate groups alone: in each estimate group where a
listed value's bucket holds no other listed value, f̂_g = (m·θ̂_g − 1 + F)/(m − 1), F the other listed values'
shares (the rest of the mass falls in its bucket with chance 1/m each, so f̂_g is unbiased), averaged with a
Student t interval from their spread (as :func:`~ldp_dask.estimators.sketch_frequencies`). Those rows took no
part in the search, so the estimate of a listed value is unbiased whichever values were listed (no winner's
curse) and its interval covers at its level.

**Misses.** A value of share f ≥ τ is missed only if one of its prefixes scored below its level's prefix cutoff
c_ℓ (the beam's last kept score), or its complete score fell below that level's cutoff for complete values, or its
ranking score fell below the last listed one, or (when the last listed value is of a live pool) its own pool
stayed dead, which needs its mean below its pool's bar b standard errors (b at most the highest bar of the found
values' pools). Each group estimate of its item is at least f − (1 − f)/(m − 1) in
mean (collisions only add mass) with standard deviation σ_g(f) from the optimized unary encoding (bucket mass
θ = f + (1 − f)/m). A prefix's score is either a mean over j ≥ 5 groups, below c with probability at most
Φ((c − f + (1 − f)/(m − 1))·√j/σ_g(f)), or the lower median, below c only if ⌊h/2⌋ of the h groups are:
P(Binomial(h, Φ((c − f + (1 − f)/(m − 1))/σ_g(f))) ≥ ⌊h/2⌋); a complete score is a mean of L − ℓ medians, of
standard error √(π/2)·σ_g(f)/√(h(L − ℓ)) (normal approximation). The worst of these is taken at each level. The
stated chance is the union bound over levels and the ranking, maximized over f ∈ [τ, 1] (normal approximation of
each group's count); ``sure_share`` is the smallest τ at which it is at most 5%.
"""

from __future__ import annotations

import codecs
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import bdtrc, ndtr, ndtri

from .._validation import LdpDaskError, check_int, check_probability
from ..channels.heavy_hitters import HeavyHitters
from ..outputs import Description, Table, summary_info
from ..summary import Summary, read_summary
from .frequencies import FrequencyEstimate
from .sketch import item_buckets, item_estimates, spread_intervals

__all__ = ["heavy_hitters", "HeavyHittersEstimate", "SURE_MISS"]

#: The miss chance at which ``sure_share`` is stated.
SURE_MISS = 0.05
#: A candidate's search score is its mean over at least this many groups of its level free of a heavier candidate
#: (:func:`_clean_mean`); the miss chance is stated for that many.
CLEAN_MIN = 5
#: The standard error of a median of h group estimates over that of their mean (√(π/2), normal errors).
MEDIAN_SE = math.sqrt(math.pi / 2)
#: The found values are ranked by their estimate less this many standard errors (about the largest noise among the
#: 10³ candidates a level scores).
RANK_Z = 3.0
#: A pool (the complete values one level scored, or the last level's truncated ones) is *live* when one of its found
#: values scores past the Bonferroni bar Φ⁻¹(1 − LIVE_ALPHA/N) of its N candidates: a pool of noise alone is live
#: with chance at most LIVE_ALPHA. Values of live pools are ranked before those of pools that show only noise.
LIVE_ALPHA = 0.2


@dataclass(frozen=True)
class HeavyHittersEstimate(FrequencyEstimate):
    """The listed values with their frequencies and intervals; ``info`` adds ``truncated`` (per value: longer
    than the search's bytes, listed as its first bytes and "…"), ``sure_share`` (a value of at least this share is listed
    with probability ≥ 95%), ``miss_chance`` (share, chance) at a given ``miss_share``, ``found``, ``searched``
    and ``beam``."""

    #: the summary, the search's level cutoffs, its ranking cutoff and the live bar (for :meth:`miss_chance`)
    search: tuple[Summary, list[tuple[float, float]], float, float] | None = field(default=None, repr=False,
                                                                                   compare=False)

    def miss_chance(self, share: float) -> float:
        """The stated chance (a union bound, module docstring) that a value of at least ``share`` is not listed."""
        if self.search is None:
            raise LdpDaskError("This result does not hold its search (it was read back from a file).")
        return _miss_chance(*self.search, float(share))

    def describe(self) -> Description:
        d = super().describe()
        rows = d.table.rows if d.table is not None else ()
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
    """A found item's text, or None when it cannot be a value: not UTF-8 (a truncated one may end in the first
    bytes of a character, which are dropped)."""
    try:
        if truncated:
            return codecs.getincrementaldecoder("utf-8")().decode(b, final=False)
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _best(score: np.ndarray, among: np.ndarray, beam: int) -> tuple[np.ndarray, float]:
    """The ``beam`` highest scores of the candidates ``among`` (indices), and the cutoff (the last kept score;
    −inf when every one was kept)."""
    if len(among) <= beam:
        return among, -math.inf
    keep = among[np.argpartition(-score[among], beam - 1)[:beam]]
    return keep, float(score[keep].min())


def _complete_scores(s: Summary, ch: HeavyHitters, hashes: np.ndarray, lev: int) -> np.ndarray:
    """The search score of values complete at level ``lev``: the mean over levels ``lev``..L − 1, where each is
    the same complete item, of its median group estimate there (a collision with an item not yet found cannot
    lift a median)."""
    L, h = ch.levels, ch.hashes
    f = item_estimates(s, hashes, np.arange(lev * h, L * h)).reshape(len(hashes), L - lev, h)
    return np.median(f, axis=2).mean(axis=1)


def _search(s: Summary, ch: HeavyHitters, beam: int,
            alphabet: np.ndarray) -> tuple[list[tuple[bytes, bool, int]], list[tuple[float, float]], int,
                                           list[np.ndarray], dict[tuple[int, bool], int]]:
    """Prefix extension over the levels: the found items (bytes, truncated, level of completion), each level's
    cutoffs (prefixes, complete values; −inf when every candidate was kept), the candidates scored, each level's
    heavy items' hashes (kept, scoring past RANK_Z standard errors of a mean, or such values found complete before;
    for :func:`_rank`) and the candidates of each pool ((level, truncated): how many were scored)."""
    L, h, B, start = ch.levels, ch.hashes, ch.max_bytes, ch.start
    k = max(1, h // 2)
    # level 0: every value of at most `start` bytes (complete), every `start`-byte prefix, the empty value
    first = [np.zeros((1, B + 1), dtype=np.uint8)]
    for t in range(1, start + 1):
        a = len(alphabet)
        grid = np.zeros((a**t, B + 1), dtype=np.uint8)
        codes = np.arange(a**t)
        for j in range(t):
            grid[:, 1 + j] = alphabet[(codes // a ** (t - 1 - j)) % a]
        first.append(grid)
    found: list[tuple[bytes, bool, int]] = []
    cutoffs: list[tuple[float, float]] = []
    heavy_at: list[np.ndarray] = []
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    searched = 0
    parents = np.zeros((0, B + 1), dtype=np.uint8)
    heavy_done = np.zeros(0, dtype=np.uint64)
    pools: dict[tuple[int, bool], int] = {}
    for lev in range(L):
        width = lev + start
        if lev == 0:
            cand = np.concatenate([*first, first[-1]])
            cut = np.concatenate([np.full(len(g), t) for t, g in enumerate(first)] + [np.full(len(first[-1]), start)])
            complete = np.r_[np.ones(len(cand) - len(first[-1]), np.int64), np.zeros(len(first[-1]), np.int64)]
        else:
            kids = np.repeat(parents, len(alphabet), axis=0)
            kids[:, width] = np.tile(alphabet, len(parents))
            cand = np.concatenate([kids, kids])
            cut = np.full(len(cand), width, dtype=np.int64)
            complete = np.r_[np.ones(len(kids), np.int64), np.zeros(len(kids), np.int64)]
        cut = cut.astype(np.int64)
        groups = ch.level_groups(lev)
        hashes = ch.candidate_hashes(cand, cut, complete)
        buckets = item_buckets(ch, hashes, groups)
        f = item_estimates(s, hashes, groups, buckets)
        # a heavy item is one whose lower median passes RANK_Z of its standard errors (of a mean of h groups, times
        # √(π/2)); the heavy values found complete at earlier levels are the same items here, their mass in these
        # groups too
        sig = float(_sigma(ch, np.zeros(1), float(rows[groups].min()))[0]) / math.sqrt(h)
        score = _clean_mean(ch, f, buckets, np.partition(f, k - 1, axis=1)[:, k - 1], beam,
                            RANK_Z * MEDIAN_SE * sig, item_buckets(ch, heavy_done, groups))
        searched += len(cand)
        pools[(lev, False)] = int(complete.sum())
        if lev == L - 1:
            pools[(lev, True)] = int(len(cand) - complete.sum())
        if lev < L - 1:  # a complete value is found, not extended: it takes no place in the prefixes' beam
            whole, part = np.flatnonzero(complete == 1), np.flatnonzero(complete == 0)
            score[whole] = _complete_scores(s, ch, hashes[whole], lev)
            keep_c, cut_c = _best(score, whole, beam)
            keep_p, cut_p = _best(score, part, beam)
            keep = np.concatenate([keep_c, keep_p])
            cutoffs.append((cut_p, cut_c))
        else:  # the last level's items are all found (complete, or truncated): one beam
            keep, cut_l = _best(score, np.arange(len(cand)), beam)
            cutoffs.append((cut_l, cut_l))
        # the heavy items here, for the ranking's clean means: those kept whose score passes RANK_Z standard errors
        # of a mean over the level's groups, and the heavy values found complete before (the same items here)
        heavy = keep[score[keep] > RANK_Z * sig]
        heavy_at.append(np.concatenate([hashes[heavy], heavy_done]))
        heavy_done = np.concatenate([heavy_done, hashes[heavy[complete[heavy] == 1]]])
        found.extend((bytes(cand[i, 1:1 + cut[i]]), False, lev) for i in keep[complete[keep] == 1])
        prefixes = keep[complete[keep] == 0]
        if lev == L - 1:
            found.extend((bytes(cand[i, 1:1 + B]), True, L - 1) for i in prefixes)
        parents = cand[prefixes]
        if not len(parents):
            break
    return found, cutoffs, searched, heavy_at, pools


def _clean_mean(ch: HeavyHitters, f: np.ndarray, buckets: np.ndarray, median: np.ndarray, beam: int, bar: float,
                found: np.ndarray) -> np.ndarray:
    """Each candidate's mean group estimate over the groups where its bucket holds neither a heavy candidate but
    itself (one of the ``beam`` of highest lower median whose lower median passes ``bar``) nor a heavy value found
    complete at an earlier level (``found``: their buckets here), where a collision with a heavier item would lift
    it; the lower median where fewer than :data:`CLEAN_MIN` groups are so free. Only heavy items are avoided: a
    group shared with noise costs nothing, and dropping it would cost the score a group."""
    c = len(f)
    heavy = np.argpartition(-median, min(beam, c) - 1)[:beam] if c > beam else np.arange(c)
    heavy = heavy[median[heavy] > bar]
    mine = np.zeros(c, dtype=np.int64)
    mine[heavy] = 1
    clean = _free(ch, buckets, np.concatenate([buckets[heavy], found]), mine)
    kept = clean.sum(axis=1)
    return np.where(kept >= CLEAN_MIN, (f * clean).sum(axis=1) / np.maximum(kept, 1), median)


def _free(ch: HeavyHitters, buckets: np.ndarray, heavy: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """Which groups of each item are free of a heavy item: its bucket there (``buckets``, items × h) holds none of
    the heavy items' buckets (``heavy``, one row an item) but its own (``mine``: 1 where the item is one of them)."""
    h = buckets.shape[1]
    occupied = np.zeros((h, ch.width), dtype=np.int64)
    np.add.at(occupied, (np.tile(np.arange(h), len(heavy)), heavy.ravel()), 1)
    return occupied[np.arange(h)[None, :], buckets] - mine[:, None] == 0


def _sigma(ch: HeavyHitters, f: np.ndarray, rows: float) -> np.ndarray:
    """The standard deviation of one group estimate of an item of share f in a group of ``rows`` rows (privacy
    noise of the optimized unary encoding; bucket mass f plus the average collided mass)."""
    m = ch.width
    p, q = ch.report_probabilities
    theta = np.minimum(1.0, f + (1.0 - f) / m)
    var = (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (max(rows, 1.0) * (p - q) ** 2)
    return m / (m - 1.0) * np.sqrt(var)


def _miss_chance(s: Summary, cutoffs: list[tuple[float, float]], final: float, live_bar: float, tau: float) -> float:
    """The chance (union bound, module docstring) that a value of share ≥ ``tau`` is not listed, given the
    search's level cutoffs (prefixes, complete values), the ranking cutoff ``final`` and, when the last listed value
    is of a live pool, the highest pool's bar ``live_bar`` in standard errors (−inf otherwise)."""
    ch: HeavyHitters = s.channel  # type: ignore[assignment]
    h, m, L = ch.hashes, ch.width, ch.levels
    k = max(1, h // 2)
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    f = np.linspace(tau, 1.0, 65)
    slack = (1.0 - f) / (m - 1.0)
    total = 0.0
    for lev, (c, c_whole) in enumerate(cutoffs):
        n_g = float(rows[ch.level_groups(lev)].min())
        sigma = _sigma(ch, f, n_g)
        worst = np.zeros_like(f)
        if c > -math.inf:  # a prefix's score: the lower median, or a mean over CLEAN_MIN..h groups
            worst = bdtrc(k - 1, h, ndtr((c - f + slack) / sigma))
            for j in range(min(h, CLEAN_MIN), h + 1):
                worst = np.maximum(worst, ndtr((c - f + slack) / (sigma / math.sqrt(j))))
        if c_whole > -math.inf and lev < L - 1:  # a complete value's: the mean of its medians over L − lev levels
            n_w = float(rows[lev * h: L * h].min())
            whole_se = MEDIAN_SE * _sigma(ch, f, n_w) / math.sqrt(h * (L - lev))
            worst = np.maximum(worst, ndtr((c_whole - f + slack) / whole_se))
        total += float(worst.max())
    if final > -math.inf:  # ranked by a mean over the levels where complete (1 to L levels of h groups) less
        n_g = float(rows[: ch.levels * h].min())  # RANK_Z of its standard errors: the worst number of levels
        ses = [_level_se(ch, f, n_g) / math.sqrt(j) for j in range(1, ch.levels + 1)]
        # below the last listed, or (when that one is of a live pool) of a pool that stayed dead: below its bar
        total += max(float((ndtr((final + RANK_Z * e - f + slack) / e)
                            + (ndtr((live_bar * e - f + slack) / e) if live_bar > -math.inf else 0.0)).max())
                     for e in ses)
    return min(1.0, total)


def _level_se(ch: HeavyHitters, f: np.ndarray, rows: float) -> np.ndarray:
    """The largest standard error of one level's ranking estimate: a clean mean over at least CLEAN_MIN groups, or
    the median of all h."""
    return max(1.0 / math.sqrt(min(CLEAN_MIN, ch.hashes)), MEDIAN_SE / math.sqrt(ch.hashes)) * _sigma(ch, f, rows)


def _rank(s: Summary, ch: HeavyHitters, hashes: np.ndarray, first: np.ndarray, heavy_items: list[np.ndarray],
          pool: np.ndarray, pool_size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each found item's ranking score: the mean over the levels where it is complete (from ``first`` on) of its
    clean mean there (the groups where its bucket holds no other of that level's ``heavy`` items, from
    :func:`_search`; the median where fewer than CLEAN_MIN are so free), less RANK_Z standard errors; and whether
    its pool (``pool``: an id an item, of ``pool_size`` candidates) is live (:func:`_live_bar`)."""
    L, h = ch.levels, ch.hashes
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    total, var, levels = np.zeros(len(hashes)), np.zeros(len(hashes)), np.zeros(len(hashes))
    for lev in range(L):
        groups = ch.level_groups(lev)
        here = first <= lev
        if not here.any():
            continue
        heavy = heavy_items[min(lev, len(heavy_items) - 1)]
        b = item_buckets(ch, hashes[here], groups)
        f = item_estimates(s, hashes[here], groups, b)
        clean = _free(ch, b, item_buckets(ch, heavy, groups), np.isin(hashes[here], heavy).astype(np.int64))
        n_clean = clean.sum(axis=1)
        use = n_clean >= min(CLEAN_MIN, h)
        est = np.where(use, (f * clean).sum(axis=1) / np.maximum(n_clean, 1), np.median(f, axis=1))
        n_g = float(rows[groups].min())
        sd = _sigma(ch, np.clip(est, 0.0, 1.0), n_g)
        se2 = np.where(use, sd**2 / np.maximum(n_clean, 1), (MEDIAN_SE * sd) ** 2 / h)
        total[here] += est
        var[here] += se2
        levels[here] += 1
    x, se = total / levels, np.sqrt(var) / levels
    live = np.isin(pool, pool[x >= _live_bar(pool_size) * se])
    return x - RANK_Z * se, live


def _live_bar(pool_size: np.ndarray | float) -> np.ndarray:
    """The bar, in standard errors, that one value of a pool of ``pool_size`` candidates must pass for the pool to
    be live: Φ⁻¹(1 − LIVE_ALPHA/N)."""
    return ndtri(1.0 - LIVE_ALPHA / np.maximum(pool_size, 1.0))


def _sure_share(s: Summary, cutoffs: list[tuple[float, float]], final: float, live_bar: float) -> float:
    """The smallest share at which :func:`miss_chance` is at most :data:`SURE_MISS` (bisection; 2 when none)."""
    if _miss_chance(s, cutoffs, final, live_bar, 1.0) > SURE_MISS:
        return 2.0
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _miss_chance(s, cutoffs, final, live_bar, mid) <= SURE_MISS else (mid, hi)
    return hi


def _estimates(s: Summary, ch: HeavyHitters, hashes: np.ndarray, level: float) -> tuple[np.ndarray, ...]:
    """The listed items' frequencies from the estimate groups (module docstring): in each group where an item's
    bucket holds no other listed item, f̂_g = (m·θ̂_g − 1 + F)/(m − 1) with F the other listed items' shares (the
    rest of the mass falls in its bucket with chance 1/m each), averaged with an interval from their spread."""
    groups = ch.estimate_group_ids()
    rows = np.asarray(s.sums["rows"], dtype=np.float64)[groups]
    b = item_buckets(ch, hashes, groups)
    f_g = item_estimates(s, hashes, groups, b)
    shared = (b[:, None, :] == b[None, :, :]).sum(axis=1) > 1  # another listed item in its bucket there
    free = ~shared
    free[free.sum(axis=1) < 2] = True  # (never in practice: an item needs two groups for a spread)
    first = np.clip(spread_intervals(f_g, rows, level, free)[0], 0.0, 1.0)
    others = first.sum() - first
    return spread_intervals(f_g + others[:, None] / (ch.width - 1), rows, level, free)


def heavy_hitters(summary: Summary | str, top: int = 10, level: float = 0.95, beam: int | None = None,
                  miss_share: float | None = None, alphabet: str | None = None) -> HeavyHittersEstimate:
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
    alphabet : str, optional
        The characters the values are made of, when that is public (e.g. ``"0123456789"`` for codes): the search
        extends prefixes by their UTF-8 bytes only. Fewer candidates a level raise fewer by noise, so rarer values
        are found; a value with another character cannot be. Default: every byte. Post-processing of the
        summary: it changes nothing in the privacy guarantee.

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
    if alphabet is not None and (not isinstance(alphabet, str) or not alphabet):
        raise LdpDaskError(f"The 'alphabet' parameter must be a non-empty string of characters. Got {alphabet!r} "
                           "instead.")
    symbols = np.arange(256, dtype=np.uint8) if alphabet is None else np.unique(
        np.frombuffer(alphabet.encode("utf-8"), dtype=np.uint8))
    found, cutoffs, searched, heavy, pools = _search(s, ch, beam, symbols)
    items = [(t, trunc, lev, b) for b, trunc, lev in found if (t := _text(b, trunc)) is not None]
    if not items:
        raise LdpDaskError("The search found no value (every candidate scored below the noise): more rows or ε.")
    cand = np.zeros((len(items), ch.max_bytes + 1), dtype=np.uint8)
    for i, (_, _, _, b) in enumerate(items):
        cand[i, 1:1 + len(b)] = np.frombuffer(b, dtype=np.uint8)
    cut = np.array([len(b) for *_, b in items], dtype=np.int64)
    hashes = ch.candidate_hashes(cand, cut, np.array([0 if t else 1 for _, t, _, _ in items], dtype=np.int64))
    rows = np.asarray(s.sums["rows"], dtype=np.float64)
    pool = np.array([2 * lev + trunc for _, trunc, lev, _ in items], dtype=np.int64)
    size = np.array([pools[(lev, trunc)] for _, trunc, lev, _ in items], dtype=np.float64)
    rank, live = _rank(s, ch, hashes, np.array([lev for _, _, lev, _ in items]), heavy, pool, size)
    order = np.lexsort((-rank, ~live))  # live pools first, each by its ranking score
    listed = order[:top]
    final = float(rank[listed[-1]]) if len(items) > top else -math.inf
    live_bar = float(_live_bar(size.max())) if len(items) > top and live[listed[-1]] else -math.inf
    raw, se, est, low, high = _estimates(s, ch, hashes[listed], level)
    show = np.argsort(-raw, kind="stable")
    labels = [items[listed[i]][0] + ("…" if items[listed[i]][1] else "") for i in show]
    info = {**summary_info(s), "encoding": "heavy-hitters", "truncated": [bool(items[listed[i]][1]) for i in show],
            "sure_share": _sure_share(s, cutoffs, final, live_bar), "found": len(items), "searched": searched, "beam": beam,
            "max_bytes": ch.max_bytes, "estimate_rows": int(rows[ch.estimate_group_ids()].sum()),
            "miss_chance": None if miss_share is None else (float(miss_share),
                                                            _miss_chance(s, cutoffs, final, live_bar,
                                                                         float(miss_share)))}
    return HeavyHittersEstimate(labels=labels, frequencies=est[show], se=se[show], ci_low=low[show],
                                ci_high=high[show], raw=raw[show], method="heavy-hitters", n=s.n,
                                epsilon=ch.epsilon, level=level, info=info,
                                search=(s, cutoffs, final, live_bar))
