"""A release that starts its own LocalCluster prints no warning of Dask's when port 8787 is taken (by another
cluster's dashboard, or a second release at the same time): the scheduler's HTTP routes go to a free loopback
port, and there is no dashboard."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ldp_dask.demo import sample_table


@pytest.mark.slow  # a LocalCluster of its own: seconds, left out of make test-fast
def test_no_port_warning_when_8787_is_taken(tmp_path):
    sample_table(tmp_path / "data")
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 8787))
        held.listen()
    except OSError:  # someone else holds it already: the condition under test holds anyway
        held.close()
        held = None
    try:
        exe = Path(sys.executable).with_name("ldp-dask")
        r = subprocess.run([str(exe), "privatize", str(tmp_path / "data"), "--column", "x", "--domain", "0", "1",
                            "--epsilon", "1", "--channel", "histogram", "--out", str(tmp_path / "x.parquet"),
                            "--seed", "1", "--in-process-rows", "0", "--no-ledger"],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONWARNINGS": "default"})
    finally:
        if held is not None:
            held.close()
    assert r.returncode == 0, r.stderr
    assert "already in use" not in r.stderr and "Warning" not in r.stderr, r.stderr
    assert (tmp_path / "x.parquet").is_file()
