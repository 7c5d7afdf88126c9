"""The deployment files, parsed and checked against the code they run (no Docker engine needed).

* ``deploy/prefect.yaml``: every flow has a deployment; every entrypoint
  imports to a Prefect flow; every parameter set names only the flow's
  parameters, gives all required ones and passes the flow's own validation
  (``Flow.validate_parameters``, the check Prefect runs when a run starts);
  the work pool and cron schedules are the shared ``definitions``, and the
  schedules parse as Prefect cron schedules.
* ``deploy/docker-compose.yml``: the five services of the topology on our
  image (PostgreSQL on its own), consistent credentials, dependencies on
  services that exist, every build context and secret file referenced.
* ``deploy/Dockerfile``: instructions are known ones, every ``COPY`` source
  exists, the project and the PostgreSQL driver are installed.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import yaml

import ldp_dask

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def prefect_yaml() -> dict:
    return yaml.safe_load((DEPLOY / "prefect.yaml").read_text())


def _flow(entrypoint: str):
    path, _, name = entrypoint.partition(":")
    assert (ROOT / path).is_file(), f"entrypoint file {path} does not exist"
    module = importlib.import_module(path[: -len(".py")].replace("/", "."))
    return getattr(module, name)


@pytest.mark.slow
def test_every_flow_has_a_deployment(prefect_yaml):
    from prefect.flows import Flow

    from ldp_dask import flows

    deployed = {_flow(d["entrypoint"]).name for d in prefect_yaml["deployments"]}
    ours = {getattr(flows, name).name for name in flows.__all__}
    assert all(isinstance(getattr(flows, n), Flow) for n in flows.__all__)
    assert ours <= deployed, f"flows without a deployment: {sorted(ours - deployed)}"


@pytest.mark.slow
def test_entrypoints_and_parameters_match_the_flows(prefect_yaml):
    from prefect.flows import Flow

    for d in prefect_yaml["deployments"]:
        fl = _flow(d["entrypoint"])
        assert isinstance(fl, Flow), d["entrypoint"]
        sig = inspect.signature(fl.fn)
        params = d.get("parameters") or {}
        keys = set(params)
        assert all(isinstance(k, str) for k in keys), f"{d['name']}: non-string parameter names {keys}"
        unknown = keys - set(sig.parameters)
        assert not unknown, f"{d['name']}: {sorted(unknown)} are not parameters of {fl.name}"
        required = {n for n, p in sig.parameters.items() if p.default is inspect.Parameter.empty}
        assert required <= keys, f"{d['name']}: missing required {sorted(required - keys)}"
        fl.validate_parameters(params)  # raises on a wrong type (Prefect's own check at run time)


def test_bad_parameters_are_caught_by_the_same_check(prefect_yaml):
    """The validation above can fail: a mistyped value is refused."""
    from prefect.exceptions import ParameterTypeError

    d = next(d for d in prefect_yaml["deployments"] if d["name"] == "nightly-release")
    fl = _flow(d["entrypoint"])
    with pytest.raises(ParameterTypeError):
        fl.validate_parameters({**d["parameters"], "epsilon": "a lot"})


def test_shared_definitions_pool_and_schedules(prefect_yaml):
    from prefect.client.schemas.schedules import CronSchedule

    defs = prefect_yaml["definitions"]
    pool = defs["work_pools"]["process_pool"]
    crons = {s["cron"] for s in defs["schedules"].values()}
    for s in defs["schedules"].values():
        CronSchedule(cron=s["cron"], timezone=s["timezone"])  # raises on an invalid cron or zone
    for d in prefect_yaml["deployments"]:
        assert d["work_pool"] == pool, d["name"]
        for s in d.get("schedules") or []:
            assert s["cron"] in crons, f"{d['name']}: schedule {s} is not one of the shared definitions"
    nightly = [d for d in prefect_yaml["deployments"] if d.get("schedules")
               and any(s["cron"] == defs["schedules"]["nightly"]["cron"] for s in d["schedules"])]
    assert [d["entrypoint"] for d in nightly] == ["flows/release.py:release_flow", "flows/plan.py:plan_flow",
                                                  "flows/release.py:release_flow", "flows/release.py:release_flow",
                                                  "flows/release.py:release_flow"]
    assert [d["name"] for d in nightly] == ["nightly-release", "nightly-plan", "nightly-snapshot", "nightly-delta",
                                            "nightly-iceberg"]
    text = (DEPLOY / "prefect.yaml").read_text()
    assert "*process_pool" in text and "*nightly" in text, "deployments must reuse the shared definitions"


def test_pull_step_sets_the_project_directory(prefect_yaml):
    (step,) = prefect_yaml["pull"]
    assert step == {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $LDP_DASK_PROJECT_DIR }}"}}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_compose_topology(compose):
    services = compose["services"]
    ours = {"prefect-server", "prefect-worker", "dask-scheduler", "dask-worker-1", "dask-worker-2", "deployer"}
    assert ours | {"postgres"} == set(services)
    images = {services[s]["image"] for s in ours}
    assert images == {"ldp-dask:0.1.0"}, "every service of ours runs the one image"
    for s in ours:
        b = services[s]["build"]
        assert (DEPLOY / b["context"] / b["dockerfile"]).resolve() == (DEPLOY / "Dockerfile").resolve()
    assert services["postgres"]["image"].startswith("postgres:")
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        assert set(deps) <= set(services), f"{name} depends on unknown services"
        for dep, cond in deps.items():
            if cond.get("condition") == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health, which has no check"
        cmd = svc.get("command")
        assert cmd is None or isinstance(cmd, list), f"{name}: exec-form command expected"


def test_compose_wiring(compose):
    s = compose["services"]
    pg = s["postgres"]["environment"]
    url = s["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    m = re.fullmatch(r"postgresql\+asyncpg://(\w+):(.+)@postgres:5432/(\w+)", url)
    assert m, url
    assert (m.group(1), m.group(2), m.group(3)) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])
    sched = s["dask-scheduler"]["command"]
    port = sched[sched.index("--port") + 1]
    for w in ("dask-worker-1", "dask-worker-2"):
        assert s[w]["command"][:3] == ["dask", "worker", f"tcp://dask-scheduler:{port}"]
    worker_env = s["prefect-worker"]["environment"]
    assert worker_env["DASK_SCHEDULER_ADDRESS"] == f"tcp://dask-scheduler:{port}"
    assert worker_env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert s["prefect-worker"]["command"][-4:] == ["--pool", "ldp-process", "--type", "process"]
    pool = yaml.safe_load((DEPLOY / "prefect.yaml").read_text())["definitions"]["work_pools"]["process_pool"]
    assert pool["name"] == "ldp-process"
    for name in s["prefect-worker"].get("secrets", []):
        assert name in compose["secrets"]
    for vol in s["prefect-worker"]["volumes"] + s["dask-worker-1"]["volumes"]:
        assert vol.split(":")[0] in compose["volumes"]
    assert "deploy/prefect.yaml" in " ".join(s["deployer"]["command"])


KNOWN = {"FROM", "RUN", "COPY", "ADD", "ENV", "WORKDIR", "USER", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD", "ARG",
         "LABEL", "HEALTHCHECK", "SHELL", "STOPSIGNAL", "ONBUILD"}


def _instructions(text: str) -> list[tuple[str, str]]:
    out, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        buf += line.rstrip()
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        op, _, rest = buf.strip().partition(" ")
        out.append((op.upper(), rest.strip()))
        buf = ""
    assert not buf, "dangling line continuation"
    return out


def test_the_stack_keeps_its_ledger_in_postgresql():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    ledger = compose["x-prefect-client-env"]["LDP_DASK_LEDGER"]
    assert ledger.startswith("postgresql://") and ledger.endswith("@postgres:5432/ldp_ledger")
    pg = compose["services"]["postgres"]
    assert "./postgres-init:/docker-entrypoint-initdb.d:ro" in pg["volumes"]
    assert "CREATE DATABASE ldp_ledger" in (DEPLOY / "postgres-init" / "ledger.sql").read_text()
    assert "postgres" in compose["services"]["prefect-worker"]["depends_on"]


def test_dockerfile():
    ins = _instructions((DEPLOY / "Dockerfile").read_text())
    ops = [op for op, _ in ins]
    assert set(ops) <= KNOWN, set(ops) - KNOWN
    assert ops[0] == "FROM" and ins[0][1].startswith("python:3.11")
    for op, rest in ins:
        if op == "COPY":
            *sources, _dest = rest.split()
            for src in sources:
                assert (ROOT / src).exists(), f"COPY source {src} missing (build context is the project root)"
    runs = " ".join(rest for op, rest in ins if op == "RUN")
    assert 'pip install ".[postgres,s3]" asyncpg' in runs  # psycopg for the PostgreSQL ledger, s3fs for s3:// data
    env = " ".join(rest for op, rest in ins if op == "ENV")
    assert "LDP_DASK_PROJECT_DIR=/opt/ldp_dask" in env
    assert ("WORKDIR", "/opt/ldp_dask") in ins
    plans = {d["parameters"]["plan"] for d in yaml.safe_load((DEPLOY / "prefect.yaml").read_text())["deployments"]
             if "plan" in (d.get("parameters") or {})}
    for path in plans:  # a deployed plan is in the image, where the flow runs from the project directory
        assert any(op == "COPY" and path.startswith(rest.split()[0].rstrip("/")) for op, rest in ins), path
        assert ldp_dask.Plan.from_toml(ROOT / path).statistics
    assert ops.index("USER") > max(i for i, o in enumerate(ops) if o == "RUN"), "drop root after installing"


def _pods(resource: dict) -> list[tuple[str, dict]]:
    """The pod specs of a DaskCluster (its workers' and its scheduler's) or of a Deployment."""
    if resource["kind"] == "DaskCluster":
        return [(part, resource["spec"][part]["spec"]) for part in ("worker", "scheduler")]
    return [("pod", resource["spec"]["template"]["spec"])]


def _reads_a_secret(pod: dict) -> list[str]:
    """What in a pod spec hands it a Secret or the key's variables."""
    found = [v["name"] for v in pod.get("volumes", []) if "secret" in v]
    for c in pod["containers"]:
        found += [e["name"] for e in c.get("env", []) if "LDP_DASK_SECRET" in e["name"] or "valueFrom" in e
                  and "secretKeyRef" in e["valueFrom"] and "ldp-dask-secret" in str(e["valueFrom"])]
        found += [str(e) for e in c.get("envFrom", []) if "secretRef" in e]
    return found


def test_kubernetes_manifests_keep_the_key_in_the_prefect_worker():
    """docs/how-to/kubernetes.md: the DaskCluster's pods mount no Secret and name no key variable, and run as
    another user; the Prefect worker mounts the key's Secret where LDP_DASK_SECRET_FILE points, read-only."""
    docs = {p.name: list(yaml.safe_load_all(p.read_text())) for p in (DEPLOY / "kubernetes").glob("*.yaml")}
    assert set(docs) == {"daskcluster.yaml", "prefect-worker.yaml"}
    dask, = docs["daskcluster.yaml"]
    worker, = docs["prefect-worker.yaml"]
    assert dask["apiVersion"] == "kubernetes.dask.org/v1" and dask["kind"] == "DaskCluster"
    for part, pod in _pods(dask):
        assert _reads_a_secret(pod) == [], (part, _reads_a_secret(pod))
    (_, pod), = _pods(worker)
    mounts = {m["name"]: m for c in pod["containers"] for m in c.get("volumeMounts", [])}
    key = next(v for v in pod["volumes"] if v["secret"]["secretName"] == "ldp-dask-secret")
    env = {e["name"]: e.get("value") for c in pod["containers"] for e in c["env"]}
    assert env["LDP_DASK_SECRET_FILE"] == mounts[key["name"]]["mountPath"] and mounts[key["name"]]["readOnly"]
    assert key["secret"]["defaultMode"] == 0o400 and "LDP_DASK_SECRET" not in env
    users = {pod["securityContext"]["runAsUser"] for _, pod in _pods(dask)}
    assert pod["securityContext"]["runAsUser"] not in users
    assert env["DASK_SCHEDULER_ADDRESS"] == f"tcp://{dask['metadata']['name']}-scheduler.{dask['metadata']['namespace']}:8786"


def test_cluster_recipes_name_a_class_and_options_that_keep_the_key_home(monkeypatch):
    """deploy/clusters/*.env (docs/how-to/jobqueue.md, dask-gateway.md, coiled.md): each names a cluster class as
    module.Class and options that are a JSON object the driver accepts with a key configured, and the key as a
    file (never its bytes in an environment file)."""
    import json

    from ldp_dask.clusters import _refuse_key_in

    monkeypatch.setenv("LDP_DASK_SECRET", "a-key-of-at-least-sixteen-bytes")
    files = sorted((DEPLOY / "clusters").glob("*.env"))
    assert [f.stem for f in files] == ["coiled", "gateway", "slurm"]
    for f in files:
        env = dict(line.split("=", 1) for line in f.read_text().splitlines() if line and not line.startswith("#"))
        assert set(env) == {"LDP_DASK_SECRET_FILE", "LDP_DASK_CLUSTER", "LDP_DASK_CLUSTER_OPTIONS",
                            "LDP_DASK_CLUSTER_WORKERS"}, f
        assert re.fullmatch(r"[a-z_]+(\.[a-z_]+)*\.[A-Z]\w+", env["LDP_DASK_CLUSTER"]), f
        assert isinstance(json.loads(env["LDP_DASK_CLUSTER_OPTIONS"]), dict) and env["LDP_DASK_CLUSTER_WORKERS"].isdigit()
        _refuse_key_in(env["LDP_DASK_CLUSTER_OPTIONS"])
        assert f"deploy/clusters/{f.name}" in " ".join(p.read_text() for p in (ROOT / "docs" / "how-to").glob("*.md"))
