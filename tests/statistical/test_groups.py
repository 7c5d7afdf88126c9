"""Grouped statistics of a plan cover, group by group: a mean per private group (Fieller's intervals from the
group-mean channel) and a mean per public group (each group's own release), over 50 declared keys and "other",
released together in one plan on fresh samples of a known population; and the private channel's sums have the
law its estimator assumes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ldp_dask
from ldp_dask.channels import GroupMean
from ldp_dask.estimators.groups import fieller

KEYS = [f"C{i:02d}" for i in range(50)]
LABELS = KEYS + ["ZZ"]  # "ZZ" is declared nowhere: its rows form the group "other"
MEANS = np.linspace(500, 4500, len(LABELS))  # the last, "other", at 4500


def _sample(rng: np.random.Generator, n: int) -> pd.DataFrame:
    g = rng.integers(0, len(LABELS), n)
    x = np.clip(MEANS[g] + rng.normal(0, 100, n), 0, 5000)  # 5 sd inside the domain: clipping moves no mean
    return pd.DataFrame({"distance": x, "carrier": np.array(LABELS)[g]})


@pytest.mark.slow  # 200 plans
def test_every_group_interval_covers_in_a_fifty_group_plan():
    # 200 plans of 200,000 rows (about 3,900 per group) at ε 4 per row, each on a fresh sample under its own key:
    # the private group's 51 Fieller intervals and the public group's 51 mean intervals. Pooled per kind, the
    # coverage must reach 95% up to the sampling error of 200 data sets (the mean of a rep's 51 dependent
    # indicators has sd at most √(0.95·0.05/200) = 1.54%): one-sided at 3.5 sd, each check fails at a true 95%
    # with probability < 2.3e-4. Both intervals bound the group's variance by Bhatia–Davis, so both over-cover;
    # the median width of the private ones must also stay below the domain (they are informative).
    plan = ldp_dask.Plan.from_dict({"statistic": [
        {"column": "distance", "target": "mean", "domain": [0, 5000], "group_by": "carrier", "groups": KEYS,
         "name": "private"},
        {"column": "distance", "target": "mean", "domain": [0, 5000], "group_by": "carrier", "groups": KEYS,
         "group_kind": "public", "name": "public"},
    ]})
    rng = np.random.default_rng(33)
    reps = 200
    hits = {"private": 0.0, "public": 0.0}
    widths = []
    for r in range(reps):
        out = ldp_dask.release_plan(plan, _sample(rng, 200_000), 4.0, seed=r, ledger=False)
        p = out["private"].result
        assert list(p.labels) == [*KEYS, "__other__"]
        hits["private"] += np.mean((p.ci_low <= MEANS) & (MEANS <= p.ci_high))
        widths.append(np.median(p.ci_high - p.ci_low))
        pub = out["public"].groups
        assert [g.key for g in pub] == [*KEYS, "__other__"]
        hits["public"] += np.mean([g.result.ci[0] <= m <= g.result.ci[1] for g, m in zip(pub, MEANS)])
    floor = 0.95 - 3.5 * np.sqrt(0.95 * 0.05 / reps)
    rates = {k: v / reps for k, v in hits.items()}
    assert all(v >= floor for v in rates.values()), rates
    assert np.median(widths) < 5000, np.median(widths)


def test_group_mean_sums_have_the_law_the_estimator_assumes():
    # The summary's noise on every coordinate is a sum of m rows' discrete Laplace, in units of 2^-15: over 400
    # releases of the same 2,000 rows, each coordinate's spread matches √(m v) within the chi-square range of 399
    # draws at 1e-4 (both ways), and its mean the exact sum within 4.5 standard errors.
    rng = np.random.default_rng(4)
    ch = GroupMean(1.0, (0.0, 10.0), groups=3)
    x = np.column_stack([rng.integers(0, 3, 2000), rng.uniform(0, 10, 2000)])
    exact = ch.exact_stats(x)["sum"] / 2**15
    draws = np.array([ch.stats(x, np.random.default_rng(k))["sum"] for k in range(400)])
    sd = np.sqrt(2000 * ch.noise_variance)
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= 4.5 * sd / np.sqrt(400))
    ratio = draws.std(axis=0, ddof=1) / sd
    assert np.all((ratio > 0.83) & (ratio < 1.18)), ratio
    # privacy: two views differ by at most 4 in L1 (t and the count, in two groups), so ε spent is 4/b
    assert abs(ch.epsilon_spent() - 1.0) < 1e-12


def test_fieller_interval_is_the_set_it_solves():
    # On a grid of μ, the interval returned holds exactly the μ that satisfy the inequality it states; None (the
    # whole domain is reported) exactly when the quadratic does not open upwards, so the set is unbounded
    z = 1.96
    for s, c, noise in [(300.0, 1000.0, 4e4), (-50.0, 200.0, 1e5), (10.0, 30.0, 1e6), (0.0, -20.0, 1e4)]:
        grid = np.linspace(-1, 1, 20001)
        inside = (s - grid * c) ** 2 <= z * z * (max(c, 0) * (1 - grid**2) + noise * (1 + grid**2))
        band = fieller(s, c, noise, z)
        if band is None:
            assert c * c + z * z * (max(c, 0) - noise) <= 0, (s, c, noise)
            continue
        lo, hi = band
        assert np.array_equal(inside, (grid >= lo - 1e-9) & (grid <= hi + 1e-9)), (s, c, noise)


@pytest.mark.slow  # 200 plans
def test_every_share_interval_covers_in_a_fifty_group_plan():
    # The shares of 4 categories within each of 51 private groups (the group-histogram channel over 51 × 4 cells)
    # and of a distribution's 5 bins within each group, in one plan, 200 times on fresh samples of 400,000 rows at
    # ε 4 per row: pooled per statistic, coverage ≥ 95% − 3.5 sd of 200 data sets (each check fails at a true 95%
    # with probability < 2.3e-4).
    cats = ["EWR", "JFK", "LGA", "SFO"]
    mix = np.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])  # even groups, odd groups
    plan = ldp_dask.Plan.from_dict({"statistic": [
        {"column": "origin", "target": "frequencies", "categories": cats, "group_by": "carrier", "groups": KEYS},
        {"column": "distance", "target": "distribution", "domain": [0, 5000], "bins": 5, "group_by": "carrier",
         "groups": KEYS},
    ]})
    edges = np.linspace(0, 5000, 6)
    bins = np.array([np.diff(np.clip((edges - (m - 100)) / 200, 0, 1)) for m in MEANS])  # uniform on m ± 100
    rng = np.random.default_rng(34)
    reps = 200
    hits = {"frequencies": 0.0, "distribution": 0.0}
    for r in range(reps):
        n = 400_000
        g = rng.integers(0, len(LABELS), n)
        u = rng.random(n)
        origin = np.array(cats)[(u[:, None] > np.cumsum(mix[g % 2], axis=1)).sum(axis=1)]
        df = pd.DataFrame({"carrier": np.array(LABELS)[g], "origin": origin,
                           "distance": MEANS[g] + rng.uniform(-100, 100, n)})
        out = ldp_dask.release_plan(plan, df, 4.0, seed=r, ledger=False)
        f = out["origin.frequencies"].result
        truth = mix[np.arange(len(LABELS)) % 2]
        hits["frequencies"] += np.mean((f.ci_low <= truth) & (truth <= f.ci_high))
        d = out["distance.distribution"].result
        hits["distribution"] += np.mean((d.ci_low <= bins) & (bins <= d.ci_high))
    floor = 0.95 - 3.5 * np.sqrt(0.95 * 0.05 / reps)
    rates = {k: v / reps for k, v in hits.items()}
    assert all(v >= floor for v in rates.values()), rates


def test_fieller_share_interval_is_the_set_it_solves():
    from ldp_dask.estimators.groups import fieller_share

    z = 1.96
    for s, c, noise, k in [(300.0, 1000.0, 4e4, 4), (5.0, 2000.0, 1e5, 10), (10.0, 30.0, 1e6, 3), (0.0, -20.0, 1e4, 2)]:
        grid = np.linspace(0, 1, 20001)
        inside = (s - grid * c) ** 2 <= z * z * (max(c, 0) * grid * (1 - grid)
                                                 + noise * ((1 - grid) ** 2 + (k - 1) * grid**2))
        band = fieller_share(s, c, noise, k, z)
        if band is None:
            assert c * c + z * z * (max(c, 0) - noise * k) <= 0, (s, c, noise, k)
            continue
        lo, hi = band
        assert np.array_equal(inside, (grid >= lo - 1e-9) & (grid <= hi + 1e-9)), (s, c, noise, k)
