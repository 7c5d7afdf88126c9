"""Hadamard response (Acharya, Sun and Zhang 2019; docs/channels.md): its output law against the Hadamard
matrix, the law of summary mode against per-row privatization (both summary draws), unbiased frequencies
whose intervals cover, the Dask path against the in-process one, the command line, bad input.

False-failure rates (fixed seeds; the rates a correct implementation would suffer with a random one): each
chi-square comparison runs at α = 10⁻³ (Bonferroni-split where several run); the mean checks use 4.5 standard
errors (≤ 7·10⁻⁶ each); the coverage test is one-sided at 3.3 sd (≤ 5·10⁻⁴)."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from law_checks import same_discrete_law
from scipy import stats
from scipy.linalg import hadamard

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import HadamardResponse, build_channel
from ldp_dask.channels import hadamard as hadamard_module
from ldp_dask.channels.hadamard import fwht, hadamard_size
from ldp_dask.estimators import frequencies
from ldp_dask.summary import Summary

ALPHA = 1e-3
Z = 4.5


def _law(ch: HadamardResponse, c: int) -> np.ndarray:
    """P(index j | category c) from the Sylvester–Hadamard matrix itself (scipy), as the paper states it."""
    k = ch.size
    row = hadamard(k)[c + 1]
    e = math.exp(ch.epsilon)
    return np.where(row == 1, 2 * e / (k * (e + 1)), 2 / (k * (e + 1)))


@pytest.mark.parametrize("d, k", [(2, 4), (3, 4), (4, 8), (7, 8), (8, 16), (1000, 1024), (1024, 2048)])
def test_size_and_transform(d, k):
    assert hadamard_size(d) == k
    if k <= 2048:
        v = np.random.default_rng(d).random(k)
        assert np.allclose(fwht(v), hadamard(k) @ v)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_output_law_and_privacy(eps):
    ch = HadamardResponse(eps, list("abcde"))
    assert ch.size == 8 and ch.epsilon_spent() <= eps and ch.epsilon_spent() >= eps * (1 - 1e-9)
    laws = np.array([_law(ch, c) for c in range(5)])
    assert np.allclose(laws.sum(axis=1), 1)
    worst = np.log(laws[:, None, :] / laws[None, :, :]).max()
    assert worst <= eps + 1e-12
    rng = np.random.default_rng(int(eps * 10))
    for c in (0, 4):  # two chi-square tests at α/2
        z = ch.privatize(np.full(40_000, c), rng)
        assert z.shape == (40_000, 1)
        obs = np.bincount(z[:, 0].astype(int), minlength=8)
        assert stats.chisquare(obs, laws[c] * len(z)).pvalue > ALPHA / 2


@pytest.mark.parametrize("draw", ["multinomial", "per-row"])
@pytest.mark.parametrize("m", [1, 7, 80])
def test_summary_law_equals_rows_law(draw, m, monkeypatch):
    if draw == "per-row":
        monkeypatch.setattr(hadamard_module, "MULTINOMIAL_MAX_CELLS", 1)
    ch = HadamardResponse(1.0, ["a", "b", "c", "d", "e"])
    rng = np.random.default_rng(m)
    codes = rng.integers(0, 5, size=m)
    summ = np.array([ch.stats(codes, rng)["sum"] for _ in range(3000)])
    rows = np.array([ch.row_sums(ch.privatize(codes, rng))["sum"] for _ in range(3000)])
    assert np.all(summ.sum(axis=1) == m)
    for j in (0, 3, 7):  # three chi-square tests at α/3
        assert same_discrete_law(summ[:, j], rows[:, j], ALPHA / 3), j


def test_frequencies_are_unbiased_with_the_stated_variance():
    # 300 summaries at n = 3000, d = 6: the mean within Z standard errors per category, and the reported
    # standard error within 20% of the spread (the relative error of an sd from 300 draws is about 4%)
    theta = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    ch = HadamardResponse(1.0, list(range(6)))
    rng = np.random.default_rng(2)
    est, ses = [], []
    for _ in range(300):
        f = frequencies(Summary(ch, 3000, ch.stats(rng.choice(6, 3000, p=theta), rng), {}))
        est.append(f.raw)  # the unbiased estimate
        ses.append(f.se)
    est = np.array(est)
    sd = est.std(axis=0, ddof=1)
    assert np.all(np.abs(est.mean(axis=0) - theta) <= Z * sd / math.sqrt(300))
    assert np.all(np.abs(np.mean(ses, axis=0) / sd - 1) < 0.2)
    # the closed form: Var θ̂ = π(1 − π)/(n(s − 1/2)²), at most (e^ε + 1)²/(n(e^ε − 1)²)
    s = ch.inside
    pi = 0.5 + (s - 0.5) * theta
    # a variance from 300 draws has relative sd √(2/299) = 8.2%; 4.5 sd per category (false failure < 5e-5)
    assert np.all(np.abs(sd**2 / (pi * (1 - pi) / (3000 * (s - 0.5) ** 2)) - 1) < 4.5 * math.sqrt(2 / 299))


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_frequency_intervals_cover():
    # 95% intervals per category over 300 data sets (d = 5): pooled coverage ≥ 95% − 3.3 sd (sd ≤ 1.3%)
    theta = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
    cats = list("abcde")
    ch = HadamardResponse(1.0, cats)
    rng = np.random.default_rng(15)
    hits = 0
    for r in range(300):
        x = np.array(cats)[rng.choice(5, size=4000, p=theta)]
        f = frequencies(ldp_dask.privatize(x, channel=ch, seed=r))
        hits += int(np.sum((f.ci_low <= theta) & (theta <= f.ci_high)))
    assert hits / 1500 >= 0.95 - 3.3 * np.sqrt(0.95 * 0.05 / 300), hits / 1500


@pytest.mark.cluster
def test_cluster_equals_in_process_and_cli(cluster, tmp_path, capsys):
    from ldp_dask.cli import main

    rng = np.random.default_rng(4)
    d = tmp_path / "dx"
    d.mkdir()
    theta = [0.5, 0.3, 0.2]
    for i in range(3):
        vals = rng.choice(["flu", "cold", "covid"], p=theta, size=40_000)
        pq.write_table(pa.table({"dx": pa.array(vals).dictionary_encode()}), d / f"p{i}.parquet", row_group_size=15_000)
    for name, extra in [("hadamard", {}), ("rr", {"encoding": "oue"})]:
        ch = build_channel(name, 2.0, categories=["flu", "cold", "covid"], **extra)
        oracle = ldp_dask.privatize(str(d), column="dx", channel=ch, client="local", secret=b"k" * 32)
        s = ldp_dask.privatize(str(d), column="dx", channel=ch, client=cluster, secret=b"k" * 32, split_every=2)
        assert s.n == 120_000 and s.same_release(oracle), name
    # rows mode: one index per row (one column), summed into the K counts the summary releases
    ch = HadamardResponse(2.0, ["flu", "cold", "covid"])
    rows = ldp_dask.privatize(str(d), column="dx", channel=ch, client=cluster, mode="rows",
                              rows_path=str(tmp_path / "rows"), secret=b"k" * 32)
    z = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "rows").iterdir())]).column("z")
    idx = np.asarray(z.combine_chunks().flatten())
    assert len(idx) == 120_000 and set(np.unique(idx)) <= set(range(4))
    assert np.array_equal(np.bincount(idx.astype(int), minlength=4), rows.sums["sum"])
    assert np.all(np.abs(frequencies(rows).frequencies - theta) < 0.02)
    out = tmp_path / "dx.summary.parquet"
    assert main(["privatize", str(d), "--column", "dx", "--channel", "hadamard", "--categories", "flu", "cold",
                 "covid", "--epsilon", "2", "--out", str(out), "--local", "--seed", "1"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(out), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    # n = 120k, ε = 2: sd of each frequency ≤ (e² + 1)/((e² − 1)√n) = 0.0042; 4.5 sd < 0.02
    assert f["method"] == "hadamard+simplex" and np.all(np.abs(np.array(f["frequencies"]) - theta) < 0.02)


@pytest.mark.parametrize("kwargs, match", [
    ({"categories": ["a"]}, "at least two categories"),
    ({"categories": ["a", "a"]}, "duplicates"),
    ({"categories": "ab"}, "list of category labels"),
    ({"categories": ["a", "b"], "epsilon": 0}, "'epsilon' parameter"),
    ({"categories": ["a", "b"], "epsilon": float("nan")}, "'epsilon' parameter"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(LdpDaskError, match=match):
        HadamardResponse(**{"epsilon": 1.0, **kwargs})
    with pytest.raises(LdpDaskError, match="not a numeric 'domain'"):
        build_channel("hadamard", 1.0, (0, 1), categories=["a", "b"])
    with pytest.raises(LdpDaskError, match="do not apply"):
        build_channel("hadamard", 1.0, categories=["a", "b"], encoding="kary")
    with pytest.raises(ldp_dask.InputDataError, match="outside the declared categories"):
        ldp_dask.privatize(np.array(["a", "zz"]), channel=HadamardResponse(1.0, ["a", "b"]), seed=1)
