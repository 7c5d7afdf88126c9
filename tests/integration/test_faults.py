"""Faults: a worker process killed in the middle of a privatize run does not change the release."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LaplaceHistogram

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")
def test_killing_a_worker_mid_run_gives_the_undisturbed_summary(tmp_path):
    from distributed import Client, LocalCluster

    d = tmp_path / "data"
    d.mkdir()
    rng = np.random.default_rng(0)
    for i in range(16):  # 16 partitions of 1M rows: each takes a noticeable time on a worker
        pq.write_table(pa.table({"x": rng.random(1_000_000)}), d / f"p{i:02d}.parquet", row_group_size=1 << 20)
    ch = LaplaceHistogram(1.0, 64, (0.0, 1.0))
    oracle = ldp_dask.privatize(str(d), column="x", channel=ch, client="local", secret=b"f" * 32)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as lc, Client(lc) as client:
        victim = sorted(client.scheduler_info()["workers"])[0]
        pid = client.run(os.getpid, workers=[victim])[victim]
        killed = threading.Event()

        def kill_when_busy():
            deadline = time.time() + 60
            while time.time() < deadline:
                if any(k.startswith("ldp-piece") for k in map(str, client.processing().get(victim, ()))):
                    os.kill(pid, signal.SIGKILL)  # the nanny restarts it; its tasks are rescheduled
                    killed.set()
                    return
                time.sleep(0.01)

        t = threading.Thread(target=kill_when_busy)
        t.start()
        s = ldp_dask.privatize(str(d), column="x", channel=ch, client=client, secret=b"f" * 32, retries=3)
        t.join()
    assert killed.is_set()  # the worker really died while it held tasks
    assert s.same_release(oracle)
