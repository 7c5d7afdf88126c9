"""Termination signals: a release stopped by SIGTERM or SIGHUP before it publishes leaves nothing — no output, no
staged file, no ledger entry — and one stopped while publishing finishes first (published and charged)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask._signals import Terminated, terminations


def _reserved(ledger) -> bool:
    if not ledger.exists():
        return False
    try:
        with sqlite3.connect(ledger) as con:
            return bool(con.execute("SELECT count(*) FROM releases WHERE status='reserved'").fetchone()[0])
    except sqlite3.Error:  # being created
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_release_stopped_before_publishing_leaves_nothing(tmp_path, sig):
    data = tmp_path / "d.parquet"
    # large enough that the in-process release runs for a second or more after its reservation (about 40 ms a
    # million rows a task on this machine, 64 tasks): the signal comes while it computes
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(8_000_000)}), data, row_group_size=125_000)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out" / "s.parquet"
    out.parent.mkdir()
    cmd = [sys.executable, "-m", "ldp_dask.cli", "privatize", str(data), "--column", "x", "--channel", "wavelet",
           "--domain", "0", "1", "--epsilon", "1", "--local", "--seed", "1", "--ledger", str(ledger),
           "--partition-rows", "125000", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _reserved(ledger):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert f"interrupted ({signal.Signals(sig).name}); nothing was published or charged" in err
    assert os.listdir(out.parent) == []  # no output, no hidden staged file
    with sqlite3.connect(ledger) as con:
        assert con.execute("SELECT count(*) FROM releases").fetchone()[0] == 0


def test_a_signal_while_publishing_waits_until_the_release_is_published():
    published = []
    with pytest.raises(Terminated) as caught:
        with terminations() as guard:
            guard.publishing = True
            os.kill(os.getpid(), signal.SIGTERM)  # held: the publishing goes on
            published.append("outputs renamed and charge committed")
    assert published and caught.value.published and caught.value.signum == signal.SIGTERM
    with pytest.raises(Terminated) as caught:  # before publishing: raised at once
        with terminations():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(5)
            published.append("never")
    assert not caught.value.published and published == ["outputs renamed and charge committed"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the previous handlers are back


@pytest.mark.slow  # two real processes killed (2 s each): make test runs it, make test-fast stays under 3 minutes
@pytest.mark.parametrize("status", ["publishing", "reserved"])
def test_recovery_removes_the_staged_debris_of_a_killed_release(tmp_path, status):
    """A process killed (SIGKILL: no handler runs) while publishing, or with a private output staged, leaves its
    entry and a hidden staged file: the next ledger operation commits the entry and removes the file (it left a
    '.tmp-<token>' file beside the committed charge for good)."""
    import ldp_dask
    from ldp_dask._io import temp_name
    from ldp_dask.ledger import Ledger

    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(1_000)}), data)
    led, out = tmp_path / "ledger.sqlite", tmp_path / "out" / "s.parquet"
    proc = subprocess.Popen([sys.executable, "-c", f"""
import os, signal, ldp_dask, ldp_dask.release as r
real = r.StagedOutputs.publish
def killed(self):  # the charge is settled ({status!r}), the output staged: the process dies before renaming it
    if {status!r} == 'reserved':
        import sqlite3
        sqlite3.connect({str(led)!r}).execute("UPDATE releases SET status='reserved'").connection.commit()
    os.kill(os.getpid(), signal.SIGKILL)
r.StagedOutputs.publish = killed
ldp_dask.privatize({str(data)!r}, 'x', ldp_dask.LaplaceHistogram(1.0, 8, (0, 1)), seed=1, client='local',
                   out={str(out)!r}, ledger=ldp_dask.ledger.Ledger({str(led)!r}, lease_seconds=1))
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    with sqlite3.connect(led) as con:
        (token, got), = con.execute("SELECT token, status FROM releases").fetchall()
    staged = temp_name(str(out), token)
    assert got == status and os.path.exists(staged) and not out.exists()
    time.sleep(1.2)  # its lease ends
    (entry,) = Ledger(str(led)).entries()  # any ledger operation recovers first
    assert entry["status"] == "committed" and entry["note"].startswith("recovered")
    assert not os.path.exists(staged) and os.listdir(out.parent) == []
    assert ldp_dask.ledger.Ledger(str(led)).spent(entry["root"]) == 1.0
