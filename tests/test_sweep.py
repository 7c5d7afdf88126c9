"""Bad-input sweep across the public entry points (CLI and Python): each malformed input gives
one clear, specific error and writes nothing; and no finite input in the domain makes a channel
emit NaN or inf."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import (
    HaarAdaptive, HaarLaplace, LaplaceHistogram, LaplaceMean, RandomizedResponse, WaveletLaplace,
)
from ldp_dask.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    good = d / "good"
    good.mkdir()
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(5000), "s": ["a"] * 5000}), good / "a.parquet")
    bad = {}
    for name, table in {
        "nan": pa.table({"x": [0.1, float("nan")]}),
        "inf": pa.table({"x": [0.1, float("inf")]}),
        "neg_inf": pa.table({"x": [0.1, float("-inf")]}),
        "outside": pa.table({"x": [0.1, 7.0]}),
        "strings": pa.table({"x": ["a", "b"]}),
        "nulls": pa.table({"x": pa.array([0.1, None])}),
        "empty": pa.table({"x": pa.array([], pa.float64())}),
    }.items():
        p = d / name
        p.mkdir()
        pq.write_table(table, p / "a.parquet")
        bad[name] = p
    corrupt = d / "corrupt"
    corrupt.mkdir()
    (corrupt / "a.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    bad["corrupt"] = corrupt
    (d / "emptydir").mkdir()
    bad["emptydir"] = d / "emptydir"
    return good, bad, d


HIST = ["--channel", "histogram", "--bins", "8", "--domain", "0", "1", "--epsilon", "1"]

CASES = [
    # (source key, extra CLI args, expected message fragment)
    ("nan", HIST, "NaN"), ("inf", HIST, "infinite"), ("neg_inf", HIST, "infinite"),
    ("outside", HIST, "outside the declared domain"), ("strings", HIST, "numeric column is required"),
    ("nulls", HIST, "null values"), ("empty", HIST, "empty"), ("corrupt", HIST, "not a readable Parquet"),
    ("emptydir", HIST, "no Parquet files"), ("missing", HIST, "no such file"),
    ("good", ["--channel", "histogram", "--bins", "8", "--domain", "0", "1", "--epsilon", "1e400"], "'epsilon'"),
    ("good", ["--channel", "histogram", "--bins", "99999999999", "--domain", "0", "1", "--epsilon", "1"], "'bins'"),
    ("good", ["--channel", "wavelet", "--j1", "99", "--domain", "0", "1", "--epsilon", "1"], "resolution"),
    ("good", ["--channel", "haar", "--level", "77", "--domain", "0", "1", "--epsilon", "1"], "'level'"),
    ("good", [*HIST, "--partition-rows", "-5"], "'partition_rows'"),
    ("good", [*HIST, "--split-every", "-2"], "'split_every'"),
    ("good", ["--channel", "histogram", "--bins", "8", "--domain", "1", "0", "--epsilon", "1"], "lo < hi"),
    ("good", ["--channel", "mean", "--epsilon", "1"], "needs a public 'domain'"),
    ("good", ["--channel", "rr", "--categories", "a", "a", "--epsilon", "1"], "duplicates"),
    ("good", ["--channel", "rr", "--epsilon", "1"], "list of categories"),
]


def _snapshot(d):
    return sorted(str(p) for p in d.rglob("*"))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_privatize_cli_sweep(files, tmp_path, capsys, case):
    good, bad, root = files
    key, extra, message = CASES[case]
    src = good if key == "good" else bad.get(key, root / "does-not-exist")
    column = "x" if key != "good" or "rr" not in extra else "s"
    before = _snapshot(root)
    out = tmp_path / "out.parquet"
    code = main(["privatize", str(src), "--column", column, *extra, "--out", str(out), "--local", "--seed", "1",
                 "--no-ledger"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], (err, message)
    assert not out.exists() and os.listdir(tmp_path) == [] and _snapshot(root) == before


def test_mismatched_summaries_and_estimators(files, tmp_path, capsys):
    good, _, _ = files
    s = ldp_dask.privatize(str(good), column="x", channel=LaplaceMean(1.0, (0, 1)), client="local", seed=1)
    s.to_parquet(tmp_path / "mean.parquet")
    from ldp_dask import gof
    from ldp_dask.estimators import frequencies, wavelet_density

    for call, match in [
        (lambda: gof.test(s, "uniform"), "'haar' channel"),
        (lambda: wavelet_density(s), "'wavelet' channel"),
        (lambda: frequencies(s), "'rr' channel"),
        (lambda: ldp_dask.histogram_density(s), "'histogram' or 'haar' channel"),
        (lambda: ldp_dask.estimate(s, gamma=2.0), "do not apply"),
        (lambda: ldp_dask.read_summary(tmp_path / "nope.parquet"), "no such summary"),
        (lambda: ldp_dask.read_summary(good / "a.parquet"), "not an ldp_dask summary"),
    ]:
        with pytest.raises(LdpDaskError, match=match):
            call()
    assert main(["estimate", str(tmp_path / "mean.parquet"), "--threshold", "hard"]) == 2
    assert main(["gof", str(tmp_path / "mean.parquet"), "--null", "uniform"]) == 2
    assert main(["quantiles", str(tmp_path / "mean.parquet"), "--q", "0.5"]) == 2
    assert sorted(os.listdir(tmp_path)) == ["mean.parquet"]
    capsys.readouterr()


FINITE = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(FINITE, min_size=1, max_size=40), seed=st.integers(0, 2**32 - 1))
def test_no_finite_input_makes_a_channel_emit_nan_or_inf(values, seed):
    x = np.array(values)
    rng = np.random.default_rng(seed)
    for ch in (LaplaceHistogram(0.1, 16, (0, 1)), LaplaceMean(50.0, (0, 1)), WaveletLaplace(2.0, (0, 1), 0, 4),
               WaveletLaplace(0.5, (0, 1), 2, 3, wavelet="coif2", calibration="paper"), HaarLaplace(1.0, 5, (0, 1)),
               HaarAdaptive(1.0, [1, 3], (0, 1)), HaarAdaptive(1.0, [1, 3], (0, 1), "epsilon")):
        v, _ = ch.prepare(x)
        for out in (ch.stats(v, rng), ch.row_sums(ch.privatize(v, rng))):
            for arr in out.values():
                assert np.all(np.isfinite(arr)), ch
    rr = RandomizedResponse(3.0, ["a", "b", "c"], encoding="unary")
    codes = rr.prepare(np.array(["a", "c"] * len(values)))[0]
    assert np.all(np.isfinite(rr.stats(codes, rng)["sum"]))
