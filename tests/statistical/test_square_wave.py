"""Square Wave with EMS (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić 2020; docs/channels.md): the output law
against the paper's formulas, the law of summary mode against per-row privatization (both summary draws), the
EM operators against a dense transition matrix, CDF bounds whose one-sided failure rate is what they state where
they are tight, quantile intervals that cover on data they were not tuned on, the Dask path against the in-process
one, the command line, bad input. The channel's outputs are indices, so the noise modes do not apply.

False-failure rates (fixed seeds; the rates a correct implementation would suffer with a random one): each
chi-square comparison runs at α = 10⁻³ (Bonferroni-split where several run); the failure-rate and coverage checks
are one-sided at 3.3 binomial sd (≤ 5·10⁻⁴ each)."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from law_checks import same_discrete_law
from scipy import stats

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import SquareWave, build_channel
from ldp_dask.estimators import local_quantiles, square_wave_cdf_bounds, square_wave_density
from ldp_dask.estimators.square_wave import _adjoint, _forward, ems
from ldp_dask.summary import Summary

ALPHA = 1e-3


def _paper_b(eps: float) -> float:
    e = math.exp(eps)
    return (eps * e - e + 1) / (2 * e * (e - 1 - eps))


def _dense(ch: SquareWave) -> np.ndarray:
    """M[j, i] = P(report j | cell i), written from the paper's p and q."""
    d, B = ch.cells, round(_paper_b(ch.epsilon) * ch.cells)
    e = math.exp(ch.epsilon)
    q = 1 / ((2 * B + 1) * e + d - 1)
    j, i = np.arange(d + 2 * B)[:, None], np.arange(d)[None, :]
    return np.where((j >= i) & (j <= i + 2 * B), e * q, q)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_parameters_output_law_and_privacy(eps):
    ch = SquareWave(eps, (0.0, 1.0), cells=16)
    assert ch.band == round(_paper_b(eps) * 16) and ch.size == 16 + 2 * ch.band
    assert eps * (1 - 1e-9) <= ch.epsilon_spent() <= eps
    M = _dense(ch)
    assert np.allclose(M.sum(axis=0), 1) and np.allclose(M, [[ch.probabilities[0] if v > M.min() else
                                                             ch.probabilities[1] for v in row] for row in M])
    assert np.log(M.max(axis=1) / M.min(axis=1)).max() <= eps + 1e-12
    rng = np.random.default_rng(int(eps * 10))
    for x in (0.0, 0.51, 1.0):  # three chi-square tests at α/3; cells 0, 8, 15
        z = ch.privatize(np.full(40_000, x), rng)
        assert z.shape == (40_000, 1)
        obs = np.bincount(z[:, 0].astype(int), minlength=ch.size)
        assert stats.chisquare(obs, M[:, min(int(x * 16), 15)] * len(z)).pvalue > ALPHA / 3


def test_half_width_follows_the_paper():
    for eps in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0):
        assert math.isclose(SquareWave(eps, (0, 1)).half_width, _paper_b(eps), rel_tol=1e-9)
    assert SquareWave(1.0, (0, 1)).band == 262  # b(1) = 0.2561 of 1024 cells


@pytest.mark.parametrize("m", [1, 7, 80])  # 1 and 7 rows: per-row band draws; 80 ≥ d(2B + 1) = 40: multinomials
def test_summary_law_equals_rows_law(m):
    ch = SquareWave(1.0, (0.0, 1.0), cells=8)
    assert ch.cells * (2 * ch.band + 1) == 40
    rng = np.random.default_rng(m)
    x = rng.random(m)
    summ = np.array([ch.stats(x, rng)["sum"] for _ in range(3000)])
    rows = np.array([ch.row_sums(ch.privatize(x, rng))["sum"] for _ in range(3000)])
    assert np.all(summ.sum(axis=1) == m)
    for j in (0, 5, ch.size - 1):  # three chi-square tests at α/3
        assert same_discrete_law(summ[:, j], rows[:, j], ALPHA / 3), j
    # and the mean counts are n·M·(cell frequencies) (4.5 sd each, false failure < 7·10⁻⁶ per index)
    expect = _dense(ch) @ np.bincount(ch.cell_index(x), minlength=8)
    sd = np.sqrt(np.maximum(expect, 1e-12) / 3000)
    assert np.all(np.abs(summ.mean(axis=0) - expect) <= 4.5 * sd + 1e-9)


def test_em_operators_and_fixed_point():
    ch = SquareWave(1.5, (0.0, 1.0), cells=64)
    M = _dense(ch)
    rng = np.random.default_rng(3)
    theta, r = rng.dirichlet(np.ones(64)), rng.random(ch.size)
    assert np.allclose(_forward(theta, ch), M @ theta) and np.allclose(_adjoint(r, ch), M.T @ r)
    # plain EM on the exact expected counts converges to the truth (the channel is identifiable)
    truth = stats.beta(2, 5).cdf(np.linspace(0, 1, 65))
    truth = np.diff(truth)
    est, _ = ems(1e6 * (M @ truth), ch, smooth=False, tol=1e-12, max_iterations=20_000)
    assert np.abs(np.cumsum(est) - np.cumsum(truth)).max() < 2e-3


def test_cdf_bounds_fail_at_their_stated_rate_where_tight():
    # rows drawn from a two-point law, cells 20 and 100 of 128 with probability 1/2 each (ε = 2: B = 17, so
    # 100 − 21 ≥ 2B + 1): the upper bound at edge 21 and the lower bound at edge 100 have mean exactly F = 1/2, so
    # each fails with probability 2.5% (normal approximation to a binomial count); for a fixed table of the same
    # two values the counts vary less, so the bounds fail less often
    ch = SquareWave(2.0, (0.0, 1.0), cells=128)
    assert 100 - 21 >= 2 * ch.band + 1
    rng = np.random.default_rng(7)
    R, n = 2000, 10_000
    fixed = np.repeat([20.5 / 128, 100.5 / 128], n // 2)
    fails = np.zeros(4)
    for _ in range(R):
        x = np.where(rng.random(n) < 0.5, 20.5 / 128, 100.5 / 128)
        for k, data in enumerate((x, fixed)):
            _, up, lo = square_wave_cdf_bounds(Summary(ch, n, ch.stats(data, rng), {}), level=0.95)
            fails[2 * k] += up[21] < 0.5
            fails[2 * k + 1] += lo[100] > 0.5
    sd = math.sqrt(0.025 * 0.975 / R)
    assert np.all(np.abs(fails[:2] / R - 0.025) <= 3.3 * sd), fails
    assert np.all(fails[2:] / R <= 0.025 + 3.3 * sd), fails


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_quantile_intervals_cover(eps):
    # data the bounds were not tuned on (a gamma bulk with a point mass at 7): deciles of the population, 150 data
    # sets of n = 20,000; pooled coverage of the 95% intervals ≥ 95% − 3.3 sd
    qs = np.linspace(0.1, 0.9, 9)

    def draw(rng, n):
        g = np.minimum(rng.gamma(2.0, 1.2, n), 10.0)
        return np.where(rng.random(n) < 0.2, 7.0, g)

    big = draw(np.random.default_rng(0), 4_000_000)
    truth = np.quantile(big, qs)
    ch = SquareWave(eps, (0.0, 10.0))
    rng = np.random.default_rng(int(eps))
    hits = 0
    for r in range(150):
        x = draw(rng, 20_000)
        # tol = 10: a rough EMS point estimate is enough here; the intervals do not depend on it
        lq = local_quantiles(ldp_dask.privatize(x, channel=ch, seed=r), q=qs, select="tol", tol=10.0)
        hits += int(np.sum((lq.ci_low <= truth) & (truth <= lq.ci_high)))
    assert hits / (150 * 9) >= 0.95 - 3.3 * math.sqrt(0.95 * 0.05 / 150), hits


def test_ems_estimate_against_the_truth():
    # Beta(2, 5), n = 10^6, ε = 4: the EMS deciles within 0.01 of the population's (the CDF bounds at this ε are
    # 2b = 0.061 wide, so 0.01 is 6× inside them); the density integrates to 1 and has no band
    ch = SquareWave(4.0, (0.0, 1.0))
    x = np.random.default_rng(11).beta(2, 5, 1_000_000)
    est = square_wave_density(ldp_dask.privatize(x, channel=ch, seed=1))
    qs = np.linspace(0.1, 0.9, 9)
    assert np.abs(est.quantile(qs) - stats.beta(2, 5).ppf(qs)).max() < 0.01
    assert math.isclose(est.masses.sum(), 1.0) and not est.has_band and est.method == "square-wave+ems"
    text = str(est)
    assert "none: the smoothing's bias" in text and "band low" not in text
    assert est.info["iterations"] >= 3 and json.dumps(est.to_dict(), allow_nan=False)


@pytest.mark.cluster
def test_cluster_equals_in_process_and_cli(cluster, tmp_path, capsys):
    from ldp_dask.cli import main

    rng = np.random.default_rng(4)
    d = tmp_path / "t"
    d.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"t": rng.gamma(3.0, 2.0, 40_000).clip(0, 40)}), d / f"p{i}.parquet",
                       row_group_size=15_000)
    ch = SquareWave(2.0, (0.0, 40.0))
    oracle = ldp_dask.privatize(str(d), column="t", channel=ch, client="local", secret=b"k" * 32)
    s = ldp_dask.privatize(str(d), column="t", channel=ch, client=cluster, secret=b"k" * 32, split_every=2)
    assert s.n == 120_000 and s.same_release(oracle)
    rows = ldp_dask.privatize(str(d), column="t", channel=ch, client=cluster, mode="rows",
                              rows_path=str(tmp_path / "rows"), secret=b"k" * 32)
    z = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "rows").iterdir())]).column("z")
    idx = np.asarray(z.combine_chunks().flatten())
    assert len(idx) == 120_000 and idx.min() >= 0 and idx.max() < ch.size
    assert np.array_equal(np.bincount(idx.astype(int), minlength=ch.size), rows.sums["sum"])
    out = tmp_path / "t.summary.parquet"
    assert main(["privatize", str(d), "--column", "t", "--channel", "square-wave", "--domain", "0", "40",
                 "--epsilon", "2", "--cells", "512", "--out", str(out), "--local", "--seed", "1"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(out), "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["method"] == "square-wave+ems" and len(e["density"]) == 512
    assert main(["quantiles", str(out), "--q", "0.5", "--json"]) == 0
    qd = json.loads(capsys.readouterr().out)
    med = stats.gamma(3.0, scale=2.0).ppf(0.5)  # 5.35; the sample median is within 0.05 of it
    assert qd["ci_low"][0] <= med <= qd["ci_high"][0] and abs(qd["values"][0] - med) < 1.0


@pytest.mark.parametrize("kwargs, match", [
    ({"cells": 1}, r"'cells' parameter must be an integer in \[2, 65536\]"),
    ({"cells": 1.5}, "'cells' parameter"),
    ({"epsilon": 0.0}, "'epsilon' parameter"),
    ({"domain": (1.0, 1.0)}, "domain"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(LdpDaskError, match=match):
        SquareWave(**{"epsilon": 1.0, "domain": (0.0, 1.0), **kwargs})
    with pytest.raises(LdpDaskError, match="needs a public 'domain'"):
        build_channel("square-wave", 1.0)
    with pytest.raises(LdpDaskError, match="do not apply"):
        build_channel("square-wave", 1.0, (0, 1), bins=10)
    with pytest.raises(ldp_dask.InputDataError, match="outside the declared domain"):
        ldp_dask.privatize(np.array([0.5, 2.0]), channel=SquareWave(1.0, (0, 1)), seed=1)
    s = ldp_dask.privatize(np.array([0.5, 0.2]), channel=SquareWave(1.0, (0, 1)), seed=1)
    with pytest.raises(LdpDaskError, match="'tol' parameter"):
        square_wave_density(s, select="tol", tol=0)
    for interval in ("bins", "band", "bootstrap"):
        with pytest.raises(LdpDaskError, match="square-wave summaries support interval='envelope' only"):
            local_quantiles(s, interval=interval)
    with pytest.raises(LdpDaskError, match="needs a summary of the 'square-wave' channel"):
        square_wave_density(ldp_dask.privatize(np.array([0.5]), channel=ldp_dask.LaplaceMean(1.0, (0, 1)), seed=1))


def test_report_shows_quantile_intervals_and_no_band():
    from ldp_dask.report import render_report

    s = ldp_dask.privatize(np.random.default_rng(1).beta(2, 5, 20_000), channel=SquareWave(2.0, (0, 1)), seed=1)
    page = render_report(s)
    assert "<h2>Quantiles</h2>" in page and "none: the smoothing" in page and "pointwise band" not in page
