"""Central-DP bounds of a column: where the bulk of the data lies, for choosing a public domain.

A local release needs a public domain fixed before the data are looked at.
An operator who runs central releases anyway can spend a little central ε to
choose it: :func:`bounds` returns ``(−2^k, 2^k)`` for the smallest power of
two 2^k with at least ``fraction`` of the values inside, found by the sparse
vector technique (AboveThreshold, Dwork & Roth 2014, Alg. 1) over the counts

    c_k = #{i : |x_i| ≤ 2^k},   k = −100, …, 1023,

which are nondecreasing in k and change by at most 1 when one record is
replaced (sensitivity 1). The threshold is ``fraction · n`` (n is public).
The release is ε-DP (:func:`~ldp_dask.central.mechanisms.above_threshold`)
and charged to the central budget of the dataset, per person as every
release.

Accuracy: with probability ≥ 1 − β the returned k has c_k ≥ fraction·n −
(8/ε)·log(2·K/β), where K ≤ 1124 counts were examined, and c_{k−1} <
fraction·n + (8/ε)·log(2·K/β) (Dwork & Roth 2014, Thm 3.24). For n in the
thousands and ε ≈ 0.1 this is within a few tenths of a percent of n.

The bounds are symmetric: whether a column is non-negative is public
knowledge the operator may add (use ``(0, 2^k)`` then); the mechanism does
not look at signs. The counts stay in driver memory and are never written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Unpack

import numpy as np

from .._validation import InputDataError, LdpDaskError, TaskError, check_epsilon, error_value
from ..engine import run, task_rows, tasks_of
from ..noise import Secret, bind_key, content_tag, digest_arrays, generator, partition_base_keys
from ..options import RunKwargs, RunOptions
from ..outputs import Described, Description, fmt, jsonable, save_json
from ..privacy import central_unit_details
from ..reading import read_piece
from ..receipts import Receipted
from ..release import Charge, Outputs, plan, release
from ..source import Dataset, Piece, Reader
from ..tasks import each_piece
from .mechanisms import above_threshold

__all__ = ["bounds", "BoundsRelease", "LOWEST_EXPONENT", "HIGHEST_EXPONENT"]

#: The smallest and largest powers of two searched: |x| ≤ 2^−100 counts in the first, and every finite double is
#: at most 2^1024 (an |x| above 2^1023 makes "none").
LOWEST_EXPONENT = -100
HIGHEST_EXPONENT = 1023


@dataclass(frozen=True)
class BoundsRelease(Described, Receipted):
    """Bounds released with central DP.

    Attributes
    ----------
    bounds : (float, float) or None
        ``(−2^k, 2^k)``; None when no power of two up to 2^1023 held the fraction (then the column has values of
        magnitude beyond 2^1023, or n is too small for this ε).
    exponent : int or None
        k.
    fraction, epsilon : float
        The target share of the values inside, and the ε spent.
    n : int
        The public number of records: rows, or with a privacy unit k × persons.
    """

    bounds: tuple[float, float] | None
    exponent: int | None
    fraction: float
    epsilon: float
    n: int
    column: str
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "central-bounds", "bounds": list(self.bounds) if self.bounds else None,
                         "exponent": self.exponent, "fraction": self.fraction, "epsilon": self.epsilon,
                         "n": self.n, "column": self.column, **self.info})

    def save(self, path: Any, overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        found = (f"[{fmt(self.bounds[0])}, {fmt(self.bounds[1])}]" if self.bounds else
                 "none: no power of two up to 2^1023 held the fraction")
        return Description(
            title=f"Central-DP bounds of {self.column}",
            headline=f"about {self.fraction:.0%} of the values lie in {found}",
            facts=(("bounds", found), ("target fraction inside", f"{self.fraction:g}"),
                   ("ε (central)", f"{self.epsilon:g}"), ("n", f"{self.n:,}"),
                   ("mechanism", "AboveThreshold over the counts of |x| ≤ 2^k (Dwork & Roth 2014)"),
                   ("neighbours", str(self.info.get("neighbours", "one record replaced, n public"))),
                   ("privacy unit", str(self.info.get("privacy_unit", "row"))),
                   ("population estimated", str(self.info.get("population", "rows"))),
                   ("sign", "symmetric: use 0 as the lower bound when the column is known to be non-negative")))


@dataclass(frozen=True)
class _MagnitudeJob:
    reader: Reader
    pieces: tuple[Piece, ...]


_SLOTS = HIGHEST_EXPONENT - LOWEST_EXPONENT + 2  # one more: magnitudes above 2^1023


def magnitude_counts(x: np.ndarray) -> np.ndarray:
    """Counts of the values by the smallest k in [−100, 1023] with |x| ≤ 2^k (the last slot: none)."""
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise InputDataError("the column holds NaN or infinite values; no bounds contain them")
    m, e = np.frexp(np.abs(x))  # |x| = m·2^e, m in [0.5, 1): |x| ≤ 2^e, and 2^(e−1) < |x| unless m = 0.5
    e = np.where(m == 0.5, e - 1, e)  # exact powers of two: |x| = 2^(e−1)
    e = np.where(x == 0, LOWEST_EXPONENT, e)
    k = np.clip(e, LOWEST_EXPONENT, HIGHEST_EXPONENT + 1) - LOWEST_EXPONENT
    return np.bincount(k, minlength=_SLOTS).astype(np.int64)


def _magnitude_piece(task: Any, job: _MagnitudeJob) -> dict[str, Any] | TaskError:
    acc = {"counts": np.zeros(_SLOTS, dtype=np.int64), "clipped": 0}

    def add(piece: Piece) -> None:
        acc["counts"] += magnitude_counts(read_piece(job.reader, piece))

    error = each_piece(job.pieces, task, add)
    return error if isinstance(error, TaskError) else acc


@dataclass(frozen=True)
class _MagnitudeBucket:
    """A bucket of persons' k records each: their magnitude counts (worker side)."""

    def __call__(self, values: Any, where: str, index: int = 0, key: bytes | None = None) -> dict[str, Any] | TaskError:
        try:
            return {"counts": magnitude_counts(values), "clipped": 0}
        except InputDataError as exc:
            return error_value(where, exc)


def _counts(dataset: Dataset, options: RunOptions, secret: Secret | None = None) -> np.ndarray:
    from .data import _hist_combine

    if dataset.unit is not None:  # every person's k records (bounded and padded), as every unit release
        from ..persons import map_units

        context = {"v": 1, "kind": "central-bounds-units", "fingerprint": dataset.fingerprint,
                   "column": dataset.column, "unit": dataset.unit, "k": options.max_contributions}
        return map_units(dataset, secret, context, _MagnitudeBucket(), _hist_combine, options,  # type: ignore[arg-type]
                         in_process=dataset.kind == "memory")["counts"]
    job = _MagnitudeJob(dataset.reader, dataset.pieces)
    tasks = tasks_of(dataset)
    res = run(tasks, _magnitude_piece, job, _hist_combine, options, rows=[task_rows(dataset.pieces, t) for t in tasks],
              in_process=dataset.kind == "memory", prefix="ldp-bounds", desc="reduce")
    return res["counts"]


def bounds(source: Any, column: str | None = None, epsilon: float = 0.1, fraction: float = 0.95, *,
           out: Any = None, overwrite: bool = False, options: RunOptions | None = None, **run: Unpack[RunKwargs]) -> BoundsRelease:
    """Symmetric bounds ``(−2^k, 2^k)`` holding about ``fraction`` of a column, released with central ε-DP.

    Parameters
    ----------
    source, column :
        As for :func:`ldp_dask.privatize` (Parquet path/URL, or in-memory data).
    epsilon : float
        Central ε spent (default 0.1), charged to the dataset's budget.
    fraction : float
        Target share of the values inside the bounds, in [0.5, 1) (default 0.95).
    out : path, optional
        Write the release as JSON.
    options, **run :
        :class:`~ldp_dask.options.RunOptions` (the key, the ledger, the cluster). With a privacy unit
        (``privacy_unit=``, ``max_contributions=k``) every person is k records (bounded and padded, as for
        every unit release) and the mechanism runs at ε/k: ε per person by group privacy.

    Returns
    -------
    BoundsRelease

    Notes
    -----
    Sensitivity 1 per count (one record replaced, n public); AboveThreshold
    with T̂ = fraction·n + Lap(2/ε) and query noise Lap(4/ε) is ε-DP (Dwork &
    Roth 2014, Thm 3.23). With probability ≥ 1 − β, the share inside the
    returned bounds is at least fraction − (8/(εn))·log(2K/β), K ≤ 1124.
    """
    epsilon = check_epsilon(epsilon)
    if not (isinstance(fraction, (int, float)) and 0.5 <= float(fraction) < 1):
        raise LdpDaskError(f"The 'fraction' parameter must be in [0.5, 1). Got {fraction!r} instead.")
    fraction = float(fraction)
    opts = RunOptions.of(options, **run)
    dataset = plan(source, column, "numeric", opts)
    params = {"fraction": fraction, "lowest_exponent": LOWEST_EXPONENT, "highest_exponent": HIGHEST_EXPONENT}
    tags: dict[str, str] = {}
    # with a privacy unit every person is k records (bounded and padded): one person moves each count by at most
    # k, so AboveThreshold runs at ε/k (group privacy), on n = k × persons
    per = opts.max_contributions if dataset.unit is not None else 1

    def compute(secret: Secret, outputs: Outputs) -> BoundsRelease:
        counts = _counts(dataset, opts, secret)  # driver memory only
        n = int(counts.sum())
        cumulative = np.cumsum(counts[:-1])  # c_k = #{|x| ≤ 2^k}, k = LOWEST_EXPONENT …
        context = {"v": 1, "kind": "central-bounds", "fingerprint": dataset.fingerprint, "column": dataset.column,
                   "epsilon": epsilon, **params}
        base = partition_base_keys(secret, context, 1)[0]
        digest = digest_arrays(counts)
        tags["content"] = f"{content_tag(base, digest):064x}"
        rng = generator(bind_key(base, digest))
        hit = above_threshold(lambda i, j: cumulative[i:j].astype(np.float64), len(cumulative),
                              fraction * n, epsilon / per, rng)
        k = None if hit is None else LOWEST_EXPONENT + hit
        b = None if k is None else (-math.ldexp(1.0, k), math.ldexp(1.0, k))
        return BoundsRelease(b, k, fraction, epsilon, n, dataset.column,
                             {"key_id": secret.key_id, **central_unit_details(dataset.unit, per, epsilon)})

    def write(result: BoundsRelease, outputs: Outputs) -> None:
        if "json" in outputs:
            from ..outputs import json_bytes

            outputs.write("json", json_bytes(result.to_dict()))

    return release(dataset, Charge("central", "central-bounds", params, epsilon), compute, opts,
                   targets={"json": out}, write=write, overwrite=overwrite,
                   content_tag=lambda _: tags.get("content")).attach()

