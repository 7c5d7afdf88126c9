"""Bad input, swept across the public entry points (CLI and Python): each malformed input gives one
clear, specific line, exit status 2, and writes nothing; and no finite input in the domain makes a
channel emit NaN or inf."""

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
    HaarAdaptive,
    HaarLaplace,
    LaplaceHistogram,
    LaplaceMean,
    RandomizedResponse,
    WaveletLaplace,
)
from ldp_dask.cli import main


@pytest.fixture
def good(tmp_path):
    d = tmp_path / "good"
    d.mkdir()
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 100, 4000)
    pq.write_table(pa.table({"x": x, "name": pa.array(["a"] * len(x))}), d / "a.parquet", row_group_size=1000)
    return d


def _dataset(tmp_path, name, table=None, raw=None):
    d = tmp_path / name
    d.mkdir()
    if table is not None:
        pq.write_table(table, d / "a.parquet")
    if raw is not None:
        (d / "a.parquet").write_bytes(raw)
    return d


WAVELET = ["--channel", "wavelet"]


def _run(capsys, tmp_path, source, *extra, out=None):
    out = out or tmp_path / "out.summary.parquet"
    channel = ["--channel", "histogram", "--bins", "8"] if "wavelet" not in extra else []
    argv = ["privatize", str(source), "--column", "x", *channel, "--domain", "0", "100", "--epsilon", "1",
            "--out", str(out), "--local", "--seed", "1", *extra]
    # later flags override earlier ones in argparse
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return code, err, out


def _bad_data(tmp_path):
    x = np.random.default_rng(1).uniform(0, 100, 100)
    nan, inf, big = x.copy(), x.copy(), x.copy()
    nan[3], inf[4], big[5] = np.nan, -np.inf, 1e6
    return {
        "nan": (pa.table({"x": nan}), None, "NaN"),
        "inf": (pa.table({"x": inf}), None, "infinite"),
        "plus_inf": (pa.table({"x": np.where(np.arange(100) == 7, np.inf, x)}), None, "infinite"),
        "out_of_domain": (pa.table({"x": big}), None, "outside the declared domain"),
        "nulls": (pa.table({"x": pa.array([1.0, None, 2.0])}), None, "null"),
        "missing_column": (pa.table({"y": x}), None, "column 'x' not found"),
        "string_column": (pa.table({"x": pa.array(["a"] * 10)}), None, "numeric column is required"),
        "empty": (pa.table({"x": pa.array([], pa.float64())}), None, "empty"),
        "corrupt": (None, b"PAR1 this is not parquet", "not a readable Parquet"),
    }


@pytest.mark.parametrize("case", ["nan", "inf", "plus_inf", "out_of_domain", "nulls", "missing_column",
                                  "string_column", "empty", "corrupt"])
def test_bad_data_gives_clear_error_and_writes_nothing(capsys, tmp_path, case):
    table, raw, message = _bad_data(tmp_path)[case]
    src = _dataset(tmp_path, case, table, raw)
    code, err, out = _run(capsys, tmp_path, src)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("ldp-dask: error:") and message in err[0], err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [case]  # nothing else written, no temp files
    assert sorted(p.name for p in src.iterdir()) == ["a.parquet"]  # the source is left as it was


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--epsilon", "0"], "'epsilon' parameter"),
        (["--epsilon", "-1"], "'epsilon' parameter"),
        (["--epsilon", "nan"], "'epsilon' parameter"),
        (["--epsilon", "inf"], "'epsilon' parameter"),
        (["--bins", "0"], "'bins' parameter"),
        (["--bins", "-4"], "'bins' parameter"),
        (["--bins", "many"], "'bins' parameter"),
        (["--domain", "5", "5"], "lo < hi"),
        (["--domain", "9", "1"], "lo < hi"),
        (["--mode", "rows"], "rows_path"),
        (["--partition-rows", "0"], "'partition_rows' parameter"),
        (["--split-every", "1"], "'split_every' parameter"),
        ([*WAVELET, "--wavelet", "bior2.2"], "not orthogonal"),
        ([*WAVELET, "--wavelet", "mexh"], "continuous wavelet"),
        ([*WAVELET, "--wavelet", "db99"], "not a PyWavelets wavelet"),
        ([*WAVELET, "--j0", "5", "--j1", "2"], "'j1' parameter must be >= j0 - 1"),
        ([*WAVELET, "--j0", "-1"], "'j0' parameter"),
        ([*WAVELET, "--nu", "1"], "'nu' parameter"),
        ([*WAVELET, "--j1", "40"], "beyond the resolution"),
        (["--wavelet", "db4"], "do not apply to the 'histogram' channel"),
        (["--bins", "99999999999"], "'bins' parameter"),
        (["--channel", "mean", "--domain", "0", "100"], "do not apply to the 'mean' channel"),  # --bins 8
        ([*WAVELET, "--bins", "auto"], "bins do not apply to the 'wavelet' channel"),
    ],
)
def test_bad_parameters(capsys, tmp_path, good, extra, message):
    code, err, out = _run(capsys, tmp_path, good, *extra)
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--channel", "mean"], "needs a public 'domain'"),
    (["--channel", "haar", "--haar-level", "77", "--domain", "0", "100"], "'level' parameter"),
    (["--channel", "rr", "--column", "name", "--categories", "a", "a"], "duplicates"),
    (["--channel", "rr", "--column", "name"], "list of categories"),
    (["--channel", "rr", "--column", "name", "--categories", "a", "--domain", "0", "1"], "not a numeric 'domain'"),
])
def test_bad_channel_arguments(capsys, tmp_path, good, argv, message):
    out = tmp_path / "out.summary.parquet"
    code = main(["privatize", str(good), "--column", "x", "--epsilon", "1", "--out", str(out), "--local",
                 "--seed", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["good"]


def test_missing_source_and_empty_directory(capsys, tmp_path):
    code, err, _ = _run(capsys, tmp_path, tmp_path / "nowhere")
    assert code == 2 and "no such file or directory" in err[0]
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    code, err, _ = _run(capsys, tmp_path, empty)
    assert code == 2 and "no Parquet files" in err[0]


def test_existing_output_needs_overwrite(capsys, tmp_path, good):
    out = tmp_path / "exists.parquet"
    out.write_bytes(b"precious")
    code, err, _ = _run(capsys, tmp_path, good, out=out)
    assert code == 2 and "already exists" in err[0] and "--overwrite" in err[0]
    assert out.read_bytes() == b"precious"
    code, _, _ = _run(capsys, tmp_path, good, "--overwrite", out=out)
    assert code == 0 and ldp_dask.read_summary(out).n == 4000


def test_clip_is_opt_in_counted_and_reported_to_the_operator_only(capsys, tmp_path):
    x = np.random.default_rng(2).uniform(-10, 110, 1000)
    src = _dataset(tmp_path, "wide", pa.table({"x": x}))
    expected = int(np.sum((x < 0) | (x > 100)))
    code, err, out = _run(capsys, tmp_path, src, "--clip")
    assert code == 0
    assert any(f"clipped {expected:,} " in line for line in err), err
    meta = ldp_dask.read_summary(out).metadata
    assert meta["clip"] is True and "n_clipped" not in meta


def test_python_api_errors_name_the_parameter(good):
    ch = ldp_dask.LaplaceHistogram(1.0, 4, (0, 100))
    with pytest.raises(ldp_dask.LdpDaskError, match="'channel' parameter"):
        ldp_dask.privatize(str(good), column="x", channel="histogram")
    with pytest.raises(ldp_dask.LdpDaskError, match="'mode' parameter"):
        ldp_dask.privatize(str(good), column="x", channel=ch, mode="fast")
    with pytest.raises(ldp_dask.LdpDaskError, match="'column' parameter is required"):
        ldp_dask.privatize(str(good), channel=ch)
    with pytest.raises(ldp_dask.LdpDaskError, match="'source' parameter"):
        ldp_dask.privatize({"x": 1}, channel=ch)
    with pytest.raises(ldp_dask.LdpDaskError, match="1-D"):
        ldp_dask.privatize(np.zeros((3, 2)), channel=ch)
    with pytest.raises(ldp_dask.InputDataError, match="empty"):
        ldp_dask.privatize(np.array([]), channel=ch)
    assert os.listdir(good) == ["a.parquet"]


def test_cli_help_for_every_command(capsys):
    for cmd in (["--help"], ["demo", "--help"], ["privatize", "--help"], ["estimate", "--help"], ["gof", "--help"],
                ["quantiles", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(cmd)
        assert info.value.code == 0
        assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--null", "beta(2,2)"], "needs column, domain, epsilon"),
        (["--null", "norm(0,1)", "--column", "x", "--domain", "0", "100", "--epsilon", "1"], "integrate to one"),
        (["--null", "beta(2,2)", "--column", "x", "--domain", "0", "100", "--epsilon", "0"], "'epsilon' parameter"),
        (["--null", "beta(2,2)", "--column", "x", "--domain", "0", "100", "--epsilon", "1", "--B", "5"],
         "'B' parameter"),
        (["--null", "uniform", "--column", "x", "--domain", "0", "100", "--epsilon", "1", "--haar-level", "30"],
         "'level' parameter"),
        (["--null", "uniform", "--column", "x", "--domain", "0", "100", "--epsilon", "1", "--statistic", "U"],
         "directory for the privatized rows"),
    ],
)
def test_gof_cli_errors(capsys, good, extra, message):
    code = main(["gof", str(good), "--local", "--seed", "1", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_mismatched_summaries_and_estimators(good, tmp_path, capsys):
    s = ldp_dask.privatize(str(good), column="x", channel=LaplaceMean(1.0, (0, 100)), client="local", seed=1)
    s.to_parquet(tmp_path / "mean.parquet")
    from ldp_dask import gof
    from ldp_dask.estimators import frequencies, wavelet_density

    for call, match in [
        (lambda: gof.test(s, "uniform"), "'haar' channel"),
        (lambda: wavelet_density(s), "'wavelet' channel"),
        (lambda: frequencies(s), "needs a summary of a categorical channel"),
        (lambda: ldp_dask.histogram_density(s), "'histogram' or 'haar' channel"),
        (lambda: ldp_dask.estimate(s, gamma=2.0), "do not apply"),
        (lambda: ldp_dask.read_summary(tmp_path / "nope.parquet"), "no such summary"),
        (lambda: ldp_dask.read_summary(good / "a.parquet"), "not an ldp_dask summary"),
        (lambda: ldp_dask.estimate(ldp_dask.privatize(np.linspace(0, 1, 100), channel=HaarAdaptive(1.0, [1], (0, 1)),
                                                      seed=1)), "no estimate of their own"),
    ]:
        with pytest.raises(LdpDaskError, match=match):
            call()
    assert main(["estimate", str(tmp_path / "mean.parquet"), "--threshold", "hard"]) == 2
    assert main(["gof", str(tmp_path / "mean.parquet"), "--null", "uniform"]) == 2
    assert main(["quantiles", str(tmp_path / "mean.parquet"), "--q", "0.5"]) == 2
    assert sorted(os.listdir(tmp_path)) == ["good", "mean.parquet"]
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


@pytest.mark.parametrize("argv, instead", [
    (["privatize", "SRC", "--column", "x", "--channel", "haar", "--domain", "0", "100", "--epsilon", "1",
      "--out", "OUT", "--level", "4"], "--haar-level"),
    (["gof", "SRC", "--null", "uniform", "--level", "0.95"], "--alpha"),
    (["estimate", "SRC", "--level", "0.9"], "--confidence"),
    (["quantiles", "SRC", "--level", "0.9"], "--confidence"),
    (["report", "SRC", "--level"], "--confidence"),
])
def test_retired_level_flag_names_its_replacement(capsys, tmp_path, good, argv, instead):
    """--level once meant a Haar level, a confidence level and a significance level; it is refused everywhere with
    the flag to use, before anything runs or is written."""
    argv = [str(good) if a == "SRC" else str(tmp_path / "o.parquet") if a == "OUT" else a for a in argv]
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and "no longer accepted" in err and instead in err, err
    assert sorted(os.listdir(tmp_path)) == ["good"]


@pytest.mark.parametrize("alpha", ["0.5", "0.95", "0", "1", "x"])
def test_gof_alpha_must_be_a_test_level(capsys, good, alpha):
    with pytest.raises(SystemExit) as info:
        main(["gof", str(good), "--null", "uniform", "--column", "x", "--domain", "0", "100", "--epsilon", "1",
              "--local", "--seed", "1", "--alpha", alpha])
    assert info.value.code == 2 and "(0, 0.5)" in capsys.readouterr().err


def test_python_gof_refuses_a_confidence_as_its_level():
    s = ldp_dask.privatize(np.linspace(0, 1, 200), channel=HaarLaplace(1.0, level=2, domain=(0, 1)), seed=1)
    with pytest.raises(LdpDaskError, match="significance level α, in \\(0, 0.5\\)"):
        ldp_dask.gof.test(s, "uniform", 0.95, B=99)


def test_new_flags_reach_the_estimators(capsys, tmp_path, good):
    """--haar-level sets J, --alpha the test level, --confidence the interval level (read back from the JSON)."""
    import json

    out = tmp_path / "h.parquet"
    assert main(["privatize", str(good), "--column", "x", "--channel", "haar", "--haar-level", "3", "--domain", "0",
                 "100", "--epsilon", "1", "--out", str(out), "--local", "--seed", "1", "--no-ledger"]) == 0
    capsys.readouterr()
    assert main(["gof", str(out), "--null", "uniform", "--alpha", "0.01", "--B", "199", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["level"] == 0.01 and r["J"] == 3
    assert main(["estimate", str(out), "--confidence", "0.8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["level"] == 0.8
