"""Subset selection (Ye and Barg 2018; docs/channels.md) and the frequency oracle ``--channel auto`` picks for huge
domains: the output law against the paper's formula, the law of summary mode against per-row privatization,
Floyd's draw of uniform subsets, unbiased frequencies whose variance is the closed form and whose intervals cover,
and — at d = 2^10, 2^16, 2^20 and ε ∈ {1, 2, 4, 6} — a rare category's variance within 1.05× of the subset-selection
optimum, computed here over every subset size.

False-failure rates (fixed seeds; the rates a correct implementation would suffer with a random one): each
chi-square comparison runs at α = 10⁻³ (Bonferroni-split where several run); the mean checks use 4.5 standard
errors (≤ 7·10⁻⁶ each); variance ratios 4.5 sd of the estimated variance (≤ 7·10⁻⁶ each, 12 cases); the coverage
test is one-sided at 3.3 sd (≤ 5·10⁻⁴)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from law_checks import same_discrete_law
from scipy import stats
from scipy.special import comb

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import SubsetSelection, build_channel, choose_channel
from ldp_dask.channels.subset import uniform_subsets
from ldp_dask.estimators import frequencies
from ldp_dask.summary import Summary

ALPHA = 1e-3
Z = 4.5


def _law(eps: float, d: int, k: int, x: int) -> dict[tuple[int, ...], float]:
    """P(Z | x) over every k-subset Z, as the paper writes it: e^ε/Ω for Z ∋ x, 1/Ω otherwise,
    Ω = C(d − 1, k − 1)e^ε + C(d − 1, k)."""
    e = math.exp(eps)
    omega = comb(d - 1, k - 1, exact=True) * e + comb(d - 1, k, exact=True)
    return {z: (e if x in z else 1.0) / omega for z in itertools.combinations(range(d), k)}


@pytest.mark.parametrize("eps, d, k", [(0.5, 5, 2), (1.0, 6, 3), (4.0, 7, 1), (2.0, 5, 4)])
def test_output_law_and_privacy(eps, d, k):
    ch = SubsetSelection(eps, list(range(d)), subset_size=k)
    assert eps * (1 - 1e-9) <= ch.epsilon_spent() <= eps
    laws = [_law(eps, d, k, x) for x in range(d)]
    sets = list(laws[0])
    assert all(abs(sum(law.values()) - 1) < 1e-12 for law in laws)
    # the channel's own likelihood is the paper's
    z = np.array(sets, dtype=float)
    for x in (0, d - 1):
        assert np.allclose(np.exp(ch.log_likelihood(z, x)), [laws[x][s] for s in sets], rtol=1e-9)
    worst = max(math.log(a[s] / b[s]) for a in laws for b in laws for s in sets)
    assert worst <= eps + 1e-12 and worst >= eps - 1e-9
    rng = np.random.default_rng(int(eps * 10) + d)
    for x in (0, d - 1):  # two chi-square tests at α/2
        rows = ch.privatize(np.full(60_000, x), rng).astype(int)
        assert rows.shape == (60_000, k) and (np.diff(np.sort(rows, axis=1), axis=1) > 0).all()
        index = {s: i for i, s in enumerate(sets)}
        obs = np.bincount([index[tuple(sorted(r))] for r in rows], minlength=len(sets))
        assert stats.chisquare(obs, np.array([laws[x][s] for s in sets]) * len(rows)).pvalue > ALPHA / 2


@pytest.mark.parametrize("universe, size", [(6, 3), (9, 1), (7, 6), (40, 2)])
def test_floyds_subsets_are_uniform(universe, size):
    rng = np.random.default_rng(universe * 10 + size)
    draws = uniform_subsets(50_000, universe, size, rng)
    assert ((0 <= draws) & (draws < universe)).all() and (np.diff(np.sort(draws, axis=1), axis=1) > 0).all()
    sets = {s: i for i, s in enumerate(itertools.combinations(range(universe), size))}
    obs = np.bincount([sets[tuple(sorted(r))] for r in draws], minlength=len(sets))
    assert stats.chisquare(obs).pvalue > ALPHA


@pytest.mark.parametrize("k", [1, 2, 7, 64])
def test_the_fused_kernel_counts_what_numpy_counts(k, monkeypatch):
    """The same draws resolved by numpy's passes and by the kernel give the same counts, bit for bit."""
    from ldp_dask.channels import subset as subset_module

    ch = SubsetSelection(3.0, list(range(300)), subset_size=k)
    counts = np.bincount(np.random.default_rng(k).integers(0, 300, 20_000), minlength=300)
    out = {}
    for fused in (False, True):
        monkeypatch.setattr(subset_module, "use_fused", lambda n, fused=fused: fused)
        out[fused] = ch.add_noise({"counts": counts}, 20_000, np.random.default_rng(9))["sum"]
    assert out[True].sum() == 20_000 * k and np.array_equal(out[True], out[False])


@pytest.mark.parametrize("m", [1, 9, 80])
def test_summary_law_equals_rows_law(m):
    ch = SubsetSelection(1.5, list("abcdef"), subset_size=2)
    rng = np.random.default_rng(m)
    codes = rng.integers(0, 6, size=m)
    summ = np.array([ch.stats(codes, rng)["sum"] for _ in range(3000)])
    rows = np.array([ch.row_sums(ch.privatize(codes, rng))["sum"] for _ in range(3000)])
    assert np.all(summ.sum(axis=1) == 2 * m)
    for j in (0, 3, 5):  # three chi-square tests at α/3
        assert same_discrete_law(summ[:, j], rows[:, j], ALPHA / 3), j


def test_frequencies_are_unbiased_with_the_stated_variance():
    # 300 summaries at n = 3000, d = 8: the mean within Z standard errors per category, and the variance within
    # 4.5 sd of the closed form (a variance from 300 draws has relative sd √(2/299) = 8.2%)
    theta = np.array([0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02, 0.0])
    ch = SubsetSelection(1.0, list(range(8)))
    assert ch.k == 2  # the best size at ε 1 and d = 8
    rng = np.random.default_rng(2)
    est = np.array([frequencies(Summary(ch, 3000, ch.stats(rng.choice(8, 3000, p=theta), rng), {})).raw
                    for _ in range(300)])
    sd = est.std(axis=0, ddof=1)
    assert np.all(np.abs(est.mean(axis=0) - theta) <= Z * sd / math.sqrt(300))
    p, q = ch.report_probabilities
    pi = q + (p - q) * theta  # iid rows: each supports category c with probability π_c, so T_c ~ Binomial(n, π_c)
    exact = pi * (1 - pi) / (3000 * (p - q) ** 2)
    assert np.all(np.abs(sd**2 / exact - 1) < 4.5 * math.sqrt(2 / 299))


def _optimum(eps: float, d: int) -> float:
    """n·Var of a rare category under subset selection at its best size, over every k in 1..d − 1."""
    e = math.exp(eps)
    k = np.arange(1, d, dtype=np.float64)
    p = k * e / (k * e + d - k)
    q = (p * (k - 1) + (1 - p) * k) / (d - 1)
    return float(np.min(q * (1 - q) / (p - q) ** 2))


@pytest.mark.slow  # 12 cases of seconds: in make test, not test-fast
@pytest.mark.parametrize("d", [2**10, 2**16, 2**20])
@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0, 6.0])
def test_a_rare_categorys_variance_is_within_five_percent_of_the_optimum(d, eps):
    """auto's oracle for d categories: its closed-form rare-category variance within 1.05× of the optimum, and its
    measured variance (the empirical second moment of the estimates of categories no row holds, pooled over
    categories and summaries) equal to its closed form within 4.5 sd."""
    ch = choose_channel(eps, categories=list(range(d)))
    p, q = ch.report_probabilities
    n = 20_000
    own = q * (1 - q) / (p - q) ** 2 / n  # the channel's rare-category variance (θ = 0)
    assert own * n <= 1.05 * _optimum(eps, d)
    rng = np.random.default_rng(d + int(eps))
    reps = max(2, 2**18 // d)
    heavy = 16  # the rows sit in 16 categories; the other d − 16 have θ = 0
    errors = []
    for _ in range(reps):
        codes = rng.integers(0, heavy, n)
        errors.append(frequencies(Summary(ch, n, ch.stats(codes, rng), {})).raw[heavy:])
    sq = np.concatenate(errors) ** 2
    # a zero-frequency category's estimate is a centred sum of independent bounded rows: its square has variance
    # ≈ 2·Var² (kurtosis near 3 at n = 20,000); the pooled categories of one summary are uncorrelated for the
    # unary encoding and correlated as about −1/(d − 1) under subset selection (every row reports k of them), so
    # their squares as about 1/(d − 1)²: the spread of the pooled mean widens by a factor near 1 + 1/d, negligible
    rel = math.sqrt(2 / len(sq))
    assert abs(sq.mean() / own - 1) <= 4.5 * rel, (ch.name, sq.mean() / own)


@pytest.mark.slow  # a coverage check of seconds: in make test, not test-fast
def test_frequency_intervals_cover():
    # 95% intervals per category over 300 data sets (d = 6): pooled coverage ≥ 95% − 3.3 sd (sd ≤ 1.3%)
    theta = np.array([0.45, 0.2, 0.15, 0.1, 0.06, 0.04])
    cats = list("abcdef")
    ch = SubsetSelection(3.0, cats)
    rng = np.random.default_rng(15)
    hits = 0
    for r in range(300):
        x = np.array(cats)[rng.choice(6, size=4000, p=theta)]
        f = frequencies(ldp_dask.privatize(x, channel=ch, seed=r))
        hits += int(np.sum((f.ci_low <= theta) & (theta <= f.ci_high)))
    assert hits / 1800 >= 0.95 - 3.3 * np.sqrt(0.95 * 0.05 / 300), hits / 1800


def test_the_command_line_and_a_rows_release(tmp_path, capsys):
    from ldp_dask.cli import main

    rng = np.random.default_rng(4)
    d = tmp_path / "dx"
    d.mkdir()
    theta = [0.5, 0.3, 0.2]
    pq.write_table(pa.table({"dx": rng.choice(["flu", "cold", "covid"], p=theta, size=60_000)}), d / "p.parquet")
    out = tmp_path / "s.parquet"
    assert main(["privatize", str(d), "--column", "dx", "--channel", "subset", "--categories", "flu", "cold", "covid",
                 "--subset-size", "2", "--epsilon", "2", "--seed", "1", "--local", "--no-ledger", "--out", str(out)]) == 0
    s = ldp_dask.read_summary(str(out))
    assert s.channel.name == "subset" and s.channel.k == 2 and s.n == 60_000
    f = frequencies(s)
    assert np.all(np.abs(f.frequencies - theta) <= Z * f.se)
    # rows mode: each row's k members (k columns), summed into the counts the summary releases
    ch = SubsetSelection(2.0, ["flu", "cold", "covid"], subset_size=2)
    rows = ch.privatize(ch.prepare(np.array(["flu"] * 10))[0], rng)
    assert rows.shape == (10, 2) and ch.row_sums(rows)["sum"].sum() == 20


@pytest.mark.parametrize("kwargs", [{"subset_size": 0}, {"subset_size": 3}, {"subset_size": 2.5},
                                    {"subset_size": True}])
def test_bad_sizes_are_refused_naming_the_parameter(kwargs):
    with pytest.raises(LdpDaskError, match="'subset_size' parameter must be an integer from 1 to 2"):
        SubsetSelection(1.0, ["a", "b", "c"], **kwargs)
    with pytest.raises(LdpDaskError, match="from 1 to 64"):
        SubsetSelection(1.0, list(range(100)), subset_size=65)
    assert build_channel("subset", 1.0, categories=list(range(100))).k <= 64
