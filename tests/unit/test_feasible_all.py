"""Every printed number is a possible one, for every estimator and target, in every output form.

A property sweep: densities (histogram, Haar, wavelet, square wave), their quantiles, means, frequencies (RR,
Hadamard), and means and shares per private group, each at ε ∈ {0.1, 1, 4} × n ∈ {5, 30, 10^4} on nasty data
(every value at one end of the domain, one category only, every row in one group), three keys each (one key
and one end for the square wave, whose fit takes seconds). In the JSON
form (``to_dict``), the tidy table (``to_table``) and the text (``describe``), no point lies outside its feasible
set (the domain, [0, 1] and the simplex, at least 0) or outside its own interval, and no ``nan`` is printed.
"""

from __future__ import annotations

import itertools
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import ldp_dask
from ldp_dask import channels as C
from ldp_dask.estimators import estimate
from ldp_dask.estimators.local_quantiles import local_quantiles

LO, HI = -50.0, 1000.0
CASES = list(itertools.product([0.1, 1.0, 4.0], [5, 30, 10_000]))
TOL = 1e-9


def _inside(values, lo, hi) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(np.all((v >= lo - TOL) & (v <= hi + TOL)))


def _holds(low, point, high) -> bool:
    low, point, high = (np.asarray(v, dtype=float) for v in (low, point, high))
    return bool(np.all((low <= point + TOL) & (point <= high + TOL)))


def _clean(result) -> None:
    """Every form: the JSON has no NaN (strict JSON), the text no 'nan'."""
    json.dumps(result.to_dict(), allow_nan=False)
    assert not re.search(r"\bnan\b", str(result.describe()), re.I), str(result.describe())


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("epsilon,n", CASES)
@pytest.mark.parametrize("name", ["histogram", "haar", "wavelet",
                                  # its EMS fit with cross-validation takes seconds a release: one key, in make test
                                  pytest.param("square-wave", marks=pytest.mark.slow)])
def test_densities_and_their_quantiles_are_possible(name, epsilon, n):
    build = {"histogram": lambda: C.LaplaceHistogram(epsilon, 8, (LO, HI)),
             "haar": lambda: C.HaarLaplace(epsilon, 3, (LO, HI)),
             "wavelet": lambda: C.WaveletLaplace(epsilon, (LO, HI), 2, 4),
             "square-wave": lambda: C.SquareWave(epsilon, (LO, HI))}[name]
    ends, seeds = ((HI,), range(1)) if name == "square-wave" else ((LO, HI), range(3))  # its fit: 2 s a release
    for end, seed in itertools.product(ends, seeds):
        s = ldp_dask.privatize(np.full(n, end), channel=build(), seed=seed, ledger=False)
        d = estimate(s)
        widths = np.diff(d.edges)
        assert np.all(d.density >= -TOL) and d.masses.sum() <= 1 + 1e-9, d.method
        if d.has_band:
            low, high = d.band()
            assert np.all(low >= -TOL) and _holds(low, d.density, high)
            if not d.smooth:
                assert np.all(high <= 1 / widths + TOL)
            table = d.to_table().to_pandas()
            assert (table["ci_low"] >= -TOL).all() and _holds(table["ci_low"], table["density"], table["ci_high"])
        _clean(d)
        q = local_quantiles(s)
        assert _inside(q.values, LO, HI) and _inside(q.ci_low, LO, HI) and _inside(q.ci_high, LO, HI)
        assert _holds(q.ci_low, q.values, q.ci_high) and np.all(np.diff(q.values) >= -TOL)
        _clean(q)


@pytest.mark.parametrize("epsilon,n", CASES)
@pytest.mark.parametrize("name", ["mean", "hybrid-mean"])
def test_means_are_possible_and_say_when_they_are_mostly_noise(name, epsilon, n):
    cls = C.LaplaceMean if name == "mean" else C.HybridMean
    for end, seed in itertools.product((LO, HI), range(3)):
        m = estimate(ldp_dask.privatize(np.full(n, end), channel=cls(epsilon, (LO, HI)), seed=seed, ledger=False))
        d = m.to_dict()
        assert _inside(d["value"], LO, HI) and _inside(d["ci"], LO, HI) and _holds(d["ci"][0], d["value"], d["ci"][1])
        if m.se > 0.25 * (HI - LO) or m.raw != m.value:
            assert d["mostly_noise"] and "mostly noise" in m.describe().headline, m.describe().headline
        else:
            assert not d["mostly_noise"]
        _clean(m)


@pytest.mark.parametrize("huge", [1e300, -1e300, 1.7e308])
def test_a_summary_value_of_1e300_is_estimated_not_an_index_error(huge):
    """A summary holding 1e300 (finite: read_summary accepts it) made the simplex projection index an empty array
    (u₁ − (u₁ − 1) rounds to 0 at 1e300): every form of the estimate is possible instead."""
    import dataclasses

    from ldp_dask.estimators.histogram import project_simplex

    assert np.array_equal(project_simplex(np.array([huge, 0.0, 0.0])), [1.0, 0.0, 0.0] if huge > 0 else [0, .5, .5])
    s = ldp_dask.privatize(np.linspace(LO, HI, 100), channel=C.LaplaceHistogram(1.0, 8, (LO, HI)), seed=1,
                           ledger=False)
    sums = {k: v.copy() for k, v in s.sums.items()}
    sums["sum"][3] = huge
    d = estimate(dataclasses.replace(s, sums=sums))
    assert _inside(d.masses, 0, 1) and abs(d.masses.sum() - 1) < 1e-9 and np.all(d.density >= 0)
    low, high = d.band()
    assert _holds(low, d.density, high)
    _clean(d)


@pytest.mark.parametrize("name", ["mean", "hybrid-mean"])
def test_a_mean_of_one_report_is_the_whole_domain_not_an_error(name):
    """A public group (or a night) with one row: one view has no sample variance, and a normal interval from one
    Laplace draw under-covers (P(|L| > 1.96·√2·b) = e^{-2.77} = 0.063 > 0.05): the whole domain, flagged as
    mostly noise. It raised "a mean interval needs at least 2 rows" and stopped a nightly plan."""
    cls = C.LaplaceMean if name == "mean" else C.HybridMean
    for value, seed in itertools.product((LO, 3.0, HI), range(3)):
        m = estimate(ldp_dask.privatize(np.array([value]), channel=cls(1.0, (LO, HI)), seed=seed, ledger=False))
        d = m.to_dict()
        assert d["ci"] == [LO, HI] and _inside(d["value"], LO, HI) and d["n"] == 1
        assert d["mostly_noise"] and "mostly noise" in m.describe().headline
        _clean(m)


@pytest.mark.parametrize("epsilon,n", CASES)
@pytest.mark.parametrize("name", ["rr", "hadamard"])
def test_shares_are_on_the_simplex(name, epsilon, n):
    cls = C.RandomizedResponse if name == "rr" else C.HadamardResponse
    for seed in range(3):
        f = estimate(ldp_dask.privatize(np.array(["a"] * n), channel=cls(epsilon, ["a", "b", "c"]), seed=seed,
                                        ledger=False))
        d = f.to_dict()
        assert _inside(d["frequencies"], 0, 1) and abs(sum(d["frequencies"]) - 1) < 1e-9
        assert _inside(d["ci_low"], 0, 1) and _inside(d["ci_high"], 0, 1)
        assert _holds(d["ci_low"], d["frequencies"], d["ci_high"])
        _clean(f)


GROUPED = """
[[statistic]]
column = "x"
target = "mean"
domain = [-50, 1000]
group_by = "g"
groups = ["A", "B"]
name = "means"

[[statistic]]
column = "c"
target = "frequencies"
categories = ["u", "v", "w"]
group_by = "g"
groups = ["A", "B"]
name = "shares"
"""


@pytest.mark.parametrize("epsilon,n", CASES)
def test_private_groups_are_possible_and_an_empty_group_has_no_estimate(tmp_path, epsilon, n):
    """Every row in group A (B and "other" empty, their noisy counts often negative): each mean in the domain, each
    group's shares on the simplex, every interval within its range and holding its point, estimated rows ≥ 0 (the
    noisy counts kept as raw_rows), and a group whose count is not positive shown as 'no estimate', its interval
    the whole range."""
    (tmp_path / "p.toml").write_text(GROUPED)
    df = pd.DataFrame({"g": ["A"] * n, "x": np.full(n, HI), "c": ["u"] * n})
    for seed in range(3):
        r = ldp_dask.release_plan(tmp_path / "p.toml", df, epsilon, seed=seed, ledger=False, design="split-epsilon")
        means, shares = (s.result for s in r.statistics)
        fin = np.isfinite(means.means)
        assert _inside(means.means[fin], LO, HI) and _inside(means.ci_low, LO, HI) and _inside(means.ci_high, LO, HI)
        assert _holds(means.ci_low[fin], means.means[fin], means.ci_high[fin])
        assert np.all(means.ci_low[~fin] == LO) and np.all(means.ci_high[~fin] == HI)
        assert np.all(means.rows >= 0) and np.array_equal(means.rows, np.maximum(means.raw_rows, 0))
        for i, row in enumerate(shares.shares):
            if np.all(np.isfinite(row)):
                assert np.all(row >= 0) and abs(row.sum() - 1) < 1e-9
                assert _holds(shares.ci_low[i], row, shares.ci_high[i])
        assert _inside(shares.ci_low, 0, 1) and _inside(shares.ci_high, 0, 1) and np.all(shares.rows >= 0)
        table = means.to_table().to_pandas()
        assert (table["estimated_rows"] >= 0).all()
        _clean(means)
        _clean(shares)
        assert not re.search(r"\bnan\b", str(r), re.I)
