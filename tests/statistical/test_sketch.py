"""The count-mean sketch (docs/channels.md): frequencies of values nobody listed. Its privacy audited on the row
views, its summary law against per-row privatization, its hash functions uniform, its estimates unbiased over
the hash functions with intervals that cover (on Zipf data of 20,000 strings, not used by any benchmark), and the
command line.

False-failure rates (fixed seeds; the rates a correct implementation would suffer with a random one): the audit's
bounds are one-sided Clopper–Pearson at 1 − 10⁻³; chi-square tests at α = 10⁻³ (Bonferroni-split where several
run); means within 4.5 standard errors (≤ 7·10⁻⁶ each); the pooled coverage of 300 releases × 14 values within
0.015 of 0.95 (about 4.8 sd of the pooled rate were the values independent; within a release they are nearly so)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from law_checks import same_discrete_law, threshold_loss
from scipy import stats

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import CountMeanSketch
from ldp_dask.channels.sketch import value_hashes
from ldp_dask.estimators import sketch_frequencies
from ldp_dask.summary import Summary

ALPHA = 1e-3
Z = 4.5


def _audit(ch: CountMeanSketch, a: str, b: str, rows: int, rng: np.random.Generator) -> float:
    """A lower bound on the loss between the views of value a and of value b: every event {LLR ≥ t}."""
    ha, hb = value_hashes([a], ch.salt)[0], value_hashes([b], ch.salt)[0]
    za = ch.privatize(np.full(rows, ha, dtype=np.uint64), rng)
    zb = ch.privatize(np.full(rows, hb, dtype=np.uint64), rng)
    llr_a = ch.log_likelihood(za, ha) - ch.log_likelihood(za, hb)
    llr_b = ch.log_likelihood(zb, ha) - ch.log_likelihood(zb, hb)
    return threshold_loss(llr_a, llr_b, ALPHA)


def test_the_views_spend_epsilon_and_no_more():
    ch = CountMeanSketch(1.0, width=8, hashes=4)
    assert 1.0 * (1 - 1e-9) <= ch.epsilon_spent() <= 1.0
    found = _audit(ch, "apple", "pear", 200_000, np.random.default_rng(1))
    assert 0.85 <= found <= ch.epsilon_spent()  # realised at the event "own bit 1, the other's 0"
    loose = CountMeanSketch(2.0, width=8, hashes=4)  # twice the noise removed: the audit sees it
    assert _audit(loose, "apple", "pear", 200_000, np.random.default_rng(2)) > 1.3


@pytest.mark.parametrize("m", [1, 9, 60])
def test_summary_law_equals_rows_law(m):
    ch = CountMeanSketch(1.0, width=4, hashes=3)
    rng = np.random.default_rng(m)
    x = value_hashes(rng.choice(["a", "b", "c", "d", "e"], size=m), ch.salt)
    summ = np.array([ch.stats(x, rng)["sum"] for _ in range(3000)])
    rows = [ch.row_sums(ch.privatize(x, rng)) for _ in range(3000)]
    assert all(np.array_equal(r["rows"], ch.stats(x, rng)["rows"]) for r in rows[:5])  # dealt in turn: the same
    rows_sum = np.array([r["sum"] for r in rows])
    for j in (0, 5, 11):  # three chi-square tests at α/3
        assert same_discrete_law(summ[:, j], rows_sum[:, j], ALPHA / 3), j


def test_the_hash_functions_spread_values_uniformly_and_apart():
    ch = CountMeanSketch(1.0, width=64, hashes=2)
    values = np.array([f"user-{i}@example.org" for i in range(64_000)], dtype=object)
    h = value_hashes(values, ch.salt)
    assert len(np.unique(h)) == len(h)  # 64-bit: no collision among 64,000
    b0, b1 = ch.buckets(h, np.zeros(len(h), int)), ch.buckets(h, np.ones(len(h), int))
    for b in (b0, b1):  # each uniform over the 64 buckets (α/3 each)
        assert stats.chisquare(np.bincount(b, minlength=64)).pvalue > ALPHA / 3
    # two hash functions apart: the pair (b0, b1) uniform over 64² cells (α/3)
    assert stats.chisquare(np.bincount(b0 * 64 + b1, minlength=64 * 64)).pvalue > ALPHA / 3


def test_values_are_their_text_whatever_the_layout():
    salt = 7
    plain = value_hashes(pa.array(["x", "y", "x", "42"]), salt)
    as_dict = value_hashes(pa.array(["x", "y", "x", "42"]).dictionary_encode(), salt)
    assert np.array_equal(plain, as_dict) and plain[0] == plain[2] != plain[1]
    assert value_hashes(np.array([42]), salt)[0] == plain[3] == value_hashes(["42"], salt)[0]
    assert value_hashes(["x"], salt + 1)[0] != plain[0]  # the salt keys the hash
    with pytest.raises(ldp_dask.InputDataError, match="missing values"):
        value_hashes(pa.array(["x", None]), salt)
    with pytest.raises(ldp_dask.InputDataError, match="strings or integers"):
        value_hashes(np.array([0.5, 1.5]), salt)


def _zipf_data(rng: np.random.Generator, n: int, d: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    w = 1 / np.arange(1, d + 1) ** 1.1
    x = rng.choice(d, n, p=w / w.sum())
    return np.array([f"item-{i}" for i in range(d)], dtype=object), x


@pytest.mark.slow  # 300 releases: seconds, in make test
def test_estimates_are_unbiased_over_the_hash_functions_and_their_intervals_cover():
    """300 releases of one data set (50,000 rows of Zipf(1.1) strings), each with a fresh salt (fresh hash
    functions) and fresh noise: the mean estimate within 4.5 standard errors of the truth for 14 values from the
    head to the tail, and the 95% intervals covering 95% ± 1.5% of the time (pooled)."""
    rng = np.random.default_rng(5)
    vals, x = _zipf_data(rng, 50_000)
    pick = np.array([0, 1, 2, 3, 5, 8, 13, 21, 50, 100, 300, 1000, 5000, 19999])
    truth = np.bincount(x, minlength=len(vals))[pick] / len(x)
    cands = list(vals[pick])
    R = 300
    raws, hits, absent_hits = [], np.zeros(len(pick)), 0
    for _ in range(R):
        ch = CountMeanSketch(2.0, width=512, hashes=32, salt=int(rng.integers(0, 2**62)))
        hv = ch.prepare(vals[x[rng.permutation(len(x))]])[0]  # rows in a fresh order: fresh groups
        f = sketch_frequencies(Summary(ch, len(x), ch.stats(hv, rng), {}), [*cands, "absent"])
        raws.append(f.raw[:-1])
        hits += (f.ci_low[:-1] <= truth) & (truth <= f.ci_high[:-1])
        absent_hits += f.ci_low[-1] <= 0.0 <= f.ci_high[-1]
    raws = np.array(raws)
    sd = raws.std(axis=0, ddof=1)
    assert np.all(np.abs(raws.mean(axis=0) - truth) <= Z * sd / math.sqrt(R))
    assert abs(hits.mean() / R - 0.95) <= 0.015, hits / R
    assert absent_hits / R >= 0.95 - 0.015


def test_a_release_end_to_end_and_the_command_line(tmp_path, capsys):
    from ldp_dask.cli import main

    rng = np.random.default_rng(8)
    vals, x = _zipf_data(rng, 60_000, d=2_000)
    d = tmp_path / "logs"
    d.mkdir()
    for i, part in enumerate(np.array_split(x, 3)):
        arr = pa.array(list(vals[part]))
        pq.write_table(pa.table({"url": arr.dictionary_encode() if i == 1 else arr}), d / f"p{i}.parquet")
    truth = np.bincount(x, minlength=len(vals)) / len(x)
    out = tmp_path / "s.parquet"
    assert main(["privatize", str(d), "--column", "url", "--channel", "sketch", "--width", "256", "--hashes", "16",
                 "--epsilon", "2", "--seed", "1", "--local", "--no-ledger", "--out", str(out)]) == 0
    s = ldp_dask.read_summary(str(out))
    assert s.channel.name == "sketch" and s.n == 60_000 and s.channel.width == 256
    f = ldp_dask.estimate(s, candidates=["item-0", "item-1", "item-7", "nobody"])
    assert np.all(np.abs(f.raw - np.r_[truth[[0, 1, 7]], 0.0]) <= Z * f.se)
    assert main(["estimate", str(out), "--candidates", "item-0", "nobody", "--json"]) == 0
    out_json = capsys.readouterr().out
    assert '"method": "sketch"' in out_json and '"item-0"' in out_json
    with pytest.raises(LdpDaskError, match="pass candidates"):
        ldp_dask.estimate(s)
    with pytest.raises(LdpDaskError, match="duplicates"):
        sketch_frequencies(s, ["item-0", "item-0"])


@pytest.mark.parametrize("kwargs, match", [({"width": 1}, "'width' parameter must be an integer from 2"),
                                           ({"hashes": 1}, "'hashes' parameter must be an integer from 2"),
                                           ({"width": 1 << 20, "hashes": 32}, "width × hashes"),
                                           ({"salt": "x"}, "'salt' parameter must be an integer")])
def test_bad_parameters_are_refused_naming_them(kwargs, match):
    with pytest.raises(LdpDaskError, match=match):
        CountMeanSketch(1.0, **kwargs)
