"""Longitudinal releases: the same persons every night, each repeating its memoized report while its state holds.

A longitudinal release is a privacy-unit release (:mod:`ldp_dask.units`: one report per person) whose channel is
memoized (:mod:`ldp_dask.channels.memo`): a person's report is a keyed function of the series' *memo key*, the
person and the state of their value. The memo key is derived on the driver from the secret and the series'
context — the column, the channel and its parameters, the privacy unit; not the night's data — so that it is the
same every night (the root is in it too: a moved table starts a new series), and the ledger counts each person's
distinct reports by their digests
(:mod:`ldp_dask.ledger.memos`). The instantaneous layer is drawn under per-bucket keys that name the *night*
(:func:`night_keys`): a night on which nobody changes state still draws a fresh layer, so it is a night of its own,
never a bit-identical repeat of the last one; only a re-run of the same night with the same reports is.

The pipeline (:func:`ldp_dask.pipeline.privatize`) runs :func:`ldp_dask.persons.map_units` with a
:class:`~ldp_dask.tasks.MemoRelease` handler under :func:`memo_key` and hands the digest pairs to the release path
(:func:`memo_update`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
from collections.abc import Mapping
from typing import Any

from ._validation import LdpDaskError
from .channels import Channel, Memoized
from .ledger.memos import MemoUpdate
from .noise import Secret, _canonical, keyed_digest, partition_base_keys
from .options import RunOptions, tonight
from .source import Dataset
from .summary import Summary

__all__ = ["series_context", "series_root", "memo_key", "series_id", "check_longitudinal", "longitudinal_metadata", "memo_update",
           "with_night", "night_keys", "capped_series"]


def with_night(options: RunOptions) -> RunOptions:
    """``options`` with its night resolved once on the driver (today's UTC date when none is given), so that the
    ledger's record and the layer's keys name the same night even across midnight."""
    return options if options.night is not None else dataclasses.replace(options, night=tonight())


def night_keys(secret: Secret, context: Mapping[str, Any], night: str, count: int) -> list[bytes]:
    """The buckets' base keys of one night, ``HMAC(secret, context ‖ night ‖ bucket)`` (driver side).

    The instantaneous layer of a bucket is drawn from its key bound to the digest of the bucket's memoized sums
    (:class:`~ldp_dask.tasks.MemoRelease`). Without the night in the key, a night whose memoized sums equal an
    earlier night's would redraw that night's layer bit for bit: the repeat itself would tell that nobody changed
    state, which the layer's guarantee (N·ε_bits against any other history) forbids."""
    return partition_base_keys(secret, {**context, "night": night}, count)


def series_context(dataset: Dataset, channel: Channel, root: str | None = None) -> dict[str, Any]:
    """What a series is: its root (:func:`series_root`), the column, the memoized channel with its parameters, the
    privacy unit. The root is in it so that two tables whose persons share ids never share reports (nor the
    ledger's count of them); a table moved to another root starts a new series, charged anew."""
    return {"v": 1, "root": dataset.root if root is None else root, "column": dataset.column,
            "channel": channel.name, "params": channel.params(), "unit": dataset.unit}


def series_root(dataset: Dataset, options: RunOptions) -> str:
    """The root a longitudinal series is keyed by: the innermost dataset declared in the run's ledger, with the
    same privacy unit, that holds the release's root — so that a table's daily snapshots written as partitions
    (``table/date=2026-01-01/``, ``table/date=2026-01-02/``, …) and released one by one continue one series of
    the declared dataset — else the release's own root."""
    from .ledger import open_ledger
    from .ledger.budget import overlaps

    ledger = open_ledger(options.ledger)
    if ledger is None:
        return dataset.root
    mine = dataset.root.rstrip("/")
    holding = [str(d["root"]).rstrip("/") for d in ledger.datasets()
               if d["privacy_unit"] == dataset.unit and overlaps(str(d["root"]), mine)
               and (mine == str(d["root"]).rstrip("/") or mine.startswith(str(d["root"]).rstrip("/") + "/"))]
    return max(holding, key=len) if holding else dataset.root


def memo_key(secret: Secret, context: dict[str, Any]) -> int:
    """The series' 128-bit memo key, ``HMAC(secret, "memo" ‖ context)`` (driver side; sent to the workers, never
    the secret)."""
    d = hmac.new(secret.key, b"ldp_dask/memo/v1|" + _canonical(context), hashlib.sha256).digest()
    return int.from_bytes(d[:16], "little")


def series_id(secret: Secret, context: dict[str, Any]) -> str:
    """The series' public name in the ledger: a keyed digest of its context."""
    return keyed_digest(secret, "memo-series", _canonical(context))[:32]


def check_longitudinal(dataset: Dataset, channel: Channel, mode: str, options: RunOptions, secret: Secret) -> None:
    """Refuse what a longitudinal release cannot be, naming the fix."""
    if dataset.unit is None:
        raise LdpDaskError("a longitudinal release memoizes each person's report: it needs a privacy unit "
                           "(privacy_unit='id', --privacy-unit id) naming the person of each row")
    if options.max_contributions != 1:
        raise LdpDaskError("a longitudinal release makes one report per person a night: max_contributions "
                           f"(--max-contributions) must be 1, got {options.max_contributions}")
    if mode != "summary":
        raise LdpDaskError(f"a longitudinal release runs in summary mode only; got mode={mode!r}")
    if not secret.reproducible:
        raise LdpDaskError("a longitudinal release needs a key kept from night to night (LDP_DASK_SECRET, "
                           "--secret-file): under a fresh key every report would be new, and charged anew")
    if not isinstance(channel, Memoized):  # pragma: no cover - the callers memoize it
        raise LdpDaskError(f"the {channel.name!r} channel is not memoized")


def longitudinal_metadata(channel: Channel, series: str) -> dict[str, Any]:
    """What a longitudinal summary records of its series and of what a person spends (docs/privacy.md); a capped
    channel's cap (the most a person spends over any history) and g too."""
    ch: Any = channel
    bits = ch.epsilon_bits()
    capped = {} if not hasattr(ch, "cap") else {"cap": ch.cap(), "g": ch.g}
    return {"series": series, "epsilon_memo": ch.epsilon_memo() if capped else channel.epsilon_spent(),
            "epsilon_night": ch.night_epsilon(), "epsilon_bits": None if math.isinf(bits) else bits,
            "instant": ch.instant, **capped}


def capped_series(dataset: Dataset, channel: Channel, secret: Secret, options: RunOptions,
                  root: str | None = None) -> tuple[tuple[str, float, float | None], ...]:
    """A capped channel's series as the ledger charges it, ``((series, cap, ε_bits),)``
    (:func:`ldp_dask.ledger.memos.capped_increase`); empty for an uncapped one."""
    ch: Any = channel
    if not hasattr(ch, "cap"):
        return ()
    bits = ch.epsilon_bits()
    root = root if root is not None else series_root(dataset, options)
    series = series_id(secret, series_context(dataset, channel, root))
    return ((series, float(ch.cap()), None if math.isinf(bits) else float(bits)),)


def memo_update(summary: Summary, pairs: Any) -> MemoUpdate:
    """What the ledger records of a longitudinal summary (:mod:`ldp_dask.ledger.memos`)."""
    info = summary.metadata["longitudinal"]
    return MemoUpdate(info["series"], float(info["epsilon_memo"]), info["epsilon_bits"], pairs, info.get("cap"))
