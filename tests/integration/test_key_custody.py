"""The key stays on the driver: worker processes cannot read it, build contexts do not contain it, and no
error message quotes a value of the data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask.cli import main

ROOT = Path(__file__).resolve().parents[2]
KEY = "driver-only-secret-0123456789abcdef"


def _worker_environment() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("LDP_DASK_SECRET")}


@pytest.mark.cluster
def test_local_cluster_workers_cannot_read_the_key(tmp_path, monkeypatch):
    from ldp_dask.pipeline import connect

    (tmp_path / "key").write_text(KEY)
    monkeypatch.setenv("LDP_DASK_SECRET", KEY)
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(tmp_path / "key"))
    import os

    from ldp_dask.noise import resolve_secret

    with connect(n_workers=2) as client:
        seen = client.run(_worker_environment)  # every worker process
        assert resolve_secret().source == "env"  # the driver still resolves its key meanwhile
        client.restart()  # the nannies (in this process) spawn new workers
        again = client.run(_worker_environment)
    assert len(seen) == 2 and all(env == {} for env in seen.values()), seen
    assert len(again) == 2 and all(env == {} for env in again.values()), again
    assert os.environ["LDP_DASK_SECRET"] == KEY  # the driver's environment is back as it was


@pytest.mark.slow
@pytest.mark.cluster
def test_a_jobqueue_cluster_keeps_the_key_home_and_releases_bit_identically(tmp_path, monkeypatch):
    """``LDP_DASK_CLUSTER`` naming dask-jobqueue's cluster class (its local job queue: the same job scripts and
    machinery as SLURM or PBS, the jobs run as local processes on 127.0.0.1): the release equals the in-process
    one under the same key, and neither the workers' environment, nor the job script, nor the workers' logs hold
    the key (a job queue exports the submitting environment to the job by default, as ``sbatch`` does)."""
    import json
    import os

    import ldp_dask
    from ldp_dask import LaplaceMean
    from ldp_dask.pipeline import connect

    rng = np.random.default_rng(3)
    (tmp_path / "data").mkdir()
    for i in range(2):
        pq.write_table(pa.table({"x": rng.uniform(0, 1, 30_000)}), tmp_path / "data" / f"part-{i}.parquet")
    logs = tmp_path / "logs"
    monkeypatch.setenv("LDP_DASK_CLUSTER", "dask_jobqueue.local.LocalCluster")
    monkeypatch.setenv("LDP_DASK_CLUSTER_OPTIONS", json.dumps({
        "cores": 1, "processes": 1, "memory": "1GiB", "interface": "lo", "local_directory": str(tmp_path / "w"),
        "log_directory": str(logs)}))
    monkeypatch.setenv("LDP_DASK_CLUSTER_WORKERS", "2")
    monkeypatch.setenv("LDP_DASK_SECRET", KEY)
    channel = LaplaceMean(1.0, (0.0, 1.0))
    far = ldp_dask.privatize(str(tmp_path / "data"), column="x", channel=channel, ledger=False, partition_rows=10_000)
    here = ldp_dask.privatize(str(tmp_path / "data"), column="x", channel=channel, ledger=False, client="local",
                              partition_rows=10_000)
    assert far.same_release(here) and far.metadata["key_id"] == here.metadata["key_id"]
    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the job's Python has no tests/ on its path
    try:
        with connect() as client:
            client.wait_for_workers(2, timeout=120)
            seen = client.run(_worker_environment)
            script = client.cluster.job_script()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert all(w.startswith("tcp://127.0.0.1:") for w in seen), seen
    assert len(seen) == 2 and all(env == {} for env in seen.values()), seen
    assert KEY not in script and "LDP_DASK_SECRET" not in script
    for f in logs.rglob("*"):
        if f.is_file():
            assert KEY not in f.read_text(errors="replace"), f
    assert os.environ["LDP_DASK_SECRET"] == KEY


@pytest.mark.parametrize("options", [
    {"environ": {"LDP_DASK_SECRET": KEY}},  # Coiled's habit: environment variables shipped to every worker
    {"env": {"KEY_FOR_WORKERS": KEY}},  # the key's bytes under another name
    {"job_script_prologue": ["export LDP_DASK_SECRET_FILE=/home/me/.ldp_key"]},  # a job script naming the file
])
def test_cluster_options_that_would_hand_the_key_to_workers_are_refused(options, tmp_path, monkeypatch, capfd):
    """Before any cluster exists, and without quoting the key."""
    import json

    from ldp_dask import LdpDaskError
    from ldp_dask.pipeline import connect

    monkeypatch.setenv("LDP_DASK_SECRET", KEY)
    monkeypatch.setenv("LDP_DASK_CLUSTER", "distributed.LocalCluster")
    monkeypatch.setenv("LDP_DASK_CLUSTER_OPTIONS", json.dumps(options))
    with pytest.raises(LdpDaskError, match="would hand the noise key to the workers") as err:
        with connect():
            pass
    assert KEY not in str(err.value) and KEY not in "".join(capfd.readouterr())


def test_no_build_context_contains_a_key(tmp_path):
    from docker.utils.build import exclude_paths

    ctx = tmp_path / "ctx"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (ctx / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / f, ctx / f)
    shutil.copy(ROOT / ".dockerignore", ctx / ".dockerignore")
    # what an operator's checkout holds beside the code
    planted = ["deploy/secrets/ldp_dask_secret", ".env", "deploy/.env", "ledger.sqlite", "deploy/secrets/tls.key",
               "demo-output/ledger.sqlite", "data/part-0.parquet", ".venv/bin/python", "my_secret.txt"]
    import secrets

    planted_key = secrets.token_hex(24)  # not in any file of the repository
    for p in planted:
        (ctx / p).parent.mkdir(parents=True, exist_ok=True)
        (ctx / p).write_text(planted_key)
    patterns = [line.strip() for line in (ctx / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    context = set(exclude_paths(str(ctx), patterns, dockerfile="deploy/Dockerfile"))
    assert not context & set(planted), sorted(context & set(planted))
    for p in (p for p in context if (ctx / p).is_file()):  # no file in the context holds the key
        assert planted_key not in (ctx / p).read_text(errors="replace"), p
    # what the Dockerfile copies is in the context
    for needed in ("pyproject.toml", "README.md", "ldp_dask/__init__.py", "flows/__init__.py", "deploy/prefect.yaml",
                   "deploy/localstack.py"):
        assert needed in context, needed
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    copies = [line for line in dockerfile.splitlines() if line.startswith("COPY")]
    assert copies and not any(line.split()[1:-1] == ["deploy"] or "secrets" in line for line in copies), copies


SENTINELS = ("987654.321", "987654", "SENTINEL-Q7", "18446744073709551615")


def _sentinel_data(d: Path) -> Path:
    """Every column holds one sentinel among ordinary values (and the id column one null)."""
    d.mkdir()
    n = 2_000
    x = np.random.default_rng(0).random(n)
    x[17] = 987654.321
    c = np.array(["a", "b"] * (n // 2), dtype=object)
    c[23] = "SENTINEL-Q7"
    u = np.arange(n, dtype=np.uint64)
    u[31] = np.iinfo(np.uint64).max
    ids = pa.array([None if i == 5 else f"id{i % 50}" for i in range(n)])
    pq.write_table(pa.table({"x": x, "c": c.astype(str), "u": u, "id": ids}), d / "part-0.parquet")
    return d


FAILURES = {  # each one fails on the sentinel
    "out of domain": ["privatize", "{d}", "--column", "x", "--channel", "mean", "--domain", "0", "1"],
    "category": ["privatize", "{d}", "--column", "c", "--channel", "rr", "--categories", "a", "b"],
    "uint64 category": ["privatize", "{d}", "--column", "u", "--channel", "rr", "--categories", "0", "1", "2"],
    "null person": ["privatize", "{d}", "--column", "x", "--channel", "histogram", "--domain", "0", "1e6",
                    "--privacy-unit", "id"],
    "central bounds": ["quantiles", "{d}", "--column", "x", "--bounds", "0", "1"],
    "gof domain": ["gof", "{d}", "--column", "x", "--domain", "0", "1", "--null", "uniform"],
}


@pytest.mark.cluster
@pytest.mark.parametrize("where", ["local", "cluster"])
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_no_error_message_quotes_a_value_of_the_data(failure, where, tmp_path, cluster, capfd):
    d = _sentinel_data(tmp_path / "d")
    argv = [a.format(d=d) for a in FAILURES[failure]] + ["--epsilon", "1", "--seed", "1", "--no-ledger"]
    if argv[0] != "gof" and argv[0] != "quantiles":
        argv += ["--out", str(tmp_path / "s.parquet")]
    argv += ["--local"] if where == "local" else ["--scheduler", cluster.scheduler.address]
    capfd.readouterr()
    assert main(argv) == 2
    out, err = capfd.readouterr()  # file descriptors: the cluster's worker processes log here too
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp-dask: error:"), err
    for s in SENTINELS:
        assert s not in out + err, (s, out + err)
    assert list(tmp_path.iterdir()) == [d]  # nothing written
