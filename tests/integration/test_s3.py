"""Object storage: Parquet read from, and summaries written to, a real S3-compatible server on 127.0.0.1.

The server is moto's (``moto[server]``) in its own process, reached over HTTP by s3fs. Credentials and the
endpoint are set in the environment as a deployment would set them (AWS_ACCESS_KEY_ID, ...,
FSSPEC_S3_ENDPOINT_URL); the Python API is also given the endpoint through ``storage_options``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask.channels import build_channel
from ldp_dask.cli import main

pytestmark = [pytest.mark.s3]


@pytest.fixture(scope="module")
def s3_cluster(s3):
    """Workers started with the credentials in their environment, as a deployment's workers are."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as lc, Client(lc) as client:
        yield client


@pytest.fixture(scope="module")
def bucket(s3, beta_dataset):
    """The beta dataset's files under s3://ldp-test/beta/, plus 40 small files under s3://ldp-test/many/."""
    import fsspec.config
    import s3fs

    fsspec.config.set_conf_env(fsspec.config.conf)  # this process imported fsspec before the fixture set it
    _, options = s3
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("ldp-test")
    for f in sorted(Path(beta_dataset).iterdir()):
        fs.put(str(f), f"ldp-test/beta/{f.name}")
    rng = np.random.default_rng(8)
    for i in range(40):
        with fs.open(f"ldp-test/many/part-{i:03d}.parquet", "wb") as fh:
            pq.write_table(pa.table({"x": rng.beta(2, 5, 500)}), fh)
    fs.invalidate_cache()
    return fs, options


def test_python_api_reads_s3_and_writes_the_summary_there(bucket, beta_dataset, s3_cluster):
    fs, options = bucket
    ch = build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=16)
    on_s3 = ldp_dask.privatize(
        "s3://ldp-test/beta", "x", ch, client=s3_cluster, seed=11, storage_options=options,
        out="s3://ldp-test/out/beta.summary.parquet", ledger=None)
    assert on_s3.written == {"summary": "s3://ldp-test/out/beta.summary.parquet"}
    # the same files on a local disk give the very same release: the plan names files relative to the root
    local = ldp_dask.privatize(str(beta_dataset), "x", ch, client="local", seed=11)
    assert on_s3.same_release(local) and on_s3.n == 210_000
    assert fs.exists("ldp-test/out/beta.summary.parquet")
    assert not [p for p in fs.ls("ldp-test/out") if ".tmp-" in p]  # nothing staged is left behind
    back = ldp_dask.read_summary("s3://ldp-test/out/beta.summary.parquet")
    assert back.same_release(on_s3)
    # many files: footers are read by threads over HTTP; the ledger's root is the bucket's prefix
    many = ldp_dask.privatize("s3://ldp-test/many", "x", ch, seed=1, storage_options=options, client="local",
                              ledger=None)
    assert many.n == 20_000 and many.metadata["partitions"] == 40


def test_cli_privatize_estimate_and_budget_on_s3(bucket, capsys, tmp_path):
    ledger = str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "beta", "--source", "s3://ldp-test/beta", "--limit", "2", "--ledger", ledger]) == 0
    capsys.readouterr()
    base = ["privatize", "s3://ldp-test/beta", "--column", "x", "--channel", "histogram", "--epsilon", "1",
            "--domain", "0", "1", "--out", "s3://ldp-test/cli/beta.summary.parquet", "--ledger", ledger]
    assert main([*base, "--seed", "3", "--json"]) == 0, capsys.readouterr().err
    info = json.loads(capsys.readouterr().out)
    assert info["n"] == 210_000
    assert main(["estimate", "s3://ldp-test/cli/beta.summary.parquet", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    widths = np.diff(est["edges"])
    assert est["n"] == 210_000 and abs(float(np.dot(est["density"], widths)) - 1) < 1e-9
    # the budget is per population on the bucket: a third release at ε = 1 does not fit in 2
    assert main([*base, "--seed", "4", "--overwrite"]) == 0
    capsys.readouterr()
    assert main([*base, "--seed", "5", "--overwrite"]) == 2
    assert "budget" in capsys.readouterr().err


@pytest.mark.prefect
def test_flow_reads_and_writes_s3(bucket, s3_cluster, prefect_harness):
    from ldp_dask.flows import privatize_flow

    out = privatize_flow(source="s3://ldp-test/beta", column="x", out="s3://ldp-test/flow/beta.summary.parquet",
                         domain=[0.0, 1.0], channel="histogram", epsilon=1.0, bins=16, seed=3,
                         scheduler=s3_cluster.scheduler.address, ledger=False)
    s = ldp_dask.read_summary("s3://ldp-test/flow/beta.summary.parquet")
    assert s.n == 210_000 and out["n"] == 210_000


def test_workers_without_credentials_are_told_so(bucket, tmp_path):
    """The driver can read the bucket but the workers cannot: one line that names the storage's refusal (its
    message quotes no data), instead of a withheld message."""
    import os

    from distributed import Client, LocalCluster
    from s3_server import CREDENTIALS

    saved = {k: os.environ.pop(k) for k in CREDENTIALS if k in os.environ}
    try:  # workers inherit this environment: no credentials
        lc = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR)
    finally:
        os.environ.update(saved)
    _, options = bucket
    ch = build_channel("histogram", 1.0, domain=(0.0, 1.0), bins=8)
    with lc, Client(lc) as client:
        with pytest.raises(ldp_dask.InputDataError) as info:
            ldp_dask.privatize("s3://ldp-test/beta", "x", ch, client=client, seed=1, storage_options=options,
                               retries=0)
    msg = str(info.value)
    assert "the storage refused the read (NoCredentialsError" in msg and "withheld" not in msg, msg
