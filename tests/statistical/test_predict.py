"""Predicted standard errors against measured ones, and the warning a release with a privacy unit gets before it
spends anything when k reports at ε/k would leave only noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ldp_dask
from ldp_dask.channels import build_channel
from ldp_dask.cli import main
from ldp_dask.predict import predict
from ldp_dask.privacy import per_row_channel
from ldp_dask.units import person_ids, person_sketch, sketch_count


def _people(persons=2_000, rows=3, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": np.repeat(np.arange(persons), rows), "x": rng.beta(2, 5, persons * rows)})


@pytest.mark.parametrize("name", ["histogram", "mean"])
def test_the_predicted_standard_error_is_the_measured_one(name):
    # 2,000 persons × k = 2 reports at ε/k = 0.5, 300 keys: the released raw estimate (a bin's share, the mean)
    # spreads as predicted. With 300 draws the sample variance over the true one lies in [0.77, 1.27] with
    # probability 0.999 (chi-square, 299 df), so the sd ratio in [0.87, 1.14]; the prediction's sampling term is a
    # bound (p(1-p) ≤ 1/4, a value's variance ≤ half-width²) that moves it by under 1% (histogram) and 4% (mean)
    # here, so the ratio measured/predicted must lie in [0.83, 1.14] (false-failure rate ≤ 1e-3).
    df = _people()
    ch = build_channel(name, 1.0, (0, 1), bins=8) if name == "histogram" else build_channel(name, 1.0, (0, 1))
    draws = []
    for seed in range(300):
        s = ldp_dask.privatize(df, "x", ch, seed=seed, privacy_unit="user", max_contributions=2, ledger=False)
        draws.append(s.sums["sum"][0] / s.n)
    predicted = predict(per_row_channel(ch, 2), 4_000)
    assert predicted is not None
    ratio = float(np.std(draws, ddof=1)) / predicted.se
    assert 0.83 <= ratio <= 1.14, (ratio, predicted)


def test_the_persons_sketch_counts_within_its_error():
    # HyperLogLog with 4,096 registers: relative sd 1.04/64 = 1.6%; 5 sd = 8% (false-failure rate < 1e-6 each)
    for persons in (50, 4_043, 250_000):
        ids = person_ids(np.random.default_rng(persons).integers(0, 10**12, persons))
        assert abs(sketch_count(person_sketch(ids)) / len(np.unique(ids)) - 1) < 0.08


def test_a_unit_release_that_would_be_noise_is_warned_about_before_it_spends(tmp_path, capsys):
    path = tmp_path / "p.parquet"
    _people(persons=4_043, rows=30, seed=3).to_parquet(path)
    base = ["privatize", str(path), "--column", "x", "--channel", "histogram", "--bins", "4", "--domain", "0", "1",
            "--epsilon", "1", "--local", "--seed", "1", "--privacy-unit", "user", "--no-ledger"]
    assert main([*base, "--max-contributions", "30", "--out", str(tmp_path / "a.parquet")]) == 0
    err = capsys.readouterr().err
    assert "would be mostly noise" in err and "k = 1 predicts" in err and "nothing has been spent yet" in err
    assert err.index("mostly noise") < err.index("ledger:")  # before the release
    assert main([*base, "--max-contributions", "1", "--out", str(tmp_path / "b.parquet")]) == 0
    assert "mostly noise" not in capsys.readouterr().err
