"""The docker-compose topology as local processes on loopback, without Docker (``make stack``).

Starts, each as its own process on 127.0.0.1:

* a Prefect server (``prefect server start``, SQLite database, the UI),
* a Dask scheduler and two Dask workers (``dask scheduler`` / ``dask worker``),
* a Prefect process worker polling the ``ldp-process`` work pool,

registers ``deploy/prefect.yaml``'s deployments with ``prefect deploy``, and
drives runs through the REST API. Everything lives in one work directory
(logs in ``logs/``) and stops when the block ends.

Run ``python deploy/localstack.py`` (what ``make stack`` does): it writes the
demo data set, triggers the nightly-release deployment on it, waits for the
run, prints where everything is and stops; ``--keep`` leaves the stack up
(Ctrl-C stops it) to look at the UI. ``tests/integration/test_stack.py`` uses the same
class.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POOL = "ldp-process"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StackError(RuntimeError):
    """A service did not start, or a command failed; the message ends with its log."""


class LocalStack:
    """Prefect server + Dask scheduler + two Dask workers + a Prefect worker, as local processes.

    Parameters
    ----------
    workdir : path
        Where the database, logs and ledger go (created).
    start_timeout : float
        Seconds to wait for each service to answer.
    """

    def __init__(self, workdir: str | os.PathLike[str], start_timeout: float = 120.0) -> None:
        self.workdir = Path(workdir)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.api_port, self.dask_port, self.dash_port = free_port(), free_port(), free_port()
        self.ui_url = f"http://127.0.0.1:{self.api_port}"
        self.api_url = f"{self.ui_url}/api"
        self.scheduler_address = f"tcp://127.0.0.1:{self.dask_port}"
        self.ledger = self.workdir / "ledger.sqlite"
        # the release key, as a deployment mounts it (a secret file): the nightly series is extended under it
        self.secret_file = self.workdir / "secret"
        self.secret_file.write_text(secrets.token_hex(32))
        self.secret_file.chmod(0o600)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        bindir = Path(sys.executable).parent
        self.prefect, self.dask = str(bindir / "prefect"), str(bindir / "dask")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "LDP_DASK_", "DASK_"))}
        env.update({
            "PREFECT_HOME": str(self.workdir / "prefect-home"),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(self.api_port),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{self.workdir / 'prefect.db'}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "true",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_LOGGING_LEVEL": "INFO",
            "DO_NOT_TRACK": "1",
            "DASK_SCHEDULER_ADDRESS": self.scheduler_address,
            "LDP_DASK_LEDGER": str(self.ledger),
            "LDP_DASK_SECRET_FILE": str(self.secret_file),
            "LDP_DASK_PROJECT_DIR": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        })
        self.env = env

    # -- lifecycle -----------------------------------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._spawn("prefect-server", [self.prefect, "server", "start", "--host", "127.0.0.1",
                                       "--port", str(self.api_port)])
        self._spawn("dask-scheduler", [self.dask, "scheduler", "--host", "127.0.0.1", "--port", str(self.dask_port),
                                       "--dashboard-address", f"127.0.0.1:{self.dash_port}"])
        for i in (1, 2):
            self._spawn(f"dask-worker-{i}", [self.dask, "worker", self.scheduler_address, "--nthreads", "1",
                                             "--name", f"dask-worker-{i}", "--no-dashboard"])
        self._wait_http(f"{self.api_url}/health", "prefect-server")
        self._wait_dask_workers(2)
        self.command("work-pool", [self.prefect, "work-pool", "create", POOL, "--type", "process", "--overwrite"])
        self.command("deploy", [self.prefect, "--no-prompt", "deploy", "--all",
                                "--prefect-file", str(ROOT / "deploy" / "prefect.yaml")])
        self._spawn("prefect-worker", [self.prefect, "worker", "start", "--pool", POOL, "--type", "process"])

    def stop(self) -> None:
        """SIGTERM every service's process group, then SIGKILL what is left after 15 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group (flow-run subprocesses)
            except ProcessLookupError:
                pass
            proc.wait()
        self.procs.clear()

    # -- helpers --------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.logs / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def log(self, name: str, tail: int = 40) -> str:
        path = self.logs / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(lines[-tail:])

    def _check_alive(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise StackError(f"{name} exited with status {proc.returncode}:\n{self.log(name)}")

    def _wait_http(self, url: str, name: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            self._check_alive(name)
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise StackError(f"{name} did not answer {url} within {self.start_timeout:.0f} s:\n{self.log(name)}")

    def _wait_dask_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.scheduler_address, timeout=self.start_timeout) as c:
            c.wait_for_workers(count, timeout=self.start_timeout)

    def command(self, name: str, argv: list[str], timeout: float = 300) -> str:
        """Run a CLI command against the stack; its output is logged and returned."""
        res = subprocess.run(argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        (self.logs / f"{name}.log").write_text(res.stdout + res.stderr)
        if res.returncode != 0:
            raise StackError(f"{' '.join(argv[1:])} failed ({res.returncode}):\n{res.stdout[-3000:]}\n"
                             f"{res.stderr[-3000:]}")
        return res.stdout

    # -- the REST API ---------------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call; a busy server's 502/503/429 (its SQLite database locked under load) is retried."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(6):
            req = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    raw = r.read()
                return json.loads(raw) if raw else None
            except urllib.error.HTTPError as exc:
                if exc.code in (429, 502, 503) and attempt < 5:
                    time.sleep(2 ** attempt)
                    continue
                raise StackError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:2000]!r}") from None

    def deployment(self, flow_name: str, deployment_name: str) -> dict[str, Any]:
        return self.api("GET", f"/deployments/name/{flow_name}/{deployment_name}")

    def run_deployment(self, flow_name: str, deployment_name: str, parameters: dict[str, Any] | None = None,
                       timeout: float = 600) -> dict[str, Any]:
        """Create a flow run of a deployment (as the UI's Run button does) and wait for a terminal state."""
        dep = self.deployment(flow_name, deployment_name)
        run = self.api("POST", f"/deployments/{dep['id']}/create_flow_run", {"parameters": parameters or {}})
        return self.wait_flow_run(run["id"], timeout)

    def wait_flow_run(self, run_id: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive("prefect-worker")
            run = self.api("GET", f"/flow_runs/{run_id}")
            if run["state_type"] in TERMINAL:
                return run
            time.sleep(1)
        raise StackError(f"flow run {run_id} not finished after {timeout:.0f} s:\n{self.log('prefect-worker')}")

    def artifacts(self, flow_run_id: str) -> list[dict[str, Any]]:
        return self.api("POST", "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})

    def subflow_runs(self, parent_id: str) -> list[dict[str, Any]]:
        """Flow runs started by a task of ``parent_id`` (its subflows)."""
        tasks = self.api("POST", "/task_runs/filter", {"task_runs": {"flow_run_id": {"any_": [parent_id]}}})
        ids = [t["id"] for t in tasks]
        if not ids:
            return []
        return self.api("POST", "/flow_runs/filter",
                        {"flow_runs": {"parent_task_run_id": {"any_": ids}}})


def main() -> int:
    ap = argparse.ArgumentParser(description="Run the local stack, trigger the nightly release on demo data.")
    ap.add_argument("--workdir", default=None, help="work directory (default: a new temporary directory)")
    ap.add_argument("--rows", type=int, default=2_000_000, help="demo rows (default 2,000,000)")
    ap.add_argument("--keep", action="store_true", help="leave the stack running until Ctrl-C")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from ldp_dask.demo import make_data

    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="ldp-stack-"))
    data = make_data(workdir / "data", rows=a.rows, files=4)
    print(f"work directory {workdir}; starting Prefect server, Dask scheduler + 2 workers, Prefect worker ...",
          flush=True)
    t0 = time.perf_counter()
    with LocalStack(workdir) as stack:
        print(f"stack up in {time.perf_counter() - t0:.0f} s: Prefect UI {stack.ui_url}, Dask dashboard "
              f"http://127.0.0.1:{stack.dash_port}/status", flush=True)
        params = {"source": str(data), "out_dir": str(workdir / "releases")}
        t1 = time.perf_counter()
        run = stack.run_deployment("ldp-release", "nightly-release", params)
        print(f"flow run {run['name']} ({run['id']}): {run['state_type']} in {time.perf_counter() - t1:.0f} s")
        print(f"  flow run page: {stack.ui_url}/runs/flow-run/{run['id']}")
        for art in stack.artifacts(run["id"]):
            print(f"  artifact {art['key']}: {stack.ui_url}/artifacts/artifact/{art['id']}")
        for path in sorted((workdir / "releases").rglob("*")):
            if path.is_file():
                print(f"  wrote {path}")
        print(f"  ledger {stack.ledger}; logs {stack.logs}")
        if a.keep:
            print("the stack is up; Ctrl-C stops it", flush=True)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
        ok = run["state_type"] == "COMPLETED"
        if not ok:
            print(stack.log("prefect-worker", 80), file=sys.stderr)
    print("stack stopped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
