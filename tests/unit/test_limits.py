"""Legal but extreme arguments: each is either done in time and memory proportional to its size, or refused up
front in one line that names the limit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask import LdpDaskError, privatize
from ldp_dask.channels import build_channel
from ldp_dask.cli import main
from ldp_dask.estimators import estimate, local_quantiles
from ldp_dask.gof import test as gof_test
from ldp_dask.report import render_report


def _one_line(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return code, err[0]


def test_randomized_response_over_1e5_categories_is_linear(tmp_path) -> None:
    """10^5 categories, 10^4 rows: the k-ary summary draws one value per moved row, not d² multinomial cells
    (it took 124 s and 2.7 GB before; now a fraction of a second)."""
    cats = [f"c{i}" for i in range(100_000)]
    rng = np.random.default_rng(0)
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"c": pa.array(rng.choice(cats[:500], 10_000))}), path)
    s = privatize(str(path), "c", build_channel("rr", 1.0, None, categories=cats), client="local", seed=1)
    assert s.n == 10_000 and s.sums["sum"].sum() == 10_000  # every row reports exactly one category
    est = estimate(s)
    assert len(est.to_dict()["frequencies"]) == 100_000


def test_bootstrap_of_a_huge_histogram_is_refused_and_a_small_one_runs() -> None:
    x = np.random.default_rng(1).beta(2, 5, 20_000)
    s = privatize(x, channel=build_channel("histogram", 1.0, (0, 1), bins=1 << 19), seed=1)
    with pytest.raises(LdpDaskError, match=r"400 replicates × 524,288 values .* the limit is 2\^27"):
        local_quantiles(s, interval="bootstrap")
    q = local_quantiles(s, B=10, interval="bootstrap")  # 5.2e6 values, drawn in blocks of 8 replicates
    assert q.values.shape == (9,) and np.all(q.ci_low <= q.ci_high)
    band = local_quantiles(s)  # the default interval draws nothing: one cumulative sum of the bins
    assert band.interval == "bins" and np.all(band.ci_low <= band.ci_high)


def test_report_of_a_million_bins_shows_a_readable_table() -> None:
    x = np.random.default_rng(2).beta(2, 5, 20_000)
    s = privatize(x, channel=build_channel("histogram", 1.0, (0, 1), bins=1 << 20), seed=1)
    page = render_report(s)
    assert "64 of its 1,048,576 bins, evenly spaced" in page and page.count("<tr>") < 200
    ax = estimate(s).plot()  # 4,096 steps of bin means, not a million
    labels = ax.get_legend_handles_labels()[1]
    assert any("means of 256 bins" in label for label in labels), labels
    assert max(len(line.get_xdata()) for line in ax.get_lines()) <= 4097


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_gof_calibration_of_a_level_20_summary(capsys) -> None:
    x = np.random.default_rng(3).uniform(size=5_000)
    s = privatize(x, channel=build_channel("haar", 1.0, (0, 1), level=20), seed=1)
    with pytest.raises(LdpDaskError, match=r"9,999 replicates × 1,048,576 values .* the limit is 2\^27"):
        gof_test(s, "uniform")
    res = gof_test(s, "uniform", B=19, rng=1)  # 2e7 values, in chunks of 4 replicates (32 MiB each)
    assert abs(res.p_value * 20 - round(res.p_value * 20)) < 1e-9 and res.p_value >= 1 / 20  # (1 + #)/(B + 1)
    # (no power check here: at 2^20 cells for 5,000 rows the noise swamps any alternative; test_gof has them)


def test_demo_and_quantile_arguments_out_of_range_are_refused(capsys, tmp_path) -> None:
    code, line = _one_line(capsys, ["demo", "--workers", "0", "--out", str(tmp_path / "demo")])
    assert code == 2 and "'workers'" in line and "[1, 256]" in line
    code, line = _one_line(capsys, ["demo", "--rows", "10", "--out", str(tmp_path / "demo")])
    assert code == 2 and "'rows'" in line
    assert not (tmp_path / "demo").exists()
    data = tmp_path / "x.parquet"
    pq.write_table(pa.table({"x": np.random.default_rng(4).random(1000)}), data)
    code, line = _one_line(capsys, ["quantiles", str(data), "--column", "x", "--bounds", "0", "1", "--epsilon", "1",
                                    "--method", "histogram", "--steps", str(1 << 31), "--local", "--no-ledger"])
    assert code == 2 and "'steps'" in line and "1048576" in line
