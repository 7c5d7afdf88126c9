"""Shared fixtures: a real LocalCluster with worker processes, real Parquet data."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.pop("LDP_DASK_SECRET", None)  # tests choose their keys explicitly
os.environ.pop("LDP_DASK_SECRET_FILE", None)
# the CLI and flows record releases in a ledger: keep the suite's out of the home directory
os.environ["LDP_DASK_LEDGER"] = os.path.join(tempfile.mkdtemp(prefix="ldp-ledger-"), "ledger.sqlite")


@pytest.fixture(autouse=True)
def _own_ledger(tmp_path_factory, monkeypatch):
    """Every release is recorded in the default ledger unless told otherwise: each test gets its own, so that no
    test's charges (or privacy units) reach another's."""
    monkeypatch.setenv("LDP_DASK_LEDGER", str(tmp_path_factory.mktemp("ledger") / "ledger.sqlite"))


@pytest.fixture(scope="session")
def cluster():
    """Two worker processes, one thread each (the machine has two cores)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as lc, Client(lc) as client:
        yield client


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on 127.0.0.1 for the session (tests/pg_server.py); yields its URL."""
    from pg_server import postgres_server

    # not under pytest's private temp dir: the server runs as an unprivileged user when the tests run as root
    with postgres_server(Path(tempfile.mkdtemp(prefix="ldp-pg-"))) as url:
        yield url


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server on 127.0.0.1 (moto's, tests/s3_server.py), credentials and endpoint in the
    environment as a deployment would set them; yields ``(endpoint, storage_options)``."""
    from s3_server import CREDENTIALS, s3_server

    with s3_server() as endpoint:
        saved = {k: os.environ.get(k) for k in [*CREDENTIALS, "FSSPEC_S3_ENDPOINT_URL"]}
        os.environ.update(CREDENTIALS)
        os.environ["FSSPEC_S3_ENDPOINT_URL"] = endpoint  # fsspec's own configuration by environment
        try:
            yield endpoint, {"endpoint_url": endpoint}
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API (own database) for the whole session, given the time a busy machine needs."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def write_dataset(directory: Path, values: list[np.ndarray], row_group_size: int = 25_000,
                  extra: bool = True) -> Path:
    """Write one Parquet file per array (column ``x``, plus a string column ``s``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, v in enumerate(values):
        cols = {"x": v}
        if extra:
            cols["s"] = pa.array(np.where(np.arange(len(v)) % 2 == 0, "a", "b"))
        pq.write_table(pa.table(cols), directory / f"part-{i:03d}.parquet", row_group_size=row_group_size)
    return directory


@pytest.fixture(scope="session")
def beta_dataset(tmp_path_factory):
    """~210k rows of Beta(2,5) in 3 files with several row groups each."""
    rng = np.random.default_rng(20261122)
    d = tmp_path_factory.mktemp("beta") / "data"
    return write_dataset(d, [rng.beta(2, 5, size=m) for m in (80_000, 70_000, 60_000)])
