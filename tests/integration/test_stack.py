"""The real stack: Prefect server, Dask scheduler + 2 workers, a Prefect worker, as local processes.

``deploy/localstack.py`` starts them on loopback (SQLite database), registers
``deploy/prefect.yaml`` with ``prefect deploy``, and the tests trigger
deployments through the REST API as the UI's Run button does. The worker
executes the flow run in its own process, which sends the partitions to the
Dask scheduler named by ``DASK_SCHEDULER_ADDRESS``. Then a headless Chromium
opens the Prefect UI and finds the run and its artifact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))

from localstack import LocalStack  # noqa: E402

import ldp_dask  # noqa: E402
from ldp_dask.demo import DemoTruth, make_data  # noqa: E402
from ldp_dask.ledger import Ledger  # noqa: E402

pytestmark = [pytest.mark.stack, pytest.mark.prefect, pytest.mark.cluster]
ROWS = 400_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("stack")
    with LocalStack(work) as s:
        s.data = make_data(work / "data", rows=ROWS, files=4)
        yield s


@pytest.fixture(scope="module")
def nightly(stack):
    """One run of the nightly-release deployment on the demo data (parameters overridden per run)."""
    out = stack.workdir / "releases"
    run = stack.run_deployment("ldp-release", "nightly-release",
                               {"source": str(stack.data), "out_dir": str(out), "date": "2026-01-02"})
    return run, out / "2026-01-02"


def test_deployments_registered(stack):
    for flow, dep in [("ldp-release", "nightly-release"), ("ldp-privatize", "privatize"),
                      ("ldp-estimate", "estimate"), ("ldp-gof", "weekly-gof"), ("ldp-quantiles", "weekly-quantiles")]:
        d = stack.deployment(flow, dep)
        assert d["work_pool_name"] == "ldp-process"
    nightly = stack.deployment("ldp-release", "nightly-release")
    (sched,) = nightly["schedules"]
    assert sched["schedule"]["cron"] == "15 2 * * *" and sched["active"]
    assert nightly["parameters"]["epsilon"] == 0.5


def test_nightly_release_runs_on_the_dask_cluster(stack, nightly):
    run, folder = nightly
    assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
    # the release: a histogram summary at the deployment's ε, over every row
    s = ldp_dask.read_summary(folder / "income.histogram.summary.parquet")
    assert (s.channel.name, s.channel.epsilon, s.n) == ("histogram", 0.5, ROWS)
    assert s.metadata["partitions"] == 4
    # its estimate is close to the known law: L1 error within 0.3 at n = 4e5, ε = 0.5
    # (the demo's own figures: about 0.05-0.15 at these sizes; 0.3 leaves room for noise, not for a wrong law)
    est = ldp_dask.histogram_density(s)
    assert est.distance(DemoTruth().pdf, r=1) < 0.3
    for suffix in ("estimate.json", "png", "html"):
        assert (folder / f"income.histogram.{suffix}").stat().st_size > 0
    # the partitions ran on the stack's scheduler (the flow-run process attached to it by the environment)
    from distributed import Client

    with Client(stack.scheduler_address, timeout=30) as c:
        prefixes = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        workers = c.scheduler_info()["workers"]
    # (4 files of 10^5 rows are read by one task, so there is nothing to combine)
    assert "ldp-piece" in prefixes, prefixes
    assert sorted(w["name"] for w in workers.values()) == ["dask-worker-1", "dask-worker-2"]


def test_nightly_release_ledger_and_artifacts(stack, nightly):
    run, folder = nightly
    subs = {r["flow_id"]: r for r in stack.subflow_runs(run["id"])}
    assert len(subs) == 2 and all(r["state_type"] == "COMPLETED" for r in subs.values())
    privatize_run = next(r for r in subs.values() if r["parameters"].get("out", "").endswith(".summary.parquet"))
    entries = Ledger(stack.ledger).entries()
    (entry,) = [e for e in entries
                if f"file://{folder / 'income.histogram.summary.parquet'}" in json.loads(e["outputs"])]
    assert entry["status"] == "committed" and entry["epsilon"] == 0.5 and entry["scope"] == "local"
    assert entry["flow_run_id"] == privatize_run["id"]
    keys = {a["key"] for a in stack.artifacts(run["id"])}
    assert keys == {"ldp-nightly-release"}
    sub_keys = {a["key"] for r in subs.values() for a in stack.artifacts(r["id"])}
    assert {"ldp-release", "ldp-release-plot", "ldp-estimate", "ldp-density-plot"} <= sub_keys
    release_md = next(a for a in stack.artifacts(privatize_run["id"]) if a["key"] == "ldp-release")["data"]
    assert "| rows (n) | 400,000 |" in release_md and "0.5 / 0.5" in release_md
    assert str(folder / "income.histogram.summary.parquet") in release_md


def test_rerun_same_day_reuses_the_release(stack, nightly):
    _, folder = nightly
    before = len(Ledger(stack.ledger).entries())
    run = stack.run_deployment("ldp-release", "nightly-release",
                               {"source": str(stack.data), "out_dir": str(folder.parent), "date": "2026-01-02"})
    assert run["state_type"] == "COMPLETED"
    assert len(Ledger(stack.ledger).entries()) == before  # nothing spent
    md = next(a for a in stack.artifacts(run["id"]) if a["key"] == "ldp-nightly-release")["data"]
    assert "Reused the existing release" in md and "| rows (n) | 400,000 |" in md


def test_failed_run_is_failed_and_spends_nothing(stack):
    before = len(Ledger(stack.ledger).entries())
    run = stack.run_deployment("ldp-privatize", "privatize",
                               {"source": str(stack.data), "column": "no_such_column",
                                "out": str(stack.workdir / "bad.summary.parquet")})
    assert run["state_type"] == "FAILED"
    assert len(Ledger(stack.ledger).entries()) == before
    assert not (stack.workdir / "bad.summary.parquet").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("LDP_DASK_REQUIRE_BROWSER"),
                    reason="no chromium binary (apt-get install chromium); .ci/run installs it and requires it")
def test_ui_shows_the_run_and_its_artifact(stack, nightly, tmp_path):
    """Headless Chromium opens the Prefect UI, finds the flow run and the release artifact, saves screenshots."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "LDP_DASK_REQUIRE_BROWSER is set but chromium is not installed"
    run, _ = nightly
    art = next(a for a in stack.artifacts(run["id"]) if a["key"] == "ldp-nightly-release")
    shots = Path(os.environ.get("LDP_DASK_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{stack.ui_url}/runs/flow-run/{run['id']}", wait_until="domcontentloaded")
        page.get_by_text(run["name"]).first.wait_for(timeout=60_000)
        page.get_by_text("Completed").first.wait_for(timeout=30_000)
        page.screenshot(path=str(shots / "flow-run.png"))
        page.goto(f"{stack.ui_url}/artifacts/artifact/{art['id']}", wait_until="domcontentloaded")
        page.get_by_text("Release of income for 2026-01-02").first.wait_for(timeout=60_000)
        page.get_by_text("income.histogram.summary.parquet").first.wait_for(timeout=10_000)
        page.get_by_text("400,000").first.wait_for(timeout=10_000)  # n, rendered from the markdown table
        page.screenshot(path=str(shots / "artifact.png"), full_page=True)
        browser.close()
    for name in ("flow-run.png", "artifact.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_the_nightly_release_is_incremental_over_three_days(stack, nightly):
    """Three nights over a table that gains a file a day (night 1 is the nightly run above, over the table's
    first four files): each later night reads only its day's file (the others come from the night before's
    summary), equals a full release with the same key, and is charged for its day's rows only."""
    _, first = nightly
    out, name = first.parent, "income.histogram.summary.parquet"
    key = ldp_dask.noise.resolve_secret(secret_file=stack.secret_file)
    summaries = [ldp_dask.read_summary(first / name, key=key)]
    # the operator's word that the table only gains files: its rows are followed file by file (checked each night)
    from ldp_dask.source import source_root

    Ledger(stack.ledger).declare("income", source_root(str(stack.data)), 10.0, append_only=True)
    runs = []
    for day in (1, 2):  # days 2 and 3: one more file each, released the next night
        make_data(stack.data / f"added-{day}", rows=50_000, files=1, seed=100 + day)
        date = f"2026-01-{day + 2:02d}"
        run = stack.run_deployment("ldp-release", "nightly-release",
                                   {"source": str(stack.data), "out_dir": str(out), "date": date})
        assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
        runs.append(run)
        summaries.append(ldp_dask.read_summary(out / date / name, key=key))
        if day == 1:  # a full release of the table as it stands, with the stack's key, here and without a ledger
            full = ldp_dask.privatize(str(stack.data), "income", summaries[-1].channel,
                                      secret_file=stack.secret_file, client="local", incremental=True)
            assert summaries[-1].same_release(full)
    assert [(s.metadata["partitions_read"], s.metadata["partitions_reused"]) for s in summaries] == \
        [(4, 0), (1, 4), (1, 5)]
    assert [s.n for s in summaries] == [ROWS, ROWS + 50_000, ROWS + 100_000]
    assert all(s.integrity == "verified" for s in summaries)
    # night 2's privatize subflow extended night 1's summary
    sub = next(r for r in stack.subflow_runs(runs[0]["id"]) if "since" in r["parameters"])
    assert sub["parameters"]["since"] == str(first / name)
    # the ledger charged each night for the rows it released anew: ε 0.5 per row, on the new file only
    charged = [sorted(p["root"].rsplit("/", 2)[-2] for p in json.loads(e["parts"]) if p["epsilon"] > 0)
               for e in Ledger(stack.ledger).entries() if e["parts"] and e["root"].endswith(stack.data.name)]
    assert charged == [[stack.data.name] * 4, ["added-1"], ["added-2"]]
    (row,) = [r for r in Ledger(stack.ledger).summary() if r["root"].endswith(stack.data.name)]
    assert row["spent"] == 0.5 and sorted(row["groups"].values()) == [0.5] * 6 and row["fallback"] is None
    md = next(a for r in stack.subflow_runs(runs[1]["id"]) for a in stack.artifacts(r["id"])
              if a["key"] == "ldp-release")["data"]
    assert "1 read, 5 reused" in md
    # the nightly artifact shows the budget: spent per row on the dataset, what remains, the nights left
    nightly_md = next(a for a in stack.artifacts(runs[1]["id"]) if a["key"] == "ldp-nightly-release")["data"]
    assert "| ε per row spent on income | 0.5 of budget 10 |" in nightly_md
    assert "| ε per row remaining | 9.5 |" in nightly_md and "| nights left at this night's rate | 19 |" in nightly_md


GROUPED_PLAN = """
[[statistic]]
column = "x"
target = "mean"
domain = [0, 100]
group_by = "g"
groups = ["big", "tiny", "empty"]
name = "x.by.g"

[[statistic]]
column = "c"
target = "frequencies"
categories = ["p", "q"]
group_by = "g"
groups = ["big", "tiny", "empty"]
name = "c.by.g"

[[statistic]]
column = "x"
target = "mean"
domain = [0, 100]
group_by = "g"
groups = ["big", "tiny", "empty"]
group_kind = "public"
name = "x.by.g.public"
"""

SERIES_PLAN = """
[[statistic]]
column = "x"
target = "distribution"
domain = [0, 100]
bins = 8

[[statistic]]
column = "x"
target = "mean"
domain = [0, 100]
"""

#: a count printed below zero (estimated rows, group rows, counts): a minus sign before a digit in a cell
NEGATIVE_CELL = re.compile(r"(^|[|\s])[-−]\d")
#: the one sentence that may quote a number outside the domain: the warning that the unbiased estimate fell outside
#: it, so the estimate shown is the nearest possible value (about 3% of releases of a mean near 50 with se 27)
UNBIASED_OUTSIDE = re.compile(r"the unbiased estimate [-−]?[0-9.e+-]+ fell outside the domain")
#: every δ a page states
STATED_DELTA = re.compile(r"at δ ([0-9.e+-]+)")


def _loaded(artifact: dict) -> str:
    """What the UI shows once a table artifact's rows are on the page: its row count ("4 Items")."""
    rows = artifact["data"] if isinstance(artifact["data"], list) else json.loads(artifact["data"])
    return f"{len(rows)} Item"


def _page_text(page, url: str, wait_for: str, shot: Path) -> str:
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(wait_for).first.wait_for(timeout=60_000)
    page.screenshot(path=str(shot), full_page=True)
    return page.inner_text("body")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("LDP_DASK_REQUIRE_BROWSER"),
                    reason="no chromium binary (apt-get install chromium); .ci/run installs it and requires it")
def test_a_nightly_plan_artifact_shows_only_possible_numbers_and_one_delta(stack, tmp_path):
    """The nightly plan deployment over a table whose groups are big (4,000 rows), tiny (3 rows) and empty (0
    rows), then a longitudinal plan over persons: the artifacts, read in the Prefect UI by a headless browser,
    show no 'nan', no count below zero and one δ per page (screenshots kept in LDP_DASK_SCREENSHOTS)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "LDP_DASK_REQUIRE_BROWSER is set but chromium is not installed"
    rng = np.random.default_rng(11)
    table = stack.workdir / "grouped"
    table.mkdir()
    g = np.array(["big"] * 4_000 + ["tiny"] * 3)
    pq.write_table(pa.table({"x": rng.uniform(0, 100, g.size), "c": rng.choice(["p", "q"], g.size), "g": g}),
                   table / "day1.parquet")
    snapshot = stack.workdir / "snapshot"  # one row per person, rewritten nightly
    snapshot.mkdir()
    pq.write_table(pa.table({"x": rng.uniform(0, 100, 2_000), "person": np.arange(2_000)}),
                   snapshot / "now.parquet")
    (tmp_path / "grouped.toml").write_text(GROUPED_PLAN)
    (tmp_path / "series.toml").write_text(SERIES_PLAN)
    out = stack.workdir / "plans"
    runs = [stack.run_deployment("ldp-plan", "nightly-plan", {
        "plan": str(tmp_path / "grouped.toml"), "source": str(table), "out_dir": str(out / "grouped"),
        "epsilon": 1.0, "date": "2026-02-01", "incremental": False})]
    for night in ("2026-02-01", "2026-02-02"):  # the same persons two nights: a longitudinal series
        if night.endswith("02"):  # a tenth of the persons' values move
            x = pq.read_table(snapshot / "now.parquet")["x"].to_numpy().copy()
            x[:200] = rng.uniform(0, 100, 200)
            pq.write_table(pa.table({"x": x, "person": np.arange(2_000)}), snapshot / "now.parquet")
        runs.append(stack.run_deployment("ldp-plan", "nightly-plan", {
            "plan": str(tmp_path / "series.toml"), "source": str(snapshot), "out_dir": str(out / "series"),
            "epsilon": 1.0, "date": night, "incremental": False, "longitudinal": True, "privacy_unit": "person"}))
    for run in runs:
        assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
    shots = Path(os.environ.get("LDP_DASK_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
    seen: dict[str, str] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for i, run in enumerate(runs):
            for art in stack.artifacts(run["id"]):
                if not art["key"].startswith("ldp-plan"):
                    continue
                wait_for = "Plan of" if art["key"] == "ldp-plan" else _loaded(art)  # the table has loaded
                name = f"plan-{i}-{art['key']}.png"
                seen[name] = _page_text(page, f"{stack.ui_url}/artifacts/artifact/{art['id']}", wait_for,
                                        shots / name)
        browser.close()
    assert any(name.startswith("plan-0-ldp-plan-x-by-g") for name in seen), sorted(seen)
    for name, text in seen.items():
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        assert not re.search(r"\bnan\b", text, re.IGNORECASE), f"{name} shows nan"
        shown = UNBIASED_OUTSIDE.sub("", text)
        assert not NEGATIVE_CELL.search(shown), f"{name} shows a negative number: {NEGATIVE_CELL.search(shown)}"
        assert len(set(STATED_DELTA.findall(text))) <= 1, f"{name} states several δ"
    # the grouped plan's report states its δ, the tiny and empty groups are there, and the series' spend is shown
    report = next(t for n, t in seen.items() if n == "plan-0-ldp-plan.png")
    assert len(STATED_DELTA.findall(report)) >= 2 and "the dataset's δ" in report
    assert "tiny" in seen["plan-0-ldp-plan-x-by-g.png"] and "empty" in seen["plan-0-ldp-plan-x-by-g.png"]
    assert all("longitudinal series" in seen[f"plan-{i}-ldp-plan.png"] for i in (1, 2)), seen["plan-2-ldp-plan.png"]
    mean = seen["plan-1-ldp-plan-x-mean.png"]  # a statistic's ε per unit, not per row, and its facts' names
    assert re.search(r"\(ε [0-9.]+ per person\)", mean) and "privacy unit" in mean, mean


def test_the_nightly_delta_deployment_reads_the_table_at_its_newest_version(stack):
    """The nightly-delta deployment over a Delta table written by deltalake (two versions): the run reads version
    1's files, and its artifact and ledger entry name the table's version. The next night, after an OPTIMIZE and
    an append, reads the appended file alone (the compacted one is carried from the log) and is charged for it
    alone."""
    deltalake = pytest.importorskip("deltalake")
    table = stack.workdir / "events"
    rng = np.random.default_rng(5)
    deltalake.write_deltalake(str(table), pa.table({"amount": rng.uniform(0, 1000, 3_000)}))
    deltalake.write_deltalake(str(table), pa.table({"amount": rng.uniform(0, 1000, 2_000)}), mode="append")
    params = {"source": f"delta://{table}", "out_dir": str(stack.workdir / "delta-out")}
    run = stack.run_deployment("ldp-release", "nightly-delta", {**params, "date": "2026-03-01"})
    assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
    md = next(a for a in stack.artifacts(run["id"]) if a["key"] == "ldp-nightly-release")["data"]
    assert f"Delta table {table} at version 1" in md and "| rows (n) | 5,000 |" in md
    assert any(e["source"] == f"Delta table {table} at version 1" for e in Ledger(stack.ledger).entries())
    deltalake.DeltaTable(str(table)).optimize.compact()  # version 2
    deltalake.write_deltalake(str(table), pa.table({"amount": rng.uniform(0, 1000, 500)}), mode="append")  # 3
    run = stack.run_deployment("ldp-release", "nightly-delta", {**params, "date": "2026-03-02"})
    assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
    md = next(a for a in stack.artifacts(run["id"]) if a["key"] == "ldp-nightly-release")["data"]
    assert f"Delta table {table} at version 3" in md and "| rows (n) | 5,500 |" in md
    entry = next(e for e in Ledger(stack.ledger).entries() if e["source"] == f"Delta table {table} at version 3")
    (part,) = json.loads(entry["parts"])  # the appended file alone: the compacted one was not read
    assert part["epsilon"] == 0.5 and part["root"].endswith(".parquet")


def test_the_nightly_iceberg_deployment_reads_the_current_snapshot(stack, monkeypatch):
    """The nightly-iceberg deployment over a table pyiceberg wrote into the embedded catalog beside the stack's
    ledger (the worker finds it there through LDP_DASK_LEDGER, as the test does)."""
    monkeypatch.setenv("LDP_DASK_LEDGER", str(stack.ledger))
    catalog = ldp_dask.iceberg_catalog()
    catalog.create_namespace_if_not_exists("shop")
    rng = np.random.default_rng(6)
    rows = pa.table({"amount": rng.uniform(0, 1000, 3_000)})
    table = catalog.create_table("shop.events", schema=rows.schema)
    table.append(rows)
    snapshot = catalog.load_table("shop.events").current_snapshot().snapshot_id
    run = stack.run_deployment("ldp-release", "nightly-iceberg", {"out_dir": str(stack.workdir / "iceberg-out"),
                                                                  "date": "2026-03-01"})
    assert run["state_type"] == "COMPLETED", stack.log("prefect-worker", 80)
    md = next(a for a in stack.artifacts(run["id"]) if a["key"] == "ldp-nightly-release")["data"]
    assert f"Iceberg table local/shop.events at snapshot {snapshot}" in md and "| rows (n) | 3,000 |" in md
