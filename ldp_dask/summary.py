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

import dataclasses
import hashlib
import hmac
import io
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import exactsum
from ._io import atomic_write
from ._validation import InputDataError
from ._version import __version__
from .amplification import DEFAULT_DELTA, SUMMARY_DELTA, central_line, central_statement
from .channels import Channel
from .outputs import Described, Description
from .privacy import epsilon_per_unit
from .receipts import Receipted
from .summary_format import PARTITIONS_KEY, Partition, checked, index_columns, sum_partitions

__all__ = ["Summary", "Partition", "read_summary", "verify_summary", "is_summary_file", "summary_mac_key",
           "sum_partitions", "summary_writer", "summary_of", "FORMAT_VERSION", "METADATA_KEY"]

FORMAT_VERSION = 1
METADATA_KEY = b"ldp_dask.summary"
@dataclass(frozen=True, eq=False)
class Summary(Described, Receipted):
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
    integrity : str
        Whether the summary is known to be as released: ``"released here"``
        (computed in this process), ``"verified"`` (read from a file whose MAC
        matched under the release key), or ``"not verified: <why>"``.
    partitions : tuple of Partition
        A partitioned release's per-file noisy sums, kept so that a later
        release reuses them (``since=``), or merges and windows them
        (:mod:`ldp_dask.partitions`); empty otherwise.
    reading : (float, str) or None
        The δ (and its label) of the reading this summary is shown in, e.g.
        a plan's pages: its central statement is restated at it
        (:meth:`stated_central`); None: its receipt's, else its own.
    """

    channel: Channel
    n: int
    sums: dict[str, np.ndarray]
    metadata: dict[str, Any]
    n_clipped: int | None = field(default=None)
    content_tag: str | None = field(default=None, repr=False)
    integrity: str = field(default="released here", repr=False)
    partitions: tuple[Partition, ...] = field(default=(), repr=False)
    reading: tuple[float, str] | None = field(default=None, repr=False)

    @property
    def verified(self) -> bool:
        """True when computed here or read from a file whose MAC matched."""
        return not self.integrity.startswith("not verified")

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
        return float(self.metadata.get("epsilon_per_unit", epsilon_per_unit(self.channel, k)))

    @property
    def central(self) -> dict[str, Any] | None:
        """The central (ε, δ) the published values also satisfy, for the same unit (:mod:`ldp_dask.amplification`,
        docs/privacy.md "The central guarantee"), computed from its public facts: the channel, n, the unit, the
        partitions kept. None in rows mode and for longitudinal releases. Never copied from metadata, which a merge
        or a later night may carry over from another summary (the computations are cached: milliseconds); the
        file records the same value."""
        return self._central(self.unit_partitions)

    def with_metadata(self, extra: dict[str, Any]) -> Summary:
        """This summary with ``extra`` added to its metadata (the release path records its ledger entry so)."""
        return dataclasses.replace(self, metadata={**self.metadata, **extra})

    def central_at(self, delta: float) -> dict[str, Any] | None:
        """:attr:`central` restated at another ``delta`` (the same release: a larger δ gives a smaller ε)."""
        return self._central(self.unit_partitions, delta)

    def stated_central(self) -> tuple[dict[str, Any] | None, str]:
        """The central statement a reading of this summary shows, and how its δ is labelled: at :attr:`reading`'s
        δ, else at the δ of its dataset's composition when it carries a release's receipt (one δ per reading), else
        at its own."""
        if self.reading is not None:
            return self.central_at(self.reading[0]), self.reading[1]
        spend = self.receipt.central if self.receipt is not None else None
        if spend is None:
            return self.central, SUMMARY_DELTA
        return self.central_at(float(spend["delta"])), str(spend.get("whose", "the dataset's δ"))

    @property
    def central_per_partition(self) -> dict[str, Any] | None:
        """:attr:`central` of one partition alone: what the ledger composes, one copy per partition released."""
        return self._central(1)

    @property
    def unit_partitions(self) -> int:
        """How many of the published partitions one unit may hold reports in: every partition of a privacy-unit
        summary over files (each file is bounded on its own, and a person may be in every file), else 1 (a row
        lies in one partition)."""
        return len(self.partitions) if self.partitions and self.privacy_unit != "row" else 1

    def _central(self, partitions: int, delta: float | None = None) -> dict[str, Any] | None:
        m = self.metadata
        if delta is None:
            delta = m.get("central_delta", DEFAULT_DELTA)
        return central_statement(self.channel, self.n, mode=str(m.get("mode", "summary")), unit=self.privacy_unit,
                                 reports_per_unit=int(m.get("max_contributions", 1)),
                                 among=min((p.rows for p in self.partitions), default=None),
                                 longitudinal="longitudinal" in m,
                                 delta=float(delta) if isinstance(delta, (int, float)) else DEFAULT_DELTA,
                                 partitions=partitions)

    def privacy_line(self) -> str:
        """E.g. ``privacy unit: row, ε 1 per row`` or ``privacy unit: user, ε 1 per user (3 reports each, ε 0.3333
        per report; estimates weigh each user equally)``."""
        unit, eps = self.privacy_unit, self.epsilon_per_unit
        if unit == "row":
            return f"privacy unit: row, ε {eps:g} per row"
        k = int(self.metadata.get("max_contributions", 1))
        return (f"privacy unit: {unit}, ε {eps:g} per {unit} ({k} report{'s' if k > 1 else ''} each, "
                f"ε {self.channel.epsilon_spent():.4g} per report; estimates weigh each {unit} equally)")

    def same_release(self, other: Summary) -> bool:
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
                  f"{unit} ({m.get('max_contributions', 1)} reports per {unit}, from rows chosen at random)"),
                 ("population estimated", "rows" if unit == "row" else f"each {unit} weighted equally"),
                 (f"ε per {unit}", f"{self.epsilon_per_unit:g}"),
                 ("channel", ch.name), ("ε per row (requested / spent)", f"{ch.epsilon:g} / {ch.epsilon_spent():g}"),
                 ("rows (n)", f"{self.n:,}"), ("central guarantee", central_line(*self.stated_central()))]
        if "domain" in params:
            facts.append(("public domain", f"[{params['domain'][0]:g}, {params['domain'][1]:g}]"))
        # the channel's own options, as its module declares them
        facts += [(opt.name, _show(params[opt.name])) for opt in ch.options if opt.name in params]
        facts += [("mode", str(m.get("mode", "?"))),
                  ("column / source", f"{m.get('column', '?')} of {m.get('source', '?')}"),
                  ("key id (source)", f"{m.get('key_id', '?')} ({m.get('key_source', '?')})")]
        if "ledger" in m:
            facts.append(("budget ledger", str(m["ledger"])))
        if self.partitions:
            read, reused = m.get("partitions_read"), m.get("partitions_reused")
            how = f" ({read} read, {reused} reused without reading them)" if read is not None else ""
            per = "one per file" if self.privacy_unit == "row" else "one per night: its new files, persons bounded once"
            facts.append((f"partitions kept ({per})", f"{len(self.partitions)}{how}"))
        if "window_days" in m:
            facts.append(("window", f"the last {m['window_days']} days"))
        if "created_at" in m:
            facts.append(("released at", str(m["created_at"])))
        facts.append(("ldp_dask version", str(m.get("package_version", __version__))))
        facts.append(("integrity", self.integrity))
        return Description(title=f"Local-DP release of {m.get('column', 'a column')}",
                           headline=f"{ch.name} channel, ε = {self.epsilon_per_unit:g} per {unit}, n = {self.n:,}",
                           facts=tuple(facts))

    def release_facts(self) -> dict[str, Any]:
        """What the release published and what it cost, public facts only, as one mapping: what ``privatize --json``
        prints and what the Prefect flows return and show (one set of facts, not one per face)."""
        ch, m, r = self.channel, self.metadata, self.receipt
        charged = r.partitions[0] if r is not None and r.partitions else None
        partitions = None if not self.partitions else {"read": m.get("partitions_read"),
                                                      "reused": m.get("partitions_reused"), "charged": charged}
        return {"summary": self.written.get("summary"), "channel": ch.name, "params": ch.params(), "n": self.n,
                "epsilon": ch.epsilon, "epsilon_spent": ch.epsilon_spent(), "mode": m.get("mode", "summary"),
                "key_id": m.get("key_id"), "key_source": m.get("key_source"), "reproducible": m.get("reproducible"),
                "rows_out": self.written.get("rows"), "privacy_unit": self.privacy_unit,
                "epsilon_per_unit": self.epsilon_per_unit, "choice": m.get("choice"), "partitions": partitions,
                "partitions_read": m.get("partitions_read"), "partitions_reused": m.get("partitions_reused"),
                "partitions_charged": charged,
                "epsilon_charged": r.epsilon if r is not None and r.ledger else None,
                "longitudinal": m.get("longitudinal"), "spend": dict(r.spend) if r is not None and r.spend else None,
                "central": self.central}

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
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "package_version": __version__,
        }
        meta.update({k: v for k, v in self.metadata.items() if k not in meta})
        if self.partitions:
            meta[PARTITIONS_KEY] = [p.record() for p in self.partitions]
        meta["central"] = self.central
        return meta

    def to_table(self, mac_key: bytes | None = None) -> pa.Table:
        """The summary as a table; with ``mac_key`` its metadata carries an HMAC of everything in the file.

        A partitioned release adds a ``partition`` column: null on the
        totals' rows, the partition's number on the rows of its sums.
        """
        blocks = [(None, self.sums)] + [(i, p.sums) for i, p in enumerate(self.partitions)]
        names, idx, vals, part = [], [], [], []
        for number, sums in blocks:
            for k in sorted(sums):
                v = np.asarray(sums[k], dtype=np.float64).ravel()
                names += [k] * len(v)
                idx.append(np.arange(len(v), dtype=np.int32))
                vals.append(v)
                part += [number] * len(v)
        columns = {
            "statistic": pa.array(names, pa.string()),
            "index": pa.array(np.concatenate(idx), pa.int32()),
            "value": pa.array(np.concatenate(vals), pa.float64()),
            **index_columns(self.channel, names, np.concatenate(idx)),
        }
        if self.partitions:
            columns["partition"] = pa.array(part, pa.int32())
        table = pa.table(columns)
        meta = self.file_metadata()
        if mac_key is not None:
            meta["mac"] = _mac(mac_key, meta, table)
        return table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})

    def write_parquet(self, fh: Any, mac_key: bytes | None = None) -> None:
        """Write the summary file's bytes to a binary file object (with an HMAC under ``mac_key``)."""
        pq.write_table(self.to_table(mac_key), fh)

    def to_parquet(self, path: str | os.PathLike[str], overwrite: bool = False, key: Any = None) -> str:
        """Write the summary atomically to ``path`` (local path or fsspec URL).

        With ``key`` (the release's :class:`~ldp_dask.noise.Secret`) the file
        carries an HMAC that :func:`verify_summary` checks.
        """
        mac_key = summary_mac_key(key) if key is not None else None
        return atomic_write(path, lambda fh: self.write_parquet(fh, mac_key), overwrite=overwrite)


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


def summary_mac_key(secret: Any) -> bytes:
    """The key of summary MACs, derived from the release key (never the key itself)."""
    from .noise import resolve_secret

    sec = resolve_secret(secret) if not hasattr(secret, "key") else secret
    return hmac.new(sec.key, b"ldp_dask/summary-mac/v1", hashlib.sha256).digest()


def _mac(mac_key: bytes, meta: dict[str, Any], table: pa.Table) -> str:
    """HMAC-SHA256 over the canonical metadata (without the MAC) and every (statistic, index, value)."""
    h = hmac.new(mac_key, json.dumps({k: v for k, v in meta.items() if k != "mac"}, sort_keys=True,
                                     separators=(",", ":"), default=str).encode(), hashlib.sha256)
    h.update(json.dumps(table.column("statistic").to_pylist()).encode())
    h.update(np.ascontiguousarray(table.column("index").to_numpy(), dtype="<i4").tobytes())
    h.update(np.ascontiguousarray(table.column("value").to_numpy(), dtype="<f8").tobytes())
    if "partition" in table.column_names:
        h.update(np.ascontiguousarray(table.column("partition").fill_null(-1).to_numpy(), dtype="<i4").tobytes())
    return h.hexdigest()


def _key_at_hand(key: Any) -> Any:
    """The key to check MACs with: the one given, else one configured in the environment (never a random one)."""
    from .noise import resolve_secret

    if key is not None:
        return resolve_secret(key) if not hasattr(key, "key") else key
    sec = resolve_secret()
    return sec if sec.source != "random" else None



def summary_of(channel: Channel, acc: dict[str, Any], metadata: dict[str, Any], clip: bool) -> Summary:
    """The summary of a release's reduced accumulator (its exact noisy sums rounded once; the clipped count only
    when clipping was asked, the keyed content tag for the ledger)."""
    return Summary(channel, int(acc["n"]), {k: exactsum.to_float(v) for k, v in acc["stats"].items()}, metadata,
                   n_clipped=int(acc["clipped"]) if clip else None, content_tag=f"{acc['tag']:064x}")

def read_summary(path: str | os.PathLike[str] | Summary, key: Any = None, *,
                 allow_unverified: bool = False) -> Summary:
    """Read and check a summary file written by :meth:`Summary.to_parquet` (or pass one through).

    The file's structure is validated (one clear :class:`InputDataError`
    otherwise): the channel and its parameters, n > 0, every statistic with
    the channel's length and a complete index, finite values, consistent
    privacy parameters. Its MAC is then checked under ``key`` or the key the
    environment configures (``LDP_DASK_SECRET``, ``LDP_DASK_SECRET_FILE``): a
    mismatch is an error. With a key at hand, a file that carries no MAC (it
    was stripped, or written unsigned) or names another key id (it was
    edited, or released under another key) is refused too, unless
    ``allow_unverified=True`` (``--allow-unverified``): it is then read and
    marked ``integrity="not verified: …"``, which estimates and reports
    show. With no key at hand nothing can be checked: the summary is read,
    marked "not verified".
    """
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
    try:
        meta = json.loads(raw)
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise InputDataError(f"{url!r}: its summary metadata is not a JSON object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputDataError(
            f"{url!r} has summary format version {meta.get('format_version')!r}; "
            f"this ldp_dask reads version {FORMAT_VERSION}"
        )
    channel, sums, partitions = checked(url, meta, table)
    integrity = _integrity(url, meta, table, key, allow_unverified)
    core = {"format_version", "channel", "channel_params", "epsilon", "n", "domain", "mac", PARTITIONS_KEY}
    extra = {k: v for k, v in meta.items() if k not in core}
    return Summary(channel, int(meta["n"]), sums, extra, integrity=integrity, partitions=partitions)


def _integrity(url: str, meta: dict[str, Any], table: pa.Table, key: Any, allow_unverified: bool = False) -> str:
    sec = _key_at_hand(key)
    if "mac" not in meta:
        why = "the file carries no MAC"
    elif sec is None:
        return "not verified: no key at hand to check its MAC (set LDP_DASK_SECRET or LDP_DASK_SECRET_FILE)"
    elif sec.key_id != meta.get("key_id"):
        why = f"released under key id {meta.get('key_id')}, the key at hand is {sec.key_id}"
    else:
        why = ""
    if why:
        if sec is not None and not allow_unverified:  # a key to check with, and nothing it can check: refused
            raise InputDataError(f"{url!r} cannot be verified with the key at hand (key id {sec.key_id}): {why}. "
                                 "It may have been altered; to use it unverified anyway, pass allow_unverified=True "
                                 "(--allow-unverified)")
        return f"not verified: {why}"
    if not hmac.compare_digest(str(meta["mac"]), _mac(summary_mac_key(sec), meta, table)):
        raise InputDataError(f"{url!r} was modified after its release: its MAC does not match its content under "
                             f"the release key (key id {sec.key_id})")
    return "verified"


def verify_summary(path: str | os.PathLike[str], key: Any = None) -> Summary:
    """Read ``path`` and require its MAC to match under ``key`` (or the environment's key).

    Raises
    ------
    InputDataError
        Invalid structure, a MAC that does not match, no MAC, or no key to check it with.
    """
    s = read_summary(path, key)
    if not s.verified:
        raise InputDataError(f"{os.fspath(path)!r}: {s.integrity}")
    return s


def summary_writer(secret: Any) -> Any:
    """What stages a release's summary file among its outputs (``outputs.write("summary", ...)``), signed with an
    HMAC under a key derived from the release key (``ldp-dask verify``): the one writer of every release path."""
    mac = summary_mac_key(secret)

    def write(summary: Summary, outputs: Any) -> None:
        if "summary" in outputs:
            outputs.write("summary", lambda fh: summary.write_parquet(fh, mac))

    return write
