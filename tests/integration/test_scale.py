"""Scale: a task's payload does not grow with the number of partitions; 10^4 partitions run end to end."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask import InputDataError, privatize
from ldp_dask.channels import build_channel
from ldp_dask.engine import batches
from ldp_dask.engine import tasks_of as _tasks
from ldp_dask.noise import partition_base_keys, resolve_secret
from ldp_dask.options import RunOptions
from ldp_dask.release import plan
from ldp_dask.tasks import ChannelJob as _Job

#: The issue's bound on what one task carries to the scheduler.
MAX_TASK_BYTES = 4096


def _one_file(path: Path, rows: int) -> Path:
    """One file of ``rows`` rows, one row per row group: planning with ``partition_rows=1`` gives ``rows`` pieces."""
    rng = np.random.default_rng(rows)
    pq.write_table(pa.table({"x": rng.beta(2, 5, rows), "c": rng.integers(0, 10, rows)}), path, row_group_size=1)
    return path


def _tiny_files(directory: Path, files: int, rows: int) -> Path:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(files)
    x = rng.beta(2, 5, files * rows)
    for f in range(files):
        pq.write_table(pa.table({"x": x[f * rows:(f + 1) * rows]}), directory / f"part-{f:05d}.parquet")
    return directory


@pytest.mark.parametrize("name", ["histogram", "mean", "wavelet", "haar", "rr"])
def test_task_payload_is_the_same_at_10_and_10000_pieces(tmp_path: Path, name: str) -> None:
    """A task names a range of pieces; what all tasks share (reader, pieces, keys, channel) travels once."""
    options = RunOptions(seed=1, partition_rows=1)  # one task per piece: nothing is grouped
    sizes = {}
    for rows in (10, 10_000):
        ds = plan(str(_one_file(tmp_path / f"{rows}.parquet", rows)), "c" if name == "rr" else "x",
                  "categorical" if name == "rr" else "numeric", options)
        assert len(ds.pieces) == len(ds.tasks) == rows
        # many categories: the channel is shared by the job, not repeated in every task
        extra = {"categories": list(range(10_000))} if name == "rr" else {"domain": (0.0, 1.0)}
        ch = build_channel(name, 1.0, n=rows, **extra)
        tasks = _tasks(ds)
        sizes[rows] = max(len(pickle.dumps(t)) for t in tasks)
        # the tasks' shared part: reader, pieces, keys and channel, pickled once per job (scattered)
        keys = tuple(partition_base_keys(resolve_secret(seed=1), {"v": 1}, len(ds.pieces)))
        assert all(b".parquet" not in pickle.dumps(t) for t in tasks[:10])  # no path in a task
        assert pickle.loads(pickle.dumps(_Job(ds.reader, ds.pieces, keys, ch, False, "summary"))).pieces == ds.pieces
    # equal but for the integers' own width (at most 3 more bytes for each of start and stop)
    assert sizes[10_000] - sizes[10] <= 6 and sizes[10_000] < MAX_TASK_BYTES, sizes


@pytest.mark.slow  # 9 s on the 2-core machine
def test_small_pieces_are_released_together_with_noise_for_all_their_rows(tmp_path: Path) -> None:
    """Consecutive small pieces form one task, released as one partition: its noise is drawn once, for all its
    rows (the law of the summary is that of a sum of one noise per row, whatever the grouping)."""
    data = _tiny_files(tmp_path / "tiny", 600, 50)
    grouped = plan(str(data), "x", "numeric", RunOptions())
    single = plan(str(data), "x", "numeric", RunOptions(partition_rows=50))
    assert len(grouped.pieces) == len(single.pieces) == 600
    assert [b - a for a, b in grouped.tasks] == [256, 256, 88]  # TASK_PIECES at most per task
    assert len(single.tasks) == 600
    small = plan(str(_tiny_files(tmp_path / "few", 20, 50)), "x", "numeric", RunOptions())
    assert len(small.tasks) == 1
    ch = build_channel("mean", 1.0, domain=(0.0, 1.0))
    sums = np.array([privatize(small, "x", ch, client="local", seed=s).sums["sum"][0] for s in range(300)])
    exact = pq.read_table(str(tmp_path / "few")).column("x").to_numpy()
    # S = Σ lattice(x_i) + noise of 1,000 rows: mean within 4.5 standard errors, variance within the chi-square
    # (299 df) band at 1e-5 each way (false failure < 1e-4 in all); noise for one piece only would be 20x smaller
    var = 1000 * ch.noise_variance
    assert abs(sums.mean() - exact.sum()) < 4.5 * np.sqrt(var / 300)
    from scipy import stats

    lo, hi = stats.chi2.ppf([1e-5, 1 - 1e-5], 299) / 299
    assert lo < sums.var(ddof=1) / var < hi, sums.var(ddof=1) / var


def test_a_release_with_many_noisy_coordinates_reads_more_rows_per_task(tmp_path: Path, monkeypatch) -> None:
    """Noise costs per coordinate and per task: a wide release (adaptive Haar: 2^17 coordinates) groups
    ROWS_PER_NOISE_CELL rows per coordinate into a task, still capped by the planned partition size."""
    import ldp_dask.dataset as dataset  # where a planned dataset cuts its tasks

    monkeypatch.setattr(dataset, "TASK_ROWS", 200)
    data = _tiny_files(tmp_path / "t", 40, 50)
    ds = plan(str(data), "x", "numeric", RunOptions())
    assert [b - a for a, b in ds.tasks] == [4] * 10
    assert ds.for_noise_cells(10) is ds  # 16 × 10 rows: under TASK_ROWS, nothing changes
    wide = ds.for_noise_cells(50)  # 16 × 50 = 800 rows per task
    assert [b - a for a, b in wide.tasks] == [16, 16, 8] and wide.layout != ds.layout
    capped = plan(str(data), "x", "numeric", RunOptions(partition_rows=300)).for_noise_cells(50)
    assert [b - a for a, b in capped.tasks] == [6] * 6 + [4]
    assert dataset.task_rows_for(1 << 17) == 1 << 21


class _RunSpecSizes:
    """A scheduler plugin recording the pickled size of every task of a graph as the scheduler holds it."""

    name = "ldp-test-run-spec-sizes"

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}

    def update_graph(self, scheduler, *, tasks=(), **kwargs) -> None:
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is not None and str(key).startswith("ldp-piece"):
                self.sizes[str(key)] = len(pickle.dumps(ts.run_spec))


@pytest.mark.slow
@pytest.mark.cluster
def test_ten_thousand_partitions_end_to_end(tmp_path: Path, cluster) -> None:
    """10^4 tiny files on a LocalCluster, one task per piece (``partition_rows``), run in one batch per worker
    thread: every batch's payload as the scheduler holds it is small (the tasks travel once, in the shared job),
    and the release equals the in-process one, and the one grouping pieces."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    data = _tiny_files(tmp_path / "tiny", 10_000, 20)
    plugin = type("Sizes", (_RunSpecSizes, SchedulerPlugin), {})()
    scheduler = cluster.cluster.scheduler
    scheduler.add_plugin(plugin)
    try:
        ch = build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=16)
        on_cluster = privatize(str(data), "x", ch, client=cluster, seed=7, partition_rows=20)
    finally:
        scheduler.remove_plugin(name=plugin.name)
    assert on_cluster.n == 200_000 and on_cluster.metadata["partitions"] == 10_000
    assert len(plugin.sizes) == len(batches([20] * 10_000, sum(cluster.nthreads().values())))
    assert max(plugin.sizes.values()) < MAX_TASK_BYTES, max(plugin.sizes.values())
    assert on_cluster.same_release(privatize(str(data), "x", ch, client="local", seed=7, partition_rows=20))
    grouped = privatize(str(data), "x", ch, client=cluster, seed=7)  # 40 tasks of 256 files
    assert grouped.metadata["partitions"] == 10_000 and grouped.n == 200_000
    assert grouped.same_release(privatize(str(data), "x", ch, client="local", seed=7))


# --- planning: pyarrow.dataset, hive partitions, globs, footer statistics --------------------------------------
def _hive(root: Path) -> Path:
    rng = np.random.default_rng(5)
    for region in ("eu", "us"):
        for day in (1, 2):
            d = root / f"region={region}" / f"day={day}"
            d.mkdir(parents=True)
            pq.write_table(pa.table({"x": rng.beta(2, 5, 1000), "user": rng.integers(0, 50, 1000)}), d / "p.parquet")
    (root / "_SUCCESS").write_text("")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "junk.parquet").write_bytes(b"not parquet")
    return root


def test_hive_partitioned_directories_and_globs_plan(tmp_path: Path) -> None:
    root = _hive(tmp_path / "hive")
    ds = plan(str(root), "x", "numeric", RunOptions())
    assert ds.n == 4000 and [p.path.split("hive/")[1] for p in ds.pieces] == [
        "region=eu/day=1/p.parquet", "region=eu/day=2/p.parquet", "region=us/day=1/p.parquet",
        "region=us/day=2/p.parquet"]
    glob = plan(str(root / "region=us" / "*" / "*.parquet"), "x", "numeric", RunOptions())
    assert glob.n == 2000 and glob.root == ds.root + "/region=us"
    # a glob over hive directories stands for the files under them, hidden names skipped as in a directory
    dirs = plan(str(root / "region=*") + "/", "x", "numeric", RunOptions())
    assert [p.path for p in dirs.pieces] == [p.path for p in ds.pieces] and dirs.root == ds.root
    days = plan(str(root / "region=*" / "day=2"), "x", "numeric", RunOptions())
    assert days.n == 2000 and all("/day=2/" in p.path for p in days.pieces)
    with pytest.raises(InputDataError, match="'region' is a hive partition key"):
        plan(str(root), "region", "categorical", RunOptions())
    s = privatize(str(root), "x", build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=8), client="local",
                  seed=1)
    assert s.n == 4000


def _with_stats(path: Path, x: pa.Array, user: pa.Array | None = None) -> Path:
    path.mkdir()
    cols = {"x": x} if user is None else {"x": x, "user": user}
    pq.write_table(pa.table(cols), path / "a.parquet")
    pq.write_table(pa.table({k: v.slice(0, 10) for k, v in cols.items()}), path / "b.parquet")  # the first 10
    return path


#: A scheduler nobody listens on: a release refused at planning never tries to reach it.
NOWHERE = "tcp://127.0.0.1:9"


def test_footer_statistics_refuse_before_any_cluster(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    ch = build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=8)
    big = _with_stats(tmp_path / "big", pa.array(np.r_[rng.random(99), 1.5]))
    with pytest.raises(InputDataError, match=r"outside the declared domain \[0, 1\] \(the Parquet statistics of "
                                             r"'.*big/a.parquet' prove it"):
        privatize(str(big), "x", ch, client=NOWHERE, seed=1)
    nulls = _with_stats(tmp_path / "nulls", pa.array([0.5] * 50 + [None] * 50))
    with pytest.raises(InputDataError, match="'x' contains null values \\(the Parquet statistics of"):
        plan(str(nulls), "x", "numeric", RunOptions())
    users = _with_stats(tmp_path / "users", pa.array(rng.random(100)), pa.array([1] * 99 + [None]))
    with pytest.raises(InputDataError, match="'x' or 'user' contains null values"):
        plan(str(users), "x", "numeric", RunOptions.of(privacy_unit="user"))
    inf = _with_stats(tmp_path / "inf", pa.array(np.r_[rng.random(99), np.inf]))
    with pytest.raises(InputDataError, match="infinite values \\(the Parquet statistics"):
        privatize(str(inf), "x", ch, client=NOWHERE, seed=1, clip=True)
    # what the statistics do not prove is left to the workers: with clip the release runs, clamping
    s = privatize(str(big), "x", ch, client="local", seed=1, clip=True)
    assert s.n == 110 and s.n_clipped == 1
    # central quantiles and goodness-of-fit tests refuse the same way, with their own bounds
    from ldp_dask.central import quantiles
    from ldp_dask.gof import run as gof_run

    with pytest.raises(InputDataError, match="statistics of"):
        quantiles(str(big), "x", epsilon=1.0, bounds=(0.0, 1.0), client=NOWHERE, seed=1)
    with pytest.raises(InputDataError, match="statistics of"):
        gof_run(str(big), "uniform", column="x", domain=(0.0, 1.0), epsilon=1.0, client=NOWHERE, seed=1)


def test_footer_statistics_stay_on_the_driver(tmp_path: Path) -> None:
    big = _with_stats(tmp_path / "big", pa.array(np.r_[np.full(99, 0.25), 0.75]))
    ds = plan(str(big), "x", "numeric", RunOptions())
    assert "0.75" not in repr(ds) and "0.75" not in repr(ds.footer_statistics)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.footer_statistics.high is None and ds.footer_statistics.high[0] == 0.75
    copy.check_range((0.0, 0.5))  # nothing proven after a pickle round trip: the workers check
    with pytest.raises(InputDataError):
        ds.check_range((0.0, 0.5))


# --- a responsive command line ------------------------------------------------------------------------------
def test_help_loads_none_of_the_heavy_libraries() -> None:
    """``ldp-dask --help`` builds every parser without scipy, Dask, Prefect, matplotlib or pandas
    (their import is most of a second; benchmarks/scaling.py times --help itself)."""
    import subprocess
    import sys

    code = ("import sys, contextlib, io\nfrom ldp_dask.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--help'])\n"
            "for c in ('privatize', 'gof', 'quantiles', 'estimate', 'budget', 'report', 'verify', 'demo'):\n"
            "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "        main([c, '--help'])\n"
            "heavy = ('scipy', 'dask', 'distributed', 'prefect', 'matplotlib', 'pandas', 'pyarrow.dataset')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_small_sources_run_in_process_by_default(tmp_path: Path, monkeypatch) -> None:
    """No cluster named: a small source runs in this process (Dask is not even imported), a large one would not;
    the release is the same either way."""
    import json
    import subprocess
    import sys

    data = _one_file(tmp_path / "d.parquet", 2000)
    env = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "LDP_DASK_CLUSTER")}
    code = ("import sys, json\nfrom ldp_dask import privatize\nfrom ldp_dask.channels import build_channel\n"
            f"s = privatize({str(data)!r}, 'x', build_channel('histogram', 1.0, domain=(0.0, 1.0), bins=8), seed=4)\n"
            "print(json.dumps({'distributed': 'distributed' in sys.modules, 'sum': s.sums['sum'].tolist()}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    env=env).stdout)
    local = privatize(str(data), "x", build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=8), client="local",
                      seed=4)
    assert out["distributed"] is False and out["sum"] == local.sums["sum"].tolist()
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.delenv("LDP_DASK_CLUSTER", raising=False)
    assert RunOptions().runs_in_process(2_000_000) and not RunOptions().runs_in_process(2_000_001)
    assert not RunOptions(in_process_rows=0).runs_in_process(1)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", NOWHERE)  # the environment names a cluster: it is used
    assert not RunOptions().runs_in_process(1)


@pytest.mark.slow  # waits out the connect timeout: 10 s
def test_an_unreachable_scheduler_fails_in_one_line(capsys, tmp_path: Path) -> None:
    from ldp_dask.cli import main

    data = _one_file(tmp_path / "d.parquet", 100)
    code = main(["privatize", str(data), "--column", "x", "--channel", "histogram", "--epsilon", "1", "--domain",
                 "0", "1", "--out", str(tmp_path / "s.parquet"), "--scheduler", NOWHERE, "--no-ledger"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"cannot reach the Dask scheduler at '{NOWHERE}' within 10 s" in err[0]
    assert not (tmp_path / "s.parquet").exists()


#: What docs/scale.md states for planning a source of 10^5 local files on the driver (footers only) and building its
#: task graph: time, growth of the driver's peak memory, and the bytes of the job every task shares.
PLAN_FILES = 100_000
PLAN_SECONDS = 90.0
PLAN_MEMORY_MIB = 512
JOB_BYTES_PER_PIECE = 256

_PLAN_SCRIPT = """
import json, pickle, resource, sys, time
from ldp_dask.channels import build_channel
from ldp_dask.engine import batches, tasks_of, tree
from ldp_dask.noise import partition_base_keys, resolve_secret
from ldp_dask.options import DEFAULT_SPLIT_EVERY, RunOptions
from ldp_dask.release import plan
from ldp_dask.tasks import ChannelJob
import pyarrow.dataset  # loaded before the baseline, as a release loads it

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
ds = plan(sys.argv[1], "x", "numeric", RunOptions(seed=1))
tasks = tasks_of(ds)
keys = tuple(partition_base_keys(resolve_secret(seed=1), {"v": 1}, len(ds.pieces)))
job = pickle.dumps((tuple(tasks), ChannelJob(ds.reader, ds.pieces, keys, build_channel("histogram", 1.0,
                   domain=(0.0, 1.0), bins=16), False, "summary")))
cuts = batches([ds.pieces[i].num_rows for i in range(len(ds.pieces))], 64)  # a cluster of 64 worker threads
nodes = []
tree(list(range(len(cuts))), None, DEFAULT_SPLIT_EVERY, lambda combine, group, depth, i: nodes.append(i) or i)
seconds = time.perf_counter() - t
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"seconds": seconds, "mib": grown, "pieces": len(ds.pieces), "n": ds.n, "job": len(job),
                  "graph": len(cuts) + len(nodes)}))
"""


@pytest.mark.slow
def test_a_hundred_thousand_files_plan_within_the_stated_time_and_memory(tmp_path: Path) -> None:
    """The planning bound of docs/scale.md ("At scale"): a source of 10^5 Parquet files (100 hive directories of
    1,000) is planned from its footers and its task graph built, in a fresh process, within PLAN_SECONDS and with
    the driver's peak memory grown by at most PLAN_MEMORY_MIB; the job the tasks share is at most
    JOB_BYTES_PER_PIECE a piece, and the graph is one batch per worker thread and its reduction, whatever the
    number of files."""
    import json
    import subprocess
    import sys

    rng = np.random.default_rng(11)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": rng.beta(2, 5, 10)}), sink)
    body = sink.getvalue().to_pybytes()  # the same 10 rows in every file: planning reads footers only
    for d in range(PLAN_FILES // 1000):
        folder = tmp_path / "wide" / f"day={d:03d}"
        folder.mkdir(parents=True)
        for f in range(1000):
            (folder / f"part-{f:04d}.parquet").write_bytes(body)
    done = subprocess.run([sys.executable, "-c", _PLAN_SCRIPT, str(tmp_path / "wide")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["pieces"] == PLAN_FILES and got["n"] == 10 * PLAN_FILES, got
    assert got["seconds"] < PLAN_SECONDS and got["mib"] < PLAN_MEMORY_MIB, got
    assert got["job"] < JOB_BYTES_PER_PIECE * PLAN_FILES, got
    assert got["graph"] < 64 + 16, got  # 64 batches, then 8 + 1 combines at fan-in 8
