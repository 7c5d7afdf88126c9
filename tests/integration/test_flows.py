"""Real Prefect flow runs (ephemeral test API) on a real LocalCluster, and the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ldp_dask

pytestmark = [pytest.mark.prefect, pytest.mark.cluster]


def test_privatize_and_estimate_flows(prefect_harness, cluster, beta_dataset, tmp_path):
    from prefect.client.orchestration import get_client

    from ldp_dask.flows import estimate_flow, privatize_flow

    out = tmp_path / "x.summary.parquet"
    facts = privatize_flow(source=str(beta_dataset), column="x", out=str(out), domain=[0.0, 1.0],
                           channel="histogram", epsilon=1.0, bins="auto",
                           scheduler=cluster.scheduler.address, seed=5)
    s = ldp_dask.read_summary(out)
    assert facts["n"] == s.n == 210_000 and facts["epsilon_spent"] <= 1.0
    # auto bins: ceil((n ε²)^(1/4))
    assert s.channel.bins == int(np.ceil(210_000 ** 0.25))
    # the flow released exactly what the library releases for the same key
    direct = ldp_dask.privatize(str(beta_dataset), column="x", channel=s.channel, client="local", seed=5)
    assert direct.same_release(s)

    res = estimate_flow(summary=str(out), out=str(tmp_path / "d.json"), plot=str(tmp_path / "d.png"))
    assert set(res["written"]) == {"json", "plot"}
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "d.json").read_text())["n"] == 210_000

    import anyio

    async def artifacts():
        # the REST body (the typed client's explicit nulls need FastAPI < 0.151, see pyproject)
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 100, "offset": 0,
                                                                    "sort": "CREATED_DESC"})
            return r.json()

    arts = anyio.run(artifacts)
    keys = {a["key"] for a in arts}
    assert {"ldp-release", "ldp-estimate", "ldp-estimate-table", "ldp-density-plot"} <= keys
    release = next(a for a in arts if a["key"] == "ldp-release")
    assert "| rows (n) | 210,000 |" in release["data"] and "| channel | histogram |" in release["data"]


def test_flow_rejects_existing_output_before_work(prefect_harness, beta_dataset, tmp_path):
    from ldp_dask.flows import privatize_flow

    out = tmp_path / "exists.parquet"
    out.write_bytes(b"keep")
    with pytest.raises(ldp_dask.LdpDaskError, match="already exists"):
        privatize_flow(source=str(beta_dataset), column="x", out=str(out), domain=[0.0, 1.0], seed=1)
    assert out.read_bytes() == b"keep"


def test_console_script_privatize_then_estimate(beta_dataset, tmp_path):
    exe = Path(sys.executable).with_name("ldp-dask")
    env = {**os.environ, "LDP_DASK_SECRET": "console-script-secret-0123456789"}
    out = tmp_path / "x.summary.parquet"
    r = subprocess.run([str(exe), "privatize", str(beta_dataset), "--column", "x", "--channel", "mean",
                        "--domain", "0", "1", "--epsilon", "1", "--out", str(out), "--local", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["key_source"] == "env" and info["n"] == 210_000
    assert "console-script-secret" not in r.stdout + r.stderr
    # repeated: pyarrow's threaded reader used to abort ~50% of processes at exit
    # (SIGABRT after printing); 5 clean runs leave a 1/32 chance of missing that bug
    for _ in range(5):
        r = subprocess.run([str(exe), "estimate", str(out), "--json"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    # Beta(2,5) has mean 2/7; n = 210k, ε = 1: sd ≈ sqrt((0.0255 + 2)/210000) = 0.0031
    assert abs(m["value"] - 2 / 7) < 4.5 * 0.0031
    r = subprocess.run([str(exe), "estimate", str(tmp_path / "missing.parquet")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("ldp-dask: error:") and len(r.stderr.splitlines()) == 1


def test_auto_channel_flow_records_its_choice(prefect_harness, cluster, beta_dataset, tmp_path):
    from ldp_dask.flows import privatize_flow

    out = tmp_path / "auto.summary.parquet"
    facts = privatize_flow(source=str(beta_dataset), column="x", out=str(out), domain=[0.0, 1.0], channel="auto",
                           epsilon=2.0, options={"target": "mean"}, scheduler=cluster.scheduler.address, seed=4)
    assert facts["channel"] == "hybrid-mean" and facts["choice"]["chosen"] == "hybrid-mean/hybrid"
    m = ldp_dask.mean(str(out))
    # Beta(2, 5): mean 2/7; the hybrid's view sd at ε = 2 is ≈ 0.5·√(1.04 + 0.1) = 0.53, /√210,000 → 0.0012
    assert abs(m.value - 2 / 7) < 4.5 * 0.0012 and m.ci[0] < 2 / 7 < m.ci[1]


def test_wavelet_flows_and_console_script(prefect_harness, cluster, beta_dataset, tmp_path):
    from ldp_dask.flows import estimate_flow, privatize_flow

    out = tmp_path / "w.summary.parquet"
    facts = privatize_flow(source=str(beta_dataset), column="x", out=str(out), domain=[0.0, 1.0],
                           channel="wavelet", epsilon=1.0, bins=None, options={"wavelet": "sym4", "calibration": "paper"},
                           scheduler=cluster.scheduler.address, seed=9)
    s = ldp_dask.read_summary(out)
    # the paper's levels from n and ε (Butucea et al. 2020, Thm 4.1, N = 1): j0 = round(log2(n)/4),
    # j1 = round(log2(n/log n)/2)
    n = 210_000
    assert (s.channel.j0, s.channel.j1) == (round(np.log2(n) / 4), round(0.5 * np.log2(n / np.log(n))))
    assert s.channel.wavelet == "sym4" and facts["epsilon_spent"] <= 1.0
    res = estimate_flow(summary=str(out), plot=str(tmp_path / "w.png"), options={"threshold": "soft"})
    assert res["estimate"]["method"] == "wavelet-soft+density" and res["written"]["plot"]

    exe = Path(sys.executable).with_name("ldp-dask")
    png = tmp_path / "cli.png"
    r = subprocess.run([str(exe), "estimate", str(out), "--plot", str(png), "--gamma", "2.5", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["gamma"] == 2.5 and png.read_bytes()[:4] == b"\x89PNG"
    # projected onto densities by default: nonnegative, integrates to one over the domain
    dens = np.array(d["density"])
    assert dens.min() >= 0 and abs(np.sum(dens * np.diff(d["edges"])) - 1) < 1e-9
    r = subprocess.run([str(exe), "estimate", str(out), "--bins", "3"], capture_output=True, text=True)
    assert r.returncode == 2


def test_gof_flow_on_raw_data(prefect_harness, cluster, beta_dataset, tmp_path):
    from ldp_dask.flows import gof_flow
    from ldp_dask.ledger import Ledger

    led = tmp_path / "ledger.sqlite"
    res = gof_flow(source=str(beta_dataset), null="beta(2,5)", column="x", domain=[0.0, 1.0], epsilon=1.0,
                   adaptive=True, B=999, calibration_seed=3, scheduler=cluster.scheduler.address, seed=4,
                   summary_out=str(tmp_path / "a.parquet"), out=str(tmp_path / "r.json"),
                   plot=str(tmp_path / "r.png"), ledger=str(led))
    # privatizing raw data for the test is a release: recorded, committed, at its ε
    (entry,) = Ledger(led).entries()
    assert (entry["scope"], entry["channel"], entry["epsilon"], entry["status"]) == \
        ("local", "haar-adaptive", 1.0, "committed")
    r = res["result"]
    assert r["method"] == "adaptive, split details" and r["n"] == 210_000
    assert set(res["written"]) == {"summary", "json", "plot"}  # published together, inside the release
    assert ldp_dask.read_summary(tmp_path / "a.parquet").channel.name == "haar-adaptive"
    # the flow's test is the library's test of the summary it wrote, with the same calibration seed
    from ldp_dask import gof

    direct = gof.adaptive_test(tmp_path / "a.parquet", "beta(2,5)", 0.05, B=999, rng=3)
    assert (r["p_value"], r["statistic"], r["reject"]) == (direct.p_value, direct.statistic, direct.reject)


def test_quantile_flow(prefect_harness, cluster, beta_dataset, tmp_path):
    from ldp_dask.flows import quantile_flow
    from ldp_dask.ledger import Ledger

    led = tmp_path.parent / f"{tmp_path.name}-ledger.sqlite"
    res = quantile_flow(source=str(beta_dataset), column="x", bounds=[0.0, 1.0], epsilon=1.0,
                        q=[0.25, 0.5, 0.75], scheduler=cluster.scheduler.address, seed=6,
                        out=str(tmp_path / "q.json"), plot=str(tmp_path / "q.png"), ledger=str(led))
    (entry,) = Ledger(led).entries()
    assert (entry["scope"], entry["channel"], entry["epsilon"], entry["status"]) == \
        ("central", "central-quantiles", 1.0, "committed")
    assert f"file://{tmp_path / 'q.json'}" in json.loads(entry["outputs"])
    r = res["release"]
    assert r["method"] == "inverse-sensitivity"  # n = 210k > 50 × 2048: the measured crossover
    assert r["epsilon_split"] == {"per_quantile": [1 / 3] * 3} and r["n"] == 210_000
    # at n = 210k the empirical quartiles of Beta(2,5) are within 4.5 sd (≤ 0.0025) of the true ones
    # and the mechanism's rank error (~6/ε ranks at ε/3 each) adds < 1e-4
    from scipy import stats

    assert np.all(np.abs(np.array(r["values"]) - stats.beta(2, 5).ppf([0.25, 0.5, 0.75])) < 0.003)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.json", "q.png"]
    # the run published its table and its plot (an embedded PNG) as artifacts
    import anyio
    from prefect.client.orchestration import get_client

    async def artifacts():
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 200, "offset": 0})
            return r.json()

    arts = {a["key"]: a["data"] for a in anyio.run(artifacts)}
    assert "inverse-sensitivity" in arts["ldp-quantiles"]
    assert arts["ldp-quantiles-plot"].startswith("![released quantile function](data:image/png;base64,iVBOR")


def test_estimate_flow_on_a_frequency_summary(prefect_harness, tmp_path):
    from ldp_dask.channels import RandomizedResponse
    from ldp_dask.flows import estimate_flow

    labels = ["a", "**b**", "<i>c</i> | $d^$"]  # markup, a table separator and mathtext: text, everywhere
    x = np.random.default_rng(0).choice(labels, size=5000)
    s = ldp_dask.privatize(x, channel=RandomizedResponse(2.0, labels), seed=1)
    s.to_parquet(tmp_path / "f.parquet")
    res = estimate_flow(summary=str(tmp_path / "f.parquet"), plot=str(tmp_path / "f.png"), projection="simplex")
    assert res["estimate"]["kind"] == "frequencies" and abs(sum(res["estimate"]["frequencies"]) - 1) < 1e-9
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"

    import anyio
    from prefect.client.orchestration import get_client

    async def artifacts():
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 200, "offset": 0,
                                                                    "sort": "CREATED_DESC"})
            return r.json()

    table = next(a for a in anyio.run(artifacts) if a["key"] == "ldp-estimate-table")
    assert table["type"] == "table"
    rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
    assert [r["category"] for r in rows] == ["a", r"\*\*b\*\*", r"&lt;i&gt;c&lt;/i&gt; \| \$d^\$"]


def test_secret_never_appears_in_any_output(prefect_harness, cluster, beta_dataset, tmp_path, capsys):
    # the secret is read from a file; every byte the run writes (summary, privatized rows, JSON, PNG,
    # Prefect artifacts, stdout/stderr) is searched for it and for its hex form
    from ldp_dask.cli import main
    from ldp_dask.flows import estimate_flow, privatize_flow

    secret = "top-secret-key-material-7f3a9c2e"
    (tmp_path / "key").write_text(secret)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["privatize", str(beta_dataset), "--column", "x", "--channel", "histogram", "--domain", "0", "1",
                 "--epsilon", "1", "--out", str(out / "s.parquet"), "--local", "--secret-file", str(tmp_path / "key"),
                 "--mode", "rows", "--rows-out", str(out / "rows"), "--json"]) == 0
    assert main(["estimate", str(out / "s.parquet"), "--out", str(out / "e.json"), "--plot", str(out / "e.png")]) == 0
    privatize_flow(source=str(beta_dataset), column="x", out=str(out / "f.parquet"), domain=[0.0, 1.0],
                   secret_file=str(tmp_path / "key"), scheduler=cluster.scheduler.address)
    estimate_flow(summary=str(out / "f.parquet"))
    printed = capsys.readouterr()
    needles = [secret.encode(), secret.encode().hex().encode()]
    blobs = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    blobs += [printed.out.encode(), printed.err.encode()]

    import anyio
    from prefect.client.orchestration import get_client

    async def artifacts():
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 200, "offset": 0})
            return r.text

    blobs.append(anyio.run(artifacts).encode())
    assert len(blobs) >= 6
    for blob in blobs:
        for needle in needles:
            assert needle not in blob


def test_rerun_flow_does_not_double_count(prefect_harness, cluster, beta_dataset, tmp_path):
    # a flow run repeated with the same key (a resumed or retried schedule) reproduces its summary
    # and spends nothing more in the ledger; a failed run records nothing
    from ldp_dask.flows import privatize_flow
    from ldp_dask.ledger import Ledger

    led = tmp_path / "ledger.sqlite"
    (tmp_path / "key").write_text("flow-secret-0123456789abcdef")
    kw = dict(source=str(beta_dataset), column="x", domain=[0.0, 1.0], epsilon=0.5, bins=16,
              secret_file=str(tmp_path / "key"), scheduler=cluster.scheduler.address, ledger=str(led))
    a = privatize_flow(out=str(tmp_path / "a.parquet"), **kw)
    b = privatize_flow(out=str(tmp_path / "a.parquet"), overwrite=True, **kw)
    assert a["key_id"] == b["key_id"]
    entries = Ledger(led).entries()
    assert [e["epsilon"] for e in entries] == [0.5, 0.0] and all(e["flow_run_id"] for e in entries)
    assert {e["status"] for e in entries} == {"committed"}
    assert Ledger(led).spent(entries[0]["root"]) == 0.5
    with pytest.raises(ldp_dask.LdpDaskError):
        privatize_flow(out=str(tmp_path / "b.parquet"), **{**kw, "domain": [0.5, 1.0]})  # data outside: fails
    assert len(Ledger(led).entries()) == 2 and not (tmp_path / "b.parquet").exists()


def test_the_nightly_flow_extends_the_newest_earlier_day(tmp_path):
    """What release_flow(incremental=True) passes as ``since``: the newest date folder before the run's date that
    holds the release (other folders, later dates and days without the file are passed over)."""
    from ldp_dask.flows.release import previous_summary

    name = "x.histogram.summary.parquet"
    assert previous_summary(str(tmp_path / "none-yet"), "2026-11-23", name) is None
    for day, has_file in [("2026-11-20", True), ("2026-11-21", True), ("2026-11-22", False), ("2026-11-24", True),
                          ("adhoc", True)]:
        (tmp_path / day).mkdir()
        if has_file:
            (tmp_path / day / name).write_bytes(b"")
    assert previous_summary(str(tmp_path), "2026-11-23", name) == f"{tmp_path}/2026-11-21/{name}"
    assert previous_summary(str(tmp_path), "2026-11-21", name) == f"{tmp_path}/2026-11-20/{name}"
    assert previous_summary(str(tmp_path), "2026-11-20", name) is None


def test_a_nightly_series_per_person_is_charged_night_by_night(prefect_harness, cluster, tmp_path, capsys):
    """With a privacy unit, each night of an incremental series is charged ε to every person: `budget` and the
    flow's artifact show the spend growing 1, 2, 3 per user against a budget of 3, with the nights left at this
    rate, and night 4 is refused before any work, saying why."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from prefect.client.orchestration import get_client

    from ldp_dask.cli import main
    from ldp_dask.flows import privatize_flow
    from ldp_dask.ledger import BudgetExceeded

    table, led = tmp_path / "events", str(tmp_path / "ledger.sqlite")

    def day(d: int) -> None:  # the same 300 aircraft fly every day
        rng = np.random.default_rng(d)
        folder = table / f"date=2026-11-{d:02d}"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"x": rng.beta(2, 5, 6_000), "user": rng.integers(0, 300, 6_000)}),
                       folder / "part.parquet")

    assert main(["budget", "set", "events", "--source", str(table), "--limit", "3", "--privacy-unit", "user",
                 "--ledger", led]) == 0

    import anyio

    async def newest_release_artifact() -> str:
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 50, "offset": 0, "sort": "CREATED_DESC"})
            return next(a for a in r.json() if a["key"] == "ldp-release")["data"]

    common = dict(source=str(table), column="x", domain=[0.0, 1.0], channel="histogram", epsilon=1.0, bins=8,
                  privacy_unit="user", max_contributions=2, ledger=led, scheduler=cluster.scheduler.address, seed=5)
    previous = None
    for night in (1, 2, 3):
        day(night)
        out = tmp_path / f"night{night}.parquet"
        facts = privatize_flow(out=str(out), incremental=True, since=previous, **common)
        previous = str(out)
        assert facts["partitions"]["read"] == 1 and facts["n"] == 2 * 300 * night  # k reports per user per day
        capsys.readouterr()
        assert main(["budget", "--ledger", led, "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["spent"] == night and row["nights_left"] == 3 - night
        # a person may be in every night's file: each night's summary is one more mechanism to compose
        assert row["central"]["events"] == night and 0 < row["central"]["epsilon"] < night
        art = anyio.run(newest_release_artifact)
        assert f"| ε per user spent on events | {night} of budget 3 |" in art
        assert f"| nights left at this night's rate | {3 - night} |" in art
        assert f"composed over {night} mechanism(s)" in art
    assert main(["budget", "--ledger", led]) == 0
    assert "nightly series: ε 1 per user a night; 0 more night(s) fit" in capsys.readouterr().out
    day(4)
    with pytest.raises(BudgetExceeded, match="needs ε = 1 per user, but the dataset 'events' has spent 3 of its "
                                             "budget 3"):
        privatize_flow(out=str(tmp_path / "night4.parquet"), since=previous, **common)
    assert not (tmp_path / "night4.parquet").exists()


def test_the_plan_flow_releases_a_report_night_by_night(prefect_harness, cluster, tmp_path):
    """The nycflights-like report as a nightly plan flow on the cluster: night 1 releases it, night 2 reads only the
    new file (once for every statistic); each night publishes one table artifact per statistic and the plan's
    markdown with the budget; a re-run of a night spends nothing."""
    import anyio
    import pyarrow as pa
    import pyarrow.parquet as pq
    from prefect.client.orchestration import get_client

    from ldp_dask.flows import plan_flow
    from ldp_dask.ledger import open_ledger

    table, led = tmp_path / "flights", str(tmp_path / "ledger.sqlite")
    table.mkdir()
    carriers = ["AA", "B6", "DL", "UA"]

    def day(d: int) -> None:
        rng = np.random.default_rng(d)
        n = 20_000
        delay = rng.normal(10, 30, n).clip(-60, 300)
        pq.write_table(pa.table({"distance": rng.gamma(2.0, 500.0, n).clip(0, 5000),
                                 "carrier": rng.choice(carriers + ["WN"], n),
                                 "air_time": rng.uniform(20, 600, n),
                                 "dep_delay": pa.array(np.where(rng.random(n) < 0.05, np.nan, delay),
                                                       from_pandas=True)}), table / f"day-{d}.parquet")

    plan = tmp_path / "report.toml"
    plan.write_text(f"""
[[statistic]]
column = "distance"
target = "distribution"
domain = [0, 5000]
bins = 25

[[statistic]]
column = "distance"
target = "mean"
domain = [0, 5000]
group_by = "carrier"
groups = {carriers!r}

[[statistic]]
column = "carrier"
target = "frequencies"
categories = {carriers!r}
other = true

[[statistic]]
column = "air_time"
target = "quantiles"
domain = [0, 700]
bins = 35

[[statistic]]
column = "dep_delay"
target = "mean"
domain = [-60, 300]
nulls = 0
""".replace("'", '"'))

    async def artifacts() -> dict[str, str]:
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 100, "offset": 0,
                                                                      "sort": "CREATED_DESC"})
            out: dict[str, str] = {}
            for a in r.json():
                out.setdefault(a["key"], a["data"] if isinstance(a["data"], str) else json.dumps(a["data"]))
            return out

    common = dict(plan=str(plan), source=str(table), out_dir=str(tmp_path / "reports"), epsilon=2.0,
                  incremental=True, ledger=led, scheduler=cluster.scheduler.address, seed=9)
    day(1)
    first = plan_flow(date="2026-11-23", **common)
    assert not first["reused"] and first["design"] in ("split-epsilon", "split-rows")
    day(2)
    second = plan_flow(date="2026-11-24", **common)
    folder = tmp_path / "reports" / "2026-11-24"
    rows = []
    for label in first["statistics"]:
        s = ldp_dask.read_summary(folder / f"{label}.summary.parquet", allow_unverified=True)
        assert s.metadata["partitions_read"] == 1 and s.metadata["partitions_reused"] == 1, label
        rows.append(s.n)
    # every row reports every statistic (split ε), or exactly one of them (split rows): 2 nights × 20,000 rows
    assert (rows == [40_000] * len(rows)) if second["design"] == "split-epsilon" else (sum(rows) == 40_000), rows
    seen = anyio.run(artifacts)
    for label in second["statistics"]:
        key = "ldp-plan-" + "-".join(label.lower().replace("_", "-").replace(".", "-").split("-"))
        assert key in seen, (key, sorted(seen))
    assert "ldp-plan" in seen and "ε per row spent on" in seen["ldp-plan"]
    assert "distance.mean" in seen["ldp-plan"]
    entries = open_ledger(led).entries()
    assert [e["channel"] for e in entries] == ["plan", "plan"]
    again = plan_flow(date="2026-11-24", **common)  # the night's report is there: nothing is spent
    assert again["reused"] and len(open_ledger(led).entries()) == 2
    assert (folder / "index.html").exists() and json.loads((folder / "estimates.json").read_text())["statistics"]


def test_the_plan_flow_finds_group_keys_privately(prefect_harness, cluster, tmp_path):
    """A plan with ``groups = "discover"`` from the Prefect flow on the cluster: the keys' release and the plan's,
    two ledger entries adding up to ε, the found keys in the flow's result and an artifact for the keys; the same
    day again spends nothing."""
    import anyio
    import pyarrow as pa
    import pyarrow.parquet as pq
    from prefect.client.orchestration import get_client

    from ldp_dask.flows import plan_flow
    from ldp_dask.ledger import open_ledger

    table, led = tmp_path / "flights", str(tmp_path / "ledger.sqlite")
    table.mkdir()
    rng = np.random.default_rng(12)
    carrier = rng.choice(["AA", "DL", "UA", "WN"] + [f"X{i}" for i in range(300)], 60_000,
                         p=[0.35, 0.25, 0.15, 0.1] + [0.15 / 300] * 300)
    pq.write_table(pa.table({"carrier": carrier, "distance": rng.gamma(2.0, 500.0, 60_000).clip(0, 5000)}),
                   table / "day-1.parquet")
    plan = tmp_path / "report.toml"
    plan.write_text("[discover]\nshare = 0.5\nmax_bytes = 4\nalphabet = \"ADLNUWX0123456789\"\n\n"
                    "[[statistic]]\ncolumn = \"distance\"\ntarget = \"mean\"\ndomain = [0, 5000]\n"
                    "group_by = \"carrier\"\ngroups = \"discover\"\ntop = 5\n")
    common = dict(plan=str(plan), source=str(table), out_dir=str(tmp_path / "reports"), epsilon=4.0, ledger=led,
                  scheduler=cluster.scheduler.address, seed=3)
    first = plan_flow(date="2026-11-25", **common)
    assert {"AA", "DL", "UA"} <= set(first["found"]["carrier"]) and first["found_charged"] == 2.0
    assert [e["epsilon"] for e in open_ledger(led).entries()] == [2.0, 2.0]

    async def keys() -> list[str]:
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 100, "offset": 0,
                                                                      "sort": "CREATED_DESC"})
            return [a["key"] for a in r.json()]

    assert {"ldp-plan-carrier-keys", "ldp-plan-distance-mean"} <= set(anyio.run(keys))
    assert (tmp_path / "reports" / "2026-11-25" / "discover" / "index.html").exists()
    again = plan_flow(date="2026-11-25", **common)
    assert again["reused"] and len(open_ledger(led).entries()) == 2


def test_the_nightly_flow_releases_a_snapshot_longitudinally(prefect_harness, cluster, tmp_path, capsys):
    """The nightly release flow with ``longitudinal=True, capped=False``: three nights of the same 3,000 persons,
    100 of whom change cell on night 3; the artifact and ``ldp-dask budget`` show the spend's percentiles over
    persons."""
    import anyio
    import pandas as pd
    from prefect.client.orchestration import get_client

    from ldp_dask.cli import main
    from ldp_dask.flows import release_flow

    table, led = tmp_path / "snapshot", str(tmp_path / "ledger.sqlite")
    table.mkdir()
    x = np.random.default_rng(3).uniform(0, 0.5, 3_000)

    async def newest(key: str) -> str:
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 50, "offset": 0, "sort": "CREATED_DESC"})
            return next(a for a in r.json() if a["key"] == key)["data"]

    for night in (1, 2, 3):
        if night == 3:
            x[:100] += 0.5  # another of the 8 cells
        pd.DataFrame({"user": np.arange(3_000), "x": x}).to_parquet(table / "today.parquet")
        res = release_flow(source=str(table), column="x", out_dir=str(tmp_path / "out"), domain=[0.0, 1.0],
                           channel="histogram", epsilon=1.0, bins=8, date=f"2026-11-0{night}", longitudinal=True,
                           capped=False, privacy_unit="user", ledger=led, scheduler=cluster.scheduler.address, seed=5)
        assert res["release"]["longitudinal"]["epsilon_memo"] <= 1.0
        art = anyio.run(newest, "ldp-release")
        if night == 2:  # every report repeats night 1's: a free re-run, charged nothing, no new spread
            assert "| ε per user charged by this release | 0 |" in art and "longitudinal series" not in art
        else:
            top = 1 if night == 1 else 2
            assert f"| longitudinal series | over its 3,000 persons ε median 1, 90% 1, 99% {top}, max {top}" in art
    capsys.readouterr()
    assert main(["budget", "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "over its 3,000 persons ε median 1, 90% 1, 99% 2, max 2" in out and ": 2 per user" in out


def test_the_plan_flow_runs_a_longitudinal_plan(prefect_harness, cluster, tmp_path):
    """plan_flow with ``longitudinal=True``: one night of a snapshot plan; the artifact shows each statistic's capped
    series (its nights, its cap: the statistic's ε)."""
    import anyio
    import pandas as pd
    from prefect.client.orchestration import get_client

    from ldp_dask.flows import plan_flow

    table = tmp_path / "snapshot"
    table.mkdir()
    rng = np.random.default_rng(4)
    pd.DataFrame({"user": np.arange(3_000), "x": rng.uniform(0, 1, 3_000),
                  "c": rng.choice(["a", "b"], 3_000)}).to_parquet(table / "today.parquet")
    toml = tmp_path / "plan.toml"
    toml.write_text('[[statistic]]\ncolumn = "x"\ntarget = "mean"\ndomain = [0, 1]\n\n'
                    '[[statistic]]\ncolumn = "c"\ntarget = "frequencies"\ncategories = ["a", "b"]\n')
    res = plan_flow(plan=str(toml), source=str(table), out_dir=str(tmp_path / "out"), epsilon=1.0,
                    date="2026-11-01", longitudinal=True, privacy_unit="user", ledger=str(tmp_path / "l.sqlite"),
                    scheduler=cluster.scheduler.address, seed=5)
    assert res["design"] == "split-epsilon" and len(res["statistics"]) == 2

    async def newest() -> str:
        async with get_client() as client:
            r = await client._client.post("/artifacts/filter", json={"limit": 50, "offset": 0, "sort": "CREATED_DESC"})
            return next(a for a in r.json() if a["key"] == "ldp-plan")["data"]

    art = anyio.run(newest)
    assert "| longitudinal series, statistic 1 | capped series, 1 night(s): ε " in art
    assert "| longitudinal series, statistic 2 | capped series, 1 night(s): ε " in art


def test_the_nightly_flow_takes_a_channel_without_bins_at_its_defaults(prefect_harness, tmp_path):
    """release_flow(channel="rr") refused its own default bins="auto" ("bins do not apply to the 'rr' channel"):
    'auto' is the default of channels that have bins, and a channel without them gets none; bins given as a
    number to such a channel is still refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ldp_dask import LdpDaskError
    from ldp_dask.flows import release_flow

    table = tmp_path / "t"
    table.mkdir()
    pq.write_table(pa.table({"c": np.random.default_rng(0).choice(["a", "b"], 5_000)}), table / "p.parquet")
    common = dict(source=str(table), column="c", out_dir=str(tmp_path / "out"), channel="rr", epsilon=1.0,
                  options={"categories": ["a", "b"]}, ledger=False)
    res = release_flow(date="2026-01-01", **common)
    assert res["release"]["reused"] is False and sorted(res["written"]) == ["json", "plot", "report", "summary"]
    with pytest.raises(LdpDaskError, match="bins do not apply"):
        release_flow(date="2026-01-02", bins=16, **common)


def test_a_longitudinal_night_refuses_a_ledger_restored_from_an_older_copy(prefect_harness, tmp_path):
    """The sweep's case: a ledger restored from a copy taken after night 1, before night 3, forgot night 2, and a
    capped series published more nights than its budget allowed while `budget` showed it within. Each summary
    records the ledger entry that charged it; night 3 reads night 2's and refuses, nothing charged or written.
    A deleted ledger (started anew) is refused the same way; the newest copy restored, night 3 runs."""
    import shutil

    import pandas as pd

    from ldp_dask.flows import release_flow
    from ldp_dask.ledger import LedgerError, open_ledger

    table, led = tmp_path / "snapshot", tmp_path / "ledger.sqlite"
    table.mkdir()
    x = np.random.default_rng(3).uniform(0, 1, 2_000)
    pd.DataFrame({"user": np.arange(2_000), "x": x}).to_parquet(table / "today.parquet")
    common = dict(source=str(table), column="x", out_dir=str(tmp_path / "out"), domain=[0.0, 1.0],
                  channel="histogram", epsilon=1.0, bins=8, longitudinal=True, privacy_unit="user", ledger=str(led),
                  seed=5)
    release_flow(date="2026-11-01", **common)
    shutil.copy(led, tmp_path / "after-night-1.sqlite")
    release_flow(date="2026-11-02", **common)
    shutil.copy(led, tmp_path / "after-night-2.sqlite")
    shutil.copy(tmp_path / "after-night-1.sqlite", led)  # the restore
    entries = len(open_ledger(str(led)).entries())
    with pytest.raises(LedgerError, match=r"entry #2 of this ledger, whose newest entry is #1: the ledger was "
                                          r"restored from an older copy"):
        release_flow(date="2026-11-03", **common)
    assert len(open_ledger(str(led)).entries()) == entries and not (tmp_path / "out" / "2026-11-03").exists()
    led.unlink()  # deleted: a new ledger would start empty
    with pytest.raises(LedgerError, match="recorded by another ledger"):
        release_flow(date="2026-11-03", **common)
    shutil.copy(tmp_path / "after-night-2.sqlite", led)
    assert release_flow(date="2026-11-03", **common)["release"]["reused"] is False
