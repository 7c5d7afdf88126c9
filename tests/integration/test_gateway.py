"""A release, a plan and two nights of the nightly flow through a dask-gateway server (docs/how-to/dask-gateway.md),
started here on 127.0.0.1 with its local backend, whose schedulers and workers run as another OS user (``nobody``) than the driver: the releases
equal the same releases in process under the same key, and no worker can read the key — not in its environment,
not in the key file or the driver's ``/proc/<pid>/environ``, not in any task's payload as the scheduler holds it,
not in the cluster's logs.

Starting processes as another user needs root (the backend's ``setuid``), and a Python that user may run: the
test builds the workers' environment from the system interpreter of the same version, with this environment's
packages on its path. Without either it is skipped, saying which.

The released LocalBackend of dask-gateway-server (2026.3.0) extends its list of paths to hand to the cluster's user
with the *characters* of a TLS path (``paths.extend(path)``), so its first ``chown`` is ``chown('/', user)``: the
test's backend hands over the cluster's working directory file by file instead (docs/how-to/dask-gateway.md).
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LaplaceMean

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
pytest.importorskip("dask_gateway_server")
# imported before any dask.config.set of its keys: a set made before dask_gateway loads its defaults removes the
# whole "gateway" section, defaults included, when it exits (the next cluster then fails on gateway.public-address)
pytest.importorskip("dask_gateway")

ROOT = Path(__file__).resolve().parents[2]
KEY = b"gateway-test-key-that-only-the-driver-holds"
PASSWORD = "gateway-test-password"
USER = "nobody"

CONFIG = """
import os
from dask_gateway_server.backends.local import LocalBackend


class OwnedLocalBackend(LocalBackend):
    def set_file_permissions(self, paths, username):
        workdir = paths[0]
        owned = [workdir] + [os.path.join(d, f) for d, dirs, files in os.walk(workdir) for f in dirs + files]
        super().set_file_permissions(owned, username)

    def cleanup_working_directory(self, workdir):
        pass  # kept until the test ends, so that it reads the logs of clusters that have stopped


c.DaskGateway.address = "127.0.0.1:{api}"
c.Proxy.address = "127.0.0.1:{proxy}"
c.DaskGateway.backend_class = OwnedLocalBackend
c.DaskGateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
c.SimpleAuthenticator.password = "{password}"
c.LocalBackend.clusters_directory = "{clusters}"
c.ClusterConfig.scheduler_cmd = ["{python}", "-m", "distributed.cli.dask_scheduler"]
c.ClusterConfig.worker_cmd = ["{python}", "-m", "distributed.cli.dask_worker"]
c.ClusterConfig.worker_memory = "1 G"
c.ClusterConfig.idle_timeout = 120
c.ClusterConfig.environment = {{"NUMBA_CACHE_DIR": "{numba}"}}  # the project's directory is not the workers' to write
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker_python(where: Path) -> Path:
    """A virtual environment of the system interpreter (runnable by ``nobody``) that sees this environment's
    packages and the project."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("starting the gateway's workers as another user needs root (and runuser, to check it can)")
    if not system.exists() or subprocess.run(["runuser", "-u", USER, "--", str(system), "-c", "pass"],
                                             capture_output=True).returncode != 0:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that user {USER!r} may run")
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python*/site-packages"))
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (site / "ldp_dask_test.pth").write_text("\n".join([str(ROOT), *ours]) + "\n")
    python = where / "bin" / "python"
    tried = subprocess.run(["runuser", "-u", USER, "--", str(python), "-c", "import ldp_dask, distributed, dask_gateway"],
                           capture_output=True, text=True, cwd="/")
    if tried.returncode != 0:
        pytest.skip(f"user {USER!r} cannot import the project from {ROOT} and this environment: "
                    f"{tried.stderr.strip().splitlines()[-1] if tried.stderr.strip() else tried.returncode}")
    return python


@pytest.fixture(scope="module")
def gateway():
    """A dask-gateway server on 127.0.0.1 (local backend, clusters run as ``nobody``); yields its addresses, its
    clusters' directory and a directory the workers may read."""
    shared = Path(tempfile.mkdtemp(prefix="ldp-gateway-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        python = _worker_python(shared / "env")
        clusters = shared / "clusters"
        clusters.mkdir(mode=0o755)
        api, proxy = _free_port(), _free_port()
        config = shared / "gateway_config.py"
        numba = shared / "numba"
        numba.mkdir(mode=0o777)
        numba.chmod(0o777)
        config.write_text(CONFIG.format(api=api, proxy=proxy, password=PASSWORD, clusters=clusters, python=python,
                                        numba=numba))
        server = subprocess.Popen([str(Path(sys.executable).parent / "dask-gateway-server"), "-f", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=shared)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{api}/api/health", timeout=2)
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("the dask-gateway server did not start") from None
                    time.sleep(0.3)
            data = shared / "data"
            data.mkdir(mode=0o755)
            yield {"address": f"http://127.0.0.1:{api}", "proxy_address": f"tls://127.0.0.1:{proxy}",
                   "clusters": clusters, "data": data}
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        assert os.stat("/").st_uid == 0  # the backend handed nothing above its clusters' directory to the user
        shutil.rmtree(shared, ignore_errors=True)


def _through_the_gateway(gateway: dict, tmp_path: Path, monkeypatch) -> Path:
    """The driver's key file (under its own temporary directory, mode 0700: root's alone) and the cluster hook's
    variables naming the gateway; returns the key file."""
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o400)
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(key_file))
    monkeypatch.setenv("LDP_DASK_CLUSTER", "dask_gateway.GatewayCluster")
    monkeypatch.setenv("LDP_DASK_CLUSTER_OPTIONS", json.dumps(
        {"address": gateway["address"], "proxy_address": gateway["proxy_address"], "auth": "basic"}))
    monkeypatch.setenv("LDP_DASK_CLUSTER_WORKERS", "2")
    return key_file


class _PayloadWatch:
    """A scheduler plugin: whether any task's payload, as the scheduler holds it, contains the key (hex too)."""

    name = "ldp-test-payload-watch"

    def __init__(self, needles: list[bytes]) -> None:
        self.needles = needles
        self.tasks = 0
        self.found: list[str] = []

    def update_graph(self, scheduler, *, tasks=(), **kwargs) -> None:
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is not None:
                self.tasks += 1
                blob = pickle.dumps(ts.run_spec)
                if any(n in blob for n in self.needles):
                    self.found.append(str(key))


def _on_worker(key_file: str, driver: int) -> dict:
    """What a worker can learn of the key: its user, its environment, the key file, the driver's environment."""
    import os

    out: dict = {"uid": os.getuid(), "env": sorted(k for k in os.environ if k.startswith("LDP_DASK"))}
    for what, path in (("file", key_file), ("proc", f"/proc/{driver}/environ")):
        try:
            with open(path, "rb") as fh:
                out[what] = len(fh.read())
        except OSError as exc:
            out[what] = type(exc).__name__
    return out


def test_releases_through_a_gateway_are_bit_identical_and_workers_cannot_read_the_key(gateway, tmp_path,
                                                                                        monkeypatch):
    import cloudpickle
    import dask
    from distributed.diagnostics.plugin import SchedulerPlugin

    from ldp_dask.pipeline import connect

    rng = np.random.default_rng(8)
    for i in range(2):
        pq.write_table(pa.table({"x": rng.uniform(0, 1, 40_000), "c": rng.choice(["a", "b", "c"], 40_000)}),
                       gateway["data"] / f"part-{i}.parquet")
        (gateway["data"] / f"part-{i}.parquet").chmod(0o644)
    key_file = _through_the_gateway(gateway, tmp_path, monkeypatch)
    source = str(gateway["data"])
    plan = ldp_dask.Plan.from_dict({"statistic": [
        {"column": "x", "target": "mean", "domain": [0, 1]},
        {"column": "c", "target": "frequencies", "categories": ["a", "b", "c"]}]})
    with dask.config.set({"gateway.auth.kwargs": {"username": USER, "password": PASSWORD}}):
        far = ldp_dask.privatize(source, column="x", channel=LaplaceMean(1.0, (0.0, 1.0)), ledger=False,
                                 partition_rows=20_000)
        far_plan = ldp_dask.release_plan(plan, source, 2.0, ledger=False, partition_rows=20_000)
        module = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(module)  # the gateway's Python has no tests/ on its path
        try:
            with connect() as client:
                client.wait_for_workers(2, timeout=120)
                watch = type("Watch", (_PayloadWatch, SchedulerPlugin), {})([KEY, KEY.hex().encode()])
                client.register_plugin(watch)
                watched = ldp_dask.privatize(source, column="x", channel=LaplaceMean(1.0, (0.0, 1.0)), ledger=False,
                                             partition_rows=20_000, client=client)
                payloads = client.run_on_scheduler(
                    lambda dask_scheduler: (dask_scheduler.plugins["ldp-test-payload-watch"].tasks,
                                            dask_scheduler.plugins["ldp-test-payload-watch"].found))
                seen = client.run(_on_worker, str(key_file), os.getpid())
                logs = [p for p in gateway["clusters"].rglob("*.log")]
                text = b"".join(p.read_bytes() for p in logs)
        finally:
            cloudpickle.unregister_pickle_by_value(module)
            client = None  # the gateway's client objects are finalized now, not inside a later import
            gc.collect()
    here = ldp_dask.privatize(source, column="x", channel=LaplaceMean(1.0, (0.0, 1.0)), ledger=False,
                              partition_rows=20_000, client="local")
    here_plan = ldp_dask.release_plan(plan, source, 2.0, ledger=False, partition_rows=20_000, client="local")
    assert far.same_release(here) and watched.same_release(here)
    for s in here_plan.statistics:
        assert np.array_equal(far_plan[s.label].summary.sums["sum"], s.summary.sums["sum"]), s.label
    assert len(seen) == 2, seen
    for worker, facts in seen.items():
        assert facts["uid"] != os.geteuid() and facts["env"] == [], (worker, facts)
        assert facts["file"] == "PermissionError" and facts["proc"] == "PermissionError", (worker, facts)
    tasks, found = payloads
    assert tasks > 0 and found == [], payloads
    assert logs and KEY not in text and KEY.hex().encode() not in text


@pytest.mark.prefect
def test_the_nightly_flow_through_a_gateway_equals_the_same_nights_in_process(gateway, prefect_harness, tmp_path,
                                                                              monkeypatch):
    """The nightly deployment (``release_flow`` with ``incremental=True``, a ledger and a privacy unit), two nights,
    its cluster made by the gateway for each run: every night's summary is bit-identical to the same night run in
    process under the same key, each night reads only its new file, the ledger charges the same ε per person, and
    no log of the gateway's clusters holds the key."""
    import dask

    from ldp_dask.flows import release_flow
    from ldp_dask.ledger import open_ledger

    table = gateway["data"] / "nightly"
    _through_the_gateway(gateway, tmp_path, monkeypatch)
    runs: dict[str, list[dict]] = {"gateway": [], "local": []}
    with dask.config.set({"gateway.auth.kwargs": {"username": USER, "password": PASSWORD}}):
        for night in (1, 2):
            rng = np.random.default_rng(night)  # the same 500 persons every night
            folder = table / f"date=2026-11-{night:02d}"
            folder.mkdir(parents=True, mode=0o755)
            pq.write_table(pa.table({"x": rng.beta(2, 5, 20_000), "user": rng.integers(0, 500, 20_000)}),
                           folder / "part.parquet")
            (folder / "part.parquet").chmod(0o644)
            for where, scheduler in (("gateway", None), ("local", "local")):
                runs[where].append(release_flow(
                    source=str(table), column="x", out_dir=str(tmp_path / where), domain=[0.0, 1.0],
                    channel="histogram", epsilon=1.0, bins=8, incremental=True, date=f"2026-11-{night:02d}",
                    privacy_unit="user", max_contributions=2, ledger=str(tmp_path / f"{where}.sqlite"),
                    scheduler=scheduler, partition_rows=10_000))
                gc.collect()  # the gateway's client objects are finalized now, not inside a later import
    for far, here in zip(runs["gateway"], runs["local"], strict=True):
        a = ldp_dask.read_summary(far["written"]["summary"])
        b = ldp_dask.read_summary(here["written"]["summary"])
        assert a.n == b.n and np.array_equal(a.sums["sum"], b.sums["sum"]), far["date"]
        assert a.metadata["partitions_read"] == 1, a.metadata  # each night reads its new file alone
    assert ldp_dask.read_summary(runs["gateway"][-1]["written"]["summary"]).metadata["partitions_reused"] == 1
    spent = [[(item["root"], item["spent"]) for item in open_ledger(str(tmp_path / f"{where}.sqlite")).summary()]
             for where in ("gateway", "local")]
    assert spent[0] == spent[1] and [e for _, e in spent[0]] == [2.0], spent  # ε 1 a night to every person
    text = b"".join(p.read_bytes() for p in gateway["clusters"].rglob("*.log"))
    assert text and KEY not in text and KEY.hex().encode() not in text
