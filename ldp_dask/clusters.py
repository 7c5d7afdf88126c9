"""Where a release runs: the Dask client of the run (the one given, a scheduler's address, the environment's cluster,
or a LocalCluster started for the command), and how ldp_dask starts one. :mod:`ldp_dask.engine` runs tasks on it;
nothing here knows tasks.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._validation import LdpDaskError
from .noise import hidden_from_children
from .options import DEFAULT_CONNECT_TIMEOUT

__all__ = ["connect", "WORKER_MALLOC", "LOCAL_CLUSTER"]


@contextmanager
def connect(client: Any = None, n_workers: int | None = None,
            timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Iterator[Any]:
    """A ``distributed.Client``: the one given, one for an address, or one for the environment's cluster.

    ``client=None`` looks at the environment, so that deployments choose their
    cluster without changing parameters:

    * ``DASK_SCHEDULER_ADDRESS`` (Dask's ``scheduler-address`` setting): attach
      to that running scheduler;
    * ``LDP_DASK_CLUSTER``: a cluster class as ``module.Class`` (e.g.
      ``dask_jobqueue.SLURMCluster`` or ``dask_kubernetes.operator.KubeCluster``),
      created for the block with the keyword arguments in
      ``LDP_DASK_CLUSTER_OPTIONS`` (a JSON object), scaled to
      ``LDP_DASK_CLUSTER_WORKERS`` workers (default 2) and closed at the end;
    * otherwise a LocalCluster of worker processes (one thread each).

    A scheduler named by address that does not answer within ``timeout``
    seconds raises :class:`~ldp_dask.LdpDaskError` in one line.
    """
    import dask
    from distributed import Client, LocalCluster

    address = os.environ.get("DASK_SCHEDULER_ADDRESS") or dask.config.get("scheduler-address", None)
    if client is None and address:
        client = str(address)
    if client is None and os.environ.get("LDP_DASK_CLUSTER"):
        with _cluster_from_env() as cluster, Client(cluster) as c:
            yield c
    elif client is None:
        workers = n_workers or max(1, min(os.cpu_count() or 1, 8))
        # worker processes inherit the environment: the key's variables are hidden while the cluster lives
        # (a nanny restarting a worker spawns it again), and this process still resolves the key
        with hidden_from_children(), _worker_heap(), \
                LocalCluster(n_workers=workers, **LOCAL_CLUSTER) as cluster, Client(cluster) as c:
            yield c
    elif isinstance(client, str):
        try:
            c = Client(client, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise LdpDaskError(f"cannot reach the Dask scheduler at {client!r} within {timeout:g} s (--scheduler, "
                               f"DASK_SCHEDULER_ADDRESS or client=): {type(exc).__name__}; is it running and "
                               "reachable from here?") from None
        with c:
            yield c
    else:
        yield client


#: The C library's allocator settings given to the workers of the LocalCluster that :func:`connect` starts for one
#: command: arrays of up to 1 GiB come from the process's heap and go back to it (Dask's default,
#: ``MALLOC_TRIM_THRESHOLD_=65536``, also makes every array over 128 KiB a fresh mapping whose pages are faulted in
#: on first touch: 5 ms per 64 MB here). Measured on 2 workers over 8·10^6 rows (``benchmarks/units.py``'s
#: files): a release per row 0.067-0.068 s -> 0.058-0.059 s, per person 0.304-0.307 s -> 0.260 s. Freed memory
#: stays with the worker, which ends with the command. A variable already set in the environment is left as it is.
WORKER_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(1 << 30)}


@contextmanager
def _worker_heap() -> Iterator[None]:
    """:data:`WORKER_MALLOC` in ``os.environ`` for the block (worker processes inherit it when they are started or
    restarted), then the environment as it was."""
    added = {k: v for k, v in WORKER_MALLOC.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k, v in added.items():
            if os.environ.get(k) == v:  # Dask's nanny writes its pre-spawn variables back: ours, or the user's
                del os.environ[k]


#: How ldp_dask starts a LocalCluster: worker processes of one thread, no dashboard, quiet logs. The scheduler
#: still serves its health routes over HTTP, on 8787 unless told otherwise (Dask then warns "Port 8787 is already in
#: use" whenever another cluster or a second release holds it): a free loopback port instead.
LOCAL_CLUSTER: dict[str, Any] = {"threads_per_worker": 1, "processes": True, "dashboard_address": None,
                                 "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"},
                                 "silence_logs": logging.ERROR}


def _refuse_key_in(raw: str) -> None:
    """Refuse cluster options that would hand the key to the workers: its variables' names (Coiled's ``environ``,
    a Kubernetes ``env``, a job script's ``job_script_prologue``) or its bytes. The message quotes neither."""
    from .noise import SECRET_ENV, SECRET_FILE_ENV, key_material

    named = [v for v in (SECRET_ENV, SECRET_FILE_ENV) if v in raw]
    material = key_material()
    if named or (material is not None and material in raw.encode()):
        raise LdpDaskError("LDP_DASK_CLUSTER_OPTIONS would hand the noise key to the workers (it names "
                           f"{' and '.join(named) if named else 'the key itself'}): the key stays on the driver, "
                           "which derives each task's keys from it; leave it out of the cluster's environment, "
                           "secrets and job scripts (docs/how-to/dask-cluster.md)")


@contextmanager
def _cluster_from_env() -> Iterator[Any]:
    """The cluster named by ``LDP_DASK_CLUSTER`` (see :func:`connect`), scaled and closed at the end."""
    import importlib

    spec = os.environ["LDP_DASK_CLUSTER"]
    module, _, name = spec.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError):
        cls = None
    if cls is None:
        raise LdpDaskError(f"LDP_DASK_CLUSTER must name an importable cluster class as 'module.Class' "
                           f"(e.g. dask_jobqueue.SLURMCluster). Got {spec!r} instead.")
    raw = os.environ.get("LDP_DASK_CLUSTER_OPTIONS", "{}")
    try:
        options = json.loads(raw)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise LdpDaskError(f"LDP_DASK_CLUSTER_OPTIONS must be a JSON object of keyword arguments. Got {raw!r}.")
    _refuse_key_in(raw)
    workers = os.environ.get("LDP_DASK_CLUSTER_WORKERS", "2")
    if not workers.isdigit() or int(workers) < 1:
        raise LdpDaskError(f"LDP_DASK_CLUSTER_WORKERS must be a positive integer. Got {workers!r} instead.")
    cluster = None
    try:
        with hidden_from_children(), cls(**options) as cluster:
            cluster.scale(int(workers))
            yield cluster
    finally:
        # a cluster manager's helpers may be finalized later, at any allocation: dask-gateway's client closes its
        # event loop on close and again, raising, in __del__; collected here, not inside whatever runs next
        import gc

        cluster = None
        gc.collect()
