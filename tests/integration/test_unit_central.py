"""The central statement of a privacy-unit summary over files counts each person once per file they may be in.

An outside audit's case: 4 Parquet files holding the same 2,000 persons (one row each per file), released with a
privacy unit as an incremental ``LaplaceHistogram(1)`` series, a file a night. Each night is bounded on its own,
so a person makes one report every night and the summary publishes every night's sums: one person moves 2 lattice
coordinates of each of the 4 partitions, 8 coordinates in all, each carrying the summed discrete Laplace noise of
the partition's 2,000 persons. The statement must hold for that whole mechanism. (The audit released the 4 files in
one night, when each file was bounded on its own; a night's files are now bounded together, one partition.)

The exact check is independent of the statement's own computation: the noise's law is built here by convolving
one person's discrete Laplace law 2,000 times (binary powers, FFT), one coordinate's privacy-loss distribution is
built by Google's ``dp_accounting`` from the two shifted laws (pessimistic rounding, so its δ is an upper bound),
composed 8 times, and its δ at the stated ε must not pass the stated δ. The statement of one partition alone —
what the summary stated before, as if each partition held other persons — must be contradicted by the same
check.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy.signal import fftconvolve

import ldp_dask
from ldp_dask.amplification import _lattice_noise_scale

PERSONS, FILES = 2_000, 4


def _sum_law(t: float, n: int) -> dict[int, float]:
    """The law of the sum of n iid discrete Laplace(t) variables (P(k) ∝ e^{−|k|/t}), by repeated convolution."""
    q = math.exp(-1.0 / t)
    half = int(60 * t) + 1  # one variable's mass beyond ±60t is below e^{-60}
    k = np.arange(-half, half + 1)
    one = (1 - q) / (1 + q) * q ** np.abs(k)
    out, out_lo, power, power_lo = np.array([1.0]), 0, one, -half
    while n:
        if n & 1:
            out, out_lo = fftconvolve(out, power), out_lo + power_lo
        n >>= 1
        if n:
            power, power_lo = fftconvolve(power, power), 2 * power_lo
    out = np.clip(out, 0.0, None)
    keep = out > 1e-250
    return dict(zip((np.arange(len(out)) + out_lo)[keep].tolist(), out[keep].tolist()))


def _exact_delta(t: float, n: int, coordinates: int, epsilon: float) -> float:
    law = _sum_law(t, n)
    lower = {x: math.log(p) for x, p in law.items()}
    upper = {x + 1: v for x, v in lower.items()}  # the same noise around a sum one lattice step higher
    one = pld.from_two_probability_mass_functions(upper, lower, pessimistic_estimate=True,
                                                  value_discretization_interval=1e-4)
    return float(one.self_compose(coordinates).get_delta_for_epsilon(epsilon))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Four nights, each adding a file of the same 2,000 persons: four kept partitions, a person in every one."""
    base = tmp_path_factory.mktemp("unit-files")
    root = base / "table"
    root.mkdir()
    rng = np.random.default_rng(21)
    since = None
    for f in range(FILES):
        pd.DataFrame({"person": np.arange(PERSONS), "x": rng.uniform(0, 1, PERSONS)}).to_parquet(
            root / f"day-{f}.parquet")
        out = base / f"night-{f}.summary.parquet"
        s = ldp_dask.privatize(str(root), "x", ldp_dask.LaplaceHistogram(1.0, 8, (0, 1)), incremental=True,
                               since=since, out=out, privacy_unit="person", seed=3, ledger=False, client="local")
        since = out
    return s


def test_the_statement_of_a_multi_file_unit_summary_holds_exactly(released):
    stated = released.central
    assert stated["partitions"] == FILES and stated["units"] == PERSONS
    assert stated["local_epsilon"] == pytest.approx(FILES * released.epsilon_per_unit)
    t = _lattice_noise_scale(released.channel)
    exact = _exact_delta(t, PERSONS, 2 * FILES, stated["epsilon"])
    assert exact <= stated["delta"], (stated, exact)
    # one partition's statement, stated for the whole summary, does not hold: the audit's finding
    alone = released.central_per_partition
    assert alone["epsilon"] < stated["epsilon"]
    assert _exact_delta(t, PERSONS, 2 * FILES, alone["epsilon"]) > 1000 * alone["delta"]



def _table(root, files, persons, seed):
    rng = np.random.default_rng(seed)
    for name in files:
        pd.DataFrame({"person": rng.integers(0, persons, 3 * persons), "x": rng.uniform(0, 1, 3 * persons)}
                     ).to_parquet(root / name)


def test_a_nights_files_are_bounded_together_and_charged_once(tmp_path, capsys):
    """A first night over 3 new files with a privacy unit charges ε 1 per person (it charged 3: each file was
    bounded on its own); the summary keeps one partition naming the 3 files, with exactly k reports per person; a
    second night adds one partition and ε 1; a re-run is free; a night whose earlier file changed reads that
    night's files again, together with the new ones."""
    from ldp_dask.ledger import Ledger

    root, led = tmp_path / "t", str(tmp_path / "l.sqlite")
    root.mkdir()
    Ledger(led).declare("events", str(root), limit=5.0, privacy_unit="person")
    _table(root, ["a.parquet", "b.parquet", "c.parquet"], 1_000, 1)
    ch = ldp_dask.LaplaceHistogram(1.0, 8, (0, 1))
    common = dict(incremental=True, privacy_unit="person", max_contributions=2, seed=3, ledger=led, client="local")
    one = ldp_dask.privatize(str(root), "x", ch, out=tmp_path / "n1.parquet", **common)
    assert one.receipt.epsilon == 1.0 and one.receipt.total == 1.0
    (night,) = one.partitions
    assert night.paths == ("a.parquet", "b.parquet", "c.parquet") and one.n == 2 * 1_000  # k = 2 per person
    assert one.central["partitions"] == 1 and one.central["local_epsilon"] == 1.0
    assert one.metadata["files_read"] == 3
    assert "tonight's files released anew as one night over their persons, ε 1 per person" in one.receipt.line()
    _table(root, ["d.parquet"], 1_000, 2)
    two = ldp_dask.privatize(str(root), "x", ch, out=tmp_path / "n2.parquet", since=tmp_path / "n1.parquet", **common)
    assert two.receipt.epsilon == 1.0 and two.receipt.total == 2.0
    assert [p.paths for p in two.partitions] == [("a.parquet", "b.parquet", "c.parquet"), ("d.parquet",)]
    assert two.metadata["partitions_read"] == 1 and two.central["partitions"] == 2
    again = ldp_dask.privatize(str(root), "x", ch, out=tmp_path / "n2b.parquet", since=tmp_path / "n1.parquet",
                               **common)
    assert again.receipt.reused and again.receipt.epsilon == 0 and again.same_release(two)
    back = ldp_dask.read_summary(tmp_path / "n2.parquet", allow_unverified=True)
    assert [p.paths for p in back.partitions] == [p.paths for p in two.partitions] and back.same_release(two)
    _table(root, ["b.parquet"], 1_000, 3)  # a correction of night 1's file b
    _table(root, ["e.parquet"], 1_000, 4)
    three = ldp_dask.privatize(str(root), "x", ch, out=tmp_path / "n3.parquet", since=tmp_path / "n2.parquet",
                               **common)
    assert [p.paths for p in three.partitions] == [("a.parquet", "b.parquet", "c.parquet", "e.parquet"),
                                                   ("d.parquet",)]
    assert three.receipt.epsilon == 1.0 and three.receipt.total == 3.0
    # a night with no new file, from the command line: said as such, and free
    from ldp_dask.cli import main

    capsys.readouterr()
    assert main(["privatize", str(root), "--column", "x", "--channel", "histogram", "--epsilon", "1", "--bins", "8",
                 "--domain", "0", "1", "--since", str(tmp_path / "n3.parquet"), "--privacy-unit", "person",
                 "--max-contributions", "2", "--seed", "3", "--ledger", led, "--local",
                 "--out", str(tmp_path / "n4.parquet")]) == 0
    out = "".join(capsys.readouterr())  # the ledger's line is on stderr
    assert "nights: no new file tonight, 2 earlier night(s) reused" in out, out
    assert "no file new tonight: no ε spent; dataset " in out and " now 3 " in out, out
