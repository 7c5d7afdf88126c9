"""Empirical privacy audit of a local channel: a Clopper–Pearson lower bound on the ε it realises.

For two inputs x, x' the channel is sampled many times each; for an event E,
ε ≥ log P(E | x)/P(E | x'), so one-sided Clopper–Pearson bounds (a lower bound
on P(E | x), an upper bound on P(E | x'), each at α/2) give a lower
confidence bound on the realised ε at level 1 − α. The event is a threshold on
the Neyman–Pearson statistic — the log-likelihood ratio of the channel's
declared noise model (additive Laplace with the channel's own per-coordinate
scales, or randomized response's report probabilities) — chosen on one half of
the samples and evaluated on the other, so the bound is honest.

A correct channel gives a bound ≤ its ε (up to the 1 − α confidence); a
miscalibrated one (noise smaller than declared) is caught when its realised ε
exceeds the nominal one by more than the sampling error.

    from ldp_dask.audit import audit_channel
    r = audit_channel(LaplaceHistogram(1.0, 8, (0, 1)), samples=400_000, rng=np.random.default_rng(0))
    r.epsilon_lower, r.epsilon_nominal
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

from ._validation import LdpDaskError, check_int, check_probability
from .channels import Channel, NumericChannel, WaveletSplit
from .channels.categorical import CategoricalChannel

__all__ = ["audit", "audit_channel", "audit_composed", "audit_person", "audit_summary", "AuditResult", "worst_pair",
           "miscalibrated", "event_loss_lower_bound"]


@dataclass(frozen=True)
class AuditResult:
    """Lower confidence bound on the realised ε for one pair of inputs."""

    channel: str
    epsilon_nominal: float
    epsilon_lower: float
    confidence: float
    samples: int
    x: Any
    x_prime: Any
    threshold: float
    hits: tuple[int, int]

    @property
    def passed(self) -> bool:
        return self.epsilon_lower <= self.epsilon_nominal

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "epsilon_nominal": self.epsilon_nominal, "epsilon_lower": self.epsilon_lower,
                "confidence": self.confidence, "samples": self.samples, "passed": self.passed}


def _scales(channel: Any) -> np.ndarray:  # duck-typed: each channel family names its scales
    """Per-coordinate Laplace scale of the channel's rows (0 where a coordinate carries no noise)."""
    for attr in ("scales",):
        if hasattr(channel, attr):
            return np.asarray(getattr(channel, attr), dtype=np.float64)
    if hasattr(channel, "sigmas") and hasattr(channel, "blocks") and hasattr(channel, "sizes"):  # HaarAdaptive
        k = len(channel.blocks)
        return np.concatenate([np.zeros(k), np.repeat(channel.sigmas, channel.sizes)])
    return np.full(channel.dim, float(channel.noise_scale))


def _mean_view(channel: Any, x: Any) -> np.ndarray:  # duck-typed, as _scales
    """E[Z | x] for an additive-noise channel: the exact statistics of one row, in row layout."""
    if hasattr(channel, "sigmas") and hasattr(channel, "blocks") and hasattr(channel, "sizes"):  # HaarAdaptive
        k = len(channel.blocks)
        t = channel.to_unit(np.array([x]))
        out = np.zeros(channel.dim)
        out[:k] = 1.0
        for g in range(k):
            idx, val = channel.signal(t, g)
            out[k + channel.block(g).start + int(idx[0])] = val[0]
        return out
    stats = channel.exact_stats(channel.prepare(np.array([x]))[0])
    view = np.asarray(stats.get("sum", next(iter(stats.values()))), dtype=np.float64).ravel()
    if getattr(channel, "noise", "continuous") == "lattice":  # exact stats are lattice coordinates
        if hasattr(channel, "granularities"):
            view = view * np.repeat(channel.granularities, [sl.stop - sl.start for sl in channel.slices])
        elif hasattr(channel, "granularity"):
            view = channel.domain[0] + channel.granularity * view
    return view


def _llr(channel: Channel, z: np.ndarray, x: Any, x_prime: Any) -> np.ndarray:
    """log p(z | x) − log p(z | x') under the channel's declared noise model."""
    if hasattr(channel, "log_likelihood"):  # channels whose views have an explicit law (categorical, bounded means)
        if isinstance(channel, CategoricalChannel):
            x, x_prime = (int(channel.prepare(np.array([v]))[0][0]) for v in (x, x_prime))
        return channel.log_likelihood(z, x) - channel.log_likelihood(z, x_prime)
    if isinstance(channel, WaveletSplit):  # the level drawn is revealed: each row's ratio is its level's
        k = len(channel.parts)
        g = np.argmax(z[:, :k], axis=1)
        out = np.zeros(len(z))
        for gi, part in enumerate(channel.parts):
            sel = g == gi
            if sel.any():
                b = channel.block(gi)
                out[sel] = _llr(part, z[sel][:, k + b.start: k + b.stop], x, x_prime)
        return out
    s = _scales(channel)
    a, ap = _mean_view(channel, x), _mean_view(channel, x_prime)
    live = s > 0
    return ((np.abs(z[:, live] - ap[live]) - np.abs(z[:, live] - a[live])) / s[live]).sum(axis=1)


def _rows(channel: Channel, x: Any, m: int, rng: np.random.Generator) -> np.ndarray:
    if hasattr(channel, "_repeat"):  # sketches: ``x`` is the prepared value (its hash, or its prefix bytes)
        return channel.privatize(channel._repeat(x, m), rng)
    if isinstance(channel, CategoricalChannel):
        vals = np.array([x] * m)
    elif np.ndim(x) == 1:  # a row of several fields: a private group's (group, value) pair
        vals = np.tile(np.asarray(x, dtype=np.float64), (m, 1))
    else:
        vals = np.full(m, float(x))
    return channel.privatize(channel.prepare(vals)[0], rng)


def audit(channel: Channel, x: Any, x_prime: Any, samples: int = 200_000, rng: np.random.Generator | None = None,
          alpha: float = 0.05, block: int = 20_000) -> AuditResult:
    """Audit the pair (x, x'): a 1 − ``alpha`` lower confidence bound on the ε the channel realises.

    ``samples`` outputs are drawn for each input (half choose the event, half
    estimate its probabilities).
    """
    samples = check_int(samples, "samples", 1000, 10**9)
    alpha = check_probability(alpha, "alpha")
    gen = rng if rng is not None else np.random.default_rng()

    def stats(v: Any) -> np.ndarray:
        out = []
        for s in range(0, samples, block):
            out.append(_llr(channel, _rows(channel, v, min(block, samples - s), gen), x, x_prime))
        return np.concatenate(out)

    eps_lo, best, hits = _lower_bound(stats(x), stats(x_prime), samples, alpha)
    return AuditResult(channel.name, float(channel.epsilon), eps_lo, 1 - alpha, samples, x, x_prime, best, hits)


def audit_composed(parts: Sequence[tuple[Channel, Any, Any]], samples: int = 200_000, reports: int = 1,
                   rng: np.random.Generator | None = None, alpha: float = 0.05, block: int = 20_000) -> AuditResult:
    """Audit one row (or one person) released by several channels in turn: a lower confidence bound on the ε the
    composition realises, to compare with the sum of the parts' ε (basic composition, which holds for adaptively
    chosen local randomizers).

    Parameters
    ----------
    parts : sequence of (Channel, x, x')
        Each channel with the row's input to it under the two neighbouring datasets: a private group's (group,
        value) pair, a sketch's prepared value, a number or a category.
    samples : int
        Draws under each dataset; half choose the threshold event, half bound its probabilities.
    reports : int
        The reports the row makes to every part under each dataset (a person's k reports with a privacy unit, each
        channel then at its ε/k).
    rng : numpy.random.Generator, optional
        The randomness of the draws.
    alpha : float
        1 − the confidence of the one-sided Clopper–Pearson bounds.
    block : int
        Draws per batch (memory).

    Returns
    -------
    AuditResult
        ``epsilon_lower``: the bound on the ε realised by the sum of all reports' log-likelihood ratios,
        thresholded as in :func:`audit`; ``epsilon_nominal``: ``reports`` × the sum of the parts' ε.
    """
    samples = check_int(samples, "samples", 1000, 10**9)
    reports = check_int(reports, "reports", 1, 10**4)
    alpha = check_probability(alpha, "alpha")
    if not parts:
        raise LdpDaskError("parts: give at least one (channel, x, x') triple")
    gen = rng if rng is not None else np.random.default_rng()

    def stats(side: int) -> np.ndarray:
        out = []
        for s in range(0, samples, block):
            m = min(block, samples - s)
            total = np.zeros(m)
            for part in parts:
                channel, x, xp = part
                for _ in range(reports):
                    total += _llr(channel, _rows(channel, part[1 + side], m, gen), x, xp)
            out.append(total)
        return np.concatenate(out)

    eps_lo, best, hits = _lower_bound(stats(0), stats(1), samples, alpha)
    nominal = reports * math.fsum(float(ch.epsilon) for ch, _, _ in parts)
    name = " + ".join(ch.name for ch, _, _ in parts) + (f" ({reports} reports each)" if reports > 1 else "")
    return AuditResult(name, nominal, eps_lo, 1 - alpha, samples, tuple(p[1] for p in parts),
                       tuple(p[2] for p in parts), best, hits)


def event_loss_lower_bound(k_a: int, k_b: int, n: int, alpha: float) -> float:
    """The realised privacy loss of one event E, bounded below: max over both directions of ln(P_a(E)/P_b(E)) from
    ``k_a`` and ``k_b`` hits of E in ``n`` draws under each of two neighbouring inputs, each probability bounded by
    a one-sided Clopper–Pearson interval at ``alpha`` (the lower one above, the upper one below); ``-inf`` when
    neither input hits E."""
    best = -math.inf
    for k1, k2 in ((k_a, k_b), (k_b, k_a)):
        if k1 == 0:
            continue
        lo = beta.ppf(alpha, k1, n - k1 + 1)
        hi = beta.ppf(1 - alpha, k2 + 1, n - k2) if k2 < n else 1.0
        best = max(best, math.log(lo / hi))
    return best


def _lower_bound(tx: np.ndarray, txp: np.ndarray, samples: int, alpha: float,
                 delta: float = 0.0) -> tuple[float, float, tuple[int, int]]:
    """Choose the threshold event on one half of the statistics, bound ε on the other half: for an (ε, δ)
    guarantee, P(E | x) ≤ e^ε P(E | x') + δ, so ε ≥ log((P(E | x) − δ)/P(E | x'))."""
    # the statistic saturates at its maximum on the worst-case event; round away the float noise of
    # the sum so that equal values under x and x' compare equal
    tx, txp = np.round(tx, 9), np.round(txp, 9)
    half = samples // 2
    sel_x, est_x, sel_xp, est_xp = tx[:half], tx[half:], txp[:half], txp[half:]
    cands = np.unique(np.quantile(sel_x, np.linspace(0.5, 0.9995, 200)))

    def bound(t: float, a: np.ndarray, b: np.ndarray) -> float:
        k, kp = int(np.count_nonzero(a >= t)), int(np.count_nonzero(b >= t))
        n, npr = len(a), len(b)
        if k == 0:
            return -math.inf
        p_lo = beta.ppf(alpha / 2, k, n - k + 1) - delta
        p_hi = beta.ppf(1 - alpha / 2, kp + 1, npr - kp) if kp < npr else 1.0
        return math.log(p_lo / p_hi) if p_lo > 0 else -math.inf

    best = max(cands, key=lambda t: bound(t, sel_x, sel_xp)) if len(cands) else 0.0
    eps_lo = bound(best, est_x, est_xp)
    hits = (int(np.count_nonzero(est_x >= best)), int(np.count_nonzero(est_xp >= best)))
    return float(max(eps_lo, 0.0)), float(best), hits


def audit_summary(channel: Channel, n: int, x: Any, x_prime: Any, others: Any, samples: int = 200_000,
                  rng: np.random.Generator | None = None, alpha: float = 0.05,
                  statement: dict[str, Any] | None = None) -> AuditResult:
    """Audit the central guarantee of a summary-mode release of ``n`` rows: a lower confidence bound on the ε
    its published sums realise between two neighbouring tables.

    The tables hold ``n − 1`` rows equal to ``others`` and one row equal to ``x`` or to ``x_prime``. Each sample
    is a release of the table's summary by the release path's own summary step
    (:func:`ldp_dask.tasks.release_exact`: the exact statistics, the noise drawn in law for n rows under a fresh
    random key, the exact sums rounded once); the statistic is the projection of the published sums on the
    difference of the two tables' mean published sums, estimated on the half of the samples that chooses the
    threshold event (:func:`audit`); the other half bounds ε. ``statement`` is the central (ε, δ) audited
    (default: the one the release states, :func:`ldp_dask.amplification.central_statement`); the bound subtracts
    its δ, so a result above its ε contradicts it at confidence 1 − ``alpha``.
    """
    from . import exactsum
    from .amplification import central_statement
    from .tasks import ChannelJob, release_exact

    samples = check_int(samples, "samples", 1000, 10**9)
    n = check_int(n, "n", 2, 10**7)
    alpha = check_probability(alpha, "alpha")
    gen = rng if rng is not None else np.random.default_rng()
    stated = statement if statement is not None else central_statement(channel, n)
    if stated is None:  # pragma: no cover - every summary-mode channel states one
        raise LdpDaskError(f"the {channel.name!r} channel states no central guarantee to audit")

    def exact(v: Any) -> dict[str, np.ndarray]:
        values, _ = channel.prepare(np.array([others] * (n - 1) + [v]), clip=False)
        return channel.exact_stats(values)

    job = ChannelJob(None, (), (), channel, False, "summary")  # type: ignore[arg-type]

    def published(table: dict[str, np.ndarray]) -> np.ndarray:
        out = []
        for _ in range(samples):
            acc = release_exact({k: np.array(v, copy=True) for k, v in table.items()}, n, 0, job, gen.bytes(32))
            out.append(np.concatenate([np.ravel(exactsum.to_float(acc["stats"][k])) for k in sorted(acc["stats"])]))
        return np.array(out)

    z, zp = published(exact(x)), published(exact(x_prime))
    half = samples // 2
    direction = z[:half].mean(axis=0) - zp[:half].mean(axis=0)
    eps_lo, best, hits = _lower_bound(z @ direction, zp @ direction, samples, alpha, float(stated["delta"]))
    return AuditResult(f"{channel.name} summary of {n} rows (central)", float(stated["epsilon"]), eps_lo,
                       1 - alpha, samples, x, x_prime, best, hits)


def audit_person(channel: Channel, max_contributions: int, rows: int, x: Any = None, x_prime: Any = None,
                 samples: int = 200_000, rng: np.random.Generator | None = None, alpha: float = 0.05,
                 bound_contributions: bool = True, block: int = 20_000, rows_prime: int | None = None,
                 pad: bool = True) -> AuditResult:
    """Audit a release with a privacy unit, treating the whole person as the unit.

    A person holds ``rows`` rows, all equal to ``x``, or — the neighbouring
    dataset — ``rows_prime`` rows (default ``rows``), all equal to ``x'``. The
    release path's own steps are applied to them: contribution bounding and
    padding (:func:`ldp_dask.units.kept_index` keyed by a random key, then
    :func:`ldp_dask.units.pad_index`) make exactly ``max_contributions`` = k
    reports, and :func:`ldp_dask.units.per_row_channel` privatizes each at ε/k.
    What an observer sees of the person is the number of its reports and
    their values; the statistic is the sum of the reports' log-likelihood
    ratios, minus a large step for a person whose report count differs from
    the first dataset's (a count that depends on the person's rows is an
    event of probability 1 under one dataset and 0 under the other). The
    bound is on the ε realised about the person, to compare with
    ``channel.epsilon`` (ε per person).

    Negative controls: ``bound_contributions=False`` keeps every row
    (realised ε ``rows/k`` times the claim); ``pad=False`` bounds without
    padding, so a person with fewer than k rows makes fewer reports (the
    count ``min(k, rows)`` differs between the datasets: unbounded ε).
    """
    from .units import kept_index, pad_index, per_row_channel, plan_cells, unit_keys

    samples = check_int(samples, "samples", 1000, 10**9)
    k = check_int(max_contributions, "max_contributions", 1, 10**6)
    m = check_int(rows, "rows", 1, 10**6)
    mp = m if rows_prime is None else check_int(rows_prime, "rows_prime", 1, 10**6)
    alpha = check_probability(alpha, "alpha")
    gen = rng if rng is not None else np.random.default_rng()
    row = per_row_channel(channel, k)
    if x is None or x_prime is None:
        x, x_prime = worst_pair(row)
    keys = unit_keys(gen.bytes(32), b"audit")

    def reports(persons: int, s: int, rows_each: int) -> np.ndarray:
        """The persons (one entry per report) of ``persons`` persons of ``rows_each`` rows each."""
        person = np.repeat(np.arange(s, s + persons, dtype=np.uint64), rows_each)
        if not bound_contributions:
            return person
        rank = ranks_of(person)
        cells = plan_cells(keys.bucket, 1, len(person))
        parts = [{"person": person, "rank": rank, "value": np.zeros(len(person))}]
        _, keep, starts = kept_index(parts, k, cells, 0, cells.count)
        if pad:
            index, _ = pad_index(person[keep], starts, k)
            keep = keep if index is None else keep[index]
        return person[keep]

    def ranks_of(person: np.ndarray) -> np.ndarray:
        from .units import ranks

        return ranks(person, np.arange(len(person)), keys)

    count_x = None

    def stats(v: Any, rows_each: int) -> np.ndarray:
        nonlocal count_x
        out = []
        for s in range(0, samples, block):
            persons = min(block, samples - s)
            person = reports(persons, s, rows_each) - np.uint64(s)
            llr = _llr(row, _rows(row, v, len(person), gen), x, x_prime)
            idx = person.astype(np.int64)
            total = np.bincount(idx, weights=llr, minlength=persons)
            count = np.bincount(idx, minlength=persons)
            if count_x is None:
                count_x = int(count[0])
            out.append(total - _COUNT_STEP * (count != count_x))  # the count, as an observer sees it
        return np.concatenate(out)

    eps_lo, best, hits = _lower_bound(stats(x, m), stats(x_prime, mp), samples, alpha)
    what = f"{m} rows" if mp == m else f"{m} vs {mp} rows"
    return AuditResult(f"{channel.name} per person ({what}, k={k})", float(channel.epsilon), eps_lo, 1 - alpha,
                       samples, x, x_prime, best, hits)


#: Far above any sum of k log-likelihood ratios of a channel at ε/k (each at most ε/k in size).
_COUNT_STEP = 1e6


def worst_pair(channel: Channel, grid: int = 257) -> tuple[Any, Any]:
    """The pair of inputs whose mean views are farthest apart in noise units (Σ|a − a'|/σ)."""
    if isinstance(channel, CategoricalChannel):
        return channel.labels[0], channel.labels[1]
    if hasattr(channel, "worst_pair"):
        return channel.worst_pair()
    if isinstance(channel, WaveletSplit):  # the level drawn most often: each level spends all of ε on its rows
        return worst_pair(channel.parts[int(np.argmax(channel.probabilities))], grid)
    if not isinstance(channel, NumericChannel):
        raise LdpDaskError(f"no automatic pair for channel {channel.name!r}; give x and x' to audit()")
    lo, hi = channel.domain
    xs = np.linspace(lo, hi, grid)
    s = _scales(channel)
    live = s > 0
    views = np.array([_mean_view(channel, v)[live] / s[live] for v in xs])
    dist = np.abs(views[:, None, :] - views[None, :, :]).sum(axis=2)
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return float(xs[i]), float(xs[j])


def audit_channel(channel: Channel, samples: int = 200_000, rng: np.random.Generator | None = None,
                  alpha: float = 0.05) -> AuditResult:
    """:func:`audit` on the channel's :func:`worst_pair`."""
    x, xp = worst_pair(channel)
    return audit(channel, x, xp, samples=samples, rng=rng, alpha=alpha)


def miscalibrated(channel: Channel, factor: float = 2.0) -> Channel:
    """A copy of ``channel`` that really spends ``factor`` × its ε while reporting the same ε.

    The noise scales are divided by ``factor``; a channel with an explicit output law (categorical, bounded
    means) is rebuilt at ``factor`` × ε and keeps the old ε on its label. For testing auditors only.
    """
    import copy

    ch: Any
    if hasattr(channel, "log_likelihood"):
        ch = type(channel).from_params({**channel.params(), "epsilon": channel.epsilon * factor})
        ch.epsilon = channel.epsilon
        return ch
    ch = copy.copy(channel)
    if isinstance(ch, WaveletSplit):  # every level's noise divided
        ch.parts = [miscalibrated(p, factor) for p in ch.parts]  # type: ignore[misc]
    elif hasattr(ch, "scales"):
        ch.scales = np.asarray(ch.scales) / factor
        if hasattr(ch, "lattice_scales"):
            ch.lattice_scales = np.asarray(ch.lattice_scales) / factor
    elif hasattr(ch, "sizes"):
        ch.sigmas = np.asarray(ch.sigmas) / factor
    else:
        ch.noise_scale = ch.noise_scale / factor
    return ch
