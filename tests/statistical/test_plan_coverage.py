"""A released plan's intervals cover: the nycflights-like report's five statistics (a density, the mean per private
carrier group, category frequencies, quantiles, a mean under a null policy) released together from one pass, under
both designs, on fresh samples of a known population; and each statistic's spread matches what `plan check`
predicted for it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

import ldp_dask
from ldp_dask.estimators import histogram_density

CARRIERS = ["AA", "B6", "DL", "UA"]
SHARES = np.array([0.3, 0.25, 0.25, 0.2])
Q = [0.1, 0.5, 0.9]
PLAN = ldp_dask.Plan.from_dict({"statistic": [
    {"column": "distance", "target": "distribution", "domain": [0, 5000], "bins": 20},
    {"column": "distance", "target": "mean", "domain": [0, 5000], "group_by": "carrier", "groups": CARRIERS,
     "name": "distance.per.carrier"},
    {"column": "carrier", "target": "frequencies", "categories": CARRIERS},
    {"column": "air_time", "target": "quantiles", "domain": [0, 700], "bins": 35, "q": Q},
    {"column": "dep_delay", "target": "mean", "domain": [-60, 300], "nulls": 0},
]})
SCALES = np.array([400.0, 500.0, 600.0, 700.0])  # each carrier's distances: Gamma(2, scale), clipped at 5000
DISTANCE = [stats.gamma(2.0, scale=s) for s in SCALES]
DELAY = stats.norm(10.0, 30.0)
NULL_SHARE = 0.1


def _sample(rng: np.random.Generator, n: int) -> pd.DataFrame:
    c = rng.choice(len(CARRIERS), n, p=SHARES)
    delay = np.clip(DELAY.rvs(n, random_state=rng), -60, 300)
    return pd.DataFrame({
        "distance": np.clip(rng.gamma(2.0, SCALES[c]), 0, 5000),
        "carrier": np.array(CARRIERS)[c],
        "air_time": rng.uniform(20, 600, n),
        "dep_delay": np.where(rng.random(n) < NULL_SHARE, np.nan, delay),
    })


def _truth() -> dict[str, np.ndarray]:
    edges = np.linspace(0, 5000, 21)
    cdf = sum(p * d.cdf(edges) for p, d in zip(SHARES, DISTANCE))
    cdf[-1] = 1.0  # clipped at 5000: the tail's mass sits in the last bin
    per = np.array([integrate.quad(d.sf, 0, 5000)[0] for d in DISTANCE])  # E[min(X, 5000)] = ∫ P(X > x) dx
    a, b = -60.0, 300.0  # E[clip(X, a, b)] of a normal, exactly
    m, s = DELAY.mean(), DELAY.std()
    za, zb = (a - m) / s, (b - m) / s
    inside = m * (stats.norm.cdf(zb) - stats.norm.cdf(za)) + s * (stats.norm.pdf(za) - stats.norm.pdf(zb))
    clipped = inside + a * stats.norm.cdf(za) + b * stats.norm.sf(zb)
    return {"bins": np.diff(cdf), "shares": SHARES, "quantiles": 20 + 580 * np.array(Q), "per": per,
            "mean": np.array((1 - NULL_SHARE) * clipped)}  # a null becomes 0: the filled column's mean


@pytest.mark.slow  # 2 × 200 plan releases
@pytest.mark.parametrize("design", ["split-rows", "split-epsilon"])
def test_every_interval_of_a_released_plan_covers(design):
    # 200 plans of 20,000 rows at ε 2 per row, each on a fresh sample and under its own key. Per statistic the
    # pooled coverage of its intervals (20 bins, 4 carriers' means — "other" holds no row and no true mean — 4
    # categories, 3 quantiles, 1 mean) must reach 95% up to the sampling error of 200 data sets: the mean of a
    # rep's dependent indicators has sd at most that of one, √(0.95·0.05/200) = 1.54%, so one-sided at 3.6 sd each
    # check fails at a true 95% with probability < 1.6e-4 (< 1e-3 for the five). The same releases check `plan
    # check`'s predicted SE of the mean (an upper bound) and of a typical category share, measured over the 200
    # draws (sd within ±15% of the truth with prob. 0.999).
    truth = _truth()
    rng = np.random.default_rng(2026)
    hits = {"bins": 0.0, "per": 0.0, "shares": 0.0, "quantiles": 0.0, "mean": 0.0}
    means, shares = [], []
    reps = 200
    for r in range(reps):
        out = ldp_dask.release_plan(PLAN, _sample(rng, 20_000), 2.0, design=design, seed=r, ledger=False)
        assert out.design == design
        d = out["distance.distribution"]
        est = d.result if d.result.has_band else histogram_density(d.summary, projection="none")
        lo, hi = (v * np.diff(est.edges) for v in est.band())
        hits["bins"] += np.mean((lo <= truth["bins"]) & (truth["bins"] <= hi))
        g = out["distance.per.carrier"].result
        hits["per"] += np.mean((g.ci_low[:4] <= truth["per"]) & (truth["per"] <= g.ci_high[:4]))
        f = out["carrier.frequencies"].result
        hits["shares"] += np.mean((f.ci_low <= SHARES) & (SHARES <= f.ci_high))
        q = out["air_time.quantiles"].quantiles
        hits["quantiles"] += np.mean((q.ci_low <= truth["quantiles"]) & (truth["quantiles"] <= q.ci_high))
        m = out["dep_delay.mean"].result
        hits["mean"] += float(m.ci[0] <= truth["mean"] <= m.ci[1])
        means.append(m.raw)  # the unbiased estimate: its spread is what the prediction predicts
        shares.append(f.raw[1])  # B6 at 0.25: the typical share 1/K the prediction assumes
    floor = 0.95 - 3.6 * np.sqrt(0.95 * 0.05 / reps)
    rates = {k: v / reps for k, v in hits.items()}
    assert all(v >= floor for v in rates.values()), (design, rates)
    predicted = {s.label: s.predicted_se for s in out.statistics}
    assert np.std(means, ddof=1) <= 1.15 * predicted["dep_delay.mean"], (np.std(means, ddof=1), predicted)
    ratio = np.std(shares, ddof=1) / predicted["carrier.frequencies"]
    assert 0.85 <= ratio <= 1.15, (design, ratio)
