"""The :class:`Summary` — reduced private statistics — and its Parquet file.

A summary file is one Parquet file holding a long table

    statistic: string   (e.g. "sum")
    index:     int32    (coordinate)
    value:     float64  (the released, noisy value)

and key-value metadata under ``ldp_dask.summary`` (JSON): format version,
channel name and parameters, ε requested and spent, n, domain, dataset
fingerprint (structural only), mode, key identifier and key source, creation
time, package version. Reading it back rebuilds the channel.

Nothing exact about the raw data is in a summary. The number of clipped
values, an exact count, is kept in memory only (``Summary.n_clipped``) for
the operator and is never serialised.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._io import atomic_write
from ._version import __version__
from .outputs import Described, Description
from ._validation import InputDataError
from .channels import Channel, channel_from_params

__all__ = ["Summary", "read_summary", "is_summary_file", "FORMAT_VERSION", "METADATA_KEY"]

FORMAT_VERSION = 1
METADATA_KEY = b"ldp_dask.summary"


@dataclass(frozen=True, eq=False)
class Summary(Described):
    """Reduced, privatized statistics of one column under one channel.

    Attributes
    ----------
    channel : Channel
        The channel that produced the statistics (with its ε and parameters).
    n : int
        Number of rows (public).
    sums : dict of str to ndarray
        Released statistics, e.g. ``{"sum": S}`` with S = Σ_i Z_i.
    metadata : dict
        Provenance: column, fingerprint, mode, key_id, key_source, ...
    n_clipped : int or None
        Exact number of clipped values when clipping was asked (operator-only;
        never written to disk).
    content_tag : str or None
        Keyed digest of the content the release was computed from, for the
        ledger's re-run rule (operator-only; never written to disk).
    """

    channel: Channel
    n: int
    sums: dict[str, np.ndarray]
    metadata: dict[str, Any]
    n_clipped: int | None = field(default=None)
    content_tag: str | None = field(default=None, repr=False)

    @property
    def epsilon(self) -> float:
        return self.channel.epsilon

    def __repr__(self) -> str:
        return (
            f"Summary(channel={self.channel!r}, n={self.n}, "
            f"statistics={sorted(self.sums)}, mode={self.metadata.get('mode')!r})"
        )

    @property
    def privacy_unit(self) -> str:
        """What ε is counted per: ``"row"``, or the column naming a person."""
        return str(self.metadata.get("privacy_unit", "row"))

    @property
    def epsilon_per_unit(self) -> float:
        """ε per privacy unit: the per-row ε spent times the rows a person may contribute."""
        k = int(self.metadata.get("max_contributions", 1))
        return float(self.metadata.get("epsilon_per_unit", k * max(self.channel.epsilon,
                                                                       self.channel.epsilon_spent())))

    def privacy_line(self) -> str:
        """E.g. ``privacy unit: row, ε 1 per row`` or ``privacy unit: user, ε 1 per user (≤ 3 rows each at ε 0.333)``."""
        unit, eps = self.privacy_unit, self.epsilon_per_unit
        if unit == "row":
            return f"privacy unit: row, ε {eps:g} per row"
        k = int(self.metadata.get("max_contributions", 1))
        return (f"privacy unit: {unit}, ε {eps:g} per {unit} (at most {k} row{'s' if k > 1 else ''} each, "
                f"ε {self.channel.epsilon_spent():.4g} per row)")

    def same_release(self, other: "Summary") -> bool:
        """True when both hold the same channel, n and bit-identical statistics."""
        return (
            self.channel == other.channel
            and self.n == other.n
            and self.sums.keys() == other.sums.keys()
            and all(
                np.array_equal(self.sums[k].view(np.int64), other.sums[k].view(np.int64))
                for k in self.sums
            )
        )

    def describe(self) -> Description:
        """What was released and what it cost: the privacy parameters of the release, one row each."""
        ch, m = self.channel, self.metadata
        params = ch.params()
        unit = self.privacy_unit
        facts = [("privacy model", "local differential privacy: each row privatized on its own before any sum"),
                 ("privacy unit", unit if unit == "row" else
                  f"{unit} (at most {m.get('max_contributions', 1)} rows per {unit}, chosen at random)"),
                 (f"ε per {unit}", f"{self.epsilon_per_unit:g}"),
                 ("channel", ch.name), ("ε per row (requested / spent)", f"{ch.epsilon:g} / {ch.epsilon_spent():g}"),
                 ("rows (n)", f"{self.n:,}")]
        if "domain" in params:
            facts.append(("public domain", f"[{params['domain'][0]:g}, {params['domain'][1]:g}]"))
        # the channel's own options, as its module declares them
        facts += [(opt.name, _show(params[opt.name])) for opt in ch.options if opt.name in params]
        facts += [("mode", str(m.get("mode", "?"))),
                  ("column / source", f"{m.get('column', '?')} of {m.get('source', '?')}"),
                  ("key id (source)", f"{m.get('key_id', '?')} ({m.get('key_source', '?')})")]
        if "created_at" in m:
            facts.append(("released at", str(m["created_at"])))
        facts.append(("ldp_dask version", str(m.get("package_version", __version__))))
        return Description(title=f"Local-DP release of {m.get('column', 'a column')}",
                           headline=f"{ch.name} channel, ε = {self.epsilon_per_unit:g} per {unit}, n = {self.n:,}",
                           facts=tuple(facts))

    # --- file format ---------------------------------------------------------------
    def file_metadata(self) -> dict[str, Any]:
        meta = {
            "format_version": FORMAT_VERSION,
            "channel": self.channel.name,
            "channel_params": self.channel.params(),
            "epsilon": self.channel.epsilon,
            "epsilon_spent": self.channel.epsilon_spent(),
            "n": int(self.n),
            "domain": list(getattr(self.channel, "domain", ())) or None,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "package_version": __version__,
        }
        meta.update({k: v for k, v in self.metadata.items() if k not in meta})
        return meta

    def to_table(self) -> pa.Table:
        names, idx, vals = [], [], []
        for k in sorted(self.sums):
            v = np.asarray(self.sums[k], dtype=np.float64).ravel()
            names += [k] * len(v)
            idx.append(np.arange(len(v), dtype=np.int32))
            vals.append(v)
        table = pa.table(
            {
                "statistic": pa.array(names, pa.string()),
                "index": pa.array(np.concatenate(idx), pa.int32()),
                "value": pa.array(np.concatenate(vals), pa.float64()),
            }
        )
        meta = json.dumps(self.file_metadata(), sort_keys=True).encode()
        return table.replace_schema_metadata({METADATA_KEY: meta})

    def write_parquet(self, fh: Any) -> None:
        """Write the summary file's bytes to a binary file object."""
        pq.write_table(self.to_table(), fh)

    def to_parquet(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        """Write the summary atomically to ``path`` (local path or fsspec URL)."""
        return atomic_write(path, self.write_parquet, overwrite=overwrite)


def _show(value: Any) -> str:
    if isinstance(value, list) and len(value) > 12:
        return json.dumps(value[:12], default=str)[:-1] + f", … ({len(value):,} in all)]"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def is_summary_file(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a single Parquet file carrying ldp_dask summary metadata (footer only)."""
    url = os.fspath(path)
    try:
        fs, p = fsspec.core.url_to_fs(url)
        if not fs.isfile(p):
            return False
        with fs.open(p, "rb") as fh:
            meta = pq.ParquetFile(fh).schema_arrow.metadata or {}
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError, ValueError):
        return False
    return METADATA_KEY in meta


def read_summary(path: str | os.PathLike[str] | Summary) -> Summary:
    """Read a summary file written by :meth:`Summary.to_parquet` (or pass one through)."""
    if isinstance(path, Summary):
        return path
    url = os.fspath(path)
    fs, p = fsspec.core.url_to_fs(url)
    if not fs.exists(p):
        raise InputDataError(f"no such summary file: {url!r}")
    try:
        with fs.open(p, "rb") as fh:
            # use_threads=False: pyarrow 26's thread pool can abort the process at
            # interpreter exit ("terminate called without an active exception")
            table = pq.read_table(io.BytesIO(fh.read()), use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise InputDataError(f"{url!r} is not a readable Parquet file ({exc})") from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise InputDataError(f"{url!r} is not an ldp_dask summary (no {METADATA_KEY.decode()!r} metadata)")
    meta = json.loads(raw)
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputDataError(
            f"{url!r} has summary format version {meta.get('format_version')!r}; "
            f"this ldp_dask reads version {FORMAT_VERSION}"
        )
    channel = channel_from_params(meta["channel"], meta["channel_params"])
    stat = table.column("statistic").to_pylist()
    index = table.column("index").to_numpy()
    value = table.column("value").to_numpy()
    sums: dict[str, np.ndarray] = {}
    for k in dict.fromkeys(stat):
        mask = np.array([s == k for s in stat])
        out = np.empty(int(mask.sum()))
        out[index[mask]] = value[mask]
        sums[k] = out
    core = {"format_version", "channel", "channel_params", "epsilon", "n", "domain"}
    extra = {k: v for k, v in meta.items() if k not in core}
    return Summary(channel, int(meta["n"]), sums, extra)
