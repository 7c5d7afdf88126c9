"""A summary file's layout and its validation: the table's optional index columns, the partitions a partitioned
release keeps, and the check of a file's structure against its channel before anything in it is used.

:func:`ldp_dask.summary.read_summary` reads a file's metadata and table and hands them to :func:`checked`; a file
that does not hold what its channel's public parameters say it must (statistics and their indices, partitions
adding up to the totals, finite values) is refused with one line naming what is wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from . import exactsum
from ._validation import InputDataError, LdpDaskError
from .channels import Channel, channel_from_params
from .privacy import epsilon_per_unit

__all__ = ["checked", "Partition", "Member", "PARTITIONS_KEY", "INDEX_COLUMNS", "index_columns", "sum_partitions"]

#: the metadata entry listing a partitioned release's partitions (their sums are the rows with a ``partition``)
PARTITIONS_KEY = "partitions_kept"


@dataclass(frozen=True)
class Member:
    """A file of a partition that holds several (a night of a privacy-unit series: its new files bounded together,
    :mod:`ldp_dask.partitions`): what a later night compares to decide whether the partition can be reused."""

    path: str
    rows: int
    layout: tuple[tuple[int, ...], ...]
    stamp: str
    identity: str = ""

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "rows": int(self.rows), "layout": [list(t) for t in self.layout],
                               "stamp": self.stamp}
        if self.identity:
            out["identity"] = self.identity
        return out


@dataclass(frozen=True, eq=False)
class Partition:
    """One partition of a partitioned release, kept with its summary: a file of the source and its noisy sums.

    Attributes
    ----------
    path : str
        The file, relative to the release's root.
    rows : int
        Its rows (public: the plan's row counts are part of the dataset's structure).
    layout : tuple of tuples
        The row groups each of its tasks read (each task drew its own noise).
    stamp : str
        A keyed digest of the file's footer, size and modification time: an unchanged stamp lets a later
        release reuse the sums without reading the file (:mod:`ldp_dask.partitions`).
    tag : str
        The keyed digest of the content it was computed from (the ledger's re-run rule).
    sums : dict of str to ndarray
        Its released, noisy statistics (the summary's totals are their exact sum, rounded once).
    identity : str
        A keyed digest of the file's Parquet footer alone, wherever the file lies: two partitions with one
        identity hold the same rows (a link or a byte copy), which :func:`ldp_dask.partitions.merge` refuses to
        add twice. Empty in summaries written before it was kept.
    members : tuple of Member
        A night's partition of a privacy-unit series holds the files released together that night (their persons
        bounded once): ``path`` is then its first file's, ``rows`` its reports (k per person), ``layout`` empty;
        each file's own facts are its members'. Empty for a partition of one file.
    """

    path: str
    rows: int
    layout: tuple[tuple[int, ...], ...]
    stamp: str
    tag: str
    sums: dict[str, np.ndarray] = field(repr=False)
    identity: str = ""
    members: tuple[Member, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        """The files it holds, relative to the release's root."""
        return tuple(m.path for m in self.members) if self.members else (self.path,)

    def record(self) -> dict[str, Any]:
        """What the summary's metadata says of it (its sums are rows of the summary's table)."""
        out: dict[str, Any] = {"path": self.path, "rows": int(self.rows), "layout": [list(t) for t in self.layout],
                               "stamp": self.stamp, "tag": self.tag}
        if self.identity:
            out["identity"] = self.identity
        if self.members:
            out["files"] = [m.record() for m in self.members]
        return out


#: The optional columns naming what an index stands for (public: derived from the channel's parameters).
INDEX_COLUMNS = {"bin_low": pa.float64(), "bin_high": pa.float64(), "label": pa.string()}


def index_columns(channel: Any, names: list[str], index: np.ndarray) -> dict[str, pa.Array]:
    """``bin_low``/``bin_high`` or ``label`` per row of the file (null where a statistic's index has none)."""
    meaning = channel.index_columns()
    wanted = sorted({c for cols in meaning.values() for c in cols}, key=list(INDEX_COLUMNS).index)
    stats = np.asarray(names, dtype=object)
    index = np.asarray(index, dtype=np.int64)
    out = {}
    for col in wanted:
        numeric = INDEX_COLUMNS[col] == pa.float64()
        data = np.zeros(len(stats)) if numeric else np.full(len(stats), None, dtype=object)
        valid = np.zeros(len(stats), dtype=bool)
        for stat, cols in meaning.items():
            if cols.get(col) is None:
                continue
            v = np.asarray(cols[col], dtype=np.float64 if numeric else object)
            rows = (stats == stat) & (index < len(v))
            data[rows] = v[index[rows]]
            valid |= rows
        out[col] = pa.array(data, INDEX_COLUMNS[col], mask=~valid)
    return out


def sum_partitions(partitions: Any) -> dict[str, np.ndarray]:
    """The exact sum of partitions' sums, rounded once: a partitioned release's totals, whatever the order."""
    keys = partitions[0].sums.keys()  # one conversion of every partition's values at once, then the exact sum
    return {k: exactsum.to_float(exactsum.add(*exactsum.from_float(np.stack([p.sums[k] for p in partitions]))))
            for k in keys}


def checked(url: str, meta: dict[str, Any],
             table: pa.Table) -> tuple[Channel, dict[str, np.ndarray], tuple[Partition, ...]]:
    """Validate a summary's structure against its channel; returns the channel and the statistics."""
    from .channels import CHANNELS, MEMO_CHANNELS, PLAN_CHANNELS

    def bad(what: str) -> InputDataError:
        return InputDataError(f"{url!r} is not a valid summary: {what}")

    name, params = meta.get("channel"), meta.get("channel_params")
    known = isinstance(name, str) and any(name in reg for reg in (CHANNELS, PLAN_CHANNELS, MEMO_CHANNELS))
    if not known or not isinstance(params, dict):
        raise bad(f"unknown channel {name!r} or parameters that are not an object")
    try:
        channel = channel_from_params(str(name), params)
    except (LdpDaskError, TypeError, ValueError) as exc:
        raise bad(f"its {name} parameters are invalid ({' '.join(str(exc).split())})") from None
    n = meta.get("n")
    group = meta.get("group")
    empty_ok = isinstance(group, dict) and group.get("kind") == "public"  # a declared key with no rows tonight
    if not (isinstance(n, int) and not isinstance(n, bool) and (0 if empty_ok else 1) <= n <= 1 << 53):
        raise bad(f"n must be an integer in [{0 if empty_ok else 1}, 2^53], got {n!r}")
    if meta.get("epsilon") != channel.epsilon:
        raise bad(f"its ε {meta.get('epsilon')!r} disagrees with its channel's {channel.epsilon!r}")
    domain = getattr(channel, "domain", None)
    if meta.get("domain") not in (None, list(domain) if domain is not None else None):
        raise bad(f"its domain {meta.get('domain')!r} disagrees with its channel's {list(domain or ())!r}")
    k = meta.get("max_contributions", 1)
    if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 1_000_000):
        raise bad(f"max_contributions must be an integer in [1, 10^6], got {k!r}")
    if "epsilon_per_unit" in meta:
        per_unit = epsilon_per_unit(channel, k)
        if not (isinstance(meta["epsilon_per_unit"], (int, float))
                and math.isclose(meta["epsilon_per_unit"], per_unit, rel_tol=1e-9)):
            raise bad(f"its ε per unit {meta['epsilon_per_unit']!r} disagrees with {k} × the channel's ε")
    if meta.get("mode", "summary") not in ("summary", "rows"):
        raise bad(f"unknown mode {meta.get('mode')!r}")
    extra = set(table.column_names) - {"statistic", "index", "value", "partition"}
    if not {"statistic", "index", "value"} <= set(table.column_names) or not extra <= set(INDEX_COLUMNS):
        raise bad(f"columns {table.column_names}, expected statistic, index, value (and {', '.join(INDEX_COLUMNS)}, "
                  "partition)")
    stat = np.asarray(table.column("statistic").to_pylist(), dtype=object)
    index = table.column("index").to_numpy()
    if extra:
        expected_cols = index_columns(channel, stat.tolist(), index)
        if set(expected_cols) != extra or any(not table.column(c).combine_chunks().equals(expected_cols[c])
                                              for c in extra):
            raise bad("its bin or label columns disagree with the channel's public parameters")
    value = table.column("value").to_numpy()
    part = (table.column("partition").fill_null(-1).to_numpy().astype(np.int64) if "partition" in table.column_names
            else np.full(len(stat), -1))
    expected = {k: int(np.size(v)) for k, v in channel.row_sums(np.zeros((1, channel.view_dim))).items()}
    if not np.all(np.isfinite(value)):
        raise bad("it holds values that are not finite")
    total = part == -1
    sums = _statistics(stat[total], index[total], value[total], expected, bad, "")
    if "group_n" in sums:
        g = sums["group_n"]
        if np.any(g < 0) or np.any(g != np.round(g)) or int(g.sum()) != n:
            raise bad("its group sizes must be non-negative integers adding up to n")
    partitions = _partitions(meta.get(PARTITIONS_KEY), stat, index, value, part, expected, bad, 0 if empty_ok else 1)
    if partitions:
        if sum(p.rows for p in partitions) != n:
            raise bad("its partitions' rows do not add up to n")
        if not all(np.array_equal(sums[k], v) for k, v in sum_partitions(partitions).items()):
            raise bad("its totals are not the sum of its partitions' sums")
    return channel, sums, partitions


def _statistics(stat: np.ndarray, index: np.ndarray, value: np.ndarray, expected: dict[str, int], bad: Any,
                where: str) -> dict[str, np.ndarray]:
    """The statistics of one block of rows (the totals, or a partition's), each with its complete index."""
    if set(stat.tolist()) != set(expected):
        raise bad(f"{where}statistics {sorted(set(stat.tolist()))}, expected {sorted(expected)} for this channel")
    sums: dict[str, np.ndarray] = {}
    for key, size in expected.items():
        mask = stat == key
        idx = index[mask]
        if len(idx) != size or not np.array_equal(np.sort(idx), np.arange(size)):
            raise bad(f"{where}statistic {key!r} must have exactly the indices 0..{size - 1} once each (the "
                      f"channel's parameters give {size} values; found {len(idx)})")
        out = np.empty(size)
        out[idx] = value[mask]
        sums[key] = out
    return sums


def _partitions(records: Any, stat: np.ndarray, index: np.ndarray, value: np.ndarray, part: np.ndarray,
                expected: dict[str, int], bad: Any, least: int = 1) -> tuple[Partition, ...]:
    """A partitioned release's partitions: the metadata's records with their rows of the table (at least ``least``
    each: 0 in a declared public group's summary, whose key may have no row in a file)."""
    count = int(part.max()) + 1 if len(part) else 0
    if records is None and count == 0:
        return ()
    if not isinstance(records, list) or len(records) != count or np.any(part < -1):
        raise bad(f"its {PARTITIONS_KEY!r} records do not match its partition column")
    out = []
    for i, r in enumerate(records):
        ok = (isinstance(r, dict) and isinstance(r.get("path"), str) and r["path"]
              and isinstance(r.get("rows"), int) and not isinstance(r["rows"], bool) and r["rows"] >= least
              and isinstance(r.get("layout"), list) and all(isinstance(t, list) and all(
                  isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in t) for t in r["layout"])
              and all(isinstance(r.get(k), str) and _is_hex(r[k]) for k in ("stamp", "tag"))
              and (isinstance(r.get("identity", ""), str) and (not r.get("identity") or _is_hex(r["identity"]))))
        members = r.get("files", []) if isinstance(r, dict) else []
        ok = ok and isinstance(members, list) and all(_member_ok(m) for m in members)
        if not ok:
            raise bad(f"its partition record {i} is malformed (path, rows, layout, stamp, tag expected)")
        if members and members[0]["path"] != r["path"]:
            raise bad(f"its partition record {i} names {r['path']!r} but holds {members[0]['path']!r} first")
        mine = part == i
        out.append(Partition(r["path"], r["rows"], tuple(tuple(t) for t in r["layout"]), r["stamp"], r["tag"],
                             _statistics(stat[mine], index[mine], value[mine], expected, bad, f"partition {i}: "),
                             r.get("identity", ""),
                             tuple(Member(m["path"], m["rows"], tuple(tuple(t) for t in m["layout"]), m["stamp"],
                                          m.get("identity", "")) for m in members)))
    paths = [x for p in out for x in p.paths]
    if len(set(paths)) != len(paths):
        raise bad("it lists a partition (or a file of one) twice")
    return tuple(out)


def _member_ok(m: Any) -> bool:
    """A file record of a night's partition: path, rows, layout, stamp (identity optional)."""
    return (isinstance(m, dict) and isinstance(m.get("path"), str) and bool(m["path"])
            and isinstance(m.get("rows"), int) and not isinstance(m["rows"], bool) and m["rows"] >= 0
            and isinstance(m.get("layout"), list) and all(isinstance(t, list) and all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in t) for t in m["layout"])
            and isinstance(m.get("stamp"), str) and _is_hex(m["stamp"])
            and isinstance(m.get("identity", ""), str) and (not m.get("identity") or _is_hex(m["identity"])))


def _is_hex(text: str) -> bool:
    return 0 < len(text) <= 128 and all(c in "0123456789abcdef" for c in text)
