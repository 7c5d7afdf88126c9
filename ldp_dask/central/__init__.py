"""Central-DP quantiles on the driver (mathematics: docs/central-quantiles.md).

    from ldp_dask.central import quantiles
    r = quantiles("data/", column="salary", q=[0.25, 0.5, 0.75], epsilon=1.0, bounds=(0, 500_000))
    r.values, r.method, r.epsilon_split, r.to_dict()

The exact statistics (a fine histogram reduced with Dask, or the sorted
values of data that fit in memory) stay in driver memory
(:mod:`ldp_dask.central.data`); only the mechanism's output is returned.
Neighbours: one record replaced, n public.

Methods: ``"joint-exp"`` (JointExp, one exponential mechanism for all
quantiles), ``"inverse-sensitivity"`` (smooth, parameter ρ, ε/k each),
``"histogram"`` (the histogram method on AboveThreshold, Canesse 2022, ε/k each),
``"laplace"`` (the naive baseline), and ``"best"`` = the method that
``benchmarks/quantiles.py`` measured best at that n (:func:`best_method`):
JointExp while its public grid is finer than its rank error, inverse
sensitivity on the fine grid beyond.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Unpack

import numpy as np

from .._validation import DECILES, LdpDaskError, check_domain, check_epsilon, check_int, check_q
from ..noise import Secret, bind_key, content_tag, digest_arrays, generator, partition_base_keys
from ..options import RunKwargs, RunOptions
from ..outputs import write_result_files
from ..privacy import central_unit_details
from ..release import Charge, Outputs, plan, release
from . import mechanisms
from .bounds import BoundsRelease, bounds
from .data import DEFAULT_CELLS, DEFAULT_EXACT_MAX, PrivateData, collect
from .result import QuantileRelease

__all__ = [
    "quantiles", "QuantileRelease", "PrivateData", "METHODS", "DECILES", "check_q",
    "run_mechanism", "best_method", "BEST_CROSSOVER", "bounds", "BoundsRelease",
]

METHODS = ("best", "joint-exp", "inverse-sensitivity", "histogram", "laplace")
#: n / max_intervals above which ``method="best"`` switches from JointExp to inverse sensitivity:
#: JointExp's error is then its grid's (w²/12 per quantile), inverse sensitivity's (rank error ≈ 2k/(εn))
#: is smaller. Measured in benchmarks/quantiles.py (RESULTS.md, "Central-DP quantiles", crossover table).
BEST_CROSSOVER = 50


def best_method(n: int, max_intervals: int = 2048) -> str:
    """The mechanism ``method="best"`` runs for n public records (see :data:`BEST_CROSSOVER`)."""
    return "joint-exp" if n <= BEST_CROSSOVER * max_intervals else "inverse-sensitivity"


def run_mechanism(data: PrivateData, q: np.ndarray, epsilon: float, method: str, rng: np.random.Generator, *,
            rho: float = 0.0, steps: int | None = None, max_intervals: int = 2048) -> tuple[np.ndarray, dict[str, Any]]:
    """Run one mechanism on exact data; returns the values (sorted) and the ε split."""
    k = len(q)
    if method == "joint-exp":
        vals = mechanisms.joint_exp(data, q, epsilon, rng, max_intervals=max_intervals)
        return vals, {"joint": epsilon}
    if method == "inverse-sensitivity":
        vals = mechanisms.inverse_sensitivity(data, q, epsilon, rng, rho=rho)
    elif method == "histogram":
        vals = mechanisms.histogram_method(data, q, epsilon, rng, steps=steps)
    else:
        vals = mechanisms.laplace_baseline(data, q, epsilon, rng)
    # sorting is post-processing: quantiles are monotone, the sorted vector is never worse
    return np.sort(vals), {"per_quantile": [epsilon / k] * k}


#: The histogram method's intervals, at most: finer than the default 2^20-cell grid is noise only.
MAX_STEPS = 1 << 20


def quantiles(source: Any, column: str | None = None, q: Any = DECILES, epsilon: float = 1.0,
              bounds: tuple[float, float] | None = None, method: str = "best", *, rho: float | None = None,
              steps: int | None = None, max_intervals: int = 2048, cells: int = DEFAULT_CELLS,
              exact_max: int = DEFAULT_EXACT_MAX, out: str | os.PathLike[str] | None = None,
              plot: str | os.PathLike[str] | None = None, html: str | os.PathLike[str] | None = None,
              overwrite: bool = False, options: RunOptions | None = None, **run: Unpack[RunKwargs]) -> QuantileRelease:
    """Central-DP quantiles of one column (ε-DP, one record replaced, n public).

    Parameters
    ----------
    source, column :
        As for :func:`ldp_dask.privatize` (Parquet path/URL, or in-memory data).
    q : sequence of float
        Probabilities in (0, 1), increasing (default: the nine deciles).
    epsilon : float
        Total ε for all the quantiles together.
    bounds : (float, float)
        Public bounds [a, b]; values outside are an error unless ``clip``.
    method : {"best", "joint-exp", "inverse-sensitivity", "histogram", "laplace"}
    rho : float, optional
        Smoothing ρ ≥ 0 of the inverse-sensitivity mechanism. Default (b − a)/2^20:
        the flat zone around the empirical quantile then has positive mass, which
        matters for data with ties (with ρ = 0 an atom at the quantile has
        probability 0), at a cost of ρ²/3 in MSE per quantile, i.e. nothing.
    steps : int, optional
        Intervals of the histogram method (default 1.5 n / log n).
    max_intervals : int
        JointExp's largest number of intervals (cost O(k K²)); beyond, the data
        are rounded to that many public cells.
    cells, exact_max :
        Fine grid of the Dask histogram, and the largest n read to the driver
        and sorted instead.
    out, plot, html : path, optional
        Write the release as JSON, a PNG of the released quantile function
        (public information only), and a self-contained HTML page (the values,
        the plot and the a-priori accuracy), before the release is committed to
        the ledger.
    overwrite : bool
        Replace existing outputs.
    options, **run :
        How the release runs (:class:`~ldp_dask.options.RunOptions`: cluster,
        key, clipping, partitioning, ledger, ...). The mechanism's randomness
        comes from a Philox generator keyed by HMAC(key, context) bound to a
        digest of the exact data, so a re-run reproduces the release and edited
        data get fresh noise. The ledger records the release in the *central*
        scope; a release over budget is refused before the data are read.
    """
    epsilon = check_epsilon(epsilon)
    if bounds is None:
        raise LdpDaskError("The 'bounds' parameter is required: public bounds (lo, hi) of the column.")
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise LdpDaskError(f"The 'bounds' parameter must be a pair (lo, hi). Got {bounds!r} instead.") from None
    bounds = check_domain(lo, hi)
    qs = check_q(q)
    if method not in METHODS:
        raise LdpDaskError(f"The 'method' parameter must be one of {', '.join(METHODS)}. Got {method!r} instead.")
    rho = (bounds[1] - bounds[0]) / DEFAULT_CELLS if rho is None else float(rho)
    if not (math.isfinite(rho) and rho >= 0):
        raise LdpDaskError(f"The 'rho' parameter must be a finite number >= 0. Got {rho!r} instead.")
    if steps is not None:
        steps = check_int(steps, "steps", 1, MAX_STEPS)
    max_intervals = check_int(max_intervals, "max_intervals", 2, 1 << 14)
    opts = RunOptions.of(options, **run)
    dataset = plan(source, column, "numeric", opts)
    dataset.check_range(bounds, opts.clip)
    resolved = best_method(dataset.n, max_intervals) if method == "best" else method
    params = {"q": qs.tolist(), "bounds": list(bounds), "method": resolved, "rho": rho, "steps": steps,
              "max_intervals": max_intervals, "cells": cells}

    tags: dict[str, str] = {}

    def compute(secret: Secret, outputs: Outputs) -> QuantileRelease:
        return _release(dataset, bounds, qs, epsilon, resolved, secret, rho, steps, max_intervals, cells, exact_max,
                        opts, params, tags)

    return release(dataset, Charge("central", "central-quantiles", params, epsilon),
                   compute, opts, targets={"json": out, "plot": plot, "html": html}, write=write_result_files,
                   overwrite=overwrite, content_tag=lambda _: tags.get("content")).attach()



def _release(dataset: Any, bounds: tuple[float, float], qs: np.ndarray, epsilon: float, resolved: str, sec: Secret,
             rho: float, steps: int | None, max_intervals: int, cells: int, exact_max: int,
             opts: RunOptions, params: dict[str, Any], tags: dict[str, str]) -> QuantileRelease:
    t0 = time.perf_counter()
    data = collect(dataset, bounds, opts, cells=cells, exact_max=exact_max, secret=sec)
    t1 = time.perf_counter()
    # the key's context: the dataset, ε and the mechanism's public parameters (those the ledger records)
    context = {"v": 1, "kind": "central-quantiles", "fingerprint": dataset.fingerprint, "column": dataset.column,
               "epsilon": epsilon, **params}
    base = partition_base_keys(sec, context, 1)[0]
    digest = digest_arrays(data.points, data.counts)
    tags["content"] = f"{content_tag(base, digest):064x}"  # for the ledger's re-run rule, never published
    rng = generator(bind_key(base, digest))
    # with a privacy unit, one person is up to k records: the mechanism runs at ε/k (group privacy)
    k = opts.max_contributions if dataset.unit is not None else 1
    values, split = run_mechanism(data, qs, epsilon / k, resolved, rng, rho=rho, steps=steps,
                                  max_intervals=max_intervals)
    t2 = time.perf_counter()
    details: dict[str, Any] = {
        "data_path": data.kind, "reduction_seconds": t1 - t0, "mechanism_seconds": t2 - t1,
        "key_id": sec.key_id, "key_source": sec.source, "ledger": opts.ledger_note,
        **central_unit_details(dataset.unit, k, epsilon),
    }
    if data.kind == "grid":
        details["grid_cells"] = cells
    if resolved == "inverse-sensitivity":
        details["rho"] = rho
    if resolved == "histogram":
        details["steps"] = steps or mechanisms.default_steps(data.n)
    if resolved == "joint-exp":
        details["max_intervals"] = max_intervals
    # from the mechanism's law and public parameters only: no data, no ε
    details["accuracy"] = mechanisms.accuracy_bound(resolved, len(qs), epsilon / k, bounds, rho=rho, steps=steps,
                                                    n=data.n)
    return QuantileRelease(q=qs, values=values, method=resolved, epsilon=epsilon, epsilon_split=split,
                           n=data.n, bounds=bounds, column=dataset.column, details=details,
                           n_clipped=data.n_clipped if opts.clip else None)
