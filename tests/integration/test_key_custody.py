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
