"""``--channel auto`` (docs/channels.md): the choice follows the closed-form variances, is recorded in the summary,
and the chosen channel's measured error agrees with the prediction that chose it."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import HadamardResponse, HybridMean, RandomizedResponse, SubsetSelection, build_channel
from ldp_dask.channels.auto import frequency_variances, mean_variances
from ldp_dask.estimators import frequencies


@pytest.mark.parametrize("eps, d, encoding", [(1.0, 2, "kary"), (1.0, 4, "kary"), (1.0, 300, "oue"),
                                              (0.5, 500, "oue"), (4.0, 3000, "oue")])
def test_categorical_choice_follows_the_variances(eps, d, encoding):
    # where subset selection is not 1% better, k-ary wins below d = 3e^ε + 2 (Wang, Blocki, Li and Jha 2017)
    ch = build_channel("auto", eps, categories=list(range(d)))
    assert isinstance(ch, RandomizedResponse) and ch.encoding == encoding
    assert ch.choice["chosen"] == f"rr/{encoding}"
    pred = frequency_variances(eps, d)
    assert pred["hadamard"] >= pred["rr/oue"]  # (e^ε + 1)² − 4e^ε = (e^ε − 1)² ≥ 0
    assert pred["subset"] * 1.01 >= min(pred["rr/kary"], pred["rr/oue"])
    assert (d < 3 * math.exp(eps) + 2) == (encoding == "kary")


@pytest.mark.parametrize("eps, d, k", [(1.0, 10, 2), (0.5, 6, 2), (1.0, 32, 8), (4.0, 165, 2), (4.0, 1000, 16),
                                       (6.0, 1024, 2)])
def test_subset_selection_is_chosen_where_it_is_more_than_one_percent_better(eps, d, k):
    # Ye and Barg's optimum is near k = d/(e^ε + 1) (at most 16 for auto); these are 1.02 to 1.33 times below the
    # better of k-ary and OUE
    ch = build_channel("auto", eps, categories=list(range(d)))
    assert isinstance(ch, SubsetSelection) and ch.k == k and ch.choice["chosen"] == "subset"
    pred = frequency_variances(eps, d)
    assert pred["subset"] * 1.01 < min(pred["rr/kary"], pred["rr/oue"])
    p, q = ch.report_probabilities
    assert pred["subset"] == pytest.approx(q * (1 - q) / (p - q) ** 2, rel=1e-9)  # the channel it built


@pytest.mark.slow  # 800 channels built: seconds, in make test
def test_the_pick_is_within_five_percent_of_the_optimum_everywhere():
    """Over d = 2..2^16 (log-spaced) and ε = 0.1..10, auto's rare-category variance against subset selection's
    optimum over every size k (Ye and Barg 2018), computed here from the paper's closed form."""
    worst = 0.0
    for d in sorted({int(v) for v in np.logspace(np.log10(2), 16 * np.log10(2), 40)}):
        k = np.arange(1, d, dtype=np.float64)
        for eps in np.arange(0.1, 10.01, 0.5):
            e = math.exp(eps)
            p = k * e / (k * e + d - k)
            q = (p * (k - 1) + (1 - p) * k) / (d - 1)
            best = float(np.min(q * (1 - q) / (p - q) ** 2))
            ch = build_channel("auto", float(eps), categories=list(range(d)))
            pin, pout = ch.report_probabilities
            worst = max(worst, pout * (1 - pout) / (pin - pout) ** 2 / best)
    assert 1.0 <= worst <= 1.05


def test_rows_mode_with_many_categories_uses_hadamard():
    ch = build_channel("auto", 1.0, categories=[f"c{i}" for i in range(1000)], mode="rows")
    assert isinstance(ch, HadamardResponse) and ch.view_dim == 1  # subset selection at k ≤ 16: 4.8× its variance
    # with 100 categories, 16 members per row have 0.85 times Hadamard response's variance
    mid = build_channel("auto", 1.0, categories=[f"c{i}" for i in range(100)], mode="rows")
    assert isinstance(mid, SubsetSelection) and mid.view_dim == mid.k == 16
    # at a large ε, subset selection's few members per row have a variance 100 times below Hadamard response's
    big = build_channel("auto", 6.0, categories=list(range(1024)), mode="rows")
    assert isinstance(big, SubsetSelection) and big.view_dim == big.k == 2
    small = build_channel("auto", 1.0, categories=list("abc"), mode="rows")
    assert isinstance(small, RandomizedResponse)


def test_mean_choice_is_the_hybrid():
    for eps in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0):
        ch = build_channel("auto", eps, (0.0, 1.0), target="mean")
        pred = mean_variances(eps)
        assert isinstance(ch, HybridMean) and ch.mechanism == "hybrid", (eps, pred)
        assert pred["hybrid-mean/hybrid"] < pred["mean"]


def test_predicted_variance_matches_the_measured_one():
    # the chosen channel's measured n·Var θ̂ over 400 releases (d = 300, ε = 1 → OUE), averaged over 32 of the
    # categories, agrees with the exact variance at θ = 1/32: each sample variance has relative sd √(2/399) = 7.1%,
    # the mean of 32 nearly independent ones 1.25%; 4.5 sd = 5.6% (false failure < 1e-5)
    ch = build_channel("auto", 1.0, categories=list(range(300)))
    assert ch.choice["chosen"] == "rr/oue"
    rng = np.random.default_rng(1)
    theta = np.full(300, 1 / 300)
    n = 20_000
    est = np.array([frequencies(ldp_dask.Summary(ch, n, ch.stats(rng.choice(300, n, p=theta), rng), {}))
                    .raw[:32] for _ in range(400)])  # the unbiased estimate, whose variance the closed form is
    measured = n * est.var(axis=0, ddof=1).mean()
    e = math.e
    q = 1 / (e + 1)
    pi = q + (0.5 - q) / 300  # θ = 1/300 is not quite "rare": the exact variance at θ
    exact = pi * (1 - pi) / (0.5 - q) ** 2
    assert abs(measured / exact - 1) < 4.5 * math.sqrt(2 / 399) / math.sqrt(32), (measured, exact)
    assert exact == pytest.approx(frequency_variances(1.0, 300)["rr/oue"], rel=0.01)


def test_cli_records_the_choice(tmp_path, capsys):
    from ldp_dask.cli import main

    rng = np.random.default_rng(2)
    pq.write_table(pa.table({"c": rng.choice([f"k{i}" for i in range(20)], 5000),
                             "x": rng.uniform(0, 5, 5000)}), tmp_path / "t.parquet")
    out = tmp_path / "c.summary.parquet"
    cats = [f"k{i}" for i in range(20)]
    assert main(["privatize", str(tmp_path / "t.parquet"), "--column", "c", "--channel", "auto", "--categories",
                 *cats, *[f"z{i}" for i in range(280)], "--epsilon", "1", "--out", str(out), "--local", "--seed", "1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["channel"] == "rr" and info["params"]["encoding"] == "oue"
    assert info["choice"]["chosen"] == "rr/oue"
    assert ldp_dask.read_summary(out).metadata["choice"]["predicted_n_var"]["rr/kary"] > 0
    m = tmp_path / "m.summary.parquet"
    assert main(["privatize", str(tmp_path / "t.parquet"), "--column", "x", "--channel", "auto", "--target", "mean",
                 "--domain", "0", "5", "--epsilon", "2", "--out", str(m), "--local", "--seed", "1"]) == 0
    assert "auto: chose hybrid-mean/hybrid" in capsys.readouterr().out
    assert ldp_dask.read_summary(m).channel.name == "hybrid-mean"
    bad = ["privatize", str(tmp_path / "t.parquet"), "--column", "x", "--channel", "auto", "--domain", "0", "5",
           "--epsilon", "2", "--out", str(tmp_path / "b.parquet"), "--local"]
    assert main(bad) == 0  # a numeric column with no target: its distribution, by the Square Wave
    assert "auto: chose square-wave for the distribution" in capsys.readouterr().out
    assert ldp_dask.read_summary(tmp_path / "b.parquet").metadata["choice"]["target"] == "distribution"
    with pytest.raises(SystemExit):
        main([*bad, "--overwrite", "--target", "median"])
    assert "invalid choice: 'median'" in capsys.readouterr().err
    assert main([*bad[:5], "histogram", *bad[6:], "--target", "mean"]) == 2
    assert "--target applies to --channel auto only" in capsys.readouterr().err


def test_bad_auto_options():
    with pytest.raises(LdpDaskError, match="not both"):
        build_channel("auto", 1.0, (0, 1), categories=["a", "b"])
    with pytest.raises(LdpDaskError, match="do not apply to --channel auto"):
        build_channel("auto", 1.0, (0, 1), target="mean", wavelet="db4")
    with pytest.raises(LdpDaskError, match="'target' of a categorical column"):
        build_channel("auto", 1.0, categories=["a", "b"], target="mean")
    with pytest.raises(LdpDaskError, match="needs the public categories"):
        build_channel("auto", 1.0)
    with pytest.raises(LdpDaskError, match="'target' of a numeric column is 'distribution' or 'mean'"):
        build_channel("auto", 1.0, (0, 1), target="frequencies")
    with pytest.raises(LdpDaskError, match="--noise does not apply to the square-wave"):
        build_channel("auto", 1.0, (0, 1), noise="continuous")
