"""The embedded default job behind ``make demo`` / ``ldp-dask demo``.

Generates a synthetic income-like column with a known density (a mixture of
two scaled Beta laws on [0, 200 000]) as several Parquet files, starts a Dask
LocalCluster of worker processes, runs the privatize and estimate Prefect
flows without a server, and writes summaries, a density plot and a report.

The demo records its releases in its own ledger, ``<out>/ledger.sqlite``,
never in the user's; like its other outputs, it is replaced on every run. It runs Prefect without a server: Prefect starts a
temporary API for the run, and the demo gives it the time a busy machine
needs (:data:`PREFECT_SETTINGS`) and turns Prefect's telemetry off.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats

__all__ = ["DemoTruth", "make_data", "sample_table", "run_demo", "PREFECT_SETTINGS", "SAMPLE_COLUMNS"]

HI = 200_000.0
#: Environment defaults of the demo's Prefect runs (a value the user set wins): the temporary API
#: server may take well over Prefect's default 20 s to start on a loaded 2-core machine, and nothing
#: is reported to Prefect's telemetry.
PREFECT_SETTINGS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


class DemoTruth:
    """The known law of the synthetic column: 0.6·Beta(2,8) + 0.4·Beta(6,4), scaled by 200 000."""

    weights = (0.6, 0.4)
    laws = (stats.beta(2, 8, scale=HI), stats.beta(6, 4, scale=HI))
    domain = (0.0, HI)

    def pdf(self, x: np.ndarray) -> np.ndarray:
        return sum(w * d.pdf(x) for w, d in zip(self.weights, self.laws))

    @property
    def mean(self) -> float:
        return float(sum(w * d.mean() for w, d in zip(self.weights, self.laws)))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        first = rng.random(n) < self.weights[0]
        return np.where(first, rng.beta(2, 8, n), rng.beta(6, 4, n)) * HI


def make_data(directory: str | os.PathLike[str], rows: int = 2_000_000, files: int = 4, seed: int = 0) -> Path:
    """Write ``rows`` synthetic rows as ``files`` Parquet files (row groups of 250 000)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    truth = DemoTruth()
    per = -(-rows // files)
    for f in range(files):
        m = min(per, rows - f * per)
        x = truth.sample(m, rng)
        region = rng.integers(0, 5, m).astype(np.int32)
        pq.write_table(pa.table({"income": x, "region": region}), d / f"part-{f:03d}.parquet",
                       row_group_size=250_000)
    return d


#: The columns of :func:`sample_table`, the table the README's and the docs' examples read.
SAMPLE_COLUMNS = {
    "x": "float64 in [0, 1], Beta(2, 5)",
    "distance": "float64 in [0, 5000], a gamma law clipped to the domain",
    "carrier": "string, eight airline codes",
    "user_id": "int64, about 3 rows per person (40,000 persons)",
    "delay": "float64 with about 2% nulls",
}


def sample_table(directory: str | os.PathLike[str], seed: int = 2026) -> Path:
    """Write the sample table the README and the documentation's examples read: two Parquet files of 60,000 rows
    (row groups of 30,000) with the columns of :data:`SAMPLE_COLUMNS`. ``ldp-dask demo --data-only DIR``.

    Refuses a ``directory`` that exists and is not empty, so that nothing is overwritten."""
    d = Path(directory)
    if d.exists() and (not d.is_dir() or any(d.iterdir())):
        from ._validation import LdpDaskError

        raise LdpDaskError(f"{d} exists and is not an empty directory; the sample table needs a new one.")
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    carriers = np.array(["AA", "B6", "DL", "EV", "MQ", "UA", "US", "WN"])
    for i in range(2):
        n = 60_000
        delay = rng.normal(10, 30, n)
        table = pa.table({
            "x": rng.beta(2, 5, n),
            "distance": np.clip(rng.gamma(2.0, 500.0, n), 0, 5000),
            "carrier": carriers[rng.choice(8, n, p=[.2, .15, .15, .1, .1, .15, .05, .1])],
            "user_id": rng.integers(0, 40_000, n),
            "delay": pa.array(delay, mask=rng.random(n) < 0.02),
        })
        pq.write_table(table, d / f"part-{i}.parquet", row_group_size=30_000)
    return d


def run_demo(out: str | os.PathLike[str] = "demo-output", rows: int = 2_000_000, files: int = 4,
             epsilon: float = 1.0, workers: int = 2, seed: int | None = None) -> dict[str, Any]:
    """Run the whole demo; returns the paths and key numbers it wrote.

    Releases are recorded in ``<out>/ledger.sqlite``, the demo's own ledger (a new one each run).
    ``rows`` is 1,000–10^9, ``files`` 1–10,000 (at most one per row), ``workers`` 1–256.
    """

    from ._validation import check_epsilon, check_int

    rows = check_int(rows, "rows", 1_000, 10**9)
    files = check_int(files, "files", 1, min(10_000, rows))
    workers = check_int(workers, "workers", 1, 256)
    epsilon = check_epsilon(epsilon)

    for key, value in PREFECT_SETTINGS.items():  # before Prefect is imported: its settings read them
        os.environ.setdefault(key, value)
    from distributed import Client, LocalCluster
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    from ldp_dask.flows import estimate_flow, privatize_flow

    from .clusters import LOCAL_CLUSTER
    from .noise import hidden_from_children

    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = make_data(outdir / "data", rows=rows, files=files)
    truth = DemoTruth()
    paths = {k: str(outdir / v) for k, v in {
        "hist": "income.histogram.summary.parquet", "mean": "income.mean.summary.parquet",
        "density_json": "income.density.json", "density_png": "income.density.png",
        "mean_json": "income.mean.json", "report": "report.md",
        "html": "income.histogram.summary.html", "ledger": "ledger.sqlite"}.items()}
    # Prefect may have been imported before the environment was set (a notebook): make sure of the timeout
    timeout = max(int(PREFECT_SETTINGS["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]),
                  int(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()))
    Path(paths["ledger"]).unlink(missing_ok=True)  # the demo's own record of this run, replaced like its outputs
    with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: timeout}), \
            hidden_from_children(), \
            LocalCluster(n_workers=workers, **LOCAL_CLUSTER) as cluster, Client(cluster):
        common = dict(source=str(data), column="income", domain=[0.0, HI], epsilon=epsilon,
                      scheduler=cluster.scheduler_address, seed=seed, overwrite=True,
                      ledger=paths["ledger"])
        rel_h = privatize_flow(out=paths["hist"], channel="histogram", bins="auto", **common)
        rel_m = privatize_flow(out=paths["mean"], channel="mean", bins=None, **common)
        est_h = estimate_flow(paths["hist"], out=paths["density_json"], plot=paths["density_png"], overwrite=True)
        est_m = estimate_flow(paths["mean"], out=paths["mean_json"], overwrite=True)

    import ldp_dask

    density = ldp_dask.histogram_density(paths["hist"])
    density.plot(paths["density_png"], truth=truth.pdf, overwrite=True,
                 title=f"Locally private income density (n = {density.n:,}, ε = {epsilon:g} per row)")
    l1, l2 = density.distance(truth.pdf, r=1), density.distance(truth.pdf, r=2)
    m = est_m["estimate"]
    elapsed = time.perf_counter() - t0
    report = f"""# ldp_dask demo report

Synthetic column `income` ({rows:,} rows in {files} Parquet files) with a known
density, 0.6·Beta(2,8) + 0.4·Beta(6,4) scaled to [0, 200 000]. Each row was
privatized locally with ε = {epsilon:g} on a Dask LocalCluster of {workers}
worker processes, through Prefect flows run without a server.

## Density ({rel_h['channel']}, {rel_h['params']['bins']} bins chosen from n and ε)
- L1 distance to the true density: {l1:.4f} (0 is perfect, 2 is disjoint)
- L2 distance: {l2:.3e}
- plot: `{paths['density_png']}`; values and pointwise standard errors: `{paths['density_json']}`

## Mean
- estimate {m['value']:,.1f}, {m['level']:.0%} interval [{m['ci'][0]:,.1f}, {m['ci'][1]:,.1f}]
- true mean of the law {truth.mean:,.1f}; {m['noise_share']:.0%} of the variance is privacy noise

## Releases
- `{paths['hist']}` (key id {rel_h['key_id']}, key source {rel_h['key_source']})
- `{paths['mean']}` (key id {rel_m['key_id']}, key source {rel_m['key_source']})
- ε per row: {rel_h['epsilon']:g} for the histogram and {rel_m['epsilon']:g} for the mean
  ({rel_h['epsilon'] + rel_m['epsilon']:g} in total by basic composition), recorded in the demo's own
  ledger `{outdir / 'ledger.sqlite'}` (`ldp-dask budget --ledger {outdir / 'ledger.sqlite'}`)

Wall time: {elapsed:.1f} s.
"""
    Path(paths["report"]).write_text(report)
    from .report import write_report

    write_report(paths["hist"], paths["html"], overwrite=True)
    return {"paths": paths, "l1": l1, "l2": l2, "mean": m, "true_mean": truth.mean, "seconds": elapsed,
            "density_written": est_h["written"]}
