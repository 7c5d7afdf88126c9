"""What one task of a plan does on a worker: read its pieces' columns once and feed every statistic.

::

    piece ──read the plan's columns once──► (row split: each row's statistic, a keyed draw)
          ──► per statistic: its rows ──► (group: its rows per group, or (group, value) pairs) ──► channel.prepare
          ──► noisy sums per statistic (and per public group), each under its own key ──► combine (one tree)

A statistic's noise is keyed by its own task key (:func:`ldp_dask.noise.partition_base_keys` of its context), a
public group's by that key and the group's index: every statistic, and every public group, is a release of its own
that happens to share a read. Which statistic a row reports to (a row split) and which group it belongs to depend
on the row's place and its group label only, never on the values released.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .._validation import InputDataError, TaskError, error_value
from ..channels import Channel
from ..noise import bind_key, generator
from ..reading import group_index, read_columns
from ..source import Piece, Reader
from ..tasks import ChannelJob, combine_sums, each_piece, piece_name, release_prepared

__all__ = ["PlanBucket", "Grouping", "PlanJob", "ASSIGN_BITS", "row_lots", "assign_rows", "group_index", "cell_index",
           "prepare_statistic", "plan_sums", "combine_plan"]

#: A row split draws each row's statistic as a 16-bit keyed integer: a statistic's share of the rows is a multiple
#: of 2^-16 (:func:`row_lots`), exactly as recorded.
ASSIGN_BITS = 16


@dataclass(frozen=True)
class Grouping:
    """A statistic's group: which of the job's readers holds the label, the declared keys (a label among none of
    them, or a null, is ``"other"``: the last group), and whether the group is public (each group released on its
    own rows) or private (the channel releases (group, value) pairs)."""

    reader: int
    keys: tuple[Any, ...]
    public: bool
    #: a private group's cells (the group-histogram channel): ``("bins", lo, hi, K)`` or ``("categories", keys,
    #: other)``; None: the channel takes (group, value) pairs
    cells: tuple[Any, ...] | None = None

    @property
    def count(self) -> int:
        return len(self.keys) + 1


@dataclass(frozen=True)
class PlanJob:
    """What every task of a plan's release shares (sent once): one reader per statistic, then one per group column
    (a piece's columns are read once for all of them), the pieces, each statistic's channel, its tasks' noise keys
    and its grouping, and, when the rows are split among the statistics, each statistic's lots of the rows and the
    key that assigns them."""

    readers: tuple[Reader, ...]
    pieces: tuple[Piece, ...]
    channels: tuple[Channel, ...]
    keys: tuple[tuple[bytes, ...], ...]  # keys[statistic][task]
    clip: bool
    #: a row split: each statistic's lots of the 2^16 draws (:func:`row_lots`); None: every row reports every one
    shares: tuple[int, ...] | None = None
    assign_key: bytes = b""
    groupings: tuple[Grouping | None, ...] = ()
    #: each piece's place for the row split (a series: its file's location and row groups); empty: its index
    places: tuple[str, ...] = ()


def row_lots(shares: Any) -> np.ndarray:
    """Shares of the rows as whole numbers of the 2^16 equally likely draws (largest remainders; at least one each):
    statistic i gets a row with probability ``lots[i] / 2^16``."""
    total = 1 << ASSIGN_BITS
    raw = np.asarray(shares, float) * total / float(np.sum(shares))
    lots = np.maximum(np.floor(raw).astype(np.int64), 1)
    while lots.sum() < total:
        lots[np.argmax(raw - lots)] += 1
    while lots.sum() > total:
        lots[np.argmax(np.where(lots > 1, lots - raw, -np.inf))] -= 1
    return lots


def assign_rows(key: bytes, place: bytes, m: int, lots: tuple[int, ...]) -> np.ndarray:
    """Which statistic each of a piece's ``m`` rows reports to: statistic i with probability ``lots[i] / 2^16``
    (:func:`row_lots`), independently of the data, from a generator keyed by the plan's assignment key and the
    piece's ``place`` — its index in the plan, or, in a series, its file's location and row groups — so a retried
    task, the same plan on another cluster, or the same file read another night, assigns the same rows."""
    table = np.repeat(np.arange(len(lots), dtype=np.uint8 if len(lots) < 256 else np.uint16), lots)
    draws = generator(bind_key(key, b"assign:" + place)).integers(0, 1 << ASSIGN_BITS, m, dtype=np.uint16)
    return table[draws]


def _place(job: PlanJob, piece: Piece) -> bytes:
    return job.places[piece.index].encode() if job.places else b"%d" % piece.index


def _take(values: Any, index: np.ndarray) -> Any:
    return values[index] if isinstance(values, np.ndarray) else values.take(pa.array(index))


def _by(order_of: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """One stable sort of small integers: the rows in group order, and where each group starts."""
    order = np.argsort(order_of, kind="stable")
    return order, np.concatenate([[0], np.cumsum(np.bincount(order_of, minlength=groups))])


def _plan_piece(job: PlanJob, piece: Piece) -> list[Any]:
    """A piece's columns read once, then each statistic's values validated by its channel: all the rows or, when
    the rows are split, the rows assigned to it; for a public group, a list of them per group."""
    columns = read_columns(job.readers, piece)
    rows: list[np.ndarray | None] = [None] * len(job.channels)
    if job.shares is not None:
        order, cuts = _by(assign_rows(job.assign_key, _place(job, piece), piece.num_rows, job.shares),
                          len(job.channels))
        rows = [order[cuts[i]:cuts[i + 1]] for i in range(len(job.channels))]
    labels: dict[int, np.ndarray] = {}
    out: list[Any] = []
    for i, ch in enumerate(job.channels):
        sel = rows[i]
        v = columns[i] if sel is None else _take(columns[i], sel)
        grouping = job.groupings[i] if job.groupings else None
        if grouping is not None and grouping.reader not in labels:
            labels[grouping.reader] = group_index(columns[grouping.reader], grouping.keys)
        g = None if grouping is None else labels[grouping.reader] if sel is None else labels[grouping.reader][sel]
        out.append(prepare_statistic(ch, v, grouping, g, job.clip))
    return out


def prepare_statistic(channel: Channel, values: Any, grouping: Grouping | None, groups: np.ndarray | None,
                      clip: bool) -> Any:
    """One statistic's values validated by its channel, ``(x, clipped)``: as they are; for a public group, a list
    of them per group; for a private group, the (group, value) pairs, or (group, cell) pairs."""
    if grouping is None or groups is None:
        return channel.prepare(values, clip=clip)
    if grouping.public:
        order, cuts = _by(groups, grouping.count)
        return [channel.prepare(_take(values, order[cuts[k]:cuts[k + 1]]), clip=clip) for k in range(grouping.count)]
    if grouping.cells is None:
        return channel.prepare(np.column_stack([groups, np.asarray(values, dtype=np.float64)]), clip=clip)
    k, clipped = cell_index(values, grouping.cells, clip)
    return channel.prepare(np.column_stack([groups, k]))[0], clipped


def cell_index(values: Any, cells: tuple[Any, ...], clip: bool) -> tuple[np.ndarray, int]:
    """Each value's cell among a private group's cells: its bin of ``("bins", lo, hi, K)`` (checked against the
    domain, or clamped with ``clip``), or its place among ``("categories", keys, other)`` (a value among none of
    them is "other", the last cell, or refused without it); and how many values were clamped."""
    from ..channels.base import check_values, grid_index

    if cells[0] == "bins":
        _, lo, hi, k = cells
        x, clipped = check_values(values, (lo, hi), clip)
        return grid_index(x, (lo, hi), k), clipped
    _, keys, other = cells
    idx = group_index(values, keys)
    if not other and len(idx) and int(idx.max()) == len(keys):
        raise InputDataError("the column holds values outside the declared categories (or nulls): list them, or "
                             "give other = true to count them as '__other__'")
    return idx, 0


def _group_key(key: bytes, group: int) -> bytes:
    """A public group's task key: its statistic's, bound to the group's index (worker side)."""
    return hmac.new(key, b"group:%d" % group, hashlib.sha256).digest()


def _concat(parts: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, int]:
    x = parts[0][0] if len(parts) == 1 else np.concatenate([v for v, _ in parts])
    return x, sum(c for _, c in parts)


def plan_sums(task: Any, job: PlanJob) -> dict[str, Any] | TaskError:
    """One task of a plan: its pieces read once, every statistic's noisy sums drawn under its own key (each as
    :func:`ldp_dask.tasks.noisy_sums` draws them for its rows); returns one accumulator per statistic (per public
    group: ``{"groups": [...]}``)."""
    parts = each_piece(job.pieces, task, lambda p: _plan_piece(job, p))
    if isinstance(parts, TaskError):
        return parts
    out: list[Any] = []
    try:
        for i, channel in enumerate(job.channels):
            one = ChannelJob(job.readers[i], (), (), channel, job.clip, "summary")
            key = job.keys[i][task.index]
            if isinstance(parts[0][i], list):  # a public group: each group its own release
                groups = []
                for k in range(len(parts[0][i])):
                    x, clipped = _concat([piece[i][k] for piece in parts])
                    groups.append(release_prepared(x, clipped, one, _group_key(key, k), task.index))
                out.append({"groups": groups})
            else:
                x, clipped = _concat([piece[i] for piece in parts])
                out.append(release_prepared(x, clipped, one, key, task.index))
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(piece_name(job.pieces[task.start]), exc)
    return {"plan": out}


def _combine_one(*accs: dict[str, Any]) -> dict[str, Any]:
    if "groups" in accs[0]:
        return {"groups": [combine_sums(*g) for g in zip(*(a["groups"] for a in accs))]}
    return combine_sums(*accs)


def combine_plan(*accs: dict[str, Any]) -> dict[str, Any]:
    """Combine plan accumulators: statistic by statistic (and group by group), exactly (:func:`combine_sums`)."""
    return {"plan": [_combine_one(*parts) for parts in zip(*(a["plan"] for a in accs))]}


@dataclass(frozen=True)
class PlanBucket:
    """What a bucket of persons' kept rows becomes in a plan with a privacy unit (worker side): every statistic's
    noisy sums of its own field of the rows (:class:`~ldp_dask.reading.Columns`), each under its own key, so that
    one bounding of every person's rows serves the whole plan. A statistic of a private group reads its group's
    index from the field of its group column (:attr:`Grouping.reader`) and releases (group, value) pairs."""

    jobs: tuple[ChannelJob, ...]
    #: per statistic, one key per bucket
    keys: tuple[tuple[bytes, ...], ...]
    groupings: tuple[Grouping | None, ...] = ()

    def __call__(self, values: Any, where: str, index: int, key: bytes | None) -> dict[str, Any] | TaskError:
        accs = []
        for i, job in enumerate(self.jobs):
            x = values[f"f{i}"]
            x = pa.array(x) if job.reader.value_kind == "categorical" else np.ascontiguousarray(x)
            grouping = self.groupings[i] if self.groupings else None
            g = None if grouping is None else np.ascontiguousarray(values[f"f{grouping.reader}"])
            try:
                prepared, clipped = prepare_statistic(job.channel, x, grouping, g, job.clip)
            except InputDataError as exc:
                return error_value(where, exc)
            accs.append(release_prepared(prepared, clipped, job, self.keys[i][index], index))
        return {"plan": accs}
